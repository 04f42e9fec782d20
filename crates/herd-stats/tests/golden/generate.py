#!/usr/bin/env python3
"""Golden values for herd-stats, computed with the reference implementations.

Pinned versions (see requirements.txt): python 3.11, numpy 2.4.6, scipy 1.17.1,
statsmodels 0.15.0, pandas 3.1.1, patsy 1.0.3.

Regenerate (from the workspace root):
    python3 -m venv /tmp/herd-golden && /tmp/herd-golden/bin/pip install -r crates/herd-stats/tests/golden/requirements.txt
    /tmp/herd-golden/bin/python crates/herd-stats/tests/golden/generate.py

Writes one JSON file per family next to this script. Every dataset is drawn from a seeded
numpy Generator, so reruns give identical files. Wilcoxon data are chosen so that floating-point
arithmetic is exact (continuous draws, values on a 0.5 grid, paired values on a 0.25 grid):
scipy then sees exactly the ties that herd's tolerance-based ranking sees.
"""

import json
import math
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import scipy
import statsmodels
import statsmodels.formula.api as smf
from scipy import optimize, stats
from statsmodels.genmod.cov_struct import Exchangeable, Independence
from statsmodels.genmod.families import Gaussian
from statsmodels.stats.multitest import multipletests

OUT = Path(__file__).resolve().parent
VERSIONS = {"numpy": np.__version__, "scipy": scipy.__version__, "statsmodels": statsmodels.__version__}
assert VERSIONS["scipy"] == "1.17.1", VERSIONS
assert VERSIONS["statsmodels"] == "0.15.0", VERSIONS

warnings.simplefilter("ignore")


def f(x):
    """JSON-safe float (inf/nan as strings)."""
    x = float(x)
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return x


def dump(name, payload):
    payload = {"versions": VERSIONS, **payload}
    (OUT / f"{name}.json").write_text(json.dumps(payload, separators=(",", ":")) + "\n")


# ---------------------------------------------------------------- Wilcoxon
def resolved_method(d, zero_method, method):
    """Which path scipy 1.17 takes (mirrors _wilcoxon_nd; checked against its p-values)."""
    if method != "auto":
        return method
    n = len(d)
    if n > 50:
        return "asymptotic"
    n_zero = int(np.count_nonzero(d == 0))
    ranked = np.abs(d[d != 0]) if zero_method == "wilcox" else np.abs(d)
    has_ties = len(np.unique(ranked)) < len(ranked)
    if not (has_ties or n_zero > 0):
        return "exact"
    return "permutation" if n <= 13 else "asymptotic"


