#!/usr/bin/env python3
"""The herd-analysis analyses written with pandas, scipy and statsmodels: the reference that
herd's Rust implementation is compared with (goldens, `generate.py`) and timed against
(`cargo xtask bench stats`, which runs `python reference.py --bench DYADS.csv --resamples 2000`).

Every choice mirrors crates/herd-analysis/src/{minimal_group,conformity}.rs; see their module docs.
"""

import argparse
import math
import sys
import time
import warnings

import numpy as np
import pandas as pd
from scipy import stats
import statsmodels.formula.api as smf
from statsmodels.genmod.cov_struct import Exchangeable
from statsmodels.genmod.families import Gaussian
from statsmodels.stats.multitest import multipletests

warnings.simplefilter("ignore")

DESIGN = ["model", "reasoning", "instrument", "swap_pass"]
CELL_FORMULAS = ["points ~ same_group", "points ~ same_group * minority_decider"]
POOLED_VISIBLE = ["points ~ same_group * visible", "points ~ same_group * minority_decider * visible"]
POOLED_REASONING = "points ~ same_group * minority_decider * reasoning"
POSITION = "points ~ same_group * minority_decider + target_position"
MEASURES = ["favouritism", "excess_share"]
SETS = ["all", "minority", "majority", "minority_minus_majority"]


def nan(x):
    return None if x is None or (isinstance(x, float) and not math.isfinite(x)) else float(x)


def design_cols(df):
    return [c for c in DESIGN if c in df.columns]


def prepare(df):
    df = df.copy()
    for c in design_cols(df):
        df[c] = df[c].astype(str)
    return df


def deciders(df):
    keys = design_cols(df) + ["labels", "m", "seed", "decider"]
    d = df.assign(p_in=df.points * df.same_group, p_out=df.points * (1 - df.same_group),
                  n_in=df.same_group, n_out=1 - df.same_group,
                  out_nonzero=((df.same_group == 0) & (df.points != 0)).astype(int))
    agg = {"p_in": "sum", "p_out": "sum", "n_in": "sum", "n_out": "sum", "points": "sum",
           "minority_decider": "first", "out_nonzero": "sum"}
    if "filled" in df.columns:
        agg["filled"] = "max"
    g = d.groupby(keys, sort=True).agg(agg).reset_index()
    g["favouritism"] = g.p_in / g.n_in - g.p_out / g.n_out
    g["excess_share"] = g.p_in / g.points - g.n_in / (g.n_in + g.n_out)
    g["extreme"] = g.out_nonzero == 0
    if "filled" not in g.columns:
        g["filled"] = 0
    return g


def seed_means(dec, cell_keys):
    out = {}
    for cell, cd in dec.groupby(cell_keys, sort=True):
        per = {}
        for measure in MEASURES:
            all_ = cd.groupby("seed")[measure].mean()
            mino = cd[cd.minority_decider == 1].groupby("seed")[measure].mean()
            majo = cd[cd.minority_decider == 0].groupby("seed")[measure].mean()
            per[measure] = {"all": all_.values, "minority": mino.values, "majority": majo.values,
                            "minority_minus_majority": (mino - majo).values}
        out[cell] = per
    return out


def rank_biserial(x):
    d = np.asarray(x)
    d = d[d != 0]
    r = stats.rankdata(np.abs(d))
    rp, rm = r[d > 0].sum(), r[d < 0].sum()
    return (rp - rm) / (rp + rm)


def wilcoxon(x):
    x = np.asarray(x, dtype=float)
    if np.all(x == 0):
        return math.nan, math.nan, math.nan
    r = stats.wilcoxon(x)
    return float(r.statistic), float(r.pvalue), rank_biserial(x)


def gee(data, formula, groups):
    res = smf.gee(formula, groups=groups, data=data, cov_struct=Exchangeable(), family=Gaussian()).fit()
    naive = np.sqrt(np.diag(res.cov_naive))
    return [{"term": name, "coef": float(res.params.iloc[i]), "se_robust": float(res.bse.iloc[i]),
             "se_naive": float(naive[i]), "z": float(res.tvalues.iloc[i]), "p": float(res.pvalues.iloc[i]),
             "rho": float(np.atleast_1d(res.cov_struct.dep_params)[0]), "scale": float(res.scale)}
            for i, name in enumerate(res.params.index)]


