"""Benchmark: the default PRL comparison at 200,000 and 1,000,000 records, and an estimate at
10,000,000 on 32 workers.

Synthetic files (:func:`sdcdist.data.synth.generate`, 8 numeric key columns, seed 1),
masked by additive noise with variance 0.1 var (``noise``, p = 0.1); one key set of all 8
columns; the default comparison ``s`` (levels at 0, 0.1, 0.25, 0.5, 1 sd: 6^8 patterns).
On a LocalCluster of ``--workers`` processes (1 thread each) it prints, per size:

- the path ``prl_counting=auto`` takes (and the time the decision took);
- the pattern counts of all pairs with the dense histogram kernel: with ``--full N``
  every task of the tiling runs at sizes <= N (wall time measured, counts checked against
  the sum of the tasks); above, all A rows and the first 32,768 B rows of ``--samples``
  tasks of the real tiling (32,768 A rows x 65,536 B rows) spread over the file run
  (the per-A-block and per-B-row work of the kernel, ranking and interval walks, is
  amortised as in a whole task), and the rest is extrapolated from their CPU time per
  pair;
- the sparse kernel (the pairs' codes sorted and counted, for pattern spaces too large for
  a histogram) on sampled blocks of the same A rows, extrapolated the same way, and
  whether its counts equal the dense kernel's there bit for bit;
- the candidates (top 20 by weight): the branch-and-bound search (auto's from 2^24 pairs
  on, ``blocks.topc_path``; the column "auto's candidates" says which auto takes, and the
  total counts that one) and the all-pairs pass, on the same sampled B rows, extrapolated (their weighed
  pairs as a share, and equality of candidates and weights on the sample);
- the EM on the (sampled) counts; peak resident memory of every process.

CPU times of the tasks divided by the workers are the wall time on otherwise idle cores
(the machine may be shared: the load average is printed). The sparse assignment on the
candidates (``n log n``) is not included in the estimates.

The 10,000,000-record estimate on 32 workers: pairs x (measured CPU s per pair of the
counting tasks at the largest size) / 32, plus B rows x (measured CPU s per B row of
the candidate search at the largest size, scaled by n like its weighed share between the
two sizes) / 32, plus the KD-tree build (n log n from the largest size, one task).

With ``--link 4092,59315`` it first runs the whole default linkage
(``probabilistic_linkage``) at those sizes on the same kind of files and prints its wall
time and phases: in this process (up to 10,000 records; a first call, then the fastest of
``--repeat`` warm calls) and on the cluster (not with ``--local-only``). (4,092: the size
of the real utility file the issue quotes, which is not shipped; 59,315: the size of
``benchmarks/prl.py``'s largest file.) ``--sizes ""`` skips the sampled table. With
``--against DIR`` the in-process linkage is also timed with the sdcdist checkout in DIR (an
older version, say), in a subprocess right after, and the ratios are printed.

    python benchmarks/prl_scale.py [--sizes 200000,1000000] [--workers 2] [--full 0]
                                   [--link 4092,59315] [--repeat 3] [--local-only]
                                   [--against DIR]
"""

from __future__ import annotations

import argparse
import os
import resource
import time

import numpy as np

KEYS = 8
TOP_C = 20
#: B rows of each sampled counting task (the task's A rows all kept)
SAMPLE_B_ROWS = 32768
#: ``--link`` runs in this process too (no cluster) up to this many records
LINK_LOCAL_MAX = 10_000


