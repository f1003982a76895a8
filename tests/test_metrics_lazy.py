"""Metric modules are imported on demand, and the key tables' exact sums are plain numpy.

A command that computes only the frequency risk must not pay for importing the linkage,
SciPy, numba or pandas (half of its time on a million records was imports); and the
exact weight sums behind it must stay exact and correctly rounded."""

from __future__ import annotations

import json
import subprocess
import sys
from fractions import Fraction

import numpy as np
import pytest

from sdcdist import keytables

HEAVY = ("numba", "scipy", "pandas", "sdcdist.linkage", "distributed")


def _run(code: str) -> dict:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_frequency_metric_imports_only_its_module():
    got = _run(
        "import json, sys\n"
        "from sdcdist.metrics import get_metric, companions, REGISTRY\n"
        "m = get_metric('ER'); companions('uniques'); 'kviol3' in REGISTRY\n"
        f"print(json.dumps([h for h in {HEAVY!r} if h in sys.modules]))\n")
    assert got == []


def test_frequency_risk_from_csv_imports_nothing_heavy(tmp_path):
    rng = np.random.default_rng(0)
    f = tmp_path / "f.csv"
    rows = ["a,b,w"] + [f"{rng.integers(3)},{rng.integers(4)},{rng.uniform(1, 9):.6f}"
                        for _ in range(200)]
    f.write_text("\n".join(rows) + "\n")
    got = _run(
        "import json, sys\n"
        "from sdcdist.cli import main\n"
        f"args = ['risk', {str(f)!r}, {str(f)!r}, '--metric', 'uniques,IR_mean,ER', "
        "'--keys', 'a,b', '--categorical', 'a,b', '--weight', 'w']\n"
        "try:\n    main(args, standalone_mode=False)\nexcept SystemExit:\n    pass\n"
        f"print(json.dumps([h for h in {HEAVY!r} if h in sys.modules]))\n")
    assert got == []


def test_the_lazy_registry_lists_every_metric():
    import sdcdist.metrics as M
    from sdcdist.metrics import REGISTRY
    names = list(REGISTRY)                       # a listing imports every module
    assert REGISTRY.loader is None
    for mod in M._MODULES:
        assert f"sdcdist.metrics.{mod}" in sys.modules
    # each name the package maps to one module is registered by that module
    for name, mod in M._DECLARED.items():
        assert name in names
        assert REGISTRY[name].func.__module__ == f"sdcdist.metrics.{mod}", name
    # companions live in their metric's module (companions() imports only that one)
    for m in REGISTRY.values():
        if m.part_of:
            assert m.func.__module__ == REGISTRY[m.part_of].func.__module__, m.name


def test_concurrent_first_look_ups_wait_for_the_loading():
    # a fresh process whose first look-ups come from several threads at once (the
    # service's first requests): each must see the whole registry, none a half-filled one
    got = _run(
        "import json, threading\n"
        "from sdcdist.metrics import REGISTRY, get_metric\n"
        "names = ['IL1s', 'uniques', 'DLD', 'ER', 'PLD', 'IL1s', 'kviol3', 'Score2']\n"
        "gate = threading.Barrier(len(names) + 1)\n"
        "seen, errors = {}, []\n"
        "def look(i, n):\n"
        "    gate.wait()\n"
        "    try:\n"
        "        seen[i] = (get_metric(n).name, n in REGISTRY, REGISTRY.get(n) is not None)\n"
        "    except Exception as e:\n"
        "        errors.append(repr(e))\n"
        "def listing():\n"
        "    gate.wait()\n"
        "    seen['all'] = len(list(REGISTRY))\n"
        "ts = [threading.Thread(target=look, args=(i, n)) for i, n in enumerate(names)]\n"
        "ts.append(threading.Thread(target=listing))\n"
        "[t.start() for t in ts]; [t.join() for t in ts]\n"
        "print(json.dumps({'errors': errors, 'ok': sorted(str(v) for k, v in seen.items()\n"
        "                  if k != 'all'), 'all': seen.get('all'), 'n': len(REGISTRY)}))\n")
    assert got["errors"] == []
    assert len(got["ok"]) == 8 and all(o.endswith("True, True)") for o in got["ok"])
    assert got["all"] == got["n"] > 50


