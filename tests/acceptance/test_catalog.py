"""The shipped catalogs: the tests that run the kvplan command.

Split by layer from the tests of the same subject in tests/unit/catalog/test_catalog.py,
tests/unit/render/test_catalog.py; tests/unit/catalog/test_catalog.py says what they check.
"""

from __future__ import annotations

import json
import sys
from typing import Any, Iterator

import pytest
from click.testing import CliRunner

from kvplan import catalog
from kvplan.cli import main

if sys.version_info >= (3, 11):
    pass
else:  # pragma: no cover
    pass


# ------------------------------------------------------------ CLI listing

def contract_quantities(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        if "value" in node:
            yield node
            return
        for v in node.values():
            yield from contract_quantities(v)
    elif isinstance(node, list):
        for v in node:
            yield from contract_quantities(v)


def run_json(command: str) -> dict[str, Any]:
    result = CliRunner().invoke(main, [command, "--format", "json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["format_version"] == "1"
    quantities = list(contract_quantities(doc))
    assert quantities
    for q in quantities:
        assert set(q) - {"interval"} == {"value", "unit", "evidence", "source"}
        assert q["evidence"] in ("derived", "reported", "assumed") and q["source"] and q["unit"]
        assert isinstance(q["value"], (int, float))
    return doc


def test_models_json_follows_the_contract() -> None:
    doc = run_json("models")
    ids = [m["id"] for m in doc["models"]]
    assert ids == sorted(catalog.models())
    by_id = {m["id"]: m for m in doc["models"]}
    kv = by_id["llama-3-70b"]["kv_bytes_per_token_bf16"]
    assert (kv["value"], kv["unit"], kv["evidence"]) == (327_680, "B", "derived")
    assert by_id["llama-3-70b"]["params"]["evidence"] == "reported"
    assert "llama-3.1-70b" in by_id["llama-3-70b"]["aliases"]
    assert sum(g["layers"] for g in by_id["gemma-3-27b"]["windows"]) == 62


def test_devices_json_follows_the_contract() -> None:
    doc = run_json("devices")
    assert [d["id"] for d in doc["devices"]] == sorted(catalog.devices())
    by_id = {d["id"]: d for d in doc["devices"]}
    h100 = by_id["h100-sxm"]
    assert h100["ridge"]["evidence"] == "derived" and h100["ridge"]["unit"] == "FLOP/B"
    assert h100["ridge"]["value"] == pytest.approx(h100["compute_bf16"]["value"] / h100["bandwidth"]["value"])
    assert by_id["mi300x"]["fabric"] is None and by_id["mi300x"]["fabric_status"] == "unpublished"
    assert by_id["b200"]["fabric"]["value"] == 10e12
    listed = {link["id"] for link in doc["links"]}
    assert listed == {lid for d in catalog.devices().values()
                      for lid in (d.host_link, d.scaleup_link, d.scaleout_link) if lid}
    assert (by_id["h100-sxm"]["node"], by_id["h100-sxm"]["scaleout_link"]) == (8, "ib-ndr")
    assert (by_id["gb200"]["node"], by_id["h100-pcie"]["node"]) == (72, None)


@pytest.mark.parametrize("command", ["models", "devices"])
def test_text_listing_fits_100_columns_and_is_deterministic(command: str) -> None:
    first = CliRunner().invoke(main, [command])
    second = CliRunner().invoke(main, [command])
    assert first.exit_code == 0 and first.output == second.output
    assert max(len(line) for line in first.output.splitlines()) <= 100
    table = catalog.models() if command == "models" else catalog.devices()
    listed = [line.split()[0] for line in first.output.splitlines()[2:2 + len(table)]]
    assert listed == sorted(table)
