"""Check script: PRL's figures on Census, Tarragona and the 10,000-record file, as JSON.

Prints, for each file and variant of :data:`prl.VARIANTS` (the files and masking of
``benchmarks/prl.py``), PLD, PLD_best, the number of links, the candidate path, and a
SHA-256 of the assigned pairs, their weights and match probabilities, and of every B
record's true-pair weight: run it on two versions of the package and compare the outputs
to show that a change keeps the figures bit for bit::

    PYTHONPATH=<old tree> python benchmarks/prl_figures.py > old.json
    PYTHONPATH=<new tree> python benchmarks/prl_figures.py > new.json
    cmp old.json new.json

Runs in-process (no cluster); it uses only ``PRLSettings.from_options`` and
``probabilistic_linkage(..., settings=...)``, so it runs on older versions too.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from prl import VARIANTS, load  # noqa: E402

#: registry options of each variant, where an older benchmarks/prl.py gives keywords
_OPTION = {"em_options": "prl_em"}


def _digest(*arrays: np.ndarray) -> str:
    h = hashlib.sha256()
    for a in arrays:
        a = np.ascontiguousarray(a)
        h.update(str(a.dtype).encode() + str(a.shape).encode())
        h.update(a.tobytes())
    return h.hexdigest()[:20]


def figures(name: str, variant: str) -> dict:
    from sdcdist.linkage.prl import PRLSettings, probabilistic_linkage
    from sdcdist.parallel import Runner
    X, Y = load(name)
    kw = VARIANTS[variant][1]
    s = PRLSettings.from_options({k if k.startswith("prl_") else _OPTION.get(k, "prl_" + k): v
                                  for k, v in kw.items()})
    runner = Runner()
    n = X.shape[0]
    res = probabilistic_linkage(runner, runner.share(X), runner.share(Y), n, n,
                                tuple(range(X.shape[1])), settings=s)
    return {"file": name, "variant": variant, "pld": res.correct, "pld20": res.correct20,
            "pld_best": res.correct_best, "links": int(res.rows_b.size),
            "candidates": res.info.get("candidates"), "em_iterations": res.info["em_iterations"],
            "em_loglik": res.info["em_loglik"],
            "pairs": _digest(res.rows_b, res.cols_a, res.weights, res.prob),
            "true_weight": _digest(res.true_weight), "pairs_weighed": res.info.get("pairs_weighed")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", default="census,tarragona,synth10k")
    ap.add_argument("--variants", default="default,step,l")
    args = ap.parse_args()
    for name in args.files.split(","):
        for v in args.variants.split(","):
            print(json.dumps(figures(name, v), sort_keys=True), flush=True)


if __name__ == "__main__":
    main()