def test_an_unknown_metric_is_still_refused_with_the_names():
    from sdcdist.errors import SdcInputError
    from sdcdist.metrics import get_metric
    with pytest.raises(SdcInputError, match="ER"):
        get_metric("EX")


@pytest.mark.parametrize("kind", ["uniform", "wide", "subnormal", "cancel", "special"])
def test_exact_group_sums_are_exact_and_correctly_rounded(kind):
    rng = np.random.default_rng(len(kind))
    n, G = 600, 9
    if kind == "uniform":
        w = rng.uniform(1, 500, n)
    elif kind == "wide":
        w = rng.normal(0, 1, n) * 10.0 ** rng.integers(-300, 300, n)
    elif kind == "subnormal":
        w = rng.choice([-1.0, 1.0], n) * rng.uniform(0, 1, n) * 1e-310
    elif kind == "cancel":
        w = rng.choice([1.0, -1.0, 1e16, -1e16, 0.5, 3.0, -0.0, 2.0 ** -60, 5e-324], n)
    else:
        w = rng.uniform(-1, 1, n)
        w[:5] = [np.inf, np.nan, -np.inf, 1e308, 1e308]
    inv = rng.integers(0, G, n)
    ex = keytables.exact_group_sums(w, inv, G)
    got = keytables.exact_to_float(ex)
    for g in range(G):
        v = w[inv == g]
        fin = v[np.isfinite(v)]
        exact = sum((Fraction(float(x)) for x in fin), Fraction(0))
        digits = sum((Fraction(int(d)) * Fraction(2) ** (24 * (ex["lo"] + k))
                      for k, d in enumerate(ex["digits"][g])), Fraction(0))
        assert digits == exact
        assert np.all(np.abs(ex["digits"][g]) < 2 ** 24)
        assert len({np.sign(d) for d in ex["digits"][g] if d}) <= 1
        if fin.size < v.size:
            assert np.isnan(got[g]) or np.isinf(got[g])
        else:
            try:
                want = float(exact)
            except OverflowError:
                want = np.inf if exact > 0 else -np.inf
            assert got[g] == want, (g, got[g], want)


def test_unique_rows_is_sorted_with_its_inverse_on_both_paths():
    rng = np.random.default_rng(3)
    for rows in (rng.integers(-1, 4, (500, 3)),                  # a small key space
                 rng.integers(-1, 10 ** 6, (500, 2))):            # a large one: sorted
        u, inv = keytables.unique_rows(rows)
        ref, rinv = np.unique(rows, axis=0, return_inverse=True)
        assert np.array_equal(u, ref) and np.array_equal(inv, rinv.reshape(-1))
        assert inv.dtype == np.int64


def test_unrounded_chunk_tables_merge_to_the_same_table():
    rng = np.random.default_rng(5)
    for trial in range(40):
        n = int(rng.integers(1, 400))
        w = [rng.uniform(1, 500, n), rng.normal(0, 1, n) * 10.0 ** rng.integers(-300, 300, n),
             rng.choice([1.0, -1.0, 1e16, -1e16, 0.5, 5e-324, 1e308], n)][trial % 3]
        codes = rng.integers(0, 4, (n, 3)).astype(float)
        codes[rng.random((n, 3)) < 0.1] = np.nan
        parts = np.split(np.arange(n), np.sort(rng.integers(0, n + 1, trial % 5)))
        a = [keytables.combo_table(codes[p], w[p]) for p in parts]
        b = [keytables.combo_table(codes[p], w[p], rounded=False) for p in parts]
        ma = keytables.merge_tables(*a) if len(a) > 1 else a[0]
        mb = keytables.with_weight(keytables.merge_tables(*b) if len(b) > 1 else b[0])
        for k in ("rows", "count", "weight"):
            assert np.array_equal(ma[k], mb[k]), (trial, k)
        fa, Fa = keytables.combo_frequencies(ma)
        fb, Fb = keytables.combo_frequencies(mb)
        assert np.array_equal(fa, fb) and np.array_equal(Fa, Fb)


def test_the_listing_order_does_not_depend_on_the_first_look_up():
    code = ("import json\n{first}\nfrom sdcdist.metrics import REGISTRY\n"
            "print(json.dumps(list(REGISTRY)))\n")
    plain = _run(code.format(first=""))
    after = _run(code.format(first="import sdcdist.metrics.risk.attacks\n"
                                   "from sdcdist.metrics import get_metric; get_metric('ER')"))
    assert plain == after
