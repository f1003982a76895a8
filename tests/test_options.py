"""The option registry: one declaration per option drives defaults, spec checks and docs."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import yaml

from sdcdist import options as opt
from sdcdist import masking, metrics
from sdcdist.audit import parse_spec
from sdcdist.errors import SdcInputError
from sdcdist.metrics.risk.attacks import ATTACK_METRICS
from sdcdist.masking import REGISTRY as METHODS
from sdcdist.metrics import DEFAULT_OPTIONS, MeasureContext, measure
from sdcdist.metrics import REGISTRY as METRICS
from sdcdist.metrics import _registry
from sdcdist.parallel import Runner

SRC = Path(opt.__file__).resolve().parent

BASE = {"name": "t", "seed": 1, "dataset": {"synthetic": {"rows": 40, "columns": 3}},
        "methods": [{"name": "noise", "params": [0.1]}], "metrics": ["IL1s"]}


def _spec(**changes):
    return parse_spec({**BASE, **changes})


def test_every_default_passes_its_own_check():
    assert len(opt.OPTIONS) >= 25
    for name, o in opt.OPTIONS.items():
        assert o.check(o.default), name
        assert o.validate(o.default) is o.default
        assert o.scope in opt.SCOPES and o.description and o.allowed


def test_default_options_come_from_the_registry():
    assert DEFAULT_OPTIONS == opt.defaults("metric")
    assert _registry.DEFAULT_OPTIONS is DEFAULT_OPTIONS
    assert set(DEFAULT_OPTIONS) == {n for n, o in opt.OPTIONS.items() if o.scope == "metric"}
    assert DEFAULT_OPTIONS["chunk_rows"] == 65_536
    assert DEFAULT_OPTIONS["block_memory"] == 64 * 2**20


def test_chunk_limit_is_that_of_the_exact_sums():
    from sdcdist.metrics.exactsum import MAX_CHUNK
    assert opt.MAX_CHUNK_ROWS == MAX_CHUNK
    assert opt.check_option("chunk_rows", MAX_CHUNK) == MAX_CHUNK
    with pytest.raises(SdcInputError, match="chunk_rows"):
        opt.check_option("chunk_rows", MAX_CHUNK + 1)


def test_task_cell_limit_default_is_the_audit_s():
    from sdcdist.audit.run import TASK_CELL_LIMIT
    assert opt.OPTIONS["task_cell_limit"].default == TASK_CELL_LIMIT


def test_declaring_twice_or_a_bad_default_is_a_bug():
    with pytest.raises(ValueError, match="twice"):
        opt.declare("chunk_rows", 1, opt.integer(1), "again")
    with pytest.raises(ValueError, match="fails its own check"):
        opt.declare("zz_test_option", 0, opt.integer(1), "bad default")
    assert "zz_test_option" not in opt.OPTIONS


MSG = "The '{}' option must be {}. Got {} instead."


@pytest.mark.parametrize("name, value", [
    ("chunk_rows", "abc"), ("chunk_rows", 0), ("chunk_rows", 2.5), ("chunk_rows", True),
    ("chunk_rows", None), ("block_memory", -1), ("block_memory", "64MB"),
    ("block_rows", [0, 5]), ("block_rows", [5]), ("block_rows", 64),
    ("linkage_method", "annoy"), ("linkage_method", None),
    ("bucket_rows", 0), ("sort_memory", 1.5),
    ("prl_method", "x"), ("prl_t", 0), ("prl_t", -0.1), ("prl_t", [0.1, 0.05]), ("prl_t", []),
    ("prl_t", "0.05"), ("prl_t", [[0.1], []]), ("prl_top_c", 0), ("prl_dense_limit", "big"),
    ("prl_blocking", ["AGI"]), ("prl_blocking", ["AGI", 0]), ("prl_blocking", [3, 50]),
    ("prl_block_rows", [10, 0]), ("prl_em", {"iterations": 5}), ("prl_em", [1]),
    ("prl_unmatched", "none"), ("prl_unmatched", 3),
    ("gdbrl_dense_max", 0), ("gdbrl_candidates", -3),
    ("crl_external", [1, 2]), ("crl_released", []), ("crl_released", {"a": 1}),
    ("id_p", []), ("id_p", [101]), ("id_p", 5), ("id_p", ["a"]),
    ("sdid_k", -0.1), ("sdid_k", "x"), ("sdid_k", float("nan")),
    ("cell_mode", "fast"), ("task_cell_limit", 0),
])
def test_bad_option_values_are_refused_by_parse_spec(name, value):
    allowed = opt.OPTIONS[name].allowed
    with pytest.raises(SdcInputError) as e:
        _spec(options={name: value})
    assert str(e.value) == MSG.format(name, allowed, repr(value))


@pytest.mark.parametrize("em, key, allowed", [
    ({"tol": "x"}, "tol", "a number >= 0"), ({"tol": -1}, "tol", "a number >= 0"),
    ({"tol": float("nan")}, "tol", "a number >= 0"), ({"tol": float("inf")}, "tol", None),
    # m_start: the other levels start at (1 - m_start) / (levels - 1)
    ({"m_start": 2}, "m_start", "a number in (0, 1)"), ({"m_start": 1}, "m_start", None),
    ({"m_start": 0}, "m_start", None), ({"m_start": -0.5}, "m_start", None),
    # eps: the guard [eps, 1 - eps] of up to 16 levels, renormalised
    ({"eps": 1}, "eps", "a number in (0, 0.01]"), ({"eps": 1e300}, "eps", None),
    ({"eps": 0.02}, "eps", None), ({"eps": 0}, "eps", None), ({"eps": -1e-9}, "eps", None),
    ({"p_max": 5}, "p_max", "null (min(nA, nB)/(nA nB)) or a number in (0, 1]"),
    ({"p_max": 0}, "p_max", None), ({"p_max": 1.0000001}, "p_max", None),
    ({"max_iter": 50, "m_start": 1.5}, "m_start", None),
])
def test_prl_em_settings_out_of_range_are_refused_naming_the_key(em, key, allowed):
    """Out-of-range EM settings made NaN fits (eps 1: P(M) nan) or meaningless ones: each
    is refused by the one validator of specs, -o, link --em and the service."""
    with pytest.raises(SdcInputError) as e:
        _spec(options={"prl_em": em})
    msg = str(e.value)
    assert msg.startswith(f"The '{key}' key of the 'prl_em' option must be "), msg
    if allowed:
        assert msg == (f"The '{key}' key of the 'prl_em' option must be {allowed}. "
                       f"Got {em[key]!r} instead.")
    with pytest.raises(SdcInputError, match=f"'{key}' key of the 'prl_em' option"):
        opt.parse_items([f"prl_em={em}".replace("'", "")])


@pytest.mark.parametrize("em", [
    {"eps": 0.01}, {"eps": 1e-300}, {"m_start": 0.5}, {"m_start": 0.999}, {"p_max": 1},
    {"p_max": None}, {"p_max": 1e-6}, {"tol": 0}, {"max_iter": 3, "fit": "m_only"}])
def test_prl_em_settings_in_range_are_accepted(em):
    assert _spec(options={"prl_em": em}).options["prl_em"] == em


def test_prl_em_eps_bound_leaves_room_for_every_level():
    """The eps bound: the floors of a column with the most levels take a small part of it."""
    from sdcdist.linkage.prl.comparison import MAX_LEVELS
    assert (MAX_LEVELS + 1) * opt.PRL_EM_EPS_MAX <= 0.2
    for key in ("eps (a number in (0, 0.01])", "m_start (a number in (0, 1))",
                "p_max (null (min(nA, nB)/(nA nB)) or a number in (0, 1])"):
        assert key in opt.OPTIONS["prl_em"].allowed


@pytest.mark.parametrize("options", [
    {"chunk_rows": 16, "block_memory": 1 << 20, "block_rows": [64, 64]},
    {"prl_t": [0.02, 0.05, 0.1], "prl_blocking": ["V1", 50], "prl_em": {"max_iter": 50},
     "prl_unmatched": None},
    {"prl_t": [[0.05], [0.02, 0.1]], "id_p": [1, 5.5], "sdid_k": 0},
    {"crl_external": ["V1"], "crl_released": "V2", "cell_mode": "task",
     "task_cell_limit": 5, "linkage_method": "brute", "bucket_rows": None},
    {"chunk_rows": np.int64(8)}, {}, None,
])
def test_good_option_values_pass_unchanged(options):
    spec = _spec(options=options)
    assert spec.options == dict(options or {})


def test_options_that_are_no_mapping_or_unknown_are_refused():
    with pytest.raises(SdcInputError, match=r"'options' must be a mapping.*Got \[1, 2\] instead"):
        _spec(options=[1, 2])
    with pytest.raises(SdcInputError, match=r"^Unknown option 'chunkrows'. Valid options: "
                                            r"attack_columns, .*block_memory, .*chunk_rows, "
                                            r".*task_cell_limit"):
        _spec(options={"chunkrows": 5})
    # a method option is not a computation option, nor an API-only one
    for name in ("roles", "info"):
        with pytest.raises(SdcInputError, match=f"Unknown option '{name}'"):
            _spec(options={name: None})


IPSO = {"name": "ipso_a", "options": {"roles": {"confidential": ["V1"], "quasi": ["V2"]}}}


def test_method_options_are_checked_against_the_method_s_declaration():
    spec = _spec(methods=[IPSO])
    assert spec.methods[0].options == IPSO["options"]
    cases = [
        ({"name": "noise", "params": [0.1], "options": {"roles": {}}},
         r"^Unknown noise option 'roles'. There are no noise options.$"),
        ({"name": "ipso_a", "options": {"rols": {}}},
         r"^Unknown ipso_a option 'rols'. Valid ipso_a options: columns, roles.$"),
        ({"name": "ipso_b", "options": {"roles": ["V1"]}},
         r"^The 'roles' option of ipso_b must be null \(the dataset's roles\) or a mapping "
         r"of role names .* Got \['V1'\] instead.$"),
        ({"name": "ipso_c", "options": {"columns": "V1,V2"}},
         None),                              # one name is a list of one: accepted
        ({"name": "ipso_c", "options": {"columns": [1, 2]}},
         r"^The 'columns' option of ipso_c must be"),
        ({"name": "distr", "options": {"info": {}}},      # API-only: not from a spec
         r"^Unknown distr option 'info'. There are no distr options.$"),
        ({"name": "noise", "params": [0.1], "options": [1]},
         r"the options of noise must be a mapping"),
    ]
    for method, match in cases:
        if match is None:
            _spec(methods=[method])
            continue
        with pytest.raises(SdcInputError, match=match):
            _spec(methods=[method])


@pytest.mark.parametrize("mapping, got", [
    ({"sex": {"lbl_zq1": None}}, "null as a new label"),
    ({"sex": {"lbl_zq1": ""}}, "an empty text as a new label"),
    ({"sex": {"lbl_zq1": "   "}}, "an empty text as a new label"),
    ({"sex": {"lbl_zq1": ["lbl_zq2"]}}, "a list as a new label"),
    ({"sex": {"lbl_zq1": float("inf")}}, "a non-finite number as a new label"),
    ({"sex": {True: "lbl_zq2"}}, "true or false as a category label"),
    ({"sex": ["lbl_zq1", "lbl_zq2"]}, "a list"),
    ({"sex": None}, "null"),
    ({"sex": "lbl_zq1"}, "a single label"),
])
def test_recode_mapping_refuses_labels_that_are_no_labels(mapping, got):
    """A spec's recode mapping whose new label was null, empty or a list was accepted (the
    category became 'None', '' or "['...']"); the refusal names the column and what was
    given, never the labels."""
    with pytest.raises(SdcInputError, match=r"^The 'sex' key of the 'mapping' option of "
                       r"recode must be a mapping of category label to new label, each "
                       rf"label a non-empty text or a number. Got {got} instead.$") as e:
        _spec(methods=[{"name": "recode", "params": [0], "options": {"mapping": mapping}}])
    assert "lbl_zq" not in str(e.value)
    with pytest.raises(SdcInputError, match=r"^The '3' key of the 'mapping' option of recode "
                                            r"must be a column name \(a text\). Got a number"):
        _spec(methods=[{"name": "recode", "params": [0], "options": {"mapping": {3: {}}}}])
    _spec(methods=[{"name": "recode", "params": [0],
                    "options": {"mapping": {"sex": {"1": 2, 3: "x", "4": 1.5}}}}])


def test_methods_declare_registered_options():
    for name, m in METHODS.items():
        for o in m.options:
            assert opt.OPTIONS[o].scope == "method", (name, o)
        assert [o.name for o in masking.options_of(name)] == list(m.options)
    assert [o.name for o in masking.options_of("ipso_a")] == ["roles", "columns"]
    from sdcdist.masking._registry import register
    with pytest.raises(ValueError, match="not a declared method option"):
        register("zz_m", param="p", kind="float", random=False, description="x",
                 options=("chunk_rows",))
    assert "zz_m" not in METHODS


def test_metrics_declare_registered_options():
    for name, m in METRICS.items():
        for o in m.options:
            assert o in opt.OPTIONS and opt.OPTIONS[o].scope == "metric", (name, o)
    names = [o.name for o in metrics.options_of("PLD")]
    assert names[0] == "prl_method" and "prl_t" in names and "chunk_rows" not in names
    # a composite metric lists the options of the metrics it is computed from
    assert {"chunk_rows", "block_memory", "prl_t", "id_p"} <= \
        {o.name for o in metrics.options_of("Score")}
    assert [o.name for o in metrics.options_of("IL2")] == ["chunk_rows"]
    with pytest.raises(SdcInputError, match="Unknown metric 'DDL'"):
        metrics.options_of("DDL")
    with pytest.raises(ValueError, match="not a declared metric option"):
        _registry.register("zz_metric", kind="loss", description="x", options=("nope",))
    assert "zz_metric" not in METRICS


class _Recording(dict):
    """A dict that remembers which keys were read."""

    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self.read: set[str] = set()

    def __getitem__(self, key):
        self.read.add(key)
        return super().__getitem__(key)

    def get(self, key, default=None):
        self.read.add(key)
        return super().get(key, default)


def test_each_metric_reads_only_the_options_it_declares(rng):
    X = rng.standard_normal((40, 3)) + 5
    Y = X + 0.1 * rng.standard_normal(X.shape)
    codes = np.floor(np.abs(X))          # categorical metrics read V1, V2 as codes
    for name in METRICS:
        cat = METRICS[name].categorical
        inputs = metrics.Inputs(
            shape_original=X.shape, shape_masked=Y.shape, columns=["V1", "V2", "V3"],
            categorical=("V1", "V2") if cat else (),
            confidential=("V3",) if cat or name in ATTACK_METRICS else (),
            household="V3" if cat else None)
        ctx = MeasureContext(Runner(), codes if cat else X, codes if cat else Y,
                             inputs=inputs, keysets=[("V1", "V2")],
                             seed=np.random.SeedSequence(3),
                             holdout=codes[::2] if cat else X[::2],   # the DCR metrics
                             shape_holdout=(X.shape[0] // 2, X.shape[1]))
        if name.startswith("so_multi"):
            # 40 records leave few unique predicates: uncapped, the attacker tries its
            # default 10,000,000 queries (about two minutes per figure)
            ctx.options["so_max_attempts"] = 5000
        rec = _Recording(ctx.options)
        ctx.options = rec
        ctx.measure(name)
        declared = {o.name for o in metrics.options_of(name)}
        assert rec.read <= declared, (name, rec.read - declared)
        assert rec.read, name                  # every metric here reads some option


_ACCESS = r"""\s*(?:\[|\.get\(|\.pop\(|\.setdefault\()\s*["']([A-Za-z_][A-Za-z0-9_]*)["']"""
_READ = re.compile(r"\b(?:options|opts)" + _ACCESS)
_READ_O = re.compile(r"\bo" + _ACCESS)          # where a module writes o = ctx.options


def test_every_option_key_read_in_the_source_is_declared():
    seen = set()
    for path in SRC.rglob("*.py"):
        text = path.read_text()
        seen |= set(_READ.findall(text))
        if re.search(r"\bo\s*=\s*ctx\.options\b", text):
            seen |= set(_READ_O.findall(text))
    assert {"chunk_rows", "gdbrl_candidates", "cell_mode", "roles", "sdid_k"} <= seen
    undeclared = seen - set(opt.OPTIONS)
    assert not undeclared, f"read but not declared in sdcdist/options.py: {sorted(undeclared)}"


def test_measure_checks_options_too(rng):
    X = rng.standard_normal((20, 2))
    with pytest.raises(SdcInputError, match=r"^Unknown option 'chunkrows'"):
        measure(X, X, ["IL1s"], options={"chunkrows": 5})
    with pytest.raises(SdcInputError, match=r"^The 'sdid_k' option must be a number >= 0. "
                                            r"Got -1 instead.$"):
        measure(X, X, ["SDID"], options={"sdid_k": -1})


def test_docs_list_every_option():
    from sdcdist.docs import options_table
    table = options_table()
    for name, o in opt.OPTIONS.items():
        assert f"| `{name}` | `{opt.default_text(o)}` |" in table
    assert "| `prl_t` | `[0, 0.1, 0.25, 0.5, 1.0]` |" in table and "PLD, PLD20" in table


def test_id_column_is_refused_with_the_reason():
    with pytest.raises(SdcInputError, match=r"'id_column'.*row order is the truth.*--id"):
        _spec(dataset={"synthetic": {"rows": 40}, "id_column": "ID"})


def test_cli_refuses_a_bad_option_before_any_cluster(tmp_path):
    from click.testing import CliRunner

    from sdcdist.cli import main
    spec = tmp_path / "s.yaml"
    bad = {**BASE, "options": {"block_memory": -1},
           "methods": [{"name": "ipso_a", "options": {"rols": {}}}]}
    for change in ({"options": {"block_memory": -1}}, {"methods": bad["methods"]}):
        spec.write_text(yaml.safe_dump({**BASE, **change}))
        # an unreachable scheduler: had the audit tried to connect, it would say so
        res = CliRunner().invoke(main, ["audit", str(spec), "--out", str(tmp_path / "c.zarr"),
                                        "--scheduler", "tcp://127.0.0.1:9"])
        assert res.exit_code == 2, res.output
        assert "block_memory" in res.output or "Unknown ipso_a option 'rols'" in res.output
        assert not (tmp_path / "c.zarr").exists()


def test_command_line_items():
    assert opt.parse_items(["chunk_rows=4096", "crl_external=[V4, V12]",
                            "prl_blocking=null"]) == \
        {"chunk_rows": 4096, "crl_external": ["V4", "V12"], "prl_blocking": None}
    assert opt.parse_items([]) == {}
    with pytest.raises(SdcInputError, match="KEY=VALUE"):
        opt.parse_items(["chunk_rows"])
    with pytest.raises(SdcInputError, match=r"^Unknown option 'cell_mode'"):
        opt.parse_items(["cell_mode=task"])          # an audit option, not a metric's
    with pytest.raises(SdcInputError, match=r"^The 'chunk_rows' option must be an integer in "
                                            r"\[1, 67108864\]. Got 'abc' instead.$"):
        opt.parse_items(["chunk_rows=abc"])
    line = opt.OPTIONS["gdbrl_candidates"].summary()
    assert line.startswith("gdbrl_candidates (default 20): ") and "an integer in [1, 1000]" in line


def test_parse_items_refuses_a_repeated_key_and_yaml_aliases():
    from sdcdist.options import parse_items
    with pytest.raises(SdcInputError, match="given twice"):
        parse_items(["chunk_rows=10", "chunk_rows=20"])
    with pytest.raises(SdcInputError, match="anchors"):
        parse_items(["prl_t=&a 0.05"])
    assert parse_items(["prl_t=5e-2"]) == {"prl_t": 0.05}


@pytest.mark.parametrize("name,value,words", [
    ("prl_em", {"max_iter": 10**12}, "[1, 10000000]"),
    ("attack_n", 10**9, "[1, 100000]"),
    ("so_n_cols", 99, "[1, 64]"),
    ("so_max_attempts", 10**12, "[1, 1000000000]"),
    ("link_neighbors", 10**9, "[1, 1000]"),
    ("block_memory", 2**40, "an integer in"),
    ("sort_memory", 2**40, "an integer in"),
    ("suda_max_size", 10**6, "[1, 64]"),
    ("task_cell_limit", 10**12, "an integer in"),
    ("block_rows", [10**9, 10**9], "in [1, 32768]"),
    ("prl_block_rows", [10**12, 1], "in [1, 1000000000]"),
])
def test_every_count_option_has_a_stated_bound(name, value, words):
    from sdcdist.options import validate
    with pytest.raises(SdcInputError, match=re.escape(words)):
        validate({name: value})


def test_so_n_cols_beyond_the_attack_columns_is_refused_before_the_attack():
    from sdcdist.metrics import measure
    X = np.column_stack([np.arange(40.0) % k for k in (3, 4, 5, 6, 7, 8, 9)])
    with pytest.raises(SdcInputError, match="'so_n_cols' option must be at most 7, the attack columns of so_multi"):
        measure(X, X, ["so_multi"], options={"so_n_cols": 20})
