"""The new methods inside an audit: params from the spec, IPSO roles from the dataset or options."""

from __future__ import annotations

import numpy as np
import pytest

from sdcdist import SdcInputError
from sdcdist.audit import run_audit
from sdcdist.audit.spec import parse_spec
from sdcdist.cube import open_cube
from sdcdist.data.synth import COLUMNS

CONF = list(COLUMNS[:3])
QUASI = list(COLUMNS[5:8])


def _spec(methods, roles=None):
    dataset = {"name": "t", "synthetic": {"rows": 300, "columns": 8, "seed": 3}}
    if roles:
        dataset["roles"] = roles
    return parse_spec({"name": "masking", "seed": 5, "dataset": dataset, "methods": methods,
                       "replicates": 1, "metrics": ["IL1s"]})


def test_every_new_method_runs_in_an_audit(tmp_path):
    methods = [{"name": n, "params": p} for n, p in [
        ("corrnoise", [0.5]), ("mixnoise", [0.5]), ("mixnoise_scaled", [0.5]),
        ("multnoise", [0.3]), ("micmul", [3]), ("mic2mul", [3]), ("mic3mul", [3]),
        ("mic4mul", [3]), ("micir", [3]), ("micz", [3]), ("micpcp", [3]), ("resample", [3]),
        ("jpeg", [50]), ("distr", [0]), ("ipso_a", [0]), ("ipso_b", [0]), ("ipso_c", [0])]]
    spec = _spec(methods, roles={"confidential": CONF, "key": QUASI})
    run_audit(spec, tmp_path / "cube.zarr")
    v = open_cube(tmp_path / "cube.zarr")["value"].sel(metric="IL1s", replicate=0)
    v = v.transpose("method", "param", ...).values.reshape(len(methods), -1)
    assert np.all(np.sum(np.isfinite(v), axis=1) == 1)      # one cell per method, measured
    assert np.all(np.nanmin(v, axis=1) > 0)


def test_ipso_roles_from_method_options(tmp_path):
    methods = [{"name": "ipso_c", "params": [0],
                "options": {"roles": {"confidential": CONF, "quasi": QUASI}}}]
    run_audit(_spec(methods), tmp_path / "a.zarr")
    roles = {"confidential": CONF, "key": QUASI}
    run_audit(_spec([{"name": "ipso_c", "params": [0]}], roles=roles), tmp_path / "b.zarr")
    a = open_cube(tmp_path / "a.zarr")["value"].sel(metric="IL1s").values
    b = open_cube(tmp_path / "b.zarr")["value"].sel(metric="IL1s").values
    assert np.isfinite(a).any() and np.array_equal(a, b, equal_nan=True)


def test_ipso_without_roles_is_a_clear_error(tmp_path):
    with pytest.raises(SdcInputError, match="ipso_b needs the roles of the columns"):
        run_audit(_spec([{"name": "ipso_b", "params": [0]}]), tmp_path / "c.zarr")


def test_method_options_one_builder_for_mask_and_audit():
    from sdcdist.audit.run import spec_method_options
    from sdcdist.masking import method_options, missing_roles
    cols = ("A", "B", "C", "D")
    roles = {"confidential": ["B", "A"], "key": ["D"]}
    opts = method_options("ipso_a", columns=cols, roles=roles)
    assert opts == {"roles": {"confidential": [1, 0], "key": [3]}, "columns": list(cols)}
    # methods without roles get nothing; explicit options win and are not modified
    assert method_options("rankswap", columns=cols, roles=roles) == {}
    given = {"roles": {"confidential": [0], "quasi": [2]}}
    assert method_options("ipso_b", columns=cols, roles=roles, options=given) == \
        {**given, "columns": list(cols)}
    assert given == {"roles": {"confidential": [0], "quasi": [2]}}
    with pytest.raises(SdcInputError, match="Unknown key column 'E' in the 'key' role of ipso_c"):
        method_options("ipso_c", columns=cols, roles={"confidential": ["A"], "key": ["E"]})
    assert missing_roles("ipso_c", {"key": ["A"]}) == ["confidential"]
    assert missing_roles("ipso_c", {"quasi": ["A"], "confidential": ["B"]}) == []
    assert missing_roles("ipso_c", {"key": [], "confidential": []}) == ["confidential", "key"]
    assert missing_roles("noise", {}) == []
    # the audit builds them the same way, from the spec's options and the dataset's roles
    spec = _spec([{"name": "ipso_a", "params": [0]}, {"name": "noise", "params": [0.1]}])
    assert spec_method_options(spec, cols, roles, "ipso_a") == opts
    assert spec_method_options(spec, cols, roles, "noise") == {}
