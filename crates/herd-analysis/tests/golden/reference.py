#!/usr/bin/env python3
"""The herd-analysis analyses written with pandas, scipy and statsmodels: the reference that
herd's Rust implementation is compared with (goldens, `generate.py`) and timed against
(`cargo xtask bench stats`, which runs `python reference.py --bench DYADS.csv --resamples 2000`).

Every choice mirrors crates/herd-analysis/src/{minimal_group/,conformity/}; see their module docs.
"""

import argparse
import math
import sys
import time
import warnings

import numpy as np
import pandas as pd
import patsy
from scipy import stats
import statsmodels.formula.api as smf
from statsmodels.genmod.cov_struct import Exchangeable, Independence
from statsmodels.genmod.generalized_estimating_equations import GEE
from statsmodels.genmod.families import Gaussian
from statsmodels.stats.multitest import multipletests

warnings.simplefilter("ignore")

DESIGN = ["model", "reasoning", "instrument", "swap_pass"]
CELL_FORMULAS = ["points ~ same_group", "points ~ same_group * minority_decider"]
POOLED_VISIBLE = ["points ~ same_group * visible", "points ~ same_group * minority_decider * visible"]
REASONING_CONTROL = "points ~ same_group * reasoning"
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


def expand_passes(df):
    """Where a cell (design without swap_pass, labels, m) has two swap passes: the cell pooling both
    (swap_pass = passes = "both", the main estimate) and each pass (passes = "per_pass"); else the
    cell itself (passes = "single"). `pass_id` keeps each row's own pass."""
    if "swap_pass" not in df.columns:
        return df.assign(passes="single", pass_id="")
    others = [c for c in design_cols(df) if c != "swap_pass"] + ["labels", "m"]
    n = df.groupby(others, sort=False).swap_pass.transform("nunique")
    df = df.assign(pass_id=df.swap_pass)
    two = df[n >= 2]
    return pd.concat([two.assign(passes="both", swap_pass="both"), two.assign(passes="per_pass"),
                      df[n < 2].assign(passes="single")], ignore_index=True)


def default_modes(df):
    """Each model's default reasoning mode: "on" where it has it, else its only mode (None if several)."""
    if "reasoning" not in df.columns:
        return None
    models = df.model if "model" in df.columns else pd.Series("", index=df.index)
    out = {}
    for model, levels in df.groupby(models, sort=True).reasoning.unique().items():
        levels = set(levels)
        out[model] = "on" if "on" in levels else (next(iter(levels)) if len(levels) == 1 else None)
    return out


def deciders(df, cell_keys):
    keys = cell_keys + ["seed", "pass_id", "decider"]
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
    """Per cell and seed, the mean over the seed's deciders (of both passes in a pooled cell)."""
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
    r = stats.wilcoxon(x)  # scipy's defaults: method "auto", zero_method "wilcox", no correction
    return float(r.statistic), float(r.pvalue), rank_biserial(x)


def fit_gee(data, formula, groups):
    return smf.gee(formula, groups=groups, data=data, cov_struct=Exchangeable(), family=Gaussian()).fit()


def gee(data, formula, groups, draws=None):
    """Coefficient rows; with `draws` (n seeds → resamples of the seeds in ascending order), each
    coefficient's seed-level bootstrap SE from refits (a seed drawn twice gives two clusters)."""
    res = fit_gee(data, formula, groups)
    naive = np.sqrt(np.diag(res.cov_naive))
    se_boot = [None] * len(res.params)
    if draws is not None:
        data = data.assign(_cluster=pd.Series(groups, index=data.index).astype(str))
        seeds = np.sort(data.seed.unique())
        parts = [data[data.seed == s] for s in seeds]
        reps = []
        for row in draws(len(seeds)):
            d = pd.concat([parts[j].assign(_cluster=f"{k}|" + parts[j]._cluster) for k, j in enumerate(row)])
            reps.append(fit_gee(d, formula, d._cluster.values).params.values)
        se_boot = [float(v) for v in np.std(np.array(reps), axis=0, ddof=1)]
    return [{"working_correlation": "exchangeable", "absorbed": None, "term": name,
             "n_clusters": int(len(np.unique(groups))), "coef": float(res.params.iloc[i]),
             "se_robust": float(res.bse.iloc[i]), "se_bootstrap": se_boot[i], "se_naive": float(naive[i]),
             "z": float(res.tvalues.iloc[i]), "p": float(res.pvalues.iloc[i]),
             "rho": float(np.atleast_1d(res.cov_struct.dep_params)[0]), "scale": float(res.scale)}
            for i, name in enumerate(res.params.index)]


