"""Run one peer linker on two files; prints one JSON line (run in benchmarks/.venv-peers).

    python run_peer.py splink|recordlinkage FILES.npz [--max-pairs N]

FILES.npz holds ``A`` (original, n x K) and ``B`` (masked); record i of B is
record i of A. Both peers compare every key column with levels on the
absolute difference in units of A's column sd, as their docs suggest for
numeric keys, fit their EM, and link each masked record to its best-scored
original record or by their own 1-1 linking. Each peer runs the set-ups its docs
allow for this task (see :func:`splink`, :func:`recordlinkage`) and reports the
strongest, with the others' figures in its ``note``. All pairs up to
``--max-pairs``; above, the blocking their docs recommend (said in the ``note``).
"""

from __future__ import annotations

import argparse
import json
import resource
import time
import traceback

import numpy as np

LEVELS = (0.1, 0.25, 0.5, 1.0)        # absolute differences, in sd of the column
#: how each peer's links were scored, by set-up key
SCORING = {"splink": {"best": "each masked record its best match_weight (ties 1/t)",
                      "1-1": "Splink 1-1 single best links"},
           "recordlinkage": {"best": "best link (ties 1/t)",
                             "1-1": "1-1 greedy (OneToOneLinking)"}}


def _rss() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _score_best(a_id: np.ndarray, b_id: np.ndarray, w: np.ndarray, truth_of_b) -> float:
    """Expected hits when each B record is linked to its best-scored A record(s): a B record
    whose true record is among t tied best counts 1/t (random tie-breaking)."""
    import pandas as pd
    df = pd.DataFrame({"a": a_id, "b": b_id, "w": w})
    top = df[df["w"] == df.groupby("b")["w"].transform("max")]
    k = top.groupby("b").size()
    hit = top[top["a"].to_numpy() == truth_of_b(top["b"].to_numpy())]["b"].to_numpy()
    return float((1.0 / k.loc[hit].to_numpy()).sum())


def splink(A: np.ndarray, B: np.ndarray, max_pairs: float) -> dict:
    """Splink at its strongest for this task, as its docs allow: per key column levels
    |a - b| <= 0.1, 0.25, 0.5, 1 sd (with and without an exact-match level first) plus else;
    u by random sampling of up to 1e7 pairs (seed 1) with no early stop; m by EM with u and
    P(match) = 1/n fixed (up to 100 iterations); no term frequencies; scored both by each
    masked record's best match_weight and by Splink's 1-1 single-best-links clustering. The
    strongest of the four is the result; the others are in the note."""
    import pandas as pd
    import splink as _s
    from splink import block_on

    n, K = A.shape
    cols = [f"k{j}" for j in range(K)]
    sd = A.std(axis=0, ddof=1)
    sd[~(sd > 0)] = 1.0
    all_pairs = A.shape[0] * B.shape[0] <= max_pairs
    width = 0.25                                     # blocking bins (in sd) when not all pairs
    # A's ids are a random permutation: Splink's 1-1 clustering breaks ties by lowest id,
    # which must not favour (or disfavour) the true record
    perm = np.random.default_rng(1).permutation(A.shape[0])   # A row i gets id perm[i]
    row_of_id = np.argsort(perm)

    def frame(X: np.ndarray, ids: np.ndarray) -> pd.DataFrame:
        df = pd.DataFrame(X, columns=cols)
        if not all_pairs:
            for j, c in enumerate(cols):
                df[f"bin_{c}"] = np.floor(X[:, j] / (width * sd[j])).astype(np.int64)
        df.insert(0, "unique_id", ids)
        return df

    if all_pairs:
        rules, note = ["1=1"], "all pairs"
    else:
        rules = [block_on(f"bin_{cols[j]}", f"bin_{cols[(j + 1) % K]}") for j in range(0, K, 2)]
        note = ("blocking (docs: OR-ed block_on rules): equal 0.25-sd bins of consecutive "
                "column pairs")
    results, walls, npairs, failed = {}, {}, [0], []

    def report() -> dict:
        best = max(results, key=lambda k: (results[k], -walls[k]))
        others = "; ".join([f"{t}, {s}: {100.0 * v / B.shape[0]:.1f} %"
                            for (t, s), v in results.items() if (t, s) != best] + failed)
        return {"tool": f"Splink {_s.__version__} (DuckDB)", "correct": results[best],
                "n": int(B.shape[0]), "wall": walls[best], "pairs": npairs[0], "rss": _rss(),
                "setups": {f"{t}|{s}": [v, walls[(t, s)]] for (t, s), v in results.items()},
                "note": (f"{note}; strongest of {len(results)} set-ups: {best[0]} (|a-b| <= "
                         f"{LEVELS} sd), {SCORING['splink'][best[1]]}; "
                         f"{SETUPS[best[0]]}; wall of that set-up alone; others: {others}")}

    for setup in ("4 levels", "fixed u", "exact + 4 levels"):
        try:
            _splink_setup(A, B, setup, frame, perm, row_of_id, rules, sd, cols, n,
                          max_pairs, all_pairs, results, walls, npairs)
        except Exception as e:                                      # noqa: BLE001
            traceback.print_exc()
            failed.append(f"{setup} failed in Splink: "
                          f"{type(e).__name__}: {str(e).splitlines()[0][:80]}")
        if results:                         # printed at once: the caller keeps the last
            print(json.dumps(report()), flush=True)         # line if the next one times out
    if not results:
        raise RuntimeError("; ".join(failed))
    return report()


