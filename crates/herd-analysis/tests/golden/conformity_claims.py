#!/usr/bin/env python3
"""The conformity paper's difficulty regression: which unit its supplement S4 was fitted on.

S4 prints, per task, β, SE, t and p of an OLS of normalised conformity on normalised difficulty and
performance. Two-sided p = 2·t.sf(|t|, df) fixes the residual df: for each printed (t, p) this script
lists every integer df whose p, for some t within S4's rounding (±0.0005), lies within S4's rounding of
p (3 significant digits, ±0.5%). The difficulty rows (|t| ≥ 5) pin one df per task; the performance
rows of the same fit only bound it and must agree. An OLS with two predictors and an intercept has
n = df + 3 points.

Result (conformity_claims.json, "s4"): lines 111, colour 129, dots 97 residual df, i.e. 114, 132 and 100
points: not one constant and not models × levels (12 × 10 = 120 colour; 10 × 10 = 100 for lines and
dots, which excluded two models, 4.1.1). Fig. 3b says what the points are: "Each hexagon corresponds to
a sample of images with a given difficulty and average logit of the correct answer". A matplotlib
hexbin of gridsize g has (g + 1)(⌊g/√3⌋ + 1) + g⌊g/√3⌋ hexagons ("hexbin_capacity"); 132 occupied
hexagons need g ≥ 11, so herd bins on g = 11 (reference.DIFFICULTY_HEXBIN_GRIDSIZE).

The script also checks that reference.hexagons (herd's binning, mirrored in Rust) puts the committed
synthetic difficulty images in the hexagons matplotlib's own hexbin does (matplotlib is needed only for
that check: pip install matplotlib).

Run from the workspace root with the golden venv (see generate.py):
    /tmp/herd-golden/bin/python crates/herd-analysis/tests/golden/conformity_claims.py
"""

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

import reference

HERE = Path(__file__).resolve().parent
DATA = HERE.parent / "data"

# Supplement S4 (task, term, t, p) as printed.
S4 = [
    ("lines", "difficulty", -6.783, 5.99e-10),
    ("lines", "performance", -1.711, 8.98e-02),
    ("color", "difficulty", -11.831, 2.52e-22),
    ("color", "performance", -0.919, 3.60e-01),
    ("dots", "difficulty", -5.374, 5.31e-07),
    ("dots", "performance", -1.961, 5.27e-02),
]
DF_SEARCH = range(2, 3001)


def p_two_sided(t, df):
    return float(2.0 * stats.t.sf(abs(t), df))


def df_inversion():
    """The residual df each printed (t, p) allows."""
    rows = []
    for task, term, t, p in S4:
        allowed = [df for df in DF_SEARCH
                   if any(abs(p_two_sided(tt, df) - p) <= 0.005 * p for tt in (t - 0.0005, t, t + 0.0005))]
        best = min(DF_SEARCH, key=lambda df: abs(math.log(p_two_sided(t, df)) - math.log(p)))
        rows.append({"task": task, "term": term, "t": t, "p": p, "df_best": best,
                     "df_min": min(allowed), "df_max": max(allowed), "p_at_df_best": p_two_sided(t, best)})
    fits = []
    for task in ["lines", "color", "dots"]:
        r = [x for x in rows if x["task"] == task]
        lo, hi = max(x["df_min"] for x in r), min(x["df_max"] for x in r)
        assert lo == hi, f"{task}: S4's rows allow df {lo}..{hi}, not one value"
        fits.append({"task": task, "residual_df": lo, "points": lo + 3})
    return rows, fits


def hexbin_capacity():
    return [{"gridsize": g, "hexagons": (g + 1) * (int(g / math.sqrt(3)) + 1) + g * int(g / math.sqrt(3))}
            for g in range(5, 21)]


def check_against_matplotlib():
    """reference.hexagons against matplotlib's hexbin on the committed synthetic difficulty images."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    df = pd.read_csv(DATA / "conformity_trials.csv", keep_default_na=False, na_values=[""])
    dd = df[df.family == "difficulty"]
    for task, gt in dd.groupby("task"):
        parts = []
        for _, gm in gt.groupby("model"):
            rows = []
            for _, gi in gm.groupby("image_id"):
                z0 = gi[gi.n == 0]
                perf = np.where(z0.correct_label == "A", z0.logit_a, z0.logit_b).mean()
                rows.append({"c": gi.p_wrong_full.mean(), "d": gi.difficulty_index.mean(), "p": perf})
            r = pd.DataFrame(rows)
            parts.append((r - r.min()) / (r.max() - r.min()))
        images = pd.concat(parts, ignore_index=True)
        g = reference.DIFFICULTY_HEXBIN_GRIDSIZE
        ours = images.assign(h=reference.hexagons(images.p.to_numpy(), images.d.to_numpy(), g))
        ours = np.sort(ours.groupby("h").c.mean().to_numpy())
        fig, ax = plt.subplots()
        theirs = ax.hexbin(images.p, images.d, C=images.c, gridsize=g, reduce_C_function=np.mean).get_array()
        plt.close(fig)
        theirs = np.sort(np.asarray(theirs, dtype=float))
        assert len(ours) == len(theirs) and np.allclose(ours, theirs, rtol=0, atol=1e-12), \
            f"{task}: herd's hexagons differ from matplotlib's hexbin"
        print(f"{task}: {len(ours)} occupied hexagons, as matplotlib's hexbin")


def main():
    rows, fits = df_inversion()
    check_against_matplotlib()
    out = {"s4": rows, "s4_fits": fits, "hexbin_capacity": hexbin_capacity(),
           "gridsize": reference.DIFFICULTY_HEXBIN_GRIDSIZE}
    (HERE / "conformity_claims.json").write_text(json.dumps(out, indent=1) + "\n")
    for f in fits:
        print(f"{f['task']}: residual df {f['residual_df']}, {f['points']} points")


if __name__ == "__main__":
    main()
