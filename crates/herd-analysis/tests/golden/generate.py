#!/usr/bin/env python3
"""Synthetic trial tables with planted effects, and golden results of the herd-analysis analyses
computed by reference.py with pandas / scipy / statsmodels (versions pinned in
crates/herd-stats/tests/golden/requirements.txt).

Regenerate (from the workspace root):
    python3 -m venv /tmp/herd-golden && /tmp/herd-golden/bin/pip install -r crates/herd-stats/tests/golden/requirements.txt
    /tmp/herd-golden/bin/python crates/herd-analysis/tests/golden/generate.py

Writes tests/data/{dyads.csv, conformity_trials.csv, bootstrap_indices.json} and
tests/golden/{minimal_group.json, minimal_group_claims.json, conformity.json}. Seeded; reruns give
identical files.
"""

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import statsmodels.formula.api as smf
from statsmodels.genmod.cov_struct import Independence
from statsmodels.genmod.families import Gaussian

import reference

HERE = Path(__file__).resolve().parent
DATA = HERE.parent / "data"
SOCIETY = 6          # agents per society (the paper: 20)
SEEDS = 6            # societies per cell (the paper: 30)
RESAMPLES = 400
# Nonce name pairs: one per society (m, seed), exchanged between the groups in the swap pass. Fewer
# pairs than societies, so each name is carried by several societies, in both roles.
NAME_PAIRS = [("Kalvo", "Tesim"), ("Dravin", "Pulek"), ("Morsa", "Feltu"), ("Quenit", "Ablor")]


def society_dyads(rng, model, labels, m, seed, reasoning, swap_pass):
    minority = np.array([1] * m + [0] * (SOCIETY - m))
    minority = minority[np.random.default_rng(seed * 7 + m).permutation(SOCIETY)]
    bias = 0.0 if labels == "hidden" else (0.9 if reasoning == "off" else 0.5) * (0.6 if model == "sim-b" else 1.0)
    # Names from the society alone (not `rng`, so the drawn allocations do not depend on them).
    pair = NAME_PAIRS[(3 * seed + m) % len(NAME_PAIRS)]
    first_to_minority = ((seed + m) % 2 == 0) != (swap_pass == "swapped")
    group_name = {1: pair[0 if first_to_minority else 1], 0: pair[1 if first_to_minority else 0]}
    rows = []
    for decider in range(SOCIETY):
        targets = [t for t in range(SOCIETY) if t != decider]
        order = rng.permutation(len(targets))   # presented position of each target
        same = np.array([minority[t] == minority[decider] for t in targets], dtype=float)
        u = rng.uniform()
        if u < 0.06:                             # parse failure: uniform fill
            points, filled = np.full(len(targets), 100.0 / len(targets)), 1
        elif labels == "visible" and u < 0.16:   # extreme: nothing to the out-group
            points, filled = 100.0 * same / same.sum(), 0
        else:
            extra = 0.5 * minority[decider] + 0.1 * (swap_pass == "swapped")
            logits = rng.normal(0, 0.5, len(targets)) + same * (bias + extra * (bias > 0)) - 0.03 * order
            w = np.exp(logits)
            points, filled = 100.0 * w / w.sum(), 0
        points = np.round(points, 6)
        for t, s, pos, pts in zip(targets, same, order, points):
            rows.append({"model": model, "labels": labels, "m": m, "seed": seed, "decider": decider, "target": t,
                         "minority_decider": int(minority[decider]), "minority_target": int(minority[t]),
                         "same_group": int(s), "points": float(pts), "reasoning": reasoning,
                         "swap_pass": swap_pass, "target_position": int(pos), "filled": filled,
                         "target_group": group_name[int(minority[t])]})
    return rows


def dyads():
    """Two models: sim-a runs both reasoning modes (on is its default) and both swap passes, so its
    main rows pool the passes; sim-b runs only `off` and only the original pass."""
    rng = np.random.default_rng(20250105)
    rows = []
    for model, modes, passes in [("sim-a", ["on", "off"], ["original", "swapped"]), ("sim-b", ["off"], ["original"])]:
        for reasoning in modes:
            for swap_pass in passes:
                for labels in ["visible", "hidden"]:
                    for m in [2, 3]:
                        for seed in range(SEEDS):
                            rows += society_dyads(rng, model, labels, m, 100 + seed, reasoning, swap_pass)
    return pd.DataFrame(rows)