def key_dict(names, values):
    values = values if isinstance(values, tuple) else (values,)
    return dict(zip(names, values))


def minimal_group(df, indices=None, resamples=2000, seed=0):
    """All four tables as lists of dicts. `indices`: replayed bootstrap resamples (else numpy draws)."""
    df = prepare(df)
    design = design_cols(df)
    cell_keys = design + ["labels", "m"]
    dec = deciders(df)
    means = seed_means(dec, cell_keys)

    seed_tests = []
    for cell, per in means.items():
        for measure in MEASURES:
            for s in SETS:
                v = per[measure][s]
                stat, p, rb = wilcoxon(v)
                row = key_dict(cell_keys, cell)
                row.update({"deciders": s, "measure": measure, "n_seeds": len(v), "mean": float(np.mean(v)),
                            "median": float(np.median(v)), "wilcoxon_statistic": stat, "wilcoxon_p": p,
                            "rank_biserial": rb})
                seed_tests.append(row)
    st = pd.DataFrame(seed_tests)
    st["bh_q"] = math.nan
    for (_, _), grp in st.groupby(["measure", "deciders"]):
        ok = grp[np.isfinite(grp.wilcoxon_p)]
        if len(ok):
            st.loc[ok.index, "bh_q"] = multipletests(ok.wilcoxon_p.values, method="fdr_bh")[1]

    gee_rows = []
    for cell, cd in df.groupby(cell_keys, sort=True):
        for formula in CELL_FORMULAS:
            for r in gee(cd, formula, cd.seed.values):
                gee_rows.append({**key_dict(cell_keys, cell), "m": str(key_dict(cell_keys, cell)["m"]),
                                 "formula": formula, **r})
    for dkey, dd in (df.groupby(design, sort=True) if design else [((), df)]):
        if dd.labels.nunique() < 2:
            continue
        dd = dd.assign(visible=(dd.labels == "visible").astype(float))
        groups = dd.labels + "|" + dd.m.astype(str) + "|" + dd.seed.astype(str)
        for formula in POOLED_VISIBLE:
            for r in gee(dd, formula, groups.values):
                gee_rows.append({**key_dict(design, dkey), "labels": "pooled", "m": "pooled",
                                 "formula": formula, **r})
    if "reasoning" in design:
        others = [c for c in design if c != "reasoning"]
        for key, dd in df.groupby(others + ["labels"], sort=True):
            if dd.reasoning.nunique() < 2:
                continue
            dd = dd.assign(reasoning=(dd.reasoning == "on").astype(float))
            groups = dd.reasoning.astype(str) + "|" + dd.m.astype(str) + "|" + dd.seed.astype(str)
            for r in gee(dd, POOLED_REASONING, groups.values):
                row = key_dict(others + ["labels"], key)
                row.update({"reasoning": "pooled", "m": "pooled", "formula": POOLED_REASONING, **r})
                gee_rows.append(row)

    boot = []
    rng = np.random.default_rng(seed)
    for cell, per in means.items():
        for quantity, values in [("favouritism", per["favouritism"]["all"]),
                                 ("minority_minus_majority", per["favouritism"]["minority_minus_majority"])]:
            n = len(values)
            idx = np.asarray(indices) if indices is not None else rng.integers(0, n, size=(resamples, n))
            reps = values[idx].mean(axis=1)
            lo, hi = np.percentile(reps, [2.5, 97.5])
            boot.append({**key_dict(cell_keys, cell), "quantity": quantity, "estimate": float(values.mean()),
                         "se": float(np.std(reps, ddof=1)), "ci_low": float(lo), "ci_high": float(hi),
                         "resamples": len(reps)})

    robust = []
    fills = ["included", "excluded"] if "filled" in df.columns else ["included"]
    for cell, cd in dec.groupby(cell_keys, sort=True):
        for fill in fills:
            kept = cd if fill == "included" else cd[cd.filled == 0]
            for s, sel in [("all", kept), ("minority", kept[kept.minority_decider == 1]),
                           ("majority", kept[kept.minority_decider == 0])]:
                n = len(sel)
                for check, share in [("prevalence", (sel.favouritism > 0).mean() if n else math.nan),
                                     ("extreme_allocations", sel.extreme.mean() if n else math.nan)]:
                    robust.append({**key_dict(cell_keys, cell), "fills": fill, "check": check, "deciders": s,
                                   "n": n, "estimate": float(share), "se": None, "statistic": None,
                                   "p": None, "formula": None})
            if "target_position" in df.columns:
                dyads = df.merge(kept[cell_keys + ["seed", "decider"]], on=cell_keys + ["seed", "decider"])
                r = [x for x in gee(dyads, POSITION, dyads.seed.values) if x["term"] == "target_position"][0]
                robust.append({**key_dict(cell_keys, cell), "fills": fill, "check": "position_effect",
                               "deciders": "all", "n": len(dyads), "estimate": r["coef"], "se": r["se_robust"],
                               "statistic": r["z"], "p": r["p"], "formula": POSITION})
    if "swap_pass" in design:
        others = [c for c in design if c != "swap_pass"] + ["labels", "m"]
        for key, cd in dec.groupby(others, sort=True):
            passes = sorted(cd.swap_pass.unique())
            if len(passes) != 2:
                continue
            for fill in fills:
                kept = cd if fill == "included" else cd[cd.filled == 0]
                a = kept[kept.swap_pass == passes[0]].groupby("seed").favouritism.mean()
                b = kept[kept.swap_pass == passes[1]].groupby("seed").favouritism.mean()
                d = (b - a).dropna().values
                stat, p, _ = wilcoxon(d)
                robust.append({**key_dict(others, key), "swap_pass": "difference", "fills": fill,
                               "check": "swap_pass_difference", "deciders": "all", "n": len(d),
                               "estimate": float(d.mean()), "se": float(np.std(d, ddof=1) / np.sqrt(len(d))),
                               "statistic": stat, "p": p, "formula": None})
    return {"seed_tests": st.to_dict("records"), "gee": gee_rows, "bootstrap": boot, "robustness": robust}


