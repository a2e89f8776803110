"""Units never surprise: one reading per spelling, a warning where kvplan and an engine differ,
`fmt` that never touches a value, suggestions that keep a unit's binary/decimal meaning, and
engine flags read the way each engine reads them."""

from __future__ import annotations

from typing import Any

import pytest

from tests.paths import ROOT

# ------------------------------------------------------------------ CLI option values

W2 = str(ROOT / "examples" / "w2-batch32.kvp")
MAP = ["map", "--model", "llama-3-8b", "--device", "h100-sxm"]


def _run(*args: str) -> Any:
    from click.testing import CliRunner

    from kvplan.cli import main

    return CliRunner().invoke(main, list(args))


@pytest.mark.parametrize("args, needle", [
    (["advise", W2, "--prefill-efficiency", "nan"], "--prefill-efficiency takes a number from 0.01 to 1"),
    (["advise", W2, "--min-gain", "nan"], "--min-gain takes a finite number of at least 1"),
    (["advise", W2, "--min-gain", "inf"], "--min-gain takes a finite number of at least 1"),
    (["advise", W2, "--min-gain", "0.5"], "--min-gain must be a finite number of at least 1, got 0.5"),
    (["advise", W2, "--reserve", "-0.1"], "--reserve must be a number from 0 to 0.99"),
    (["report", W2, "-o", "unused", "--prefill-efficiency", "inf"], "--prefill-efficiency"),
    (["emit", W2, "--activation-reserve=-100GB"], "--activation-reserve must be bytes from 0 to 2^53 B"),
    (["emit", W2, "--activation-reserve", "1e400GB"], "not a finite number"),
    (["emit", W2, "--runtime-reserve", "nan"], "--runtime-reserve takes bytes"),
    (["emit", W2, "--runtime-reserve", "5GIB"], "did you mean 'GiB'?"),
    (["emit", W2, "--runtime-reserve", "5 tokens"], "--runtime-reserve takes bytes, got tokens"),
    ([*MAP, "--context", "1e400"], "--context '1e400' is not a finite number"),
    ([*MAP, "--context", "1e300"], "--context must be a whole number of tokens from 1 to 2^30"),
    ([*MAP, "--context", "0.5"], "--context must be a whole number of tokens"),
    ([*MAP, "--devices", "99999999999999999999"], "--devices must be a whole number from 1 to 4,096"),
    ([*MAP, "--batch", "1.5"], "--batch must be a whole number from 1 to 2^20, got 1.5"),
    ([*MAP, "--batch", "1K"], "did you mean 'k'?"),
    ([*MAP, "--tp", "-1"], "--tp must be a whole number from 0 to 4,096"),
    (["import", "--from", "vllm", "vllm serve x --max-num-seqs 8", "--model", "llama-3-8b", "--device", "h100-sxm",
      "--context", "nan"], "--context takes a whole number of tokens"),
    (["import", "--from", "vllm", "vllm serve x", "--model", "llama-3-8b", "--device", "h100-sxm",
      "--batch", "0"], "--batch must be a whole number from 1"),
    (["sweep", "--model", "llama-3-8b", "--device", "h100-sxm", "--devices", "99999999999999999999"],
     "above 4,096, kvplan's limit for devices"),
])
def test_a_bad_option_value_is_one_line_and_exit_2(args: list[str], needle: str) -> None:
    r = _run(*args)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.exit_code == 2, r.output
    assert len(lines) == 1 and lines[0].startswith("kvplan: error: ") and needle in lines[0], r.stderr
    assert r.stdout == "" and "Traceback" not in r.output


def test_byte_options_take_plain_bytes_and_zero() -> None:
    plain = _run("emit", W2, "--target", "vllm", "--activation-reserve", "5000000000")
    decimal = _run("emit", W2, "--target", "vllm", "--activation-reserve", "5 GB")
    default = _run("emit", W2, "--target", "vllm")
    assert plain.exit_code == decimal.exit_code == 0, plain.output
    assert (plain.stdout, plain.stderr) == (decimal.stdout, decimal.stderr)
    assert plain.stdout != default.stdout                 # the option was used, not ignored
    zero = _run("emit", W2, "--target", "vllm", "--runtime-reserve", "0")
    assert zero.exit_code == 0 and "error" not in zero.stderr, zero.output


def test_upper_case_k_on_the_command_line_reads_1000_and_warns() -> None:
    upper, lower = _run(*MAP, "--context", "128K"), _run(*MAP, "--context", "128k")
    assert upper.exit_code == lower.exit_code == 0
    assert upper.stdout == lower.stdout                   # 128,000 tokens either way
    assert "128,000" in upper.stderr and "131,072" in upper.stderr and "128Ki" in upper.stderr
    assert lower.stderr == ""
    sweep = _run("sweep", "--model", "llama-3-8b", "--device", "h100-sxm", "--context", "4K..128K:x2")
    assert sweep.exit_code == 0 and "4,096" in sweep.stderr and "131,072" in sweep.stderr


def _numeric_options() -> list[tuple[str, Any]]:
    from kvplan.cli import main

    return [(name, p) for name, cmd in sorted(main.commands.items()) for p in cmd.params]


def test_every_numeric_option_has_a_checked_range_listed_in_the_docs() -> None:
    import click

    from kvplan.cli import Number, _top

    raw = [(c, p.opts) for c, p in _numeric_options()
           if isinstance(p.type, (click.types.IntParamType, click.types.FloatParamType))]
    assert raw == [], "a numeric option without a kvplan Number type (no finite/range check)"
    rows = [ln for ln in (ROOT / "docs" / "cli.md").read_text(encoding="utf-8").splitlines() if ln.startswith("| `--")]
    numbers = [(c, p) for c, p in _numeric_options() if isinstance(p.type, Number)]
    assert len(numbers) >= 11
    for command, p in numbers:
        t = p.type
        row = next((r for r in rows if f"`{p.opts[0]}`" in r.split("|")[1] and command in r.split("|")[2]), None)
        assert row is not None, f"docs/cli.md lists no range for {command} {p.opts[0]}"
        top = "finite" if t.hi == float("inf") else (_top(int(t.hi)) if t.integer or t.hi > 1 else f"{t.hi:g}")
        assert f"{t.lo:g}" in row.split("|")[-2] and top in row.split("|")[-2], row
