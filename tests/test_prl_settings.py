"""PRL settings: one object built from the option registry; every PRL option reaches the
kernels with the same value whichever way it is given (link flag or -o, risk -o,
measure -o, a spec's options)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from click.testing import CliRunner

from sdcdist import SdcInputError
from sdcdist.linkage.prl import DEFAULTS, PRLSettings, driver
from sdcdist.linkage.prl.settings import NAMES
from sdcdist.options import OPTIONS, prl_names

#: a valid value other than the default for every PRL option of the registry
SAMPLES = {
    "prl_method": "d",
    "prl_t": [0.1, 0.5],
    "prl_weights": "step",
    "prl_top_c": 7,
    "prl_dense_limit": 100,
    "prl_blocking": "c",
    "prl_block_rows": [64, 32],
    "prl_em": {"tol": 1e-12, "max_iter": 777},
    "prl_unmatched": None,
    "prl_counting": "pairs",
}

#: the same value written as a command line writes it
TEXT = {"prl_t": "[0.1, 0.5]", "prl_block_rows": "[64, 32]", "prl_em": "{tol: 1e-12, max_iter: 777}",
        "prl_unmatched": "null"}


def _text(name):
    return TEXT.get(name, str(SAMPLES[name]))


def test_settings_have_one_field_per_registry_option_and_its_default():
    assert NAMES == prl_names() and set(SAMPLES) == set(NAMES)
    assert [f.name for f in dataclasses.fields(PRLSettings)] == [n[4:] for n in NAMES]
    for name in NAMES:
        assert DEFAULTS.as_options()[name] == (DEFAULTS.em.as_option() if name == "prl_em"
                                               else OPTIONS[name].default) or \
            OPTIONS[name].default is None
        s = PRLSettings.from_options({name: SAMPLES[name]})
        assert s != DEFAULTS
        assert s.as_options()[name] == _expected(name)
    with pytest.raises(dataclasses.FrozenInstanceError):
        DEFAULTS.top_c = 3
    with pytest.raises(SdcInputError, match="Unknown PRL option 'chunk_rows'"):
        PRLSettings.from_options({"chunk_rows": 10})
    with pytest.raises(SdcInputError, match="The 'prl_top_c' option must be"):
        PRLSettings.from_options({"prl_top_c": 0})


def _expected(name):
    v = SAMPLES[name]
    if name == "prl_em":
        return {**DEFAULTS.em.as_option(), **v}
    return v


@pytest.fixture
def files(tmp_path):
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(3)
    n = 40
    X = np.column_stack([rng.normal(size=(n, 2)), rng.integers(0, 3, n)])
    Y = X + np.c_[rng.normal(0, 0.05, (n, 2)), np.zeros(n)]
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    pd.DataFrame(X, columns=["x", "y", "c"]).to_csv(a, index=False)
    pd.DataFrame(Y, columns=["x", "y", "c"]).to_csv(b, index=False)
    return str(a), str(b), X, Y


class _Stop(Exception):
    pass


@pytest.fixture
def seen(monkeypatch):
    """The settings the count phase receives (the run stops there)."""
    got = []

    def count(runner, A, B, n_a, n_b, cmp, s, blocking):
        got.append((s, cmp, blocking))
        raise _Stop

    monkeypatch.setattr(driver, "count", count)
    return got


@pytest.mark.parametrize("name", NAMES)
def test_every_prl_option_reaches_the_kernels_the_same_way(name, files, seen, tmp_path):
    from sdcdist.audit.spec import parse_spec
    from sdcdist.cli import main
    from sdcdist.data import from_array
    from sdcdist.metrics import measure
    a, b, X, Y = files
    value, text = SAMPLES[name], _text(name)
    expect = PRLSettings.from_options({name: value})
    out = str(tmp_path / "p.parquet")
    flag = {"prl_method": "--compare", "prl_t": "--t", "prl_blocking": "--block-on"}.get(
        name, "--" + name[4:].replace("_", "-"))
    runs = [["link", a, b, "--keys", "x,y,c", "--out", out, "-o", f"{name}={text}"],
            ["link", a, b, "--keys", "x,y,c", "--out", out, flag, text],
            ["risk", a, b, "--metric", "PLD", "--keyset", "x,y,c", "-o", f"{name}={text}"],
            ["measure", a, b, "--metric", "PLD", "--keyset", "x,y,c", "-o", f"{name}={text}"]]
    # every path hands the kernels the same settings object (blocking by column name,
    # placed among the key columns by the driver)
    metric_expect = expect
    for args in runs:
        seen.clear()
        res = CliRunner().invoke(main, args)
        assert seen, (args, res.output)
        assert seen[0][0] == (expect if args[0] == "link" else metric_expect), args
        if name == "prl_blocking":
            assert seen[0][2] == (2, 0)
    # a spec's options, through the Python API
    spec = parse_spec({"dataset": {"synthetic": {"rows": 30}}, "methods": [{"name": "noise", "params": [0.1]}],
                       "metrics": ["PLD"], "options": {name: value}})
    seen.clear()
    try:
        measure(from_array(X, ["x", "y", "c"]), Y, ["PLD"], keysets=[["x", "y", "c"]],
                options=spec.options)
    except _Stop:
        pass
    assert seen[0][0] == metric_expect
    s, cmp, blocking = seen[0]
    # the kernels' inputs follow the settings
    if name == "prl_blocking":
        assert blocking == (2, 0)
    if name in ("prl_method", "prl_t", "prl_weights"):
        assert (cmp.method, cmp.weights) == (s.method, s.weights)
        assert cmp.levels[0] == (s.t if isinstance(s.t, tuple) else (s.t,))


def test_a_flag_and_the_same_option_with_o_are_refused(files, tmp_path):
    from sdcdist.cli import main
    a, b, _, _ = files
    res = CliRunner().invoke(main, ["link", a, b, "--keys", "x,y", "--out",
                                    str(tmp_path / "p.parquet"), "--counting", "pairs", "-o",
                                    "prl_counting=count"])
    assert res.exit_code == 2 and "set the same thing" in res.output
    res = CliRunner().invoke(main, ["link", a, b, "--keys", "x,y", "--out",
                                    str(tmp_path / "p.parquet"), "--unmatched", "sometimes"])
    assert res.exit_code == 2 and "--unmatched" in res.output and "prl_unmatched" in res.output


def test_linkage_takes_its_options_only_as_settings():
    """probabilistic_linkage and link_files have no keyword side door for PRL options: the
    one PRLSettings (plus the explicit arguments) is the only way in."""
    import inspect

    from sdcdist.linkage.link import link_files
    for f in (driver.probabilistic_linkage, link_files):
        kinds = {p.kind for p in inspect.signature(f).parameters.values()}
        assert inspect.Parameter.VAR_KEYWORD not in kinds, f.__name__
    assert not hasattr(driver, "settings_of") and not hasattr(driver, "_KEYWORDS")
    X = np.arange(12.0).reshape(6, 2)
    with pytest.raises(TypeError):
        driver.probabilistic_linkage(None, X, X, 6, 6, (0, 1), t=0.05)


def test_comparison_defaults_are_the_registry_defaults():
    """A Comparison built without a weight shape takes the registry's (linear), as
    comparison() and the settings do; step is only the weight shape's other value."""
    from sdcdist.linkage.prl.comparison import (RULE_DOWNWEIGHT, RULE_LEVEL, RULE_LINEAR,
                                                Comparison, comparison)
    cmp = Comparison("s", ((0.0, 0.1, 0.25, 0.5, 1.0), (0.05,), ()), (False, False, True))
    assert cmp.weights == OPTIONS["prl_weights"].default == DEFAULTS.weights
    assert cmp == comparison(3, DEFAULTS.with_(t=((0.0, 0.1, 0.25, 0.5, 1.0), (0.05,), (0,))),
                             categorical=[False, False, True])
    assert list(cmp.rule) == [RULE_LINEAR, RULE_DOWNWEIGHT, RULE_LEVEL]
    step = comparison(3, categorical=[False, False, True], weights="step")
    assert list(step.rule) == [RULE_LEVEL, RULE_LEVEL, RULE_LEVEL]
