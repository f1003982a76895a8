"""The executor and drivers of sdcdist.parallel: same results with and without a cluster."""

from __future__ import annotations

import threading
import time

import numpy as np
import pandas as pd
import pytest

from sdcdist.audit import parse_spec
from sdcdist.audit.calibrate import calibrate
from sdcdist.parallel import (CellExecutor, Local, Runner, add_dicts, cell_mode, chunk_bounds,
                              distributed_sort, indexed_reduce, map_reduce, pairwise_reduce,
                              tree_reduce)
from sdcdist.parallel.sort import chunk_ranks


def _runners(client):
    return [Runner(), Runner(client)]


# -- runner ----------------------------------------------------------------------------

def test_runner_vocabulary(client):
    for r in _runners(client):
        x = r.share(np.arange(5.0))
        h = r.task(np.multiply, x, 2.0)
        assert r.result(h).tolist() == [0, 2, 4, 6, 8]
        assert r.call(np.sum, h) == 20.0
        assert r.result([r.task(int, "7"), h])[0] == 7
        assert r.call(np.add, x, np.ones(5)).tolist() == [1, 2, 3, 4, 5]
        hs = [r.task(pow, 2, k) for k in range(6)]
        assert sorted(r.result(f) for f in r.as_completed(hs)) == [1, 2, 4, 8, 16, 32]
        assert r.result(r.task(divmod, 7, 2)) == (3, 1)
    assert isinstance(Runner().task(abs, -1), Local)
    assert Runner().n_workers == 1 and not Runner().lost()
    assert Runner(client).n_workers == 2 and not Runner(client).lost()


def test_task_passes_keywords_to_the_function(client):
    for r in _runners(client):
        assert r.call(np.round, r.share(np.array([1.26])), decimals=1).tolist() == [1.3]


def test_a_shared_value_is_recomputable_not_scattered(client):
    """A shared input lives in a task's spec: losing its worker loses no data (issue 14)."""
    r = Runner(client)
    h = r.share(np.arange(3.0))
    assert r.call(np.sum, h) == 3.0

    def spec_kept(dask_scheduler, key=h.key):
        return dask_scheduler.tasks[key].run_spec is not None  # None for scattered data
    assert client.run_on_scheduler(spec_kept)
    assert h.key != r.share(np.arange(3.0)).key   # each share its own task


# -- reductions --------------------------------------------------------------------------

def test_chunk_bounds():
    assert chunk_bounds(7, 3) == [(0, 3), (3, 6), (6, 7)]
    assert chunk_bounds(0, 3) == []
    with pytest.raises(ValueError):
        chunk_bounds(5, 0)


def test_add_dicts_adds_in_argument_order():
    a, b, c = {"x": 1, "v": np.array([1.0])}, {"x": 2, "v": np.array([1e16])}, \
        {"x": 3, "v": np.array([-1e16])}
    out = add_dicts(a, b, c)
    assert out["x"] == 6 and out["v"][0] == (1.0 + 1e16) - 1e16
    assert a["x"] == 1 and a["v"].tolist() == [1.0]          # inputs untouched
    assert add_dicts(a) == a


def _grouping(*xs):
    return "(" + ",".join(xs) + ")"


def test_tree_reduce_grouping_is_fixed(client):
    for r in _runners(client):
        leaves = [r.task(str, i) for i in range(10)]
        got = r.result(tree_reduce(r, _grouping, leaves, split_every=3))
        assert got == "(((0,1,2),(3,4,5),(6,7,8)),9)"
        assert r.result(tree_reduce(r, _grouping, leaves[:1])) == "0"
    with pytest.raises(ValueError):
        tree_reduce(Runner(), _grouping, [])


def _moments(s, e, X, shift):
    x = X[s:e] - shift
    return {"n": e - s, "sum": x.sum(axis=0), "sq": (x * x).sum(axis=0)}


