"""pycanon's attribute-disclosure figures on the reference files (run in benchmarks/.venv-peers).

    benchmarks/.venv-peers/bin/python benchmarks/peers/attribute_pycanon.py > out.json

Prints a JSON object {case: {measure: value}}; tests/data/attribute_reference.json holds its
output (with sdcMicro's, from attribute_sdcmicro.R). A categorical confidential column is
passed as text, so that pycanon's t-closeness uses the equal distance on it (the ordered
distance on numeric columns).
"""

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pycanon
from pycanon import anonymity as an

ROOT = Path(__file__).resolve().parents[2]
CASES = json.loads((ROOT / "benchmarks" / "peers" / "attribute_cases.json").read_text())


def figures(data: pd.DataFrame, keys: list, conf: list) -> dict:
    c, l_ = an.recursive_c_l_diversity(data, keys, conf)
    return {"ldiv_distinct": int(an.l_diversity(data, keys, conf)),
            "ldiv_entropy_int": int(an.entropy_l_diversity(data, keys, conf)),
            "recursive_c": None if np.isnan(c) else int(c), "recursive_l": int(l_),
            "tclose": float(an.t_closeness(data, keys, conf)),
            "beta_basic": float(an.basic_beta_likeness(data, keys, conf)),
            "beta_enhanced": float(an.enhanced_beta_likeness(data, keys, conf)),
            "delta_disc": float(an.delta_disclosure(data, keys, conf))}


import sys  # noqa: E402

out = {"tool": f"pycanon {pycanon.__version__}" if hasattr(pycanon, "__version__")
       else "pycanon"}
only = sys.argv[1:] or list(CASES)
for name in only:
    case = CASES[name]
    d = pd.read_csv(ROOT / case["file"])
    for col in case["confidential"]:
        if col in case["categorical"]:
            d[col] = d[col].map(lambda v: f"c{int(v)}")
    out[name] = figures(d, case["keys"], case["confidential"])
print(json.dumps(out, indent=1))
