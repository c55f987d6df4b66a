"""rllib_ext.common.names: the case-insensitive lookup shared by the small registries."""

from __future__ import annotations

import pytest

from rllib_ext.common.names import lookup

TABLE = {"adam": 1, "dsgd": 2}


def test_lookup_is_case_insensitive():
    assert lookup(TABLE, "adam", "optimizer") == 1
    assert lookup(TABLE, "DSGD", "optimizer") == 2
    assert lookup(TABLE, "DsGd", "optimizer") == 2


@pytest.mark.parametrize("name", ["rmsprop", "", None, 3])
def test_unknown_name_is_one_error_naming_it_the_kind_and_every_valid_name(name):
    with pytest.raises(ValueError) as info:
        lookup(TABLE, name, "optimizer")
    message = str(info.value)
    assert f"Unknown optimizer {name!r}" in message
    assert "'adam', 'dsgd'" in message
