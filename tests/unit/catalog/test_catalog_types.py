"""Typed reads of catalog entries (issue 10 build 2): a wrongly typed field is a CatalogError
naming the entry and key, where it used to pass through untyped into the record."""

import pytest

from kvplan.base.errors import CatalogError
from kvplan.catalog import model_from_entry, models

_ENTRY = {"name": "Toy", "layers": 2, "q_heads": 4, "kv_heads": 2, "head_dim": 8, "params": "1M"}


def test_a_typed_entry_reads_as_before():
    m = model_from_entry("toy", _ENTRY)
    assert (m.name, m.n_layers, m.n_q, m.n_kv, m.head_dim, m.params) == ("Toy", 2, 4, 2, 8, 1e6)
    assert m.windows == (None, None) and m.soft_cap is None and m.max_context is None


@pytest.mark.parametrize("key, raw, want", [
    ("name", 3, "a string"),
    ("layers", [2], "an integer"),
    ("soft_cap", "50", "a number"),
    ("max_context", 4096.5, "an integer"),
    ("layer_windows", 0, "a list of integers"),
])
def test_a_wrongly_typed_field_names_entry_and_key(key, raw, want):
    with pytest.raises(CatalogError) as err:
        model_from_entry("toy", {**_ENTRY, key: raw})
    assert str(err.value).startswith(f"toy.{key} is {raw!r}: expected {want}")


def test_shipped_models_keep_their_integer_fields():
    # soft_cap and max_context pass through as written (an int stays an int), as before the typed reads
    gemma = [m for m in models().values() if m.soft_cap is not None]
    assert gemma and all(isinstance(m.soft_cap, float) for m in gemma)
    assert all(m.max_context is None or type(m.max_context) is int for m in models().values())