def fit_gee_within(data, formula, groups, strata):
    """statsmodels' independence GEE of `formula + C(strata)` (one intercept per stratum), the
    intercepts absorbed: the response and every other column centred within each stratum and fitted
    without an intercept, with the scale's degrees of freedom counting the strata. Strata nest in
    clusters, so the robust covariance is the centred design's (Frisch-Waugh-Lovell);
    generate.py checks every such fit against the `C(strata)` one."""
    y, x = patsy.dmatrices(formula, data, return_type="dataframe")
    x = x.drop(columns="Intercept")
    key = pd.Series(np.asarray(strata), index=data.index)
    y = y.iloc[:, 0] - y.iloc[:, 0].groupby(key).transform("mean")
    x = x - x.groupby(key).transform("mean")
    model = GEE(y, x, groups=groups, cov_struct=Independence(), family=Gaussian())
    return model.fit(ddof_scale=x.shape[1] + key.nunique())


def gee_within(data, formula, groups, strata):
    """Coefficient rows of `fit_gee_within` (no intercept: it is absorbed)."""
    res = fit_gee_within(data, formula, groups, strata)
    naive = np.sqrt(np.diag(res.cov_naive))
    return [{"working_correlation": "independence", "absorbed": "decider", "term": name,
             "n_clusters": int(len(np.unique(groups))), "coef": float(res.params.iloc[i]),
             "se_robust": float(res.bse.iloc[i]), "se_bootstrap": None, "se_naive": float(naive[i]),
             "z": float(res.tvalues.iloc[i]), "p": float(res.pvalues.iloc[i]), "rho": 0.0,
             "scale": float(res.scale)}
            for i, name in enumerate(res.params.index)]


def deciders_of(dd):
    """Each row's decider within one pass: the unit whose points sum to the pool."""
    return (dd.m.astype(str) + "|" + dd.seed.astype(str) + "|" + dd.pass_id.astype(str) + "|"
            + dd.decider.astype(str)).values


def m_pooled_groups(df, design):
    """The `m_pooled` fits: per design combination, pass role and label condition, pooled over m."""
    return df.groupby(design + ["passes", "labels"], sort=True)


def described(key, fill, check, n, estimate, target_group=None):
    return {**key, "fills": fill, "check": check, "deciders": "all", "target_group": target_group, "n": int(n),
            "estimate": nan(float(estimate)), "se": None, "statistic": None, "p": None, "formula": None}


def position_balance(key, fill, dyads):
    """Mean presented position of in- and out-group targets, and per seed (the unit) in − out with a
    signed-rank test over seeds."""
    inside, outside = dyads[dyads.same_group == 1], dyads[dyads.same_group == 0]
    rows = [described(key, fill, "position_in_group", len(inside), inside.target_position.mean()),
            described(key, fill, "position_out_group", len(outside), outside.target_position.mean())]
    per_seed = dyads.groupby(["seed", "same_group"]).target_position.mean().unstack()
    d = (per_seed[1] - per_seed[0]).dropna().values
    # Positions are integers, so differences of two seeds' means are often exactly tied (±5/12) yet
    # differ in the last bit; herd-stats ranks values within 1e-9 as ties, scipy only equal ones, so
    # the test sees the differences rounded to where float noise ends.
    stat, p, _ = wilcoxon(np.round(d, 12))
    row = described(key, fill, "position_balance", len(d), d.mean() if len(d) else math.nan)
    row.update({"se": nan(float(np.std(d, ddof=1) / np.sqrt(len(d)))) if len(d) >= 2 else None,
                "statistic": nan(stat), "p": nan(p)})
    return rows + [row]