def make_files(n: int, seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    from sdcdist.data import synth
    from sdcdist.masking import REGISTRY
    A = synth.generate(n, columns=KEYS, seed=seed).values
    B = REGISTRY["noise"](A, 0.1, rng=np.random.default_rng(seed))
    return A, B


def _maxrss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _spread(n: int, rows: int, count: int) -> list[tuple[int, int]]:
    """``count`` blocks of ``rows`` rows spread evenly over ``n`` rows."""
    starts = np.linspace(0, max(0, n - rows), count).astype(int)
    return [(int(s), int(s) + rows) for s in starts]


def _sub(side: dict, s: int, e: int) -> dict:
    return {k: v[s:e] for k, v in side.items()}


def _load() -> str:
    try:
        return "load average %.1f %.1f %.1f" % os.getloadavg()
    except OSError:
        return "load average unknown"


# tasks (module level so that worker processes can import them)

def _counts_task(A: dict, B: dict, cmp, a0: int, a1: int, b0: int, b1: int, kernel: str):
    from sdcdist.linkage import prl
    t0 = time.thread_time()
    out = prl.pattern_counts(_sub(A, a0, a1), _sub(B, b0, b1), cmp, kernel=kernel)
    return out, time.thread_time() - t0


def _topc_search_task(tree: dict, B: dict, cmp, wp, s: int, e: int):
    from sdcdist.linkage.prl import topc
    t0 = time.thread_time()
    out = topc.topc_search(tree, _sub(B, s, e), cmp, wp, TOP_C)
    return out, time.thread_time() - t0


def _topc_pairs_task(A: dict, B: dict, cmp, wp, s: int, e: int):
    from sdcdist.linkage.prl import topc
    t0 = time.thread_time()
    out = topc.topc_block(A, _sub(B, s, e), cmp, wp, TOP_C)
    return out, time.thread_time() - t0


def _tree_task(A: dict, scale):
    from sdcdist.linkage.prl import kdtree
    t0 = time.thread_time()
    tree = kdtree.build_tree(A, scale=scale)
    return {"tree": tree, "t": time.thread_time() - t0}


def _topc_path(blocks, n: int, path: str) -> str:
    """auto's candidate search at n x n records (``blocks.topc_path``; before it existed the
    search ran on the counting path and from ``AUTO_MIN_PAIRS`` pairs on)."""
    if hasattr(blocks, "topc_path"):
        return blocks.topc_path(n, n, path=path)
    return "search" if path == "count" or n * n >= blocks.AUTO_MIN_PAIRS else "pairs"


def link(n: int, workers: int, *, repeat: int = 3, local_only: bool = False) -> dict:
    """The whole default linkage (``probabilistic_linkage``, prl_counting auto) at n records,
    wall time: in this process (no cluster; up to :data:`LINK_LOCAL_MAX` records) and on a
    LocalCluster of ``workers`` (not with ``local_only``). Small files run a first call
    (which loads the kernels it meets, or compiles them), then ``repeat`` more calls, of
    which the fastest (wall) is kept: on a shared machine the others wait for a core."""
    from sdcdist.linkage.prl import probabilistic_linkage
    from sdcdist.parallel import Runner

    A, B = make_files(n)
    cols = tuple(range(KEYS))
    small = n <= LINK_LOCAL_MAX
    out: dict = {"n": n, "load_start": _load(), "runs": []}

    def cpu(client) -> float:
        # CPU seconds of this process and of every worker process
        own = time.process_time()
        return own + (sum(client.run(time.process_time).values()) if client else 0.0)

    def once(runner, a, b) -> dict:
        c0 = cpu(runner.client)
        t0 = time.perf_counter()
        res = probabilistic_linkage(runner, a, b, n, n, cols)
        wall = time.perf_counter() - t0
        used = cpu(runner.client) - c0
        i = res.info
        return {"wall": wall, "cpu": used, "timings": i["timings"], "counting": i["counting"],
                "candidates": i.get("candidates", "-"), "assignment": i["assignment"],
                "em_iterations": i["em_iterations"], "pld": 100.0 * res.correct / n}

    def timed(where: str, runner, a, b) -> None:
        if not small:
            out["runs"].append({"label": where, **once(runner, a, b)})
            return
        out["runs"].append({"label": where + ", first call", **once(runner, a, b)})
        again = [once(runner, a, b) for _ in range(max(1, repeat))]
        best = min(again, key=lambda r: r["wall"])
        walls = ", ".join(f"{r['wall']:.2f}" for r in again)
        out["runs"].append({"label": where + f", warm: best of {len(again)} ({walls})",
                            **best})

    if small:
        timed("in-process", Runner(), A, B)
    if local_only:
        out["load_end"] = _load()
        return out
    from distributed import Client, LocalCluster
    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                      dashboard_address=":0", silence_logs=40) as cluster, \
            Client(cluster) as client:
        client.run(_warm)
        runner = Runner(client)
        timed(f"{workers} workers", runner, runner.share(A), runner.share(B))
        # peak resident memory of each process over the whole run (the linkage's peak
        # for a single large run): the largest worker, the scheduler, this client
        out["rss"] = (max(client.run(_maxrss_mib).values()),
                      client.run_on_scheduler(_maxrss_mib), _maxrss_mib())
    out["load_end"] = _load()
    return out


