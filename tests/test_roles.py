"""The role rules are stated once (sdcdist/roles.py) and both role checks read them: a
file's declared roles and the roles a command or an audit gives."""

from __future__ import annotations

import pytest

from sdcdist.data.types import check_roles
from sdcdist.errors import SdcInputError
from sdcdist.metrics import Inputs
from sdcdist.roles import EXCLUSIVE, first_clash, role_clash_error

COLS = ("a", "b", "c", "w", "h")


@pytest.mark.parametrize("role,other", list(EXCLUSIVE))
def test_every_exclusive_pair_is_refused_by_both_checks_with_one_message(role, other):
    """A column holding both roles of an exclusive pair: the file check and the Inputs
    check refuse it, each with the table's reason."""
    why = EXCLUSIVE[(role, other)]
    roles = {role: ["c"], other: ["c"]}
    with pytest.raises(SdcInputError) as file_err:
        check_roles(COLS, roles)
    assert why in str(file_err.value)
    assert str(file_err.value) == str(role_clash_error("c", role, other, source="the data"))
    # the same pair given to a command (Inputs): a key role is a key set there
    fields = {"household": {"household": "c"}, "weight": {"weight": "c"},
              "confidential": {"confidential": ("c",)}, "key": {"keysets": (("a", "c"),)}}
    inputs = Inputs(columns=COLS, **fields[role], **fields[other])
    with pytest.raises(SdcInputError) as cmd_err:
        inputs.check()
    assert why in str(cmd_err.value)


def test_compatible_roles_pass_and_first_clash_follows_the_table():
    roles = {"key": ["a", "b"], "confidential": ["c"], "weight": ["w"], "household": ["h"]}
    check_roles(COLS, roles)
    Inputs(columns=COLS, keysets=(("a", "b"),), confidential=("c",), weight="w",
           household="h").check()
    assert first_clash(roles) is None
    # two clashes: the table's order decides which is named
    assert first_clash({"key": ["w", "h"], "weight": ["w"], "household": ["h"]}) == \
        ("h", "household", "key")
