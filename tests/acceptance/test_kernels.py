"""Decode-kernel settings: the tests that run the kvplan command.

Split by layer from the tests of the same subject in tests/unit/engines/test_kernels.py,
tests/unit/model/test_kernels.py; tests/unit/model/test_kernels.py says what they check.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import pytest
from click.testing import CliRunner

from kvplan.cli import main
from tests.paths import DATA, ROOT

GOLDEN = DATA / "golden" / "emit"


def test_plan_json_carries_the_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    monkeypatch.chdir(ROOT)
    r = CliRunner().invoke(main, ["advise", "examples/w2-batch32.kvp", "--format", "json"])
    body = json.loads(r.stdout)
    k = body["plans"][0]["kernel"]
    assert k["target"] == "flashinfer" and k["kernel_time"]["evidence"] == "derived"
    assert k["page_size"] == body["plans"][0]["choices"]["block_size"]


# ------------------------------------------------------------------ golden emit

@pytest.mark.parametrize("name", ["w2-batch32", "deepseek-v3-mi300x", "llama-3.1-8b-h100-custom"])
def test_emit_flashinfer_golden(name: str, golden: Callable[[Path, str], None],
                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    r = CliRunner().invoke(main, ["emit", f"examples/{name}.kvp", "--target", "flashinfer"])
    assert r.exit_code in (0, 1), r.output
    for chunk in r.stdout.split("==> ")[1:]:
        head, _, body = chunk.partition(" <==\n")
        if head.endswith(".py"):
            compile(body, head, "exec")   # the emitted Python is valid Python
    golden(GOLDEN / f"{name}.flashinfer.txt", r.stdout)
