"""The four inference parts (L40S, L4, A10G, H20; docs/catalog.md, "Device and link sources"): each figure is the
one its cited page gives (dense; sparse / 2 where a page gives only the sparse figure), and its links resolve."""

from __future__ import annotations

import pytest

from kvplan import catalog
from tests.paths import ROOT


# Figures as read (dense; sparse / 2 where a page gives only the sparse figure), one row per source figure:
#   L40S  https://modal.com/blog/nvidia-l40s-price-article: 48 GB GDDR6, 864 GB/s, FP8 1.47 PFLOPS with sparsity;
#         grokipedia.com/page/NVIDIA_L4_vs_L40S: FP8 1,466 with sparsity, 142 RT cores (one per SM)
#   L4    grokipedia.com/page/NVIDIA_L4_vs_L40S: 24 GB, 300 GB/s, FP16 tensor 242 and FP8 485 with sparsity
#   A10G  https://www.baseten.co/blog/nvidia-a10-vs-a10g-for-ml-model-inference/: 24 GB GDDR6, 600 GB/s
#   H20   https://willitrunai.com/es/gpus/h20-96gb: 96 GB, 4.0 TB/s, 148 TFLOPS FP16, 296 INT8, NVLink 4.0;
#         zangshuxian.com/new/674733024499207168: 78 SMs
@pytest.mark.parametrize("did, field, value", [
    ("l40s", "memory", 48e9), ("l40s", "bandwidth", 864e9), ("l40s", "compute_fp8", 1466e12 / 2),
    ("l40s", "sm_count", 142),
    ("l4", "memory", 24e9), ("l4", "bandwidth", 300e9), ("l4", "compute", 242e12 / 2),
    ("l4", "compute_fp8", 485e12 / 2),
    ("a10g", "memory", 24e9), ("a10g", "bandwidth", 600e9), ("a10g", "compute_fp8", None),
    ("h20", "memory", 96e9), ("h20", "bandwidth", 4.0e12), ("h20", "compute", 148e12), ("h20", "compute_fp8", 296e12),
    ("h20", "sm_count", 78),
])
def test_each_new_device_has_its_cited_figure(did: str, field: str, value: float | None) -> None:
    got = getattr(catalog.get_device(did), field)
    assert got == (pytest.approx(value) if value is not None else None)


@pytest.mark.parametrize("did, host, scaleup", [("l40s", "pcie4-x16", None), ("l4", "pcie4-x16", None),
                                                ("a10g", "pcie4-x16", None), ("h20", None, "nvlink4")])
def test_each_new_device_has_its_cited_links(did: str, host: str | None, scaleup: str | None) -> None:
    d = catalog.get_device(did)
    assert (d.host_link, d.scaleup_link) == (host, scaleup)
    for lid in (host, scaleup):
        assert lid is None or lid in catalog.links()


def test_each_new_device_has_no_node_and_the_docs_say_why() -> None:
    """No source read gives a node or scale-out NIC for the PCIe cards or the H20: both are absent (planned as one
    domain), and docs/catalog.md's "No node is given for" paragraph names each."""
    doc = (ROOT / "docs" / "catalog.md").read_text(encoding="utf-8")
    why = doc.split("No node is given for", 1)[1].split("\n\n", 1)[0]
    for did in ("l40s", "l4", "a10g", "h20"):
        d = catalog.get_device(did)
        assert (d.node, d.scaleout_link) == (None, None), did
        assert f"`{did}`" in why, did