def test_map_reduce_is_bit_identical_on_a_cluster(rng, client):
    X = rng.standard_normal((103, 3))
    outs = []
    for r in _runners(client):
        outs.append(map_reduce(r, _moments, add_dicts, [r.share(X)], 103, chunk_rows=10,
                               args=(0.5,), aggregate=lambda t: (t["n"], t["sum"], t["sq"])))
    assert outs[0][0] == outs[1][0] == 103
    assert np.array_equal(outs[0][1], outs[1][1]) and np.array_equal(outs[0][2], outs[1][2])
    assert np.allclose(outs[0][1], (X - 0.5).sum(axis=0))


# -- pairs -------------------------------------------------------------------------------

def _less_block(a0, a1, b0, b1, Q, C):
    return {"less": (Q[a0:a1, None] > C[None, b0:b1]).sum(axis=1)}


def _sorted_index(c0, c1, C):
    return np.sort(C[c0:c1])


def _query_less(q0, q1, Q, index, side):
    return {"less": np.searchsorted(index, Q[q0:q1], side=side)}


def _finish_total(q0, q1, merged, Q, C, scale):
    return {"pairs": scale * int(merged["less"].sum()), "rows": q1 - q0}


def _stack(*parts):
    return {"less": np.concatenate([p["less"] for p in parts])}


def _finish_rows(a0, a1, merged, Q, C):
    return merged


@pytest.mark.parametrize("rows", [(1, 9), (7, 1), (13, 40), (100, 100)])  # 1-row blocks on
# each side without 37 x 41 one-pair tasks
def test_indexed_reduce_equals_brute_force(rng, client, rows):
    Q = rng.integers(0, 20, 37).astype(float)           # ties with the candidates
    C = rng.integers(0, 20, 41).astype(float)
    brute = (Q[:, None] > C[None, :]).sum(axis=1)
    for r in _runners(client):
        per_row = indexed_reduce(r, _sorted_index, _query_less, add_dicts, _stack,
                                 r.share(Q), r.share(C), 37, 41, rows_q=rows[0],
                                 rows_c=rows[1], query_args=("left",))
        assert per_row["less"].tolist() == brute.tolist()
        total = indexed_reduce(r, _sorted_index, _query_less, add_dicts, add_dicts, Q, C,
                               37, 41, rows_q=rows[0], rows_c=rows[1], query_args=("left",),
                               finish=_finish_total, finish_args=(3,))
        assert total == {"pairs": 3 * int(brute.sum()), "rows": 37}
        tiled = pairwise_reduce(r, _less_block, add_dicts, _finish_rows, _stack, Q, C, 37, 41,
                                rows_a=rows[0], rows_b=rows[1])
        assert tiled["less"].tolist() == brute.tolist()


# -- sort --------------------------------------------------------------------------------

@pytest.mark.parametrize("chunk_rows,bucket_rows", [(1, 5), (9, 20), (64, 64), (200, None)])
def test_distributed_sort_equals_np_sort(rng, client, chunk_rows, bucket_rows):
    n = 40 if chunk_rows == 1 else 150          # one-row chunks: 40 of them are enough
    X = np.column_stack([rng.standard_normal(n), rng.integers(0, 4, n).astype(float),
                         np.r_[-0.0, 0.0, rng.exponential(size=n - 2)]])
    seeds = np.array([5, 6, 7], dtype=np.uint64)
    for r in _runners(client):
        S = distributed_sort(r, r.share(X), n, (0, 1, 2), chunk_rows=chunk_rows,
                             seeds=seeds, bucket_rows=bucket_rows)
        buckets = r.result(S.buckets)
        for j in range(3):
            got = np.concatenate([b["values"][j] for b in buckets])
            assert np.array_equal(got, np.sort(X[:, j]))
        ranks = np.vstack([chunk_ranks(r.result(S.which[c]), *[b["ranks"][c] for b in buckets])
                           for c in range(len(S.bounds))])
        for j in range(3):                       # rank k holds the k-th smallest value
            assert np.array_equal(np.sort(X[:, j])[ranks[:, j] - 1], X[:, j])