# ------------------------------------------------------------------ conformity
def conformity(df):
    df = df.copy()
    df["level"] = df["level"].fillna("").astype(str)
    is_diff = (df.family == "difficulty") & (df.level == "") & df.get("difficulty_level", pd.Series(np.nan, index=df.index)).notna()
    df.loc[is_diff, "level"] = df.loc[is_diff, "difficulty_level"].astype(int).astype(str)
    measures = ["p_wrong_full"] + (["p_wrong_ab"] if "p_wrong_ab" in df.columns and df.p_wrong_ab.notna().all() else [])
    z975 = stats.norm.ppf(0.975)

    def auc_of(g, measure):
        c = g.groupby("n")[measure].mean().sort_index()
        ns = c.index.values.astype(float)
        return float(np.trapezoid(c.values, ns) / (ns[-1] - ns[0]))

    curves, aucs, level_auc = [], [], {}
    keys = ["model", "task", "family", "level"]
    for measure in measures:
        for key, g in df.groupby(keys, sort=True):
            for n, gn in g.groupby("n"):
                v = gn[measure].values
                sd = float(np.std(v, ddof=1)) if len(v) >= 2 else math.nan
                se = sd / math.sqrt(len(v))
                m = float(v.mean())
                curves.append({**dict(zip(keys, key)), "measure": measure, "n": int(n), "trials": len(v),
                               "mean": m, "sd": sd, "se": se, "ci_low": m - z975 * se, "ci_high": m + z975 * se})
            a = auc_of(g, measure)
            aucs.append({**dict(zip(keys, key)), "measure": measure, "n_points": int(g.n.nunique()), "auc": a})
            level_auc[(measure,) + key] = a

    contrasts = {"normative": [("public", "private", "paraphrase", "greater")],
                 "nationality": [("same", "different", "seed", "two-sided")],
                 "ethnicity": [("same", "different", "seed", "two-sided")],
                 "minimal_group": [("same", "different", "seed", "two-sided")],
                 "spatial": [("near", "far", "seed", "two-sided")],
                 "temporal": [("near", "far", "seed", "two-sided")]}
    deltas = []
    for (model, task, family), g in df.groupby(["model", "task", "family"], sort=True):
        levels = sorted(g.level.unique())
        pairs = contrasts.get(family, [])
        if family == "source_strength":
            pairs = [(l, "participants", "seed", "two-sided") for l in levels if l != "participants"]
        for a, b, unit, alt in pairs:
            if a not in levels or b not in levels:
                continue
            for measure in measures:
                ua = {k: auc_of(x, measure) for k, x in g[g.level == a].groupby(g[unit].astype(str))}
                ub = {k: auc_of(x, measure) for k, x in g[g.level == b].groupby(g[unit].astype(str))}
                d = np.array([ua[k] - ub[k] for k in sorted(ua) if k in ub])
                t = stats.ttest_1samp(d, 0.0, alternative=alt)
                se = float(np.std(d, ddof=1) / np.sqrt(len(d)))
                z = float(d.mean() / se)
                zp = stats.norm.sf(z) if alt == "greater" else 2 * stats.norm.sf(abs(z))
                deltas.append({"model": model, "task": task, "family": family, "measure": measure, "level_a": a,
                               "level_b": b, "pairing": unit, "alternative": alt, "n_pairs": len(d),
                               "auc_a": level_auc[(measure, model, task, family, a)],
                               "auc_b": level_auc[(measure, model, task, family, b)],
                               "delta": float(d.mean()), "se": se, "t": float(t.statistic), "df": float(t.df),
                               "t_p": float(t.pvalue), "z": z, "z_p": float(zp)})

    spear = []
    for measure in measures:
        groups = {}
        for (ms, model, task, family, level), a in level_auc.items():
            if ms == measure and family == "difficulty":
                groups.setdefault((model, task), []).append((float(level), a))
        for (model, task), pts in sorted(groups.items()):
            pts.sort()
            r = stats.spearmanr([p[0] for p in pts], [p[1] for p in pts])
            spear.append({"model": model, "task": task, "measure": measure, "n_levels": len(pts),
                          "rho": float(r.statistic), "p": float(r.pvalue)})

    ols_rows = []
    dd = df[df.family == "difficulty"]
    for measure in measures:
        for task, gt in dd.groupby("task", sort=True):
            parts = []
            for model, gm in gt.groupby("model", sort=True):
                rows = []
                for image, gi in gm.groupby("image_id", sort=True):
                    z0 = gi[gi.n == 0]
                    perf = np.where(z0.correct_label == "A", z0.logit_a, z0.logit_b).mean()
                    rows.append({"conformity": auc_of(gi, measure), "difficulty": gi.difficulty_index.mean(),
                                 "performance": perf})
                r = pd.DataFrame(rows)
                parts.append((r - r.min()) / (r.max() - r.min()))
            data = pd.concat(parts)
            fit = smf.ols("conformity ~ difficulty + performance", data=data).fit()
            for name in fit.params.index:
                ols_rows.append({"task": task, "measure": measure, "term": name, "coef": float(fit.params[name]),
                                 "se": float(fit.bse[name]), "t": float(fit.tvalues[name]),
                                 "p": float(fit.pvalues[name]), "r_squared": float(fit.rsquared), "n": len(data)})
    return {"curves": curves, "auc": aucs, "deltas": deltas, "difficulty_spearman": spear,
            "difficulty_ols": ols_rows}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bench", metavar="DYADS_CSV", required=True,
                    help="time the full minimal-group analysis on this dyad table")
    ap.add_argument("--resamples", type=int, default=2000)
    args = ap.parse_args()
    df = pd.read_csv(args.bench)
    start = time.perf_counter()
    tables = minimal_group(df, resamples=args.resamples)
    elapsed = time.perf_counter() - start
    print(f"reference_seconds={elapsed:.6f} rows={sum(len(t) for t in tables.values())}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