def wilcoxon_cases():
    rng = np.random.default_rng(20240501)
    datasets = []
    for n in range(1, 61):
        datasets.append({"kind": "one_sample", "label": f"continuous_n{n}",
                         "x": (rng.normal(0.3, 1.0, n)).tolist()})
    for n in range(2, 61):
        v = np.round(rng.normal(0.4, 1.2, n) * 2) / 2  # 0.5 grid: ties and zeros
        v[0] = 0.0
        if np.all(v == 0):
            v[-1] = 1.5
        datasets.append({"kind": "one_sample", "label": f"ties_zeros_n{n}", "x": v.tolist()})
    for n in range(2, 21):
        v = np.round(rng.normal(0.5, 1.0, n) * 2) / 2
        v[v == 0] = 0.5  # ties, no zeros
        datasets.append({"kind": "one_sample", "label": f"ties_only_n{n}", "x": v.tolist()})
    for n in [1, 3, 5, 8, 10, 12, 13, 14, 15, 20, 25, 30, 40, 50, 51, 55, 60]:
        x = np.round(rng.normal(5, 2, n) * 4) / 4
        y = np.round((x + rng.normal(-0.4, 1.0, n)) * 4) / 4
        if n >= 3:
            y[1] = x[1]  # a zero difference
        datasets.append({"kind": "paired", "label": f"paired_n{n}", "x": x.tolist(), "y": y.tolist()})
    for n in [6, 18, 45]:
        x = rng.normal(0, 1, n)
        y = x - rng.normal(0.2, 0.5, n)
        datasets.append({"kind": "paired", "label": f"paired_continuous_n{n}",
                         "x": x.tolist(), "y": y.tolist()})

    cases = []
    for di, ds in enumerate(datasets):
        x = np.asarray(ds["x"])
        d = x - np.asarray(ds["y"]) if ds["kind"] == "paired" else x
        has_zero = bool(np.any(d == 0))
        zero_methods = ["wilcox", "pratt", "zsplit"] if has_zero else ["wilcox"]
        for zero_method in zero_methods:
            for alternative in ["two-sided", "greater", "less"]:
                for correction in [False, True]:
                    for method in ["auto", "exact", "asymptotic"]:
                        args = (x,) if ds["kind"] == "one_sample" else (x, np.asarray(ds["y"]))
                        res = stats.wilcoxon(*args, zero_method=zero_method, correction=correction,
                                             alternative=alternative, method=method)
                        if not np.isfinite(res.pvalue):
                            continue
                        case = {"dataset": di, "zero_method": zero_method, "correction": correction,
                                "alternative": alternative, "method": method,
                                "method_used": resolved_method(d, zero_method, method),
                                "statistic": f(res.statistic), "pvalue": f(res.pvalue)}
                        if hasattr(res, "zstatistic"):
                            case["zstatistic"] = f(res.zstatistic)
                        cases.append(case)
    return datasets, cases


def tie_robustness():
    """Values equal in exact arithmetic, one summed in another order.

    scipy sees the tie in `tied` (exact path impossible -> permutation) but not in `perturbed`
    (exact path); herd must give the tied answer for both."""
    parts = [0.1, 0.2, 0.3]
    a = parts[0] + parts[1] + parts[2]
    b = parts[2] + parts[1] + parts[0]
    assert a != b
    rest = [1.25, -0.35, 2.5, 0.9, 3.1, -1.7, 1.05, 4.4]
    tied = [a, a] + rest
    perturbed = [a, b] + rest
    out = {"tied": tied, "perturbed": perturbed}
    for key in ["tied", "perturbed"]:
        r = stats.wilcoxon(out[key])
        out[f"scipy_{key}"] = {"statistic": f(r.statistic), "pvalue": f(r.pvalue)}
    assert out["scipy_tied"]["pvalue"] != out["scipy_perturbed"]["pvalue"]
    return out


# ---------------------------------------------------------------- BH and Holm
def bh_cases():
    rng = np.random.default_rng(7)
    cases = []
    for m in list(range(1, 31)) + [48, 100]:
        p = rng.uniform(0, 1, m) ** rng.uniform(1, 6)
        if m > 4:
            p[1] = p[3]  # exact duplicate
            p[0] = 1.0
            p[2] = 0.0
        q = multipletests(p, method="fdr_bh")[1]
        holm = multipletests(p, method="holm")[1]
        cases.append({"p": p.tolist(), "q": q.tolist(), "holm": holm.tolist()})
    p = np.array([1e-30, 3e-25, 0.04, 0.049, 0.2, 0.8])
    cases.append({"p": p.tolist(), "q": multipletests(p, method="fdr_bh")[1].tolist(),
                  "holm": multipletests(p, method="holm")[1].tolist()})
    return cases