# -- cells -------------------------------------------------------------------------------

def _whole(X, k, tag):
    return {"tag": tag, "value": float(np.sum(X * k))}


def _spread(runner, X, cell):
    return runner.call(_whole, X, *cell)


def _run(runner, mode, cells, inputs, fail=None):
    got = {}
    seen = []

    def on_done(c, res):
        assert threading.current_thread() is threading.main_thread()
        seen.append(c)
        got[c] = res
    ex = CellExecutor(runner, inputs)
    ex.run(cells, mode=mode, input_of=lambda c: c[1], whole=_whole,
           whole_args=lambda c: (c[0], c[1]), spread=_spread, on_done=on_done)
    assert sorted(seen) == sorted(cells)
    return got


def test_cell_executor_modes_and_clients_agree(rng, client):
    inputs = {"a": rng.standard_normal((30, 2)), "b": rng.standard_normal((20, 2))}
    cells = [(k, t) for k in (1.0, 2.5, -3.0) for t in ("a", "b")]
    results = [_run(r, mode, cells, inputs) for r in _runners(client)
               for mode in ("task", "distributed")]
    for other in results[1:]:
        assert other == results[0]
    assert results[0][(2.5, "a")]["value"] == float(np.sum(inputs["a"] * 2.5))
    assert _run(Runner(client), "task", [], inputs) == {}


def _boom(X, k, tag):
    if k < 0:
        raise RuntimeError("cell failed")
    return {"value": float(k)}


def test_cell_executor_raises_the_failure_of_a_cell(client):
    for r in _runners(client):
        for mode in ("task", "distributed"):
            ex = CellExecutor(r, {"a": np.ones(3)})
            with pytest.raises(RuntimeError, match="cell failed"):
                ex.run([(1.0, "a"), (-1.0, "a"), (2.0, "a")], mode=mode,
                       input_of=lambda c: c[1], whole=_boom, whole_args=lambda c: c,
                       spread=lambda run, X, c: run.call(_boom, X, *c),
                       on_done=lambda c, res: None)
    with pytest.raises(ValueError):
        CellExecutor(Runner(), {}).run([1], mode="auto", input_of=str, whole=str,
                                       whole_args=tuple, spread=str, on_done=print)


def test_cell_mode_resolves_auto():
    assert cell_mode("auto", 20_000, limit=20_000) == "task"
    assert cell_mode("auto", 20_001, limit=20_000) == "distributed"
    assert cell_mode("auto", 11, limit=10) == "distributed"
    assert cell_mode("task", 10**9, limit=20_000) == "task"
    assert cell_mode("distributed", 5, limit=20_000) == "distributed"
    from sdcdist.audit.run import options_cell_mode
    assert options_cell_mode({}, 20_000) == "task" and options_cell_mode({}, 20_001) == "distributed"
    assert options_cell_mode({"task_cell_limit": 10}, 11) == "distributed"


def _cal_spec(mode):
    return parse_spec({"name": "cal", "seed": 11,
                       "dataset": {"name": "s", "synthetic": {"rows": 120, "columns": 3,
                                                              "seed": 4}},
                       "methods": [{"name": "noise", "params": [0.01, 0.2, 1.0]},
                                   {"name": "rankswap", "params": [1, 30]}],
                       "replicates": 2, "metrics": ["IL1s", "PS"], "keysets": "prefixes",
                       "options": {"cell_mode": mode, "chunk_rows": 50}})


def test_calibrate_distributed_cells_equal_task_cells(client):
    ref = calibrate(_cal_spec("task"), metric="DLD", target=20.0, tol=1.0, max_iter=4)
    for c in (None, client):
        got = calibrate(_cal_spec("distributed"), metric="DLD", target=20.0, tol=1.0,
                        max_iter=4, client=c)
        pd.testing.assert_frame_equal(got.table, ref.table, check_exact=True)
        assert got.probes == ref.probes
    assert set(ref.table["status"]) <= {"ok", "not converged", "unreachable"}
    assert (ref.table["status"] == "ok").any()


