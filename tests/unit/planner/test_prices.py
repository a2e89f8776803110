"""The catalog's prices (docs/catalog.md, "Prices"): every device carries a dated, cited on-demand price or is a
documented gap; the per-GPU arithmetic a source states holds; `objective = cheapest` plans on the devices that gained
a price; a spec's `price` still overrides; an unpriced device's error names it and its suggestion works applied."""

from __future__ import annotations

import re

import pytest

from kvplan import catalog
from kvplan.lang import check_source
from kvplan.planner import cost, plan
from tests.paths import ROOT

#: The devices the lead's issue (21, item 4) names as failing `objective = cheapest` for want of a price.
NAMED = ("h200", "b200", "mi300x")


def _spec(device: str, top: str = "", workload: str = "batch = 4\n    context = 4k") -> str:
    return (f'kvplan 1\ndeployment "d" {{\n  model = llama-3.1-8b\n  device = {device}\n  engine = vllm\n{top}'
            f"  workload {{\n    {workload}\n  }}\n}}\n")


def _errors(text: str) -> list[str]:
    r = check_source(text, "t.kvp")
    return [f"{d.code} {d.message}" for d in r.diagnostics if d.severity.value == "error"]


def _catalog_doc() -> str:
    return (ROOT / "docs" / "catalog.md").read_text(encoding="utf-8")


def _documented_gaps() -> set[str]:
    """The device ids the **Gaps** paragraph of docs/catalog.md's Prices section names."""
    prices = _catalog_doc().split("## Prices", 1)[1].split("\n## ", 1)[0]
    gaps = prices.split("**Gaps**", 1)[1].split("\n\n", 1)[0]
    return set(re.findall(r"`([a-z0-9-]+)`", gaps)) & set(catalog.devices())


# ------------------------------------------------------------ every device: a price or a documented gap

def test_every_device_has_a_cited_dated_price_or_is_a_named_gap() -> None:
    unpriced = {d.id for d in catalog.devices().values() if d.price_per_hour is None}
    assert unpriced == _documented_gaps(), "docs/catalog.md's Gaps must name exactly the devices without a price"
    for d in catalog.devices().values():
        if d.price_per_hour is None:
            continue
        # the page first (a URL; `https://` left off where the whole URL would not fit `kvplan devices`' 100 columns)
        assert re.match(r"(https://)?[\w-]+(\.[\w-]+)+/\S*", d.price_source), d.id
        assert "on-demand" in d.price_source, f"{d.id}: the basis is an on-demand list price"
        assert re.fullmatch(r"20\d\d-\d\d-\d\d", d.price_date), d.id


def test_the_priced_devices_include_every_one_the_issue_names_and_the_new_aws_parts() -> None:
    priced = {d.id for d in catalog.devices().values() if d.price_per_hour is not None}
    assert {"a100-80g", "h100-sxm", *NAMED, "b200-hgx", "b300", "mi325x", "h100-pcie", "l40s", "a10g"} <= priced


@pytest.mark.parametrize("did", sorted(d.id for d in catalog.devices().values()
                                       if "per GPU = instance / " in d.price_source))
def test_a_per_gpu_price_is_the_quoted_instance_price_over_its_gpus(did: str) -> None:
    """Where a source says 'on-demand $X/h; per GPU = instance / N', the catalog price is X / N to the cent."""
    d = catalog.get_device(did)
    instance = float(re.search(r"on-demand \$([\d.]+)/h", d.price_source).group(1))  # type: ignore[union-attr]
    n = int(re.search(r"per GPU = instance / (\d+)", d.price_source).group(1))  # type: ignore[union-attr]
    assert d.price_per_hour == pytest.approx(instance / n, abs=5e-5)


def test_the_docs_table_lists_each_catalog_price() -> None:
    """docs/catalog.md's price table and the catalog agree, row by row."""
    table = _catalog_doc().split("| device | USD/h |", 1)[1].split("\n\n", 1)[0]
    listed: dict[str, float] = {}
    for row in table.splitlines()[2:]:
        cells = [c.strip() for c in row.strip("|").split("|")]
        for did in re.findall(r"`([a-z0-9-]+)`", cells[0]):
            listed[did] = float(cells[1])
    assert listed == {d.id: d.price_per_hour for d in catalog.devices().values() if d.price_per_hour is not None}


# ------------------------------------------------------------ objective = cheapest and `price =`

@pytest.mark.parametrize("did", NAMED)
def test_cheapest_plans_on_the_devices_that_gained_a_price(did: str) -> None:
    text = _spec(did, top="  objective = cheapest\n")
    assert _errors(text) == []
    p = plan(check_source(text, "t.kvp").scenarios[0])
    assert p.cost is not None and p.cost.price.value == catalog.get_device(did).price_per_hour
    assert p.cost.price.evidence.value == "reported" and catalog.get_device(did).price_date in p.cost.price.source
    assert p.cost.hourly.value == pytest.approx(p.cost.price.value * p.n_devices * p.scenario.replicas)


@pytest.mark.parametrize("did", ["h200", "l40s"])
def test_a_spec_price_still_overrides_the_catalog(did: str) -> None:
    sc = check_source(_spec(did, top="  objective = cheapest\n  price = 2.50 USD/h\n"), "t.kvp").scenarios[0]
    pr = cost.price(sc)
    assert pr is not None and pr.value == 2.5 != catalog.get_device(did).price_per_hour
    assert pr.evidence.value == "assumed"


def test_an_unpriced_device_is_named_and_the_suggested_price_line_works() -> None:
    text = _spec("l4", top="  objective = cheapest\n")
    [err] = _errors(text)
    assert err.startswith("KV104 ") and "`l4`" in err
    [d] = check_source(text, "t.kvp").diagnostics
    suggestion = re.search(r"`(price = [^`]+)`", d.help or "").group(1)  # type: ignore[union-attr]
    fixed = text.replace("  objective = cheapest\n", f"  objective = cheapest\n  {suggestion}\n")
    assert _errors(fixed) == []
    p = plan(check_source(fixed, "t.kvp").scenarios[0])
    assert p.cost is not None and p.cost.price.value == 2.5 and p.cost.price.evidence.value == "assumed"
