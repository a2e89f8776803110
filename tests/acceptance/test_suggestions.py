"""Every suggestion kvplan prints that names a concrete change works: the tests that run the kvplan command.

Split by layer from the tests of the same subject in tests/unit/lang/test_suggestions.py,
tests/unit/planner/test_suggestions.py; tests/unit/planner/test_suggestions.py says what they check.
"""

from __future__ import annotations

from pathlib import Path

from tests.unit.planner.test_suggestions import WL, _dep, _helps


def test_a_dtype_suggestion_keeps_the_bit_width(tmp_path: Path) -> None:
    """On main `kvplan map --kv-dtype int3` said "did you mean 'int8'?"."""
    from click.testing import CliRunner

    from kvplan.cli import main

    for args in (["map", "--model", "llama-3-8b", "--device", "h100-sxm", "--kv-dtype", "int3"],
                 ["sweep", "--model", "llama-3-8b", "--device", "h100-sxm", "--kv-dtype", "bf16,fp9"],
                 ["map", "--model", "llama-3-8b", "--device", "h100-sxm", "--weights", "int3"]):
        r = CliRunner().invoke(main, args)
        assert r.exit_code == 2 and "did you mean" not in r.stderr, r.stderr
        assert "known: fp32, bf16, fp16, fp8, int8, int4, fp4, int2" in r.stderr, r.stderr
    r = CliRunner().invoke(main, ["map", "--model", "llama-3-8b", "--device", "h100-sxm", "--kv-dtype", "imt8"])
    assert r.exit_code == 2 and "did you mean 'int8'?" in r.stderr, r.stderr
    text = _dep(WL.format(b=8, s="32k") + "\npin {\n    kv_dtype = int3\n}")
    (d,) = _helps(text, tmp_path, "KV110")
    assert "did you mean" not in (d.help or "") and not d.fixes, d.help


# ------------------------------------------------------------------ examples in help texts and docs