def _sleep(s):
    import time
    time.sleep(s)
    return s


def test_lost_scheduler_stops_the_wait(client, monkeypatch):
    r = Runner(client)
    slow = r.fresh_task(_sleep, 3.0)
    monkeypatch.setattr(r, "lost", lambda: True)
    try:
        with pytest.raises(ConnectionError, match="lost the connection"):
            list(r.as_completed([slow]))
        ex = CellExecutor(r, {"a": np.ones(2)})
        for mode in ("task", "distributed"):
            with pytest.raises(ConnectionError):
                ex.run([(3.0, "a")], mode=mode, input_of=lambda c: c[1],
                       whole=lambda X, s, tag: _sleep(s), whole_args=lambda c: c,
                       spread=lambda run, X, c: run.call(_sleep, c[0]),
                       on_done=lambda c, res: None)
    finally:
        r.cancel([slow])


def test_results_do_not_depend_on_the_blas_thread_count(client):
    """PS2 sums through BLAS: it gave other bits with 2 BLAS threads than with 1."""
    from threadpoolctl import threadpool_limits

    import sdcdist
    from sdcdist.data import load_microdata, reference_file
    X = load_microdata(reference_file("census")).values
    Y = sdcdist.mask(X, "corrnoise", 0.5, rng=np.random.default_rng(1))
    got = []
    for n, cl in ((1, None), (2, None), (2, client)):
        with threadpool_limits(n):
            got.append({k: r.value for k, r in
                        sdcdist.measure(X, Y, ["PS", "PS2"], client=cl).items()})
    assert got[0] == got[1] == got[2]


def test_one_blas_thread_is_reentrant_and_restores():
    from threadpoolctl import threadpool_info

    from sdcdist.parallel import one_blas_thread
    before = [i["num_threads"] for i in threadpool_info()]
    with one_blas_thread():
        with one_blas_thread():
            assert all(i["num_threads"] == 1 for i in threadpool_info())
        assert all(i["num_threads"] == 1 for i in threadpool_info())
    assert [i["num_threads"] for i in threadpool_info()] == before


def test_map_concurrent_runs_pieces_at_once(client):
    """Key sets of a cell are driven together: two pieces meet at a barrier (they would
    time out one after the other), results come back in item order."""
    import threading

    from sdcdist.parallel import Runner
    from sdcdist.parallel.cells import cell_mode
    barrier = threading.Barrier(2, timeout=20)

    def piece(x):
        barrier.wait()
        return x * 10
    assert Runner(client).map_concurrent(piece, [1, 2]) == [10, 20]
    assert Runner(None).map_concurrent(lambda x: x + 1, [1, 2, 3]) == [2, 3, 4]
    # few cells on several workers: each cell's own tasks are spread
    assert cell_mode("auto", 1000, limit=20_000, cells=1, workers=2) == "distributed"
    assert cell_mode("auto", 1000, limit=20_000, cells=40, workers=2) == "task"
    assert cell_mode("task", 1000, limit=20_000, cells=1, workers=2) == "task"


def test_keysets_in_parallel_give_the_same_values(census, client):
    from sdcdist.metrics import measure
    X = census.values[:300, :6]
    rng = np.random.default_rng(1)
    Y = X + 0.3 * X.std(axis=0) * rng.normal(size=X.shape)
    cols = census.columns[:6]
    ks = [cols[:2], cols[:4], cols]
    here = measure(X, Y, ["PLD", "DLD"], columns=cols, keysets=ks)
    there = measure(X, Y, ["PLD", "DLD"], columns=cols, keysets=ks, client=client)
    for m in ("PLD", "DLD"):
        assert here[m].per_keyset == there[m].per_keyset