def token_receipt(key, fill, dyads):
    """Mean points per target by the target's group name, and the SD (pandas' ddof 1) across names."""
    by_name = dyads.groupby("target_group", sort=True).points.agg(["mean", "size"])
    rows = [described(key, fill, "token_receipt", r["size"], r["mean"], target_group=name)
            for name, r in by_name.iterrows()]
    return rows + [described(key, fill, "token_receipt_sd", len(by_name), by_name["mean"].std())]


def key_dict(names, values):
    values = values if isinstance(values, tuple) else (values,)
    return dict(zip(names, values))


def society(dd):
    """Cluster ids for fits pooled across cells: the society (m, seed), whatever its arm, mode or pass."""
    return (dd.m.astype(str) + "|" + dd.seed.astype(str)).values


def minimal_group(df, indices=None, resamples=2000, seed=0, gee_bootstrap=True):
    """All four tables as lists of dicts. `indices`: replayed bootstrap resamples (else numpy draws)."""
    df = prepare(df)
    design = design_cols(df)
    defaults = default_modes(df)
    df = expand_passes(df)
    cell_keys = design + ["passes", "labels", "m"]
    dec = deciders(df, cell_keys)
    means = seed_means(dec, cell_keys)

    seed_tests = []
    for cell, per in means.items():
        key = key_dict(cell_keys, cell)
        if defaults is None:
            default = 1
        else:
            d = defaults[key.get("model", "")]
            default = None if d is None else int(key["reasoning"] == d)
        for measure in MEASURES:
            for s in SETS:
                v = per[measure][s]
                stat, p, rb = wilcoxon(v)
                row = dict(key)
                row.update({"default_reasoning": default, "deciders": s, "measure": measure, "n_seeds": len(v),
                            "n_seeds_positive": int((v > 0).sum()), "n_seeds_negative": int((v < 0).sum()),
                            "mean": float(np.mean(v)), "median": float(np.median(v)), "wilcoxon_statistic": stat,
                            "wilcoxon_p": p, "rank_biserial": rb})
                seed_tests.append(row)
    st = pd.DataFrame(seed_tests)
    # Families never mix main rows with per-pass rows, nor one pass with the other.
    st["_pass"] = np.where(st.passes == "per_pass", st.swap_pass, "main") if "swap_pass" in design else "main"

    def bh(column, keys, members):
        st[column] = math.nan
        for _, grp in st[members].groupby(keys, sort=True):
            ok = grp[np.isfinite(grp.wilcoxon_p)]
            if len(ok):
                st.loc[ok.index, column] = multipletests(ok.wilcoxon_p.values, method="fdr_bh")[1]

    # The paper's family: per measure, label arm and reasoning mode (and instrument), the minority-
    # and majority-decider blocks of every model and m.
    paper = ["measure", "labels"] + [c for c in ("reasoning", "instrument") if c in design] + ["_pass"]
    bh("q_paper_family", paper, st.deciders.isin(["minority", "majority"]))
    bh("q_all_cells", ["measure", "deciders", "_pass"], np.ones(len(st), dtype=bool))
    st = st.drop(columns="_pass")

    def draws(n):
        if indices is not None:
            return np.asarray(indices)
        return np.random.default_rng(seed).integers(0, n, size=(resamples, n))

    boot_indices = draws if gee_bootstrap else None
    gee_rows = []
    for cell, cd in df.groupby(cell_keys, sort=True):
        key = key_dict(cell_keys, cell)
        main = key["passes"] != "per_pass"
        for formula in CELL_FORMULAS:
            for r in gee(cd, formula, cd.seed.values, boot_indices if main else None):
                gee_rows.append({**key, "m": str(key["m"]), "analysis": "cell", "formula": formula, **r})
    for dkey, dd in df.groupby(design + ["passes"], sort=True):
        if dd.labels.nunique() < 2:
            continue
        dd = dd.assign(visible=(dd.labels == "visible").astype(float))
        for formula in POOLED_VISIBLE:
            for r in gee(dd, formula, society(dd)):
                gee_rows.append({**key_dict(design + ["passes"], dkey), "labels": "pooled", "m": "pooled",
                                 "analysis": "labels_pooled", "formula": formula, **r})
    # The paper's per-model favouritism: `points ~ same_group` per design combination and label
    # condition pooled over m, clustered by society, with the independence working correlation and
    # an intercept per decider (the exchangeable fit degenerates under the sum constraint).
    for dkey, dd in m_pooled_groups(df, design):
        for r in gee_within(dd, CELL_FORMULAS[0], society(dd), deciders_of(dd)):
            gee_rows.append({**key_dict(design + ["passes", "labels"], dkey), "m": "pooled",
                             "analysis": "m_pooled", "formula": CELL_FORMULAS[0], **r})
    if "reasoning" in design:
        others = [c for c in design if c != "reasoning"] + ["passes"]
        pooled = []
        for key, dd in df.groupby(others + ["labels"], sort=True):
            if dd.reasoning.nunique() < 2:
                continue
            assert set(dd.reasoning) == {"on", "off"}
            pooled.append((key_dict(others + ["labels"], key), dd.assign(reasoning=(dd.reasoning == "on").astype(float))))
        for key, dd in pooled:
            if key["labels"] != "visible":
                continue
            main = key["passes"] != "per_pass"
            for r in gee(dd, REASONING_CONTROL, society(dd), boot_indices if main else None):
                gee_rows.append({**key, "reasoning": "pooled", "m": "pooled", "analysis": "reasoning_control",
                                 "formula": REASONING_CONTROL, **r})
        for key, dd in pooled:
            for r in gee(dd, POOLED_REASONING, society(dd)):
                gee_rows.append({**key, "reasoning": "pooled", "m": "pooled", "analysis": "reasoning_three_way",
                                 "formula": POOLED_REASONING, **r})

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
                on = cell_keys + ["seed", "pass_id", "decider"]
                dyads = df.merge(kept[on], on=on)
                r = [x for x in gee(dyads, POSITION, dyads.seed.values) if x["term"] == "target_position"][0]
                robust.append({**key_dict(cell_keys, cell), "fills": fill, "check": "position_effect",
                               "deciders": "all", "n": len(dyads), "estimate": r["coef"], "se": r["se_robust"],
                               "statistic": r["z"], "p": r["p"], "formula": POSITION})
                robust += position_balance(key_dict(cell_keys, cell), fill, dyads)
            key = key_dict(cell_keys, cell)
            if "target_group" in df.columns and key["passes"] != "per_pass" and key["labels"] == "visible":
                on = cell_keys + ["seed", "pass_id", "decider"]
                robust += token_receipt(key, fill, df.merge(kept[on], on=on))
    if "swap_pass" in design:
        others = [c for c in design if c != "swap_pass"] + ["labels", "m"]
        per_pass = dec[dec.passes == "per_pass"]
        for key, cd in per_pass.groupby(others, sort=True):
            passes = sorted(cd.swap_pass.unique())
            if len(passes) != 2:
                continue
            for fill in fills:
                kept = cd if fill == "included" else cd[cd.filled == 0]
                a = kept[kept.swap_pass == passes[0]].groupby("seed").favouritism.mean()
                b = kept[kept.swap_pass == passes[1]].groupby("seed").favouritism.mean()
                d = (b - a).dropna().values
                stat, p, _ = wilcoxon(d)
                robust.append({**key_dict(others, key), "swap_pass": "difference", "passes": "both", "fills": fill,
                               "check": "swap_pass_difference", "deciders": "all", "n": len(d),
                               "estimate": float(d.mean()), "se": float(np.std(d, ddof=1) / np.sqrt(len(d))),
                               "statistic": stat, "p": p, "formula": None})
    return {"seed_tests": st.to_dict("records"), "gee": gee_rows, "bootstrap": boot, "robustness": robust}