# ---------------------------------------------------------------- GEE
def minimal_group_society(rng, society, minority, bias, minority_extra, n_agents=20):
    labels = np.array([1] * minority + [0] * (n_agents - minority))
    rng.shuffle(labels)
    rows = []
    for decider in range(n_agents):
        targets = [t for t in range(n_agents) if t != decider]
        same = np.array([labels[t] == labels[decider] for t in targets], dtype=float)
        is_minority = float(labels[decider] == 1)
        logits = rng.normal(0, 0.6, len(targets)) + same * (bias + minority_extra * is_minority)
        w = np.exp(logits)
        points = 100 * w / w.sum()
        for t, s, pts in zip(targets, same, points):
            rows.append({"society": society, "decider": society * 100 + decider,
                         "points": pts, "same_group": s, "minority_decider": is_minority,
                         "position": float(targets.index(t))})
    return rows


def fit_gee(df, formula, groups):
    model = smf.gee(formula, groups=groups, data=df, cov_struct=Exchangeable(), family=Gaussian())
    res = model.fit()
    return {
        "names": list(res.params.index),
        "params": [f(v) for v in res.params],
        "robust_se": [f(v) for v in res.bse],
        "robust_z": [f(v) for v in res.tvalues],
        "robust_p": [f(v) for v in res.pvalues],
        "naive_se": [f(v) for v in np.sqrt(np.diag(res.cov_naive))],
        "robust_cov": [[f(v) for v in row] for row in res.cov_robust],
        "rho": f(res.cov_struct.dep_params),
        "scale": f(res.scale),
        "converged": bool(res.converged),
        "iterations": len(res.fit_history["params"]),
    }


def gee_cases():
    rng = np.random.default_rng(99)
    cases = []

    rows = []
    for s, m in enumerate([3, 5, 10, 3, 5]):
        rows += minimal_group_society(rng, 1000 + s, m, bias=0.35, minority_extra=0.4)
    df = pd.DataFrame(rows)
    for label, formula, groups in [
        ("minimal_group_by_society", "points ~ same_group * minority_decider", "society"),
        ("minimal_group_by_decider", "points ~ same_group", "decider"),
        ("minimal_group_by_decider_interaction", "points ~ same_group * minority_decider", "decider"),
        ("minimal_group_position", "points ~ same_group * minority_decider + position", "society"),
    ]:
        cases.append({"label": label, "formula": formula, "groups": df[groups].tolist(),
                      "columns": {c: df[c].tolist() for c in
                                  ["points", "same_group", "minority_decider", "position"]},
                      "expected": fit_gee(df, formula, groups)})

    # Unbalanced clusters with a positive random intercept.
    sizes = rng.integers(1, 16, 40)
    rows = []
    for g, k in enumerate(sizes):
        u = rng.normal(0, 1.0)
        for _ in range(k):
            x1 = rng.normal(0, 1)
            x2 = float(rng.uniform() < 0.4)
            y = 1.0 + 0.5 * x1 - 0.8 * x2 + 0.3 * x1 * x2 + u + rng.normal(0, 1.5)
            rows.append({"g": int(g), "y": y, "x1": x1, "x2": x2})
    df = pd.DataFrame(rows)
    cases.append({"label": "unbalanced_random_intercept", "formula": "y ~ x1 * x2",
                  "groups": df["g"].tolist(),
                  "columns": {c: df[c].tolist() for c in ["y", "x1", "x2"]},
                  "expected": fit_gee(df, "y ~ x1 * x2", "g")})

    # Three-way interaction (reasoning-mode control) with unequal society sizes.
    rows = []
    for s in range(8):
        n_dec = int(rng.integers(5, 12))
        for dec in range(n_dec):
            thinking = float(s % 2)
            minority = float(dec < 3)
            for t in range(6):
                same = float(t < 2)
                y = 5 + same * (1 + 0.8 * minority - 0.5 * thinking) + rng.normal(0, 2) + 0.3 * s
                rows.append({"s": s, "points": y, "same_group": same, "minority_decider": minority,
                             "thinking": thinking})
    df = pd.DataFrame(rows)
    formula = "points ~ same_group * minority_decider * thinking"
    cases.append({"label": "three_way_unequal_societies", "formula": formula,
                  "groups": df["s"].tolist(),
                  "columns": {c: df[c].tolist() for c in
                              ["points", "same_group", "minority_decider", "thinking"]},
                  "expected": fit_gee(df, formula, "s")})
    return cases



