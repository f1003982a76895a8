"""Run one peer linker on two files; prints one JSON line (run in benchmarks/.venv-peers).

    python run_peer.py splink|recordlinkage FILES.npz [--max-pairs N]

FILES.npz holds ``A`` (original, n x K) and ``B`` (masked); record i of B is
record i of A. Both peers compare every key column with levels on the
absolute difference in units of A's column sd, as their docs suggest for
numeric keys, fit their EM and link each masked record to its best-scored
original record. All pairs up to ``--max-pairs``; above, the blocking their
docs recommend (said in the output's ``note``).
"""

from __future__ import annotations

import argparse
import json
import resource
import time

import numpy as np

LEVELS = (0.1, 0.25, 0.5, 1.0)        # absolute differences, in sd of the column


def _rss() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def splink(A: np.ndarray, B: np.ndarray, max_pairs: float) -> dict:
    import pandas as pd
    import splink.comparison_level_library as cll
    import splink.comparison_library as cl
    from splink import DuckDBAPI, Linker, SettingsCreator, block_on

    n, K = A.shape
    cols = [f"k{j}" for j in range(K)]
    sd = A.std(axis=0, ddof=1)
    sd[~(sd > 0)] = 1.0
    all_pairs = A.shape[0] * B.shape[0] <= max_pairs
    width = 0.25                                     # blocking bins (in sd) when not all pairs

    def frame(X: np.ndarray) -> pd.DataFrame:
        df = pd.DataFrame(X, columns=cols)
        for j, c in enumerate(cols):
            df[f"bin_{c}"] = np.floor(X[:, j] / (width * sd[j])).astype(np.int64)
        df.insert(0, "unique_id", np.arange(len(df)))
        return df

    t0 = time.perf_counter()
    api = DuckDBAPI()
    sa = api.register(frame(A), dataset_display_name="a")
    sb = api.register(frame(B), dataset_display_name="b")
    comparisons = [cl.CustomComparison(
        [cll.CustomLevel(f"abs({c}_l - {c}_r) <= {float(t * sd[j])!r}",
                         label_for_charts=f"within {t} sd") for t in LEVELS] + [cll.ElseLevel()],
        output_column_name=c) for j, c in enumerate(cols)]
    if all_pairs:
        rules, note = ["1=1"], "all pairs"
    else:
        rules = [block_on(f"bin_{cols[j]}", f"bin_{cols[(j + 1) % K]}") for j in range(0, K, 2)]
        note = ("blocking (docs: OR-ed block_on rules): equal 0.25-sd bins of consecutive "
                "column pairs")
    settings = SettingsCreator(link_type="link_only", comparisons=comparisons,
                               blocking_rules_to_generate_predictions=rules,
                               probability_two_random_records_match=1.0 / n,
                               retain_matching_columns=False)
    linker = Linker([sa, sb], settings)
    linker.training.estimate_u_using_random_sampling(max_pairs=min(max_pairs, 1e7), seed=1)
    # blocked: one EM session per blocking rule of two disjoint column pairs, as the docs
    # recommend, so every comparison is estimated in a session that does not block on it
    for rule in (["1=1"] if all_pairs else rules[:2]):
        linker.training.estimate_parameters_using_expectation_maximisation(
            rule, fix_probability_two_random_records_match=True)
    pred = linker.inference.predict().as_pandas_dataframe()
    left_is_a = pred["source_dataset_l"] == "a"
    a_id = np.where(left_is_a, pred["unique_id_l"], pred["unique_id_r"])
    b_id = np.where(left_is_a, pred["unique_id_r"], pred["unique_id_l"])
    df = pd.DataFrame({"a": a_id, "b": b_id, "w": pred["match_weight"].to_numpy()})
    best = df.sort_values(["b", "w"], ascending=[True, False]).drop_duplicates("b")
    correct = int(np.count_nonzero(best["a"].to_numpy() == best["b"].to_numpy()))
    import splink as _s
    return {"tool": f"Splink {_s.__version__} (DuckDB)", "correct": correct, "n": int(B.shape[0]),
            "wall": time.perf_counter() - t0, "pairs": int(len(pred)), "rss": _rss(),
            "note": note + f"; levels at {LEVELS} sd, EM with P(match) = 1/n fixed, best link"}


def recordlinkage(A: np.ndarray, B: np.ndarray, max_pairs: float) -> dict:
    import pandas as pd
    import recordlinkage as rl

    n, K = A.shape
    cols = [f"k{j}" for j in range(K)]
    sd = A.std(axis=0, ddof=1)
    sd[~(sd > 0)] = 1.0
    dfa, dfb = pd.DataFrame(A, columns=cols), pd.DataFrame(B, columns=cols)
    t0 = time.perf_counter()
    idx = rl.Index()
    if A.shape[0] * B.shape[0] <= max_pairs:
        idx.full()
        note = "all pairs (full index)"
    else:
        w = max(3, int(max_pairs // n) | 1)
        idx.sortedneighbourhood(cols[0], window=w)
        note = f"blocking (docs: sorted neighbourhood) on {cols[0]}, window {w}"
    pairs = idx.index(dfa, dfb)
    cmp = rl.Compare()
    for j, c in enumerate(cols):
        # linear similarity: 1 at equality, 0 from one sd apart
        cmp.numeric(c, c, method="linear", offset=0.0, scale=float(sd[j]) / 2, label=c)
    feats = cmp.compute(pairs, dfa, dfb)
    ecm = rl.ECMClassifier(binarize=0.5)
    ecm.fit(feats)
    prob = pd.Series(ecm.prob(feats), index=feats.index)
    best = prob.groupby(level=1).idxmax()
    a_rows = np.array([p[0] for p in best.values])
    correct = int(np.count_nonzero(a_rows == best.index.to_numpy()))
    return {"tool": f"recordlinkage {rl.__version__} (ECM)", "correct": correct,
            "n": int(B.shape[0]), "wall": time.perf_counter() - t0, "pairs": int(len(pairs)),
            "rss": _rss(), "note": note + "; linear numeric similarity (0 at 1 sd), binarised "
                                          "at 0.5, ECM, best link"}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("tool", choices=["splink", "recordlinkage"])
    ap.add_argument("files")
    ap.add_argument("--max-pairs", type=float, default=2e7)
    a = ap.parse_args()
    z = np.load(a.files)
    fn = splink if a.tool == "splink" else recordlinkage
    print(json.dumps(fn(z["A"], z["B"], a.max_pairs)))


if __name__ == "__main__":
    main()