#: the Splink set-ups (all: levels |a - b| <= LEVELS sd of A's column, then else; no term
#: frequencies; scored by best link and by 1-1 single best links)
SETUPS = {
    "4 levels": "u from up to 1e7 random pairs (seed 1, no early stop), EM of m and u with "
                "P(match) = 1/n fixed, <= 100 it",
    "exact + 4 levels": "an exact-match level first, otherwise as 4 levels",
    "fixed u": "a null level first; u from random pairs, every pair up to 1e7 pairs or "
               "more (max_pairs >= all pairs, no early stop: Splink's default "
               "min_count_per_level=100 stops after a probe of ~1 % of the pairs), then EM of "
               "m only with u and P(match) = 1/n fixed, <= 100 it",
}


def _splink_setup(A, B, setup, frame, perm, row_of_id, rules, sd, cols, n, max_pairs,
                  all_pairs, results, walls, npairs) -> None:
    """One Splink model (with or without an exact-match level), scored by best link and by
    1-1 single best links into ``results`` / ``walls``; returns the pairs predicted."""
    import pandas as pd
    import splink.comparison_level_library as cll
    import splink.comparison_library as cl
    from splink import DuckDBAPI, Linker, SettingsCreator
    if True:                                    # noqa: SIM108 (one set-up)
        t0 = time.perf_counter()
        api = DuckDBAPI()
        sa = api.register(frame(A, perm), dataset_display_name="a")
        sb = api.register(frame(B, np.arange(B.shape[0])), dataset_display_name="b")

        exact, fixed_u = setup == "exact + 4 levels", setup == "fixed u"

        def levels(j: int, c: str) -> list:
            if fixed_u:          # the docs' library levels: null, absolute differences, else
                return ([cll.NullLevel(c)]
                        + [cll.AbsoluteDifferenceLevel(c, float(t * sd[j])) for t in LEVELS]
                        + [cll.ElseLevel()])
            lv = [cll.CustomLevel(f"{c}_l = {c}_r", label_for_charts="exact")] if exact else []
            lv += [cll.CustomLevel(f"abs({c}_l - {c}_r) <= {float(t * sd[j])!r}",
                                   label_for_charts=f"within {t} sd") for t in LEVELS]
            return lv + [cll.ElseLevel()]

        comparisons = [cl.CustomComparison(levels(j, c), output_column_name=c)
                       for j, c in enumerate(cols)]
        settings = SettingsCreator(link_type="link_only", comparisons=comparisons,
                                   blocking_rules_to_generate_predictions=rules,
                                   probability_two_random_records_match=1.0 / n,
                                   max_iterations=100, retain_matching_columns=False)
        linker = Linker([sa, sb], settings)
        # min_count_per_level=None: all the sampled pairs (by default Splink stops after a 1 %
        # probe once every level has 100 pairs, and its u are then far coarser)
        n_all = float(A.shape[0]) * B.shape[0]
        u_pairs = max(1e7, n_all) if fixed_u and all_pairs else min(max_pairs, 1e7)
        linker.training.estimate_u_using_random_sampling(max_pairs=u_pairs, seed=1,
                                                         min_count_per_level=None)
        # blocked: one EM session per blocking rule of two disjoint column pairs, as the docs
        # recommend, so every comparison is estimated in a session that does not block on it
        for rule in (["1=1"] if all_pairs else rules[:2]):
            extra = ({"fix_u_probabilities": True, "estimate_without_term_frequencies": True}
                     if fixed_u else {})
            linker.training.estimate_parameters_using_expectation_maximisation(
                rule, fix_probability_two_random_records_match=True, **extra)
        pred_sdf = linker.inference.predict()
        pred = pred_sdf.as_pandas_dataframe()
        left_is_a = (pred["source_dataset_l"] == "a").to_numpy()
        a_id = np.where(left_is_a, pred["unique_id_l"], pred["unique_id_r"]).astype(np.int64)
        b_id = np.where(left_is_a, pred["unique_id_r"], pred["unique_id_l"]).astype(np.int64)
        npairs[0] = int(len(pred))
        tag = setup
        results[(tag, "best")] = _score_best(a_id, b_id, pred["match_weight"].to_numpy(),
                                             lambda b: perm[b])
        walls[(tag, "best")] = time.perf_counter() - t0
        cl_df = linker.clustering.cluster_using_single_best_links(
            pred_sdf, duplicate_free_datasets=["a", "b"], threshold_match_probability=0.0,
            ties_method="lowest_id").as_pandas_dataframe()
        ca = cl_df[cl_df["source_dataset"] == "a"].set_index("cluster_id")["unique_id"]
        cb = cl_df[cl_df["source_dataset"] == "b"].set_index("cluster_id")["unique_id"]
        both = pd.concat([ca.rename("a"), cb.rename("b")], axis=1, join="inner")
        results[(tag, "1-1")] = float(np.count_nonzero(
            row_of_id[both["a"].to_numpy(np.int64)] == both["b"].to_numpy(np.int64)))
        walls[(tag, "1-1")] = time.perf_counter() - t0