# ------------------------------------------------- GEE, independence working correlation
def fit_gee_independence(df, formula, groups, absorb=None):
    """statsmodels' GEE with `Independence()`; with `absorb`, one intercept per value of that
    column (`+ C(absorb)`), whose coefficients (and the common intercept) are left out."""
    sm_formula = formula if absorb is None else f"{formula} + C({absorb})"
    res = smf.gee(sm_formula, groups=groups, data=df, cov_struct=Independence(), family=Gaussian()).fit()
    names = list(res.params.index)
    keep = [i for i, n in enumerate(names) if absorb is None or not (n == "Intercept" or n.startswith("C("))]
    cov_robust, cov_naive = np.asarray(res.cov_robust), np.asarray(res.cov_naive)
    return {
        "names": [names[i] for i in keep],
        "params": [f(res.params.iloc[i]) for i in keep],
        "robust_se": [f(res.bse.iloc[i]) for i in keep],
        "robust_z": [f(res.tvalues.iloc[i]) for i in keep],
        "robust_p": [f(res.pvalues.iloc[i]) for i in keep],
        "naive_se": [f(np.sqrt(cov_naive[i, i])) for i in keep],
        "robust_cov": [[f(cov_robust[i, j]) for j in keep] for i in keep],
        "rho": 0.0 if res.cov_struct.dep_params is None else f(res.cov_struct.dep_params),
        "scale": f(res.scale),
        "converged": bool(res.converged),
        "iterations": len(res.fit_history["params"]),
        "n_params": len(names),
    }


def sum_constrained_societies(rng, n_societies, size, minorities, effect, noise):
    """Societies whose every decider splits 100 points over the other members: each target gets
    the decider's baseline, plus `effect` if it is in the decider's group, plus noise centred
    within the decider (so the points sum to exactly 100). The baseline is what the sum leaves,
    (100 − in-group targets × effect) / targets, so each decider's favouritism (mean in-group −
    mean out-group points) is `effect` plus its noise. Minority sizes cycle over `minorities`,
    so the societies' compositions differ, as the paper's m = 3, 5, 10 do."""
    rows = []
    for s in range(n_societies):
        m = minorities[s % len(minorities)]
        minority = rng.permutation(np.array([1] * m + [0] * (size - m)))
        for d in range(size):
            targets = [t for t in range(size) if t != d]
            same = np.array([float(minority[t] == minority[d]) for t in targets])
            e = rng.normal(0, noise, len(targets))
            points = (100 - same.sum() * effect) / len(targets) + effect * same + (e - e.mean())
            for sg, pts in zip(same, points):
                rows.append({"society": s, "decider": s * 100 + d, "points": float(pts), "same_group": sg,
                             "minority_decider": float(minority[d])})
    return pd.DataFrame(rows)


