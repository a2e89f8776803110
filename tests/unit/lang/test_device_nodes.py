"""A device block states its node size and scale-out link together (SPEC §12)."""

from __future__ import annotations

import pytest

from kvplan import catalog
from kvplan.lang import check_source
from kvplan.lang import fixes as fx
from kvplan.model import expected as ex

SPEC = """kvplan 1
device "box" {{
    memory    = 80 GB
    bandwidth = 3.35 TB/s
    compute   = 989 TFLOPS
    link      = nvlink4
{lines}
}}
deployment "d" {{
    model   = llama-3-70b
    device  = box
    devices = 16
    workload {{
        batch   = 128
        context = 4k
    }}
}}
"""


def _device(text: str) -> catalog.Device:
    r = check_source(text, "t.kvp")
    assert r.ok, [d.message for d in r.diagnostics]
    return r.scenarios[0].device


@pytest.mark.parametrize("out", ["ib-ndr", "50 GB/s"])
def test_a_device_block_gives_its_node_and_scale_out_link(out: str) -> None:
    d = _device(SPEC.format(lines=f"    node = 8\n    scaleout_link = {out}"))
    assert (d.node, d.scaleout_link) == (8, "ib-ndr")
    assert ex.spanned_link(d, 16, 16) == "ib-ndr" and ex.spanned_link(d, 8, 16) == "nvlink4"


@pytest.mark.parametrize("given, missing", [("node = 8", "scaleout_link"), ("scaleout_link = ib-ndr", "node")])
def test_one_without_the_other_is_a_located_error_whose_fix_plans(given: str, missing: str) -> None:
    text = SPEC.format(lines=f"    {given}")
    (d,) = [d for d in check_source(text, "t.kvp").diagnostics if d.severity.value == "error"]
    assert d.code == "KV104" and d.span is not None and d.span.line == 7 and missing in d.message
    after = fx.apply(text, d.fixes[0].edits)
    dev = _device(after)
    assert (dev.node, dev.scaleout_link) == (8, "ib-ndr")


def test_a_node_of_no_devices_is_refused() -> None:
    r = check_source(SPEC.format(lines="    node = 0\n    scaleout_link = ib-ndr"), "t.kvp")
    (d,) = r.diagnostics
    assert d.code == "KV108" and d.span is not None and d.span.line == 7 and "between 1 and 4,096" in (d.help or "")


def test_a_device_block_gives_the_devices_one_host_holds() -> None:
    d = _device(SPEC.format(lines="    node = 72\n    scaleout_link = ib-ndr\n    host = 4"))
    assert (d.node, d.host) == (72, 4)
    assert _device(SPEC.format(lines="    node = 8\n    scaleout_link = ib-ndr")).host is None


@pytest.mark.parametrize("host", ["3", "12"])
def test_a_host_that_neither_divides_the_node_nor_is_a_multiple_of_it_is_a_located_error(host: str) -> None:
    r = check_source(SPEC.format(lines=f"    node = 8\n    scaleout_link = ib-ndr\n    host = {host}"), "t.kvp")
    (d,) = [d for d in r.diagnostics if d.severity.value == "error"]
    assert d.code == "KV108" and d.span is not None and d.span.line == 9
    assert f"host = {host} and node = 8, and neither divides the other" in d.message