def conformity_trials():
    rng = np.random.default_rng(77)
    rows = []

    def p(base, n, effect):
        x = base + 2.5 * n / 10 + effect + rng.normal(0, 0.4)
        full = 1 / (1 + math.exp(-x))
        return round(full, 6), round(min(1.0, full * 1.05 + 0.01 * rng.uniform()), 6)

    def add(model, family, level, n, seed, effect, base, **extra):
        full, ab = p(base, n, effect)
        rows.append({"model": model, "task": "lines", "family": family, "level": level, "n": n, "seed": seed,
                     "p_wrong_full": full, "p_wrong_ab": ab, **extra})

    for model, base in [("sim-a", -3.0), ("sim-b", -2.0)]:
        for seed in range(8):
            for n in range(11):
                add(model, "group_size", None, n, seed, 0.0, base)
            for family, levels in [("nationality", [("same", 0.6), ("different", 0.0)]),
                                   ("ethnicity", [("same", 0.3), ("different", 0.0)]),
                                   ("spatial", [("near", 0.4), ("far", 0.0)]),
                                   ("source_strength", [("participants", 0.0), ("experts", 0.5), ("kids", -0.4)])]:
                for level, effect in levels:
                    for n in [0, 3, 6, 10]:
                        add(model, family, level, n, seed, effect, base)
        for k in range(10):
            for level, effect in [("public", 0.3), ("private", 0.0)]:
                for n in [0, 2, 4, 6, 8, 10]:
                    add(model, "normative", level, n, k, effect, base, paraphrase=f"p{k:02d}")
        for d in range(1, 6):
            for i in range(4):
                image = f"{model}-d{d}-{i}"
                index = round(d + rng.uniform(-0.4, 0.4), 4)
                label = "A" if i % 2 == 0 else "B"
                logit_correct = round(3.0 - 0.3 * d + rng.normal(0, 0.3), 4)
                logit_wrong = round(rng.normal(0, 0.5), 4)
                la, lb = (logit_correct, logit_wrong) if label == "A" else (logit_wrong, logit_correct)
                for n in [0, 2, 5, 10]:
                    add(model, "difficulty", None, n, i, 0.35 * d + rng.normal(0, 0.2), base, difficulty_level=d,
                        difficulty_index=index, image_id=image, correct_label=label, logit_a=la, logit_b=lb)
    df = pd.DataFrame(rows)
    df["difficulty_level"] = df["difficulty_level"].astype("Int64")  # integers with gaps, not floats
    return df[["model", "task", "family", "level", "n", "seed", "paraphrase", "difficulty_level", "difficulty_index",
               "image_id", "correct_label", "logit_a", "logit_b", "p_wrong_full", "p_wrong_ab"]]


def clean(records):
    out = []
    for r in records:
        row = {}
        for k, v in r.items():
            if isinstance(v, (np.integer,)):
                v = int(v)
            elif isinstance(v, (float, np.floating)):
                v = None if not math.isfinite(float(v)) else float(v)
            row[k] = v
        out.append(row)
    return out


def write_minimal_group_claims():
    """The minimal-group headlines' per-model claims (reference.minimal_group_claims) on the committed
    dyads: tests/golden/minimal_group_claims.json."""
    d = pd.read_csv(DATA / "dyads.csv")
    claims = reference.minimal_group_claims(d)
    (HERE / "minimal_group_claims.json").write_text(
        json.dumps({k: clean(v) for k, v in claims.items()}, separators=(",", ":")) + "\n")
    return {k: len(v) for k, v in claims.items()}


def check_absorbed_intercepts(d, mg):
    """The `m_pooled` rows (reference.fit_gee_within, intercepts absorbed) against statsmodels'
    independence GEE with a dummy per decider, `points ~ same_group + C(decider)`."""
    df = reference.expand_passes(reference.prepare(d))
    design = reference.design_cols(df)
    rows = [r for r in mg["gee"] if r["analysis"] == "m_pooled"]
    fits = 0
    for dkey, dd in reference.m_pooled_groups(df, design):
        key = reference.key_dict(design + ["passes", "labels"], dkey)
        dd = dd.assign(_decider=reference.deciders_of(dd))
        res = smf.gee("points ~ same_group + C(_decider)", groups=reference.society(dd), data=dd,
                      cov_struct=Independence(), family=Gaussian()).fit()
        i = list(res.params.index).index("same_group")
        (row,) = [r for r in rows if all(r[k] == v for k, v in key.items())]
        for name, value in [("coef", res.params.iloc[i]), ("se_robust", res.bse.iloc[i]),
                            ("se_naive", np.sqrt(res.cov_naive[i, i])), ("scale", res.scale)]:
            assert abs(row[name] - value) <= 1e-9 * abs(value), (key, name, row[name], value)
        fits += 1
    assert fits == len(rows), (fits, len(rows))
    return fits


def main():
    DATA.mkdir(exist_ok=True)
    d = dyads()
    d.to_csv(DATA / "dyads.csv", index=False)
    d = pd.read_csv(DATA / "dyads.csv")  # analyse exactly what the Rust test reads
    indices = np.random.default_rng(5).integers(0, SEEDS, size=(RESAMPLES, SEEDS))
    (DATA / "bootstrap_indices.json").write_text(json.dumps(indices.tolist(), separators=(",", ":")) + "\n")
    mg = reference.minimal_group(d, indices=indices)
    (HERE / "minimal_group.json").write_text(
        json.dumps({k: clean(v) for k, v in mg.items()}, separators=(",", ":")) + "\n")
    print("m_pooled fits checked against C(decider):", check_absorbed_intercepts(d, mg))

    c = conformity_trials()
    c.to_csv(DATA / "conformity_trials.csv", index=False)
    c = pd.read_csv(DATA / "conformity_trials.csv")
    conf = reference.conformity(c)
    (HERE / "conformity.json").write_text(
        json.dumps({k: clean(v) for k, v in conf.items()}, separators=(",", ":")) + "\n")
    print("rows:", len(d), "dyads,", len(c), "conformity trials;",
          {k: len(v) for k, v in mg.items()}, {k: len(v) for k, v in conf.items()})
    print("minimal-group claims:", write_minimal_group_claims())


if __name__ == "__main__":
    main()
