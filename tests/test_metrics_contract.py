"""One contract over every metric of the registry (issue 38).

A metric declares what it needs besides the two files when it registers
(``needs``: a holdout file, confidential columns, a household id). On one tiny file
with every role, each metric must

- run when its declared needs are given;
- be refused with the standard "needs ..." message (:func:`sdcdist.metrics.inputs.need_error`)
  when one of them is missing, before anything is computed;
- give the same value without each input it does not declare (an undeclared input it
  reads is a need, or an input it ``reads`` when given, that it should declare).

Key sets are named, so that the roles do not change the default key sets; linkage
metrics that compare numeric values link on numeric keys, the others on categorical keys.
"""

from __future__ import annotations

import logging

import numpy as np
import pytest

from sdcdist.errors import SdcInputError
from sdcdist.metrics import NEEDS, REGISTRY, Inputs, applicable, measure
from sdcdist.metrics.inputs import need_error

COLS = ["a", "b", "c", "k1", "k2", "s", "h", "w"]
CATS = ("k1", "k2", "s", "h")
NUMERIC_KEYS = (("a",), ("a", "b"))
CATEGORICAL_KEYS = (("k1",), ("k1", "k2"))


def _file(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    a = rng.normal(50, 10, n)
    b = 0.5 * a + rng.normal(0, 3, n)
    c = rng.normal(5, 2, n)
    k1, k2, s = rng.integers(0, 3, n), rng.integers(0, 2, n), rng.integers(0, 3, n)
    h = np.repeat(np.arange(n // 2), 2)[:n]
    w = rng.uniform(1, 5, n)
    return np.column_stack([a, b, c, k1, k2, s, h, w]).astype(np.float64)


N = 40
X = _file(N, 1)
Y = X.copy()
Y[:, :3] += np.random.default_rng(2).normal(0, 1, (N, 3))
HOLDOUT = _file(N, 3)
FULL = Inputs(columns=COLS, categorical=CATS, weight="w", confidential=("s",), household="h")
#: the attacks on 40 records: few attacks, a short search
OPTIONS = {"attack_n": 20, "so_max_attempts": 2000}
#: each need, and the inputs without it
WITHOUT = {"holdout": {}, "confidential": {"confidential": ()}, "household": {"household": None}}


def _keys(name: str) -> tuple:
    """Numeric keys for a metric that compares numeric values (declared: key sets and not
    categorical, or a guard that refuses categorical key sets only, as CRL's on Pearson's
    correlations), else categorical keys."""
    m = REGISTRY[name]
    if m.keysets and not m.categorical:
        return NUMERIC_KEYS
    on = {k: applicable(m, FULL.replace(holdout=True, keysets=k))
          for k in (NUMERIC_KEYS, CATEGORICAL_KEYS)}
    return NUMERIC_KEYS if on[NUMERIC_KEYS] is None and on[CATEGORICAL_KEYS] is not None \
        else CATEGORICAL_KEYS


def _run(names: list[str], inputs: Inputs, holdout: bool) -> dict[str, float]:
    """Values of ``names``, measured in two groups (numeric and categorical key sets)."""
    out: dict[str, float] = {}
    for keys in (NUMERIC_KEYS, CATEGORICAL_KEYS):
        group = [n for n in names if _keys(n) == keys]
        if group:
            res = measure(X, Y, group, inputs=inputs.replace(keysets=keys),
                          holdout=HOLDOUT if holdout else None, seed=7, options=OPTIONS)
            out.update({n: res[n].value for n in group})
    return out


@pytest.fixture(scope="module")
def full() -> dict[str, float]:
    logging.getLogger("sdcdist").setLevel(logging.ERROR)   # PRL's notes on 40 records
    return _run(list(REGISTRY), FULL, holdout=True)


def test_every_metric_runs_when_its_needs_are_met(full):
    assert set(full) == set(REGISTRY)
    for n, m in REGISTRY.items():
        assert applicable(m, FULL.replace(holdout=True, keysets=_keys(n))) is None, n


@pytest.mark.parametrize("need", NEEDS)
def test_a_missing_need_gets_the_standard_message(need):
    inputs = FULL.replace(**WITHOUT[need])
    needing = [n for n, m in REGISTRY.items() if need in m.needs]
    assert needing, need
    for n in needing:
        why = applicable(n, inputs.replace(holdout=need != "holdout"))
        assert why is not None and why.need == need, n
        with pytest.raises(SdcInputError) as e:
            measure(X, Y, [n], inputs=inputs.replace(keysets=_keys(n)), options=OPTIONS,
                    holdout=None if need == "holdout" else HOLDOUT)
        assert str(e.value) == str(need_error(n, need)), n


@pytest.mark.parametrize("need", NEEDS)
def test_no_undeclared_input_changes_a_value(full, need):
    others = [n for n in REGISTRY
              if not any(need in REGISTRY[r].needs | REGISTRY[r].reads
                         for r in _requirements(n))]
    got = _run(others, FULL.replace(**WITHOUT[need]), holdout=need != "holdout")
    changed = [n for n in others
               if not np.array_equal(got[n], full[n], equal_nan=True)]
    assert not changed, f"{changed} change without {need} but do not declare it"


def _requirements(name: str) -> list[str]:
    from sdcdist.metrics import expand_requirements
    return expand_requirements([name])


# -- what metrics declare, read without data ---------------------------------------------

def test_scaling_and_scores_are_declared_at_registration():
    from sdcdist.metrics import preferred_score, score_weights
    assert {n for n, m in REGISTRY.items() if m.scaled} == {
        "IL1s", "IL1s_sum", "R_MSE", "R_MAE", "R_MV", "PS", "PS2", "EMD", "EMD1"}
    weights = score_weights()
    assert weights["Score2"] == {"IL_S2": 0.5, "DLD": 0.25, "ID1": 0.125, "ID2": 0.125}
    assert all(set(REGISTRY[s].requires) == set(w) for s, w in weights.items())
    assert {n for n, m in REGISTRY.items() if m.kind == "score"} == set(weights)
    assert preferred_score() == "Score2"


def test_guards_leave_out_models_too_large_for_the_keys():
    keys = tuple(f"q{i}" for i in range(17))
    inputs = Inputs(columns=keys, categorical=keys, keysets=(keys,),
                    levels=tuple((k, 2) for k in keys))
    why = applicable("suda_share", inputs)
    assert why is not None and why.head == "17 categorical keys" and not why.quiet
    assert "suda_max_size=" in why.tail
    assert applicable("suda_share", inputs, {"suda_max_size": 3}) is None
    # 2^17 cells fit the log-linear model; 10^17 do not; unknown levels: no guess
    assert applicable("modrisk_tau1", inputs) is None
    big = inputs.replace(levels=tuple((k, 10) for k in keys))
    assert "log-linear model of 1e+17 cells" in applicable("modrisk_tau1", big).head
    assert applicable("modrisk_tau1", inputs.replace(levels=())) is None


def test_role_clash_rules_are_stated_once():
    clash = [
        (FULL.replace(weight="h", categorical=CATS[:3]), "both the household id and the weight"),
        (FULL.replace(confidential=("h",)), "both the household id and a confidential"),
        (FULL.replace(keysets=(("a", "h"),)), "household id is never a linkage key"),
        (FULL.replace(keysets=(("a", "w"),)), "sampling weight is never a linkage key"),
        (FULL.replace(keys=("a", "w")), "sampling weight is never a linkage key"),
        (FULL.replace(weight="k1"), "Weight column 'k1' is categorical"),
        (FULL.replace(keysets=(("a", "a"),)), "more than once"),
        (FULL.replace(keysets=()), "no key sets given"),
    ]
    for inputs, msg in clash:
        with pytest.raises(SdcInputError, match=msg):
            inputs.check()
    FULL.replace(keysets=CATEGORICAL_KEYS).check()


def test_default_choice_and_notes():
    """The metrics a command computes unasked: not those computed only by name, nor
    those whose needs are missing (quietly), nor those that do not apply (with a note)."""
    from sdcdist.metrics import default_metrics
    inputs = Inputs(columns=("a", "b"), shape_original=(10, 2), shape_masked=(8, 2))
    names, skipped = default_metrics("risk", inputs)
    assert not any(REGISTRY[n].by_name or REGISTRY[n].needs for n in names)
    loud = [r for r in skipped if not r.quiet]
    assert [r.head for r in loud] == ["files differ in shape"]
    assert loud[0].note(["ID1"]) == ("files differ in shape: skipping ID1 (they compare the "
                                     "files record by record)")
    assert all(REGISTRY[n].same_shape for n in skipped[loud[0]])