# ------------------------------------------------------------------ conformity
DIFFICULTY_HEXBIN_GRIDSIZE = 11   # crates/herd-analysis/src/conformity/difficulty.rs, DIFFICULTY_HEXBIN_GRIDSIZE


def hexagons(x, y, gridsize):
    """The hexagon of matplotlib's Axes.hexbin (lib/matplotlib/axes/_axes.py, matplotlib 3.x) holding each
    point of data min-max normalised to [0, 1] on both axes, as "lattice:column:row"."""
    nx = gridsize
    ny = int(nx / math.sqrt(3))
    padding = 1.e-9 * (1.0 - 0.0)
    xmin, xmax, ymin, ymax = 0.0 - padding, 1.0 + padding, 0.0, 1.0
    ix = (x - xmin) / ((xmax - xmin) / nx)
    iy = (y - ymin) / ((ymax - ymin) / ny)
    ix1, iy1 = np.round(ix).astype(int), np.round(iy).astype(int)
    ix2, iy2 = np.floor(ix).astype(int), np.floor(iy).astype(int)
    d1 = (ix - ix1) ** 2 + 3.0 * (iy - iy1) ** 2
    d2 = (ix - ix2 - 0.5) ** 2 + 3.0 * (iy - iy2 - 0.5) ** 2
    first = d1 < d2
    return [f"1:{a}:{b}" if f else f"2:{c}:{d}" for f, a, b, c, d in zip(first, ix1, iy1, ix2, iy2)]


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
            c = g.groupby("n")[measure].mean().sort_index()
            # Saturation: the first N whose rise from the curve's first N reaches 90% of the rise at the
            # largest N, for a rising curve.
            first, last = c.iloc[0], c.iloc[-1]
            sat = int(c.index[(c >= first + 0.9 * (last - first)).values][0]) if last > first else None
            aucs.append({**dict(zip(keys, key)), "measure": measure, "n_points": int(g.n.nunique()), "auc": a,
                         "saturation_n": sat})
            level_auc[(measure,) + key] = a

    contrasts = {"normative": [("public", "private", "paraphrase", "greater")],
                 "nationality": [("same", "different", "seed", "two-sided")],
                 "ethnicity": [("same", "different", "seed", "two-sided")],
                 "minimal_group": [("same", "different", "seed", "two-sided")],
                 "spatial": [("near", "far", "seed", "two-sided")],
                 "temporal": [("near", "far", "seed", "two-sided")]}
    deltas = []
    social = {}  # (model, task, measure) -> family -> (seed -> same − different, AUC same, AUC different)
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
                if family in ("nationality", "ethnicity", "minimal_group"):
                    social.setdefault((model, task, measure), {})[family] = (
                        {k: ua[k] - ub[k] for k in ua if k in ub},
                        level_auc[(measure, model, task, family, a)], level_auc[(measure, model, task, family, b)])
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

    # Fig. 4d / S6: same − different averaged over the social families a seed has (two or more).
    for (model, task, measure), fams in sorted(social.items()):
        if len(fams) < 2:
            continue
        per_seed = {}
        for diffs, _, _ in fams.values():
            for k, v in diffs.items():
                per_seed.setdefault(k, []).append(v)
        d = np.array([np.mean(per_seed[k]) for k in sorted(per_seed)])
        t = stats.ttest_1samp(d, 0.0)
        se = float(np.std(d, ddof=1) / np.sqrt(len(d)))
        z = float(d.mean() / se)
        deltas.append({"model": model, "task": task, "family": "social_mean", "measure": measure, "level_a": "same",
                       "level_b": "different", "pairing": "seed", "alternative": "two-sided", "n_pairs": len(d),
                       "auc_a": float(np.mean([f[1] for f in fams.values()])),
                       "auc_b": float(np.mean([f[2] for f in fams.values()])),
                       "delta": float(d.mean()), "se": se, "t": float(t.statistic), "df": float(t.df),
                       "t_p": float(t.pvalue), "z": z, "z_p": float(2 * stats.norm.sf(abs(z)))})

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
                # Per image: its AUC over N, difficulty index and correct logit at N = 0.
                for image, gi in gm.groupby("image_id", sort=True):
                    z0 = gi[gi.n == 0]
                    perf = np.where(z0.correct_label == "A", z0.logit_a, z0.logit_b).mean()
                    rows.append({"conformity": auc_of(gi, measure), "difficulty": gi.difficulty_index.mean(),
                                 "performance": perf})
                r = pd.DataFrame(rows)
                parts.append((r - r.min()) / (r.max() - r.min()))
            images = pd.concat(parts, ignore_index=True)
            # The paper's unit (S4's df, fig. 3b): occupied hexagons of (performance, difficulty), each the
            # mean of its images.
            images["hexagon"] = hexagons(images.performance.to_numpy(), images.difficulty.to_numpy(),
                                         DIFFICULTY_HEXBIN_GRIDSIZE)
            data = images.groupby("hexagon", sort=True)[["conformity", "difficulty", "performance"]].mean()
            fit = smf.ols("conformity ~ difficulty + performance", data=data).fit()
            for name in fit.params.index:
                ols_rows.append({"task": task, "measure": measure, "term": name, "coef": float(fit.params[name]),
                                 "se": float(fit.bse[name]), "t": float(fit.tvalues[name]),
                                 "p": float(fit.pvalues[name]), "r_squared": float(fit.rsquared), "n": len(data)})
    return {"curves": curves, "auc": aucs, "deltas": deltas, "difficulty_spearman": spear,
            "difficulty_ols": ols_rows}