def recordlinkage(A: np.ndarray, B: np.ndarray, max_pairs: float) -> dict:
    """recordlinkage's ECM at its strongest here, sanely bounded. Two feature set-ups, each
    scored both by each masked record's best probability (ties 1/t) and by recordlinkage's
    1-1 greedy linking (OneToOneLinking); the strongest of the four is the result:

    * ``linear``: per key column the linear similarity (1 at equality, 0 at 1 sd) binarised
      at 0.5 (one feature a column; ECM takes binary features);
    * ``levels``: per key column one binary feature per level |a - b| <= 0.1, 0.25, 0.5,
      1 sd (numeric ``step`` comparisons with those offsets).

    ECM runs with its documented defaults (``max_iter=100``, ``atol=1e-4``). A bound of
    1000 iterations at atol 1e-8 never finished Census: ECM works on the distinct feature
    rows (``np.unique``), and the 52 level indicators leave 763,521 distinct rows of
    1,166,400 pairs, every one re-binarised column by column (sklearn ``LabelBinarizer``) in
    every iteration. The tighter bound does not re-identify more: on the first 150 Census
    records ECM converges in 19 iterations by default and 33 at atol 1e-8, with the same
    re-identification (5.9 %) and P(match) (0.546). Features are binarised at 0.5 before
    ECM and held as uint8 (the same 0/1 values ECM's ``binarize=0.5`` gives, so the same
    fit): ECM's ``np.unique`` then sorts 1 byte a feature, and on the linear similarity
    finds 2 distinct values a column instead of every float. The cheap ``linear`` set-up
    runs first and is printed at once, so a file on which ``levels`` does not finish within
    the caller's timeout still has a recordlinkage row."""
    import pandas as pd
    import recordlinkage as rl
    from recordlinkage.network import OneToOneLinking

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
    t_index = time.perf_counter() - t0
    rng = np.random.default_rng(1)
    results, walls = {}, {}
    desc = {"levels": f"one binary feature per level |a-b| <= {LEVELS} sd, ECM defaults",
            "linear": "linear similarity (0 at 1 sd) binarised at 0.5, ECM defaults"}

    def report(done: bool) -> dict:
        best = max(results, key=lambda k: (results[k], -walls[k]))
        others = "; ".join(f"{t}, {s}: {100.0 * v / B.shape[0]:.1f} %"
                           for (t, s), v in results.items() if (t, s) != best)
        return {"tool": f"recordlinkage {rl.__version__} (ECM)", "correct": results[best],
                "n": int(B.shape[0]), "wall": walls[best], "pairs": int(len(pairs)),
                "rss": _rss(), "note": (f"{note}; strongest of {len(results)} set-ups"
                                        f"{'' if done else ' finished'}: {desc[best[0]]}, "
                                        f"{SCORING['recordlinkage'][best[1]]}; ECM "
                                        + ", ".join(f"{k} {v}" for k, v in ecm_it.items())
                                        + f"; others: {others}")}

    ecm_it = {}
    # the cheap single-feature set-up first: the per-level one may not finish on a large file,
    # and each finished set-up is printed at once (the caller keeps the last line on a timeout)
    for setup in ("linear", "levels"):
        t1 = time.perf_counter()
        parts = []
        for j, c in enumerate(cols):             # column by column: compute gives float64
            cmp = rl.Compare()
            if setup == "levels":
                for t in LEVELS:
                    # exact numeric comparison within an offset: 1 iff |a - b| <= t sd
                    cmp.numeric(c, c, method="step", offset=float(t * sd[j]), label=f"{c}_{t}")
            else:
                cmp.numeric(c, c, method="linear", offset=0.0, scale=float(sd[j]) / 2, label=c)
            f = cmp.compute(pairs, dfa, dfb)
            # binarised at 0.5 here, as ECM's binarize=0.5 would, and held as uint8 (same
            # 0/1 values): 1 byte a feature for ECM's np.unique over the rows instead of 8
            parts.append((f > 0.5).astype(np.uint8))
        feats = pd.concat(parts, axis=1)
        del parts, f
        ecm = rl.ECMClassifier(binarize=0.5)     # its documented defaults: 100 it, atol 1e-4
        ecm.fit(feats)
        it = len(ecm.kernel._logging_class_log_prior) - 1
        ecm_it[setup] = f"{it} it" + (" (hit max_iter)" if it >= ecm.kernel.max_iter else "")
        prob = ecm.prob(feats)
        a_rows = feats.index.get_level_values(0).to_numpy()
        b_rows = feats.index.get_level_values(1).to_numpy()
        results[(setup, "best")] = _score_best(a_rows, b_rows, np.asarray(prob), lambda b: b)
        walls[(setup, "best")] = t_index + time.perf_counter() - t1
        # 1-1 greedy on the pairs sorted by probability (ties in random order)
        o = np.lexsort((rng.random(prob.size), -np.asarray(prob)))
        links = OneToOneLinking(method="greedy").compute(feats.index[o])
        la, lb = links.get_level_values(0).to_numpy(), links.get_level_values(1).to_numpy()
        results[(setup, "1-1")] = float(np.count_nonzero(la == lb))
        walls[(setup, "1-1")] = t_index + time.perf_counter() - t1
        if setup == "linear":
            print(json.dumps(report(False)), flush=True)
    return report(True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("tool", choices=["splink", "splink_fixed_u_sql", "recordlinkage"])
    ap.add_argument("files")
    ap.add_argument("--max-pairs", type=float, default=2e7)
    ap.add_argument("--block-width", type=float, default=0.1,
                    help="splink_fixed_u_sql: blocking bins, in sd of the column")
    ap.add_argument("--block-columns", type=int, default=2,
                    help="splink_fixed_u_sql: key columns per blocking rule")
    ap.add_argument("--memory", default="6GB", help="splink_fixed_u_sql: DuckDB memory_limit")
    ap.add_argument("--threads", type=int, default=2, help="splink_fixed_u_sql: DuckDB threads")
    ap.add_argument("--tmp", default="/tmp",
                    help="splink_fixed_u_sql: directory of DuckDB's database file and spill "
                         "files (needs room for the compared pairs: ~30 GB at 1e8 pairs)")
    ap.add_argument("--u-pairs", type=float, default=0.0,
                    help="splink_fixed_u_sql: random pairs for u (default every pair if all "
                         "pairs are compared, else 1e7)")
    ap.add_argument("--em-pairs", type=float, default=0.0,
                    help="splink_fixed_u_sql: EM on Splink's sample of about this many pairs "
                         "(estimate_parameters_using_expectation_maximisation(max_pairs=...)); "
                         "default 0: EM on every compared pair")
    ap.add_argument("--keep-edges", type=int, default=200,
                    help="splink_fixed_u_sql: 1-1 by single best links on the pairs above the "
                         "weight a first slice's top (this many / n) reach (0: no 1-1)")
    ap.add_argument("--chunks", type=int, default=10,
                    help="splink_fixed_u_sql: slices of the masked file to predict in")
    ap.add_argument("--predict-slices", type=int, default=0,
                    help="splink_fixed_u_sql: above --max-pairs, instead of blocking, all pairs "
                         "of this many of the --chunks slices (EM on Splink's sample of "
                         "--max-pairs pairs)")
    ap.add_argument("--log", default=None,
                    help="splink_fixed_u_sql: append Splink's INFO log, with times, to this file")
    a = ap.parse_args()
    z = np.load(a.files)
    fn = {"splink": splink, "recordlinkage": recordlinkage,
          "splink_fixed_u_sql": splink_fixed_u_sql}[a.tool]
    kw = ({"block_width": a.block_width, "block_columns": a.block_columns, "memory": a.memory,
           "threads": a.threads, "tmp": a.tmp, "u_pairs": a.u_pairs, "em_pairs": a.em_pairs,
           "log": a.log, "keep_edges": a.keep_edges, "chunks": a.chunks,
           "predict_slices": a.predict_slices}
          if a.tool == "splink_fixed_u_sql" else {})
    print(json.dumps(fn(z["A"], z["B"], a.max_pairs, **kw)))


def splink_fixed_u_sql(A: np.ndarray, B: np.ndarray, max_pairs: float, *,
                       block_width: float = 0.1, block_columns: int = 2,
                       chunks: int = 10, tmp: str = "/tmp", memory: str = "6GB",
                       threads: int = 2, u_pairs: float = 0.0, em_pairs: float = 0.0,
                       log: str | None = None, keep_edges: int = 200,
                       predict_slices: int = 0) -> dict:
    """Splink's fixed-u set-up (see :data:`SETUPS`) on a large file, scored by best link in SQL.

    Splink works in a DuckDB database file under ``tmp`` (``DuckDBAPI`` takes the connection;
    its ``memory_limit``, ``threads`` and a ``temp_directory`` beside the file are DuckDB
    settings), so the tables Splink materialises (EM's blocked pairs and their comparison
    vectors: every compared pair) live on disk and DuckDB spills its joins there rather than
    failing at ``memory``. u by Splink's random sampling of ``u_pairs`` pairs (default: every
    pair where all pairs are compared, else 1e7; no early stop); m by Splink's EM with u and
    P(match) = 1/n fixed, no term frequencies, on every compared pair, or with ``em_pairs`` on
    Splink's own sample of about that many (``max_pairs`` of
    ``estimate_parameters_using_expectation_maximisation``: a hash filter on the records of
    each side). The predictions never leave DuckDB: ``predict_chunk`` scores the masked file
    in ``chunks`` slices (Splink's documented way to bound predict's memory), and one SQL
    query per slice adds up the best-link hits (per masked record the max match_weight; the
    true record counts 1/t among t tied at the top); the slice's table is dropped before the
    next one.

    1-1 (with ``keep_edges`` > 0): Splink's single-best-links clustering (ties to the lowest
    id, as :func:`splink`) on the pairs whose match_weight reaches a threshold w0: the
    ``keep_edges / n`` upper quantile of the first slice's weights (about ``keep_edges``
    pairs a masked record), kept from every slice. Splink's own ``threshold_match_weight``
    of the clustering does the same, and a link below w0 never decides one above it (a record
    whose best remaining pair is below w0 has only pairs below w0 left), so the figure is
    exactly the hits of the links at or above w0: a lower bound of the clustering on all
    pairs, which can add at most the true pairs below w0 (counted and reported).

    All pairs up to ``max_pairs``; above, Splink's blocking as its docs recommend for large
    files: OR-ed ``block_on`` rules, one per group of ``block_columns`` consecutive key
    columns (all the groups, cyclically), each on equal bins floor(x / (block_width sd));
    m by EM on the same rules (one session per disjoint group). The share of true pairs the
    blocking keeps is reported (a masked record whose true record is not a candidate cannot
    be a hit). Or, with ``predict_slices`` = k > 0, no blocking but a sample: u from
    ``u_pairs`` (default 1e7) random pairs, EM on Splink's own sample of about ``max_pairs``
    of all pairs (its ``max_pairs``), and predict on all pairs of the first k of ``chunks``
    slices of the masked file (Splink's ``predict_chunk``: slices by a hash of the record
    id, so a random set of masked records, each against every original record). A masked
    record's best link depends on its own pairs only, so its outcome is exact, and the
    rate over the slices estimates the file's (its standard error is reported). The 1-1
    figure only when k = ``chunks`` (the clustering needs every masked record)."""
    import logging
    import os
    import shutil
    import tempfile

    import duckdb
    import pandas as pd
    import splink as _s
    import splink.comparison_level_library as cll
    import splink.comparison_library as cl
    from splink import DuckDBAPI, Linker, SettingsCreator, block_on

    bench_log = logging.getLogger("splink.benchmark")
    if log:
        h = logging.FileHandler(log)
        h.setFormatter(logging.Formatter("%(asctime)s %(name)s: %(message)s"))
        logging.getLogger("splink").addHandler(h)
        logging.getLogger("splink").setLevel(logging.INFO)

    n, K = A.shape
    cols = [f"k{j}" for j in range(K)]
    sd = A.std(axis=0, ddof=1)
    sd[~(sd > 0)] = 1.0
    n_all = float(A.shape[0]) * B.shape[0]
    all_pairs = n_all <= max_pairs
    perm = np.random.default_rng(1).permutation(A.shape[0])   # A row i gets id perm[i]
    t0 = time.perf_counter()
    tdir = tempfile.mkdtemp(prefix="splink_", dir=tmp)
    try:
        con = duckdb.connect(os.path.join(tdir, "splink.duckdb"),
                             config={"memory_limit": memory, "threads": threads,
                                     "temp_directory": os.path.join(tdir, "spill"),
                                     "preserve_insertion_order": False})

        def frame(X: np.ndarray, ids: np.ndarray) -> pd.DataFrame:
            df = pd.DataFrame(X, columns=cols)
            if not all_pairs:
                for j, c in enumerate(cols):
                    df[f"bin_{c}"] = np.floor(X[:, j] / (block_width * sd[j])).astype(np.int64)
            df.insert(0, "unique_id", ids)
            return df

        sample = not all_pairs and predict_slices > 0
        if sample:                   # the 1-1 figure needs every slice
            em_pairs = em_pairs or max_pairs
            keep_edges = keep_edges if predict_slices >= chunks else 0
        if all_pairs or sample:
            rules, kept = ["1=1"], 1.0
            where = f"all {n_all:.3g} pairs"
        else:
            groups = [[cols[(j + i) % K] for i in range(block_columns)] for j in range(K)]
            rules = [block_on(*[f"bin_{c}" for c in g]) for g in groups]
            bA = np.floor(A / (block_width * sd)).astype(np.int64)
            bB = np.floor(B / (block_width * sd)).astype(np.int64)
            same = bA == bB
            kept = float(np.mean(np.any([same[:, [(j + i) % K for i in range(block_columns)]]
                                         .all(axis=1) for j in range(K)], axis=0)))
            where = (f"blocked (docs: OR-ed block_on rules): {K} rules, each equal "
                     f"floor(x / ({block_width} sd)) bins on {block_columns} consecutive key "
                     f"columns; keeps {100.0 * kept:.2f} % of the true pairs")
        api = DuckDBAPI(con)
        sa = api.register(frame(A, perm), dataset_display_name="a")
        sb = api.register(frame(B, np.arange(B.shape[0])), dataset_display_name="b")
        comparisons = [cl.CustomComparison(
            [cll.NullLevel(c)] + [cll.AbsoluteDifferenceLevel(c, float(t * sd[j]))
                                  for t in LEVELS] + [cll.ElseLevel()],
            output_column_name=c) for j, c in enumerate(cols)]
        settings = SettingsCreator(link_type="link_only", comparisons=comparisons,
                                   blocking_rules_to_generate_predictions=rules,
                                   probability_two_random_records_match=1.0 / n,
                                   max_iterations=100, retain_matching_columns=False)
        linker = Linker([sa, sb], settings)
        # u from every pair where all pairs are compared (unless u_pairs says how many)
        u_pairs = u_pairs or (max(1e7, n_all) if all_pairs else 1e7)
        if sample:
            where = (f"all {n_all:.3g} pairs, predicted in {chunks} slices of the masked "
                     f"file (predict_chunk: each masked record against all {A.shape[0]:,} "
                     f"original records)")
        bench_log.info("u from %.3g random pairs", u_pairs)
        linker.training.estimate_u_using_random_sampling(max_pairs=u_pairs, seed=1,
                                                         min_count_per_level=None)
        t_u = time.perf_counter() - t0
        # blocked: one EM session per disjoint group of columns, as the docs recommend (each
        # comparison is estimated in the sessions that do not block on it); a session Splink
        # rejects (an m below its 1e-300 floor) is skipped and said in the note
        sessions, failed, its, sampled = (["1=1"] if all_pairs or sample
                                          else rules[::block_columns]), [], [], []
        for rule in sessions:
            bench_log.info("EM session %s", getattr(rule, "blocking_rule_sql", rule))
            try:
                em = linker.training.estimate_parameters_using_expectation_maximisation(
                    rule, fix_u_probabilities=True,
                    fix_probability_two_random_records_match=True,
                    estimate_without_term_frequencies=True,
                    **({"max_pairs": em_pairs} if em_pairs else {}))
                its.append(len(em._core_model_settings_history) - 1)
                info = em._sample_info or {}
                if info.get("sampling_applied"):
                    sampled.append(f"~{info['expected_pairs_after_sampling']:.3g} of "
                                   f"~{info['estimated_total_pairs']:.3g}")
            except ValueError as e:
                failed.append(f"{getattr(rule, 'blocking_rule_sql', rule)}: "
                              f"{str(e).splitlines()[0][:60]}")
        t_em = time.perf_counter() - t0 - t_u
        truth = pd.DataFrame({"b_id": np.arange(B.shape[0], dtype=np.int64),
                              "a_id": perm.astype(np.int64)})
        con.register("__truth_df", truth)
        em_on = (f"EM on Splink's max_pairs sample ({'; '.join(sampled)} pairs)" if sampled
                 else "EM on every compared pair")
        u_from = (f"u from every pair (Splink's random sampling, max_pairs {u_pairs:.3g} >= "
                  f"all pairs, no early stop)" if all_pairs and u_pairs >= n_all else
                  f"u from {u_pairs:.3g} random pairs (no early stop)")
        st = {"hits": 0.0, "pairs": 0, "n_b": 0, "below": 0, "slices": 0, "one": None,
              "kept_edges": 0, "w0": None, "wall1": None}
        n_slices = predict_slices if sample else chunks

        def result() -> dict:
            """The figures so far: after every slice (printed at once, so a run cut short
            keeps an estimate from the slices it finished) and at the end."""
            wall = time.perf_counter() - t0 if st["wall"] is None else st["wall"]
            t_pred = wall - t_u - t_em
            setup = f"{where}; {u_from}; {em_on}"
            hits, n_b, se = st["hits"], st["n_b"], None
            if st["slices"] < chunks:  # a sample of the masked file: its rate, as hits of n
                rate = hits / max(n_b, 1)
                se = (rate * (1.0 - rate) / max(n_b, 1)) ** 0.5
                setup += (f"; best link predicted for {n_b:,} masked records "
                          f"({st['slices']} of {chunks} slices, {hits:.2f} hits), estimating "
                          f"the file's rate (standard error {100.0 * se:.2f} points)")
                hits = rate * B.shape[0]
            one = st["one"]
            if one is not None:
                setup += (f"; 1-1: single best links on the {st['kept_edges']:,} pairs with "
                          f"match_weight >= {st['w0']:.3g} (a lower bound: {st['below']:,} "
                          f"true pairs lie below)")
            return {"tool": f"Splink {_s.__version__} (DuckDB)", "n": int(B.shape[0]),
                    "best": hits,
                    **({"correct": one, "wall_1_1": st["wall1"],
                        "correct_lower_bound": st["below"] > 0} if one is not None else {}),
                    "wall": wall, "pairs": st["pairs"], "rss": _rss(), "kept": kept,
                    "setup": setup,
                    **({"best_se": se, "masked_predicted": n_b} if se is not None else {}),
                    "note": (f"{setup}; fixed u: null level + |a-b| <= {LEVELS} sd + else, EM "
                             f"of m only with u and P(match) = 1/n fixed, no term frequencies "
                             f"({', '.join(map(str, its))} it); DuckDB file database, "
                             f"memory_limit {memory}, {threads} thread(s), spilling to disk; "
                             f"predict in slices of the masked file, best link scored in "
                             f"DuckDB SQL; u {t_u:.0f} s, EM {t_em:.0f} s, predict + score "
                             f"{t_pred:.0f} s"
                             + (f", 1-1 clustering {st['wall1'] - wall:.0f} s (wall: best "
                                f"link; 1-1 {st['wall1']:.0f} s)" if one is not None else
                                ", no 1-1 figure") + "; "
                             f"{len(sessions) - len(failed)} of {len(sessions)} EM sessions"
                             + (f" (skipped: {'; '.join(failed)})" if failed else ""))}

        st["wall"] = None
        w0, below = None, 0
        for k in range(1, n_slices + 1):
            bench_log.info("predict slice %d of %d", k, chunks)
            pred = linker.inference.predict_chunk(right_chunk=(k, chunks), warning_mode="never")
            t = pred.physical_name
            if keep_edges > 0:
                if w0 is None:
                    (w0,), = con.execute(f"select quantile_disc(match_weight, "
                                         f"{1.0 - min(1.0, keep_edges / n)!r}) "
                                         f"from {t}").fetchall()
                    w0 = float(w0)
                    con.execute(f"create table __kept_edges as select * from {t} "
                                f"where match_weight >= {w0!r}")
                else:
                    con.execute(f"insert into __kept_edges select * from {t} "
                                f"where match_weight >= {w0!r}")
                (nb,), = con.execute(f"""
                    select count(*) from {t} p join __truth_df tr
                    on tr.b_id = case when p.source_dataset_l = 'a' then p.unique_id_r
                                      else p.unique_id_l end
                    and tr.a_id = case when p.source_dataset_l = 'a' then p.unique_id_l
                                       else p.unique_id_r end
                    where p.match_weight < {w0!r}""").fetchall()
                below += int(nb)
            q = f"""
            with p as (
              select case when source_dataset_l = 'a' then unique_id_r else unique_id_l end
                       as b_id,
                     case when source_dataset_l = 'a' then unique_id_l else unique_id_r end
                       as a_id,
                     match_weight as w from {t}),
            top as (select b_id, max(w) as w from p group by b_id),
            at_top as (select p.b_id, p.a_id from p join top using (b_id) where p.w = top.w),
            per_b as (select at_top.b_id, count(*) as t,
                             sum(case when at_top.a_id = tr.a_id then 1 else 0 end) as hit
                      from at_top join __truth_df tr on at_top.b_id = tr.b_id
                      group by at_top.b_id)
            select coalesce(sum(hit::double / t), 0), (select count(*) from {t}), count(*)
            from per_b"""
            (h, c, nb), = con.execute(q).fetchall()
            st["hits"] += float(h)
            st["pairs"] += int(c)
            st["n_b"] += int(nb)
            st["slices"] = k
            st["below"] = below
            pred.drop_table_from_database_and_remove_from_cache()
            if k < chunks and (all_pairs or sample):   # every pair of the slice's records
                print(json.dumps(result()), flush=True)
        st["wall"] = time.perf_counter() - t0
        if keep_edges > 0:
            bench_log.info("single best links on the pairs with match_weight >= %g", w0)
            (st["kept_edges"],), = con.execute("select count(*) from __kept_edges").fetchall()
            kept_sdf = linker.table_management.register_table_predict(
                api.register("__kept_edges"))
            cl_df = linker.clustering.cluster_using_single_best_links(
                kept_sdf, duplicate_free_datasets=["a", "b"], threshold_match_weight=w0,
                ties_method="lowest_id").as_pandas_dataframe()
            row_of_id = np.argsort(perm)
            ca = cl_df[cl_df["source_dataset"] == "a"].set_index("cluster_id")["unique_id"]
            cb = cl_df[cl_df["source_dataset"] == "b"].set_index("cluster_id")["unique_id"]
            both = pd.concat([ca.rename("a"), cb.rename("b")], axis=1, join="inner")
            st["one"] = float(np.count_nonzero(
                row_of_id[both["a"].to_numpy(np.int64)] == both["b"].to_numpy(np.int64)))
            st["wall1"] = time.perf_counter() - t0
            st["w0"] = w0
        out = result()
        con.close()
    finally:
        shutil.rmtree(tdir, ignore_errors=True)
    return out


if __name__ == "__main__":
    main()