def gee_independence_cases():
    rng = np.random.default_rng(4040)
    cases, within, planted = [], [], []
    columns = ["points", "same_group", "minority_decider", "position"]

    rows = []
    for s, m in enumerate([3, 5, 10, 3, 5]):
        rows += minimal_group_society(rng, 2000 + s, m, bias=0.35, minority_extra=0.4)
    df = pd.DataFrame(rows)
    for label, formula, groups in [
        ("minimal_group_by_society", "points ~ same_group", "society"),
        ("minimal_group_interaction", "points ~ same_group * minority_decider", "society"),
        ("minimal_group_position", "points ~ same_group * minority_decider + position", "society"),
        ("minimal_group_by_decider", "points ~ same_group * minority_decider", "decider"),
    ]:
        cases.append({"label": label, "formula": formula, "groups": df[groups].tolist(),
                      "columns": {c: df[c].tolist() for c in columns},
                      "expected": fit_gee_independence(df, formula, groups)})
    for label, formula in [("minimal_group_within_decider", "points ~ same_group"),
                           ("minimal_group_within_decider_position", "points ~ same_group + position")]:
        within.append({"label": label, "formula": formula, "groups": df["society"].tolist(),
                       "strata": df["decider"].tolist(), "columns": {c: df[c].tolist() for c in columns},
                       "expected": fit_gee_independence(df, formula, "society", absorb="decider")})

    # Unbalanced clusters (sizes 1 to 15) with a positive random intercept.
    rows = []
    for g, k in enumerate(rng.integers(1, 16, 40)):
        u = rng.normal(0, 1.0)
        for _ in range(k):
            x1, x2 = rng.normal(0, 1), float(rng.uniform() < 0.4)
            y = 1.0 + 0.5 * x1 - 0.8 * x2 + 0.3 * x1 * x2 + u + rng.normal(0, 1.5)
            rows.append({"g": int(g), "y": y, "x1": x1, "x2": x2})
    df = pd.DataFrame(rows)
    cases.append({"label": "unbalanced_random_intercept", "formula": "y ~ x1 * x2", "groups": df["g"].tolist(),
                  "columns": {c: df[c].tolist() for c in ["y", "x1", "x2"]},
                  "expected": fit_gee_independence(df, "y ~ x1 * x2", "g")})

    # Sum-constrained planted data (societies of 10, minorities of 2, 3 and 5): no in-group effect,
    # and 1.0 point/target per decider, with noise that hides the societies' compositions (σ = 3:
    # the exchangeable ρ sits at its bound) and with less noise (σ = 1.5: ρ just above it).
    for label, effect, noise in [("planted_null", 0.0, 3.0), ("planted_effect", 1.0, 3.0),
                                 ("planted_effect_quiet", 1.0, 1.5)]:
        df = sum_constrained_societies(rng, 60, 10, [2, 3, 5], effect, noise)
        formula = "points ~ same_group"
        per_decider = df.groupby("decider").apply(
            lambda d: d.points[d.same_group == 1].mean() - d.points[d.same_group == 0].mean())
        society_means = per_decider.groupby(per_decider.index // 100).mean()
        seed_mean = float(society_means.mean())
        seed_se = float(society_means.std(ddof=1) / np.sqrt(len(society_means)))
        exchangeable = fit_gee(df, formula, "society")
        independence = fit_gee_independence(df, formula, "society")
        decider = fit_gee_independence(df, formula, "society", absorb="decider")
        # What the data show. The exchangeable fit degenerates: at ρ's bound −1/(n − 1) (n = 10 × 9
        # rows per society) its estimate is pinned near 0 whatever the effect, with a robust SE
        # collapsed far below the seed-level SE; just above the bound it is shrunk well below the
        # planted effect. The independence fit has a robust SE of the seed-level SE's size; with
        # each decider's intercept it recovers the planted effect (and the seed-level mean), while
        # without it the pooled contrast is pulled by the composition (deciders of a small group
        # have few in-group targets and, under the sum, a higher baseline).
        bound = -1.0 / (90 - 1)
        b_ex, se_ex = exchangeable["params"][1], exchangeable["robust_se"][1]
        if noise == 3.0:
            assert abs(exchangeable["rho"] - bound) < 0.01 * abs(bound), exchangeable["rho"]
            assert se_ex < 0.05 * seed_se and abs(b_ex) < 0.05, (b_ex, se_ex, seed_se)
        else:
            assert exchangeable["rho"] < 0.8 * bound and b_ex < effect - 5 * seed_se, (exchangeable["rho"], b_ex)
        b, se = decider["params"][0], decider["robust_se"][0]
        assert abs(b - effect) < 3 * se and 0.5 < se / seed_se < 2.0, (b, se, seed_se)
        assert abs(b - seed_mean) < seed_se, (b, seed_mean, seed_se)
        assert 0.5 < independence["robust_se"][1] / seed_se < 2.0, (independence["robust_se"], seed_se)
        planted.append({"label": label, "formula": formula, "effect": effect, "noise": noise, "society_size": 10,
                        "groups": df["society"].tolist(), "strata": df["decider"].tolist(),
                        "columns": {c: df[c].tolist() for c in ["points", "same_group"]},
                        "seed_level": {"mean": seed_mean, "se": seed_se, "societies": len(society_means)},
                        "exchangeable": exchangeable, "independence": independence,
                        "independence_within_decider": decider})
    return cases, within, planted


# ---------------------------------------------------------------- bootstrap
def bootstrap_cases():
    rng = np.random.default_rng(2024)
    cases = []
    for n_clusters, n_resamples in [(30, 2000), (12, 500)]:
        seed_means = rng.normal(2.3, 1.1, n_clusters)
        minority_gap = rng.normal(3.0, 2.0, n_clusters)
        idx = np.random.default_rng(n_clusters).integers(0, n_clusters, size=(n_resamples, n_clusters))
        for stat_name, values in [("mean", seed_means), ("mean_difference", None)]:
            if stat_name == "mean":
                reps = seed_means[idx].mean(axis=1)
            else:
                reps = (minority_gap[idx] - seed_means[idx]).mean(axis=1)
            cases.append({
                "statistic": stat_name, "seed_means": seed_means.tolist(),
                "minority_gap": minority_gap.tolist(), "indices": idx.tolist(),
                "replicates_head": reps[:20].tolist(),
                "se": f(np.std(reps, ddof=1)),
                "ci95": [f(v) for v in np.percentile(reps, [2.5, 97.5])],
                "ci90": [f(v) for v in np.percentile(reps, [5, 95])],
                "median": f(np.percentile(reps, 50)),
            })
    return cases


# ---------------------------------------------------------------- Spearman, OLS, t, z, AUC
def spearman_cases():
    rng = np.random.default_rng(11)
    cases = []
    for n in [3, 4, 5, 8, 11, 20, 33, 60]:
        x = np.round(rng.normal(0, 1, n) * 2) / 2  # ties
        y = np.round((0.6 * x + rng.normal(0, 1, n)) * 3) / 3
        for alternative in ["two-sided", "greater", "less"]:
            r = stats.spearmanr(x, y, alternative=alternative)
            cases.append({"x": x.tolist(), "y": y.tolist(), "alternative": alternative,
                          "rho": f(r.statistic), "pvalue": f(r.pvalue)})
    x = np.arange(1.0, 11.0)
    for y in [x ** 2, -x]:
        r = stats.spearmanr(x, y)
        cases.append({"x": x.tolist(), "y": y.tolist(), "alternative": "two-sided",
                      "rho": f(r.statistic), "pvalue": f(r.pvalue)})
    return cases


def ols_cases():
    rng = np.random.default_rng(5)
    cases = []
    # The last case is heteroscedastic (noise growing with performance, as fig. 3b's hexagon means of
    # few images at the edges), where the HC3 standard errors differ from the classical ones.
    for n, noise, hetero in [(12, 1.0, False), (40, 0.3, False), (200, 2.0, False), (25, 0.01, False),
                             (110, 0.2, True)]:
        a = rng.uniform(0, 1, n)
        b = rng.uniform(0, 1, n)
        scale = noise * (0.1 + 3.0 * b ** 3) if hetero else noise
        y = 0.2 + 1.5 * a - 0.7 * b + rng.normal(0, 1, n) * scale
        df = pd.DataFrame({"y": y, "difficulty": a, "performance": b})
        res = smf.ols("y ~ difficulty + performance", data=df).fit()
        hc3 = smf.ols("y ~ difficulty + performance", data=df).fit(cov_type="HC3", use_t=True)
        cases.append({"formula": "y ~ difficulty + performance",
                      "columns": {c: df[c].tolist() for c in df.columns},
                      "names": list(res.params.index),
                      "params": [f(v) for v in res.params], "se": [f(v) for v in res.bse],
                      "t": [f(v) for v in res.tvalues], "p": [f(v) for v in res.pvalues],
                      "se_hc3": [f(v) for v in hc3.bse], "p_hc3": [f(v) for v in hc3.pvalues],
                      "r_squared": f(res.rsquared), "adj_r_squared": f(res.rsquared_adj),
                      "scale": f(res.scale)})
    return cases


def ttest_cases():
    rng = np.random.default_rng(3)
    cases = []
    samples = [rng.normal(0.1, 1, 10), rng.normal(-0.5, 2, 25), rng.normal(0.02, 0.1, 100),
               rng.normal(5, 0.5, 30), rng.normal(-3, 0.2, 15), rng.normal(1, 3, 2)]
    for i, s in enumerate(samples):
        for popmean in [0.0, 0.3]:
            for alternative in ["two-sided", "greater", "less"]:
                r = stats.ttest_1samp(s, popmean, alternative=alternative)
                cases.append({"sample": s.tolist(), "popmean": popmean, "alternative": alternative,
                              "t": f(r.statistic), "df": f(r.df), "pvalue": f(r.pvalue)})
    assert min(c["pvalue"] for c in cases) < 1e-20
    z_cases = []
    for z in [-40.0, -8.5, -3.2, -1.96, -0.1, 0.0, 0.7, 1.645, 2.5, 6.0, 12.0, 37.5]:
        for alternative in ["two-sided", "greater", "less"]:
            if alternative == "two-sided":
                p = 2 * stats.norm.sf(abs(z))
            elif alternative == "greater":
                p = stats.norm.sf(z)
            else:
                p = stats.norm.cdf(z)
            z_cases.append({"z": z, "alternative": alternative, "pvalue": f(p)})
    t_tail = []
    for t in [0.5, 2.0, 10.0, 50.0, 1e3, -50.0, -7.0]:
        for df in [1.0, 3.0, 29.0, 99.0, 1000.0]:
            t_tail.append({"t": t, "df": df, "sf": f(stats.t.sf(t, df)), "cdf": f(stats.t.cdf(t, df))})
    return cases, z_cases, t_tail


def welch_cases():
    rng = np.random.default_rng(11)
    cases = []
    pairs = [(rng.normal(0.3, 0.1, 8), rng.normal(0.25, 0.2, 8)), (rng.normal(0.0, 1.0, 5), rng.normal(2.0, 0.3, 12)),
             (rng.normal(0.5, 0.01, 40), rng.normal(0.5, 0.05, 3)), (rng.normal(10.0, 0.2, 30), rng.normal(0.0, 0.2, 30)),
             (rng.normal(0.1, 0.4, 2), rng.normal(0.2, 0.1, 2))]
    for a, b in pairs:
        for alternative in ["two-sided", "greater", "less"]:
            r = stats.ttest_ind(a, b, equal_var=False, alternative=alternative)
            case = {"a": a.tolist(), "b": b.tolist(), "alternative": alternative,
                    "t": f(r.statistic), "df": f(r.df), "pvalue": f(r.pvalue)}
            if alternative == "two-sided":
                ci95 = stats.ttest_ind(a, b, equal_var=False).confidence_interval(0.95)
                ci90 = stats.ttest_ind(a, b, equal_var=False).confidence_interval(0.90)
                case["ci95"] = [f(ci95.low), f(ci95.high)]
                case["ci90"] = [f(ci90.low), f(ci90.high)]
            cases.append(case)
    assert min(c["pvalue"] for c in cases) < 1e-20
    quantiles = [{"q": q, "df": df, "ppf": f(stats.t.ppf(q, df))}
                 for q in [0.5, 0.9, 0.95, 0.975, 0.995, 0.025] for df in [1.0, 2.5, 7.0, 29.3, 500.0]]
    return cases, quantiles


def auc_cases():
    rng = np.random.default_rng(1)
    cases = []
    for n in [0, 1, 2, 5, 11]:
        y = rng.uniform(0, 1, n)
        x = np.sort(rng.uniform(0, 10, n))
        cases.append({"y": y.tolist(), "x": x.tolist(), "area": f(np.trapezoid(y, x)),
                      "dx": 1.0, "area_uniform": f(np.trapezoid(y, dx=1.0))})
    y = rng.uniform(0, 1, 11)  # conformity curve N = 0..10
    cases.append({"y": y.tolist(), "x": list(map(float, range(11))), "area": f(np.trapezoid(y, np.arange(11.0))),
                  "dx": 0.5, "area_uniform": f(np.trapezoid(y, dx=0.5))})
    return cases


def noncentral_f_cases():
    """scipy's ncf.cdf over a grid, and the 90% interval of the noncentrality an observed F gives: the
    noncentralities where ncf.cdf(F) is 0.95 and 0.05 (0 where even 0 leaves it below), by brentq."""
    cdf = [{"f": fv, "d1": d1, "d2": d2, "nc": nc, "cdf": f(stats.ncf.cdf(fv, d1, d2, nc))}
           for fv in [0.05, 0.5, 1.0, 2.0, 4.0, 12.0] for d1, d2 in [(1, 5), (3, 10), (10, 80), (30, 600)]
           for nc in [0.0, 0.3, 2.0, 15.0, 80.0, 400.0]]

    def solve(fv, d1, d2, p):
        g = lambda nc: stats.ncf.cdf(fv, d1, d2, nc) - p
        if stats.ncf.cdf(fv, d1, d2, 0.0) <= p:
            return 0.0
        hi = 1.0
        while g(hi) > 0:
            hi *= 2.0
        return optimize.brentq(g, 0.0, hi, xtol=1e-14, rtol=1e-13)

    intervals = [{"f": fv, "d1": d1, "d2": d2, "level": 0.9,
                  "low": f(solve(fv, d1, d2, 0.95)), "high": f(solve(fv, d1, d2, 0.05))}
                 for fv in [0.4, 1.0, 1.7, 3.0, 9.0] for d1, d2 in [(10, 80), (4, 20), (20, 250)]]
    return cdf, intervals


def main():
    datasets, cases = wilcoxon_cases()
    dump("wilcoxon", {"datasets": datasets, "cases": cases, "tie_robustness": tie_robustness()})
    dump("bh", {"cases": bh_cases()})
    dump("gee", {"cases": gee_cases()})
    independence, within, planted = gee_independence_cases()
    dump("gee_independence", {"cases": independence, "within": within, "planted": planted})
    dump("bootstrap", {"cases": bootstrap_cases()})
    dump("spearman", {"cases": spearman_cases()})
    dump("ols", {"cases": ols_cases()})
    t_cases, z_cases, t_tail = ttest_cases()
    dump("ttest", {"cases": t_cases, "z_cases": z_cases, "t_tail": t_tail})
    welch, quantiles = welch_cases()
    normal_quantiles = [{"q": q, "ppf": f(stats.norm.ppf(q))}
                        for q in [0.5, 0.9, 0.95, 0.975, 0.995, 0.999, 0.9993, 1 - 1e-12, 0.025, 1e-30]]
    dump("welch", {"cases": welch, "quantiles": quantiles, "normal_quantiles": normal_quantiles})
    dump("auc", {"cases": auc_cases()})
    ncf_cdf, ncf_intervals = noncentral_f_cases()
    dump("noncentral_f", {"cdf": ncf_cdf, "intervals": ncf_intervals})
    print(f"wrote golden files to {OUT}: {len(cases)} wilcoxon cases")


if __name__ == "__main__":
    main()