# ---- The per-model claims of the minimal-group headlines (herd-analysis's `model_claims`) ----

CLAIMS_DESIGN = ["model", "reasoning"]


def society_test(values):
    """Two-sided Wilcoxon signed-rank against zero (scipy's defaults) and the 95% t-interval of the mean."""
    v = np.asarray(values, dtype=float)
    n = len(v)
    nonzero = int(np.sum(~np.isclose(v, 0.0, rtol=0.0, atol=1e-9)))
    # Shares minus 0.5 tie in value but not always in the last bit (|2/3 − 0.5| vs |1/3 − 0.5|);
    # herd-stats ranks values within 1e-9 as ties, scipy only equal ones, so the test sees the values
    # rounded to where float noise ends (as position_balance).
    stat, p, _ = wilcoxon(np.round(v, 12)) if nonzero else (math.nan, math.nan, math.nan)
    if n >= 2:
        half = stats.t.ppf(0.975, n - 1) * np.std(v, ddof=1) / math.sqrt(n)
        low, high = v.mean() - half, v.mean() + half
    else:
        low = high = math.nan
    return {"n_societies": n, "n_nonzero": nonzero, "mean": float(v.mean()), "wilcoxon_statistic": nan(stat),
            "wilcoxon_p": nan(p), "ci_low": nan(low), "ci_high": nan(high)}