def test_map_reduce_takes_local_rows_in_this_process_on_arrays_in_memory():
    """``local_rows``: larger chunks only without a client and on in-memory arrays."""
    from sdcdist.parallel import map_reduce

    def spans(start, stop, X):
        return [(start, stop)]

    def join(*parts):
        return [s for p in parts for s in p]
    X = np.zeros((100, 2))
    r = Runner(None)
    assert map_reduce(r, spans, join, [r.share(X)], 100, chunk_rows=30,
                      local_rows=64) == [(0, 64), (64, 100)]
    assert map_reduce(r, spans, join, [r.share(X)], 100, chunk_rows=30,
                      local_rows=10) == [(0, 30), (30, 60), (60, 90), (90, 100)]

    class Lazy:                       # an array read on demand (a store): chunks as asked
        shape = (100, 2)
    assert len(map_reduce(r, spans, join, [Lazy()], 100, chunk_rows=30,
                          local_rows=64)) == 4


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_thread_map_and_pool_return_blocks_in_order(threads):
    from sdcdist.parallel import thread_map, thread_pool
    blocks = [(i, i + 1) for i in range(7)]
    assert thread_map(lambda a, b: a * b, blocks, threads) == [i * (i + 1) for i in range(7)]
    with thread_pool(threads) as pmap:
        for _ in range(3):                 # the pool's threads serve map after map
            assert pmap(lambda a, b: a + b, blocks) == [2 * i + 1 for i in range(7)]
        assert pmap(lambda a: a, [(5,)]) == [5]
        assert pmap(lambda a: a, []) == []


def test_thread_map_runs_blocks_in_the_callers_thread_and_a_helper_at_once():
    """Two threads: the caller takes blocks itself, beside one helper; both meet at a
    barrier (one after the other they would time out)."""
    from sdcdist.parallel import thread_map, thread_pool
    barrier = threading.Barrier(2, timeout=20)
    seen = set()

    def block(i):
        seen.add(threading.current_thread() is threading.main_thread())
        barrier.wait()
        return i
    assert thread_map(block, [(0,), (1,)], 2) == [0, 1]
    assert seen == {True, False}
    with thread_pool(2) as pmap:
        assert pmap(block, [(0,), (1,)]) == [0, 1]


def test_thread_map_raises_the_first_failing_blocks_error_after_all_ended():
    from sdcdist.parallel import thread_map, thread_pool
    done = []

    def block(i):
        if i in (2, 5):
            raise ValueError(f"block {i}")
        done.append(i)
        return i
    for threads in (1, 2, 3):
        done.clear()
        with pytest.raises(ValueError, match="block 2"):
            thread_map(block, [(i,) for i in range(8)], threads)
        if threads > 1:                     # the other blocks still ran
            assert sorted(done) == [0, 1, 3, 4, 6, 7]
        with thread_pool(threads) as pmap, pytest.raises(ValueError, match="block 2"):
            pmap(block, [(i,) for i in range(8)])


def test_alongside_runs_both_and_its_gate_holds_the_side_until_opened():
    from sdcdist.parallel import alongside
    assert alongside(lambda: 1, lambda: 2) == (2, 1)
    events = []
    ran = threading.Event()

    def side():
        events.append("side")
        ran.set()
        return "s"

    def main(start):
        time.sleep(0.2)                  # the side would have run by now without the gate
        events.append("before")
        start()
        assert ran.wait(20)              # and now it runs, while main goes on
        return "m"
    assert alongside(side, main, gate=True) == ("m", "s")
    assert events == ["before", "side"]
    # a main that never opens the gate: the side runs once it ends, however it ends
    events.clear()
    assert alongside(side, lambda start: events.append("main") or "m", gate=True) == ("m", "s")
    assert events == ["main", "side"]
    events.clear()

    def failing(start):
        raise ValueError("main failed")
    with pytest.raises(ValueError, match="main failed"):
        alongside(side, failing, gate=True)
    assert events == ["side"]                  # not left waiting: no hang
