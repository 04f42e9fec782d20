"""Golden values for herd's calibration tables (`herd calibrate`): the 95% Wilson interval of a
verdict's rate k/n, as statsmodels computes it. Run with the venv of
crates/herd-stats/tests/golden/requirements.txt; writes calibration.json beside this file."""

import json
from pathlib import Path

from statsmodels.stats.proportion import proportion_confint

CASES = [(0, 20), (1, 20), (19, 20), (20, 20), (7, 100), (50, 100), (95, 100), (3, 7), (0, 1), (1, 1), (250, 1000)]

rows = []
for k, n in CASES:
    low, high = proportion_confint(k, n, alpha=0.05, method="wilson")
    rows.append({"k": k, "n": n, "low": float(low), "high": float(high)})

Path(__file__).with_name("calibration.json").write_text(json.dumps({"wilson": rows}, indent=1) + "\n")