def model_claims(df, take):
    """Per model, reasoning mode and label condition: one value per society (m, seed) from its
    deciders (both swap passes, each decider once per pass), tested over the societies; `take`
    selects the dyad rows (a boolean mask)."""
    df = prepare(df)[take]
    design = [c for c in CLAIMS_DESIGN if c in df.columns]
    size = int(df.groupby(design + ["labels", "m", "seed", "decider"] +
                          (["swap_pass"] if "swap_pass" in df.columns else [])).size().iloc[0]) + 1
    df = df.assign(passes="claims", pass_id=df.swap_pass if "swap_pass" in df.columns else "")
    dec = deciders(df, design + ["labels", "m"])
    dec["above"] = (dec.favouritism > 0).astype(float)
    rows = []

    def push(key, quantity, ms, values):
        if len(values) == 0:
            return
        rows.append({**key, "quantity": quantity, "m": ",".join(str(m) for m in ms), **society_test(values)})

    def means(d, ms, column):
        return d[d.m.isin(ms)].groupby(["m", "seed"])[column].mean()

    def gaps(d, ms, column):
        minority = means(d[d.minority_decider == 1], ms, column)
        majority = means(d[d.minority_decider == 0], ms, column)
        return (minority - majority).dropna()

    visible_gaps = {}
    for group, d in dec.groupby(design + ["labels"], sort=True):
        key = key_dict(design + ["labels"], group)
        all_m = sorted(d.m.unique())
        unequal = [m for m in all_m if 2 * m < size]
        equal = [m for m in all_m if 2 * m == size]
        push(key, "favouritism", all_m, means(d, all_m, "favouritism").values)
        if key["labels"] == "visible":
            gap = gaps(d, unequal, "favouritism")
            push(key, "minority_gap", unequal, gap.values)
            push(key, "excess_share_gap", unequal, gaps(d, unequal, "excess_share").values)
            push(key, "equal_groups_gap", equal, gaps(d, equal, "favouritism").values)
            push(key, "prevalence", unequal, means(d[d.minority_decider == 1], unequal, "above").values - 0.5)
            smallest = unequal[:1]
            majority = d[d.minority_decider == 0]
            push(key, "majority_favouritism_smallest_m", smallest, means(majority, smallest, "favouritism").values)
            push(key, "majority_excess_share_smallest_m", smallest, means(majority, smallest, "excess_share").values)
            majority_share = means(majority, unequal, "excess_share")
            push(key, "majority_excess_share", unequal, majority_share.values)
            if "reasoning" in key:
                visible_gaps.setdefault(key.get("model"), {})[key["reasoning"]] = (unequal, gap, majority_share)
        else:
            push(key, "prevalence", all_m, means(d, all_m, "above").values - 0.5)
    for model, modes in sorted(visible_gaps.items()):
        if "on" not in modes or "off" not in modes:
            continue
        (ms_on, on, share_on), (ms_off, off, share_off) = modes["on"], modes["off"]
        key = {"model": model} if "model" in design else {}
        key = {**key, "reasoning": "on_minus_off", "labels": "visible"}
        ms = [m for m in ms_on if m in ms_off]
        push(key, "minority_gap", ms, (on - off).dropna().values)
        push(key, "majority_excess_share", ms, (share_on - share_off).dropna().values)
    return rows


def minimal_group_claims(df):
    """`model_claims` on the report's headline selection (each model's default reasoning mode, both
    passes; the base instrument where there is one) and on every mode (the reasoning control)."""
    d = prepare(df)
    base = d.instrument == "base" if "instrument" in d.columns else pd.Series(True, index=d.index)
    defaults = default_modes(d)
    default = (d.reasoning == d.model.map(defaults)) if defaults is not None else pd.Series(True, index=d.index)
    return {"headline": model_claims(df, (base & default).values), "all_modes": model_claims(df, base.values)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bench", metavar="DYADS_CSV", required=True,
                    help="time the full minimal-group analysis on this dyad table")
    ap.add_argument("--resamples", type=int, default=2000)
    ap.add_argument("--gee-bootstrap", action="store_true",
                    help="also bootstrap the main GEE fits (refits on every resample)")
    args = ap.parse_args()
    df = pd.read_csv(args.bench)
    start = time.perf_counter()
    tables = minimal_group(df, resamples=args.resamples, gee_bootstrap=args.gee_bootstrap)
    elapsed = time.perf_counter() - start
    print(f"reference_seconds={elapsed:.6f} rows={sum(len(t) for t in tables.values())}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