def link_against(n: int, other: str, repeat: int) -> dict:
    """:func:`link` in this process only (``local_only``), run in a subprocess with the
    sdcdist checkout in the folder ``other`` first on the path (its own compiled-kernel
    cache in a temporary folder): a baseline measured in the same run."""
    import json
    import subprocess
    import sys
    import tempfile
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "PYTHONPATH": other, "NUMBA_CACHE_DIR": cache,
               "PYTHONDONTWRITEBYTECODE": "1"}
        done = subprocess.run([sys.executable, os.path.abspath(__file__), "--sizes", "",
                               "--link", str(n), "--local-only", "--repeat", str(repeat),
                               "--json"], env=env, check=True, capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def _link_row(n: int, x: dict, tag: str = "") -> str:
    t = x["timings"]
    return (f"| {n:,} | {tag}{x['label']} | {x['wall']:.2f} ({x['cpu']:.2f}) | "
            f"{t['patterns']:.2f} | {t['em']:.2f} ({x['em_iterations']} it) | "
            f"{t['candidates']:.2f} | {t['assignment']:.2f} ({x['assignment']}) | "
            f"{x['counting']} | {x['candidates']} | {x['pld']:.2f} |")


def _item(d: dict, key: str):
    return d[key]


def _warm() -> None:
    """Compile (or load) every kernel the tasks time, on a tiny problem."""
    from sdcdist.linkage import prl
    from sdcdist.linkage.prl import kdtree, topc
    A, B = make_files(300)
    cmp = prl.comparison(KEYS)
    a = prl.prepare_side(A, tuple(range(KEYS)), cmp, side="a")
    b = prl.prepare_side(B, tuple(range(KEYS)), cmp, side="b")
    prl.pattern_counts(a, b, cmp, kernel="sparse")
    counts = prl.pattern_counts(a, b, cmp, kernel="dense")
    wp = prl.weight_params(prl.em(counts, cmp, p_start=1 / 300, p_max=1 / 300), cmp)
    topc.topc_search(kdtree.build_tree(a, scale=kdtree.split_scale(wp, cmp)), b, cmp, wp, TOP_C)
    topc.topc_block(a, b, cmp, wp, TOP_C)


def bench(n: int, workers: int, full: bool, samples: int) -> dict:
    from distributed import Client, LocalCluster

    from sdcdist.linkage import prl
    from sdcdist.linkage.prl import blocks, kdtree
    from sdcdist.options import PRL_BLOCK_ROWS
    from sdcdist.parallel import Runner

    A, B = make_files(n)
    cols = tuple(range(KEYS))
    cmp = prl.comparison(KEYS)
    pairs = float(n) * n
    out: dict = {"n": n, "load_start": _load()}
    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                      dashboard_address=":0", silence_logs=40) as cluster, \
            Client(cluster) as client:
        runner = Runner(client)
        client.run(_warm)
        Ah, Bh = runner.share(A), runner.share(B)
        Ap = runner.task(prl.prepare_side, Ah, cols, cmp, side="a")
        Bp = runner.task(prl.prepare_side, Bh, cols, cmp, side="b")
        runner.result(Ap), runner.result(Bp)
        t0 = time.perf_counter()
        path, _, info = blocks.choose_counting(runner, Ap, Bp, n, n, cmp)
        share = info.get("enumerated_share_estimate")
        # below AUTO_MIN_PAIRS auto does not sample (the small-file rule): no share to print
        out["decision"] = f"{info['counting']} (" + (
            "no share sampled" if share is None else f"share estimate {share:.3f}") + \
            f", {time.perf_counter() - t0:.1f} s)"
        out["topc_path"] = _topc_path(blocks, n, path)
        rows = (PRL_BLOCK_ROWS, PRL_BLOCK_ROWS)
        tasks = blocks.count_tasks(n, n, cmp, rows)
        out["tasks"] = len(tasks)
        if full:
            t0 = time.perf_counter()
            parts = runner.result([runner.task(_counts_task, Ap, Bp, cmp, *t, "dense")
                                   for t in tasks])
            out["wall_counts_full"] = time.perf_counter() - t0
            counts = prl.merge_counts(*[p[0] for p in parts])
            assert int(counts[1].sum()) == n * n
            cpu = sum(p[1] for p in parts)
            done = pairs
        else:
            # the first SAMPLE_B_ROWS B rows of tasks spread over the tiling
            pick = [tasks[int(i)] for i in np.linspace(0, len(tasks) - 1, samples)]
            pick = [(a0, a1, b0, min(b1, b0 + SAMPLE_B_ROWS)) for a0, a1, b0, b1 in pick]
            parts = runner.result([runner.task(_counts_task, Ap, Bp, cmp, *t, "dense")
                                   for t in pick])
            counts = prl.merge_counts(*[p[0] for p in parts])
            cpu = sum(p[1] for p in parts)
            done = float(sum((t[1] - t[0]) * (t[3] - t[2]) for t in pick))
        out["ns_pair_dense"] = 1e9 * cpu / done
        out["t_counts"] = cpu / done * pairs / workers
        out["pairs_timed"] = done
        # the sparse kernel on a few sampled blocks (the same tiling's A rows)
        hrows = min(n, max(16, int(2.5e7 // n)))
        hblocks = _spread(n, hrows, 2)
        hp = runner.result([runner.task(_counts_task, Ap, Bp, cmp, s, e, 0, n, "sparse")
                            for s, e in hblocks])
        dp = runner.result([runner.task(_counts_task, Ap, Bp, cmp, s, e, 0, n, "dense")
                            for s, e in hblocks])
        out["hrows"] = hrows
        out["sparse_equal"] = all(np.array_equal(h[0][0], d[0][0])
                                and np.array_equal(h[0][1], d[0][1]) for h, d in zip(hp, dp))
        hdone = float(len(hblocks) * hrows * n)
        out["ns_pair_sparse"] = 1e9 * sum(h[1] for h in hp) / hdone
        out["t_sparse"] = sum(h[1] for h in hp) / hdone * pairs / workers
        # EM on the counts (all of them with --full, else the sampled tasks')
        t0 = time.perf_counter()
        N = float(counts[1].sum())
        fit = prl.em(counts, cmp, p_start=n / pairs, p_max=n / pairs)
        out["t_em"] = time.perf_counter() - t0
        out["em"] = f"{fit.iterations} iterations, converged {fit.converged}, on {N:.3g} pairs"
        wp = prl.weight_params(fit, cmp)
        # candidates: branch and bound against all pairs on the same sampled B rows
        scale = kdtree.split_scale(wp, cmp)
        built = runner.task(_tree_task, Ap, scale)
        out["t_tree"] = runner.call(_item, built, "t")
        tree = runner.task(_item, built, "tree")
        # at least 512 B rows a sample: a search task's fixed cost (the bound table,
        # ~0.1 s) is then spread as in the real search tasks of 8,192 B rows, not over 50
        brows = min(n, max(512, int(5e7 // n)))
        bblocks = _spread(n, brows, samples)
        ts = runner.result([runner.task(_topc_search_task, tree, Bp, cmp, wp, s, e)
                            for s, e in bblocks])
        prows = max(16, int(brows // 4))
        tp = runner.result([runner.task(_topc_pairs_task, Ap, Bp, cmp, wp, s, s + prows)
                            for s, _ in bblocks[:2]])
        out["topc_equal"] = all(np.array_equal(t[0]["idx"][:prows], p[0]["idx"])
                                and np.array_equal(t[0]["w"][:prows], p[0]["w"])
                                for t, p in zip(ts, tp))
        out["share_weighed"] = sum(t[0]["visited"] for t in ts) / (len(bblocks) * brows * n)
        out["s_row_search"] = sum(t[1] for t in ts) / (len(bblocks) * brows)
        out["t_search"] = out["s_row_search"] * n / workers
        out["t_topc_pairs"] = sum(p[1] for p in tp) / (len(tp) * prows) * n / workers
        out["rss_workers"] = max(client.run(_maxrss_mib).values())
        out["rss_scheduler"] = client.run_on_scheduler(_maxrss_mib)
        out["rss_client"] = _maxrss_mib()
    out["load_end"] = _load()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="200000,1000000")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--full", type=int, default=0,
                    help="run every counting task (not a sample) up to this size")
    ap.add_argument("--samples", type=int, default=4)
    ap.add_argument("--link", default="",
                    help="also run the whole default linkage at these sizes, wall time "
                         "(e.g. 4092,59315: the size of a real utility file and of the "
                         "59,315-record file; same synthetic 8-key files)")
    ap.add_argument("--repeat", type=int, default=3,
                    help="--link: warm calls in this process after the first, the fastest kept")
    ap.add_argument("--local-only", action="store_true",
                    help="--link: in this process only (no cluster)")
    ap.add_argument("--against", default="",
                    help="--link: also time the in-process linkage with the sdcdist checkout "
                         "in this folder (in a subprocess, same files), and print the ratios")
    ap.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    w = args.workers
    if args.link and args.json:
        import json
        print(json.dumps([link(int(x), w, repeat=args.repeat, local_only=args.local_only)
                          for x in args.link.split(",")]))
        return
    if args.link:
        print("whole default linkage (probabilistic_linkage, prl_counting auto), wall s "
              "(on a shared machine the CPU time, beside it, is the steadier figure); "
              "phases in wall s: candidates = every pair's weight when the assignment is dense")
        print("| records | where | wall (CPU s, all processes) | patterns | EM | candidates | "
              "assignment | counting | candidates by | PLD % |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for n in (int(x) for x in args.link.split(",")):
            r = link(n, w, repeat=args.repeat, local_only=args.local_only or bool(args.against))
            for x in r["runs"]:
                print(_link_row(n, x), flush=True)
            if "rss" in r:
                print("  peak RSS over the cluster run: worker %.0f / scheduler %.0f / client "
                      "%.0f MiB" % r["rss"], flush=True)
            print(f"  ({r['load_start']} at start, {r['load_end']} at end)", flush=True)
            if args.against and n <= LINK_LOCAL_MAX:
                base = link_against(n, args.against, args.repeat)[0]
                for x in base["runs"]:
                    print(_link_row(n, x, f"{args.against}: "), flush=True)
                print(f"  ({base['load_start']} at start, {base['load_end']} at end)")
                ours, theirs = r["runs"][-1], base["runs"][-1]
                print(f"  warm in-process, {args.against} / this checkout: wall "
                      f"{theirs['wall'] / ours['wall']:.2f}x, CPU "
                      f"{theirs['cpu'] / ours['cpu']:.2f}x; PLD equal: "
                      f"{theirs['pld'] == ours['pld']}", flush=True)
        if not args.sizes:
            return
    rows = []
    print(f"default PRL (s, 6 levels) on {KEYS} key columns, {w} workers x 1 thread; "
          "times are task CPU s / workers (wall on idle cores) unless marked wall", flush=True)
    print("| records | auto's path | counts, dense kernel | counts, sparse kernel | "
          "KD-tree | top-20 search | top-20 all pairs | auto's candidates | EM | total (auto's "
          "paths) | peak RSS worker / scheduler / client |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for n in (int(x) for x in args.sizes.split(",")):
        r = bench(n, w, n <= args.full, args.samples)
        rows.append(r)
        how = ("all %d tasks, wall %.0f s" % (r["tasks"], r["wall_counts_full"])
               if "wall_counts_full" in r else
               "%d B rows of %d of %d tasks sampled (%.2g pairs), extrapolated" % (
                   SAMPLE_B_ROWS, args.samples, r["tasks"], r["pairs_timed"]))
        searched = r["topc_path"] == "search"
        total = r["t_counts"] + r["t_em"] + (r["t_tree"] + r["t_search"] if searched
                                             else r["t_topc_pairs"])
        print(f"| {n:,} | {r['decision']} | {r['t_counts']:.0f} s ({r['ns_pair_dense']:.2f} "
              f"ns/pair; {how}) | {r['t_sparse']:.0f} s ({r['ns_pair_sparse']:.1f} ns/pair, "
              f"2 x {r['hrows']} A rows sampled; equal {r['sparse_equal']}) | {r['t_tree']:.1f} s | "
              f"{r['t_search']:.0f} s (weighs {100 * r['share_weighed']:.2f} % of pairs) | "
              f"{r['t_topc_pairs']:.0f} s (candidates equal {r['topc_equal']}) | "
              f"{'search' if searched else 'all pairs'} | "
              f"{r['t_em']:.1f} s wall ({r['em']}) | {total:.0f} s | "
              f"{r['rss_workers']:.0f} / {r['rss_scheduler']:.0f} / {r['rss_client']:.0f} "
              f"MiB |", flush=True)
        print(f"  ({r['load_start']} at start, {r['load_end']} at end)", flush=True)
    big = rows[-1]
    n1 = big["n"]
    n10 = 10_000_000
    if len(rows) > 1 and rows[0]["share_weighed"] > 0 and big["share_weighed"] > 0:
        gamma = np.log(rows[0]["share_weighed"] / big["share_weighed"]) / \
            np.log(n1 / rows[0]["n"])
    else:
        gamma = 0.0
    c_pair = big["ns_pair_dense"] * 1e-9
    counts32 = c_pair * float(n10) ** 2 / 32
    search32 = big["s_row_search"] * (n10 / n1) ** (1 - gamma) * n10 / 32
    tree = big["t_tree"] * (n10 * np.log(n10)) / (n1 * np.log(n1))
    sparse32 = big["ns_pair_sparse"] * 1e-9 * float(n10) ** 2 / 32
    print(f"\n10,000,000 records on 32 workers, estimated: counts {counts32 / 3600:.1f} h "
          f"({n10 ** 2:.0e} pairs x {big['ns_pair_dense']:.2f} ns CPU per pair measured on "
          f"the counting tasks at {n1:,} / 32), top-20 search {search32 / 3600:.1f} h "
          f"({n10:,} B rows x {big['s_row_search'] * 1e3:.1f} ms CPU per row at {n1:,}, x "
          f"(10^7/{n1:,})^{1 - gamma:.2f} as its weighed share falls as n^-{gamma:.2f}, / 32), "
          f"KD-tree {tree / 60:.0f} min (one task, n log n); total "
          f"{(counts32 + search32 + tree) / 3600:.1f} h before assignment. The sparse "
          f"kernel's counts alone: {sparse32 / 3600:.1f} h.", flush=True)


if __name__ == "__main__":
    main()
