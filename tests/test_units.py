"""Units never surprise: one reading per spelling, a warning where kvplan and an engine differ,
`fmt` that never touches a value, suggestions that keep a unit's binary/decimal meaning, and
engine flags read the way each engine reads them."""

from __future__ import annotations

import re
from typing import Any, Iterator

import pytest

from kvplan.base import units
from kvplan.base.errors import KvplanError
from kvplan.base.units import UNITS, Dim, parse_quantity
from kvplan.engines import importer
from kvplan.lang import check_source
from kvplan.lang.fmt import format_source
from kvplan.lang.spec import Block, Bound, Entry, ListValue, Quantity
from kvplan.lang.syntax import parse
from tests.paths import ROOT

# ------------------------------------------------------------------ did you mean

@pytest.mark.parametrize("written, table, meant", [
    ("GIB", Dim.BYTES, "GiB"), ("gib", Dim.BYTES, "GiB"), ("Gib", Dim.BYTES, "GiB"), ("KIB", Dim.BYTES, "KiB"),
    ("gb", Dim.BYTES, "GB"), ("TIB/S", Dim.BANDWIDTH, "TiB/s"), ("TB/S", Dim.BANDWIDTH, "TB/s"),
    ("MS", Dim.TIME, "ms"), ("KI", Dim.TOKENS, "Ki"), ("mi", Dim.TOKENS, "Mi"),
    ("GiBB", Dim.BYTES, "GiB"),    # a typo of a binary unit stays binary
    ("GBB", Dim.BYTES, "GB"),      # and of a decimal one decimal
])
def test_a_unit_suggestion_keeps_binary_and_decimal_apart(written: str, table: Dim, meant: str) -> None:
    assert units.suggest_unit(written, UNITS[table]) == meant
    with pytest.raises(KvplanError) as info:
        parse_quantity(f"5 {written}", table, what="x")
    assert f"did you mean '{meant}'" in (info.value.help or "")


def test_5gib_in_a_spec_suggests_gib_and_the_suggestion_reads_5_gibibytes() -> None:
    text = 'kvplan 1\ndevice "g" {\n    memory = 5GIB\n    bandwidth = 3 TB/s\n    compute = 900 TFLOPS\n}\n'
    (d,) = [d for d in check_source(text, "g.kvp").diagnostics if d.code == "KV107"]
    assert d.help == "did you mean `GiB`?"
    fixed = text.replace("5GIB", "5GiB")
    assert not [d for d in check_source(fixed, "g.kvp").diagnostics if d.code == "KV107"]
    assert parse_quantity("5GiB", Dim.BYTES) == 5 * 2**30


def test_a_count_in_upper_case_k_is_a_case_slip_not_a_wrong_dimension() -> None:
    text = ('kvplan 1\ndeployment "x" {\n    model = llama-3-8b\n    device = h100-sxm\n'
            '    workload {\n        batch = 1K\n        context = 8k\n    }\n}\n')
    (d,) = [d for d in check_source(text, "x.kvp").diagnostics if d.severity.value == "error"]
    assert (d.code, d.help) == ("KV107", "did you mean `k`?")


def test_a_bare_number_for_bytes_says_plain_number_not_tokens() -> None:
    text = 'kvplan 1\ndevice "g" {\n    memory = 80\n    bandwidth = 3 TB/s\n    compute = 900 TFLOPS\n}\n'
    (d,) = [d for d in check_source(text, "g.kvp").diagnostics if d.code == "KV106"]
    assert d.message == "memory takes bytes, got a plain number 80" and "tokens" not in d.message


def test_a_quantity_that_overflows_is_refused_as_not_finite() -> None:
    with pytest.raises(KvplanError, match="not a finite number"):
        parse_quantity("1e400", Dim.TOKENS, what="context")


# ------------------------------------------------------------------ KV125: `K`

def _spec(context: str, prefix: str = "0") -> str:
    return ('kvplan 1\n\ndeployment "chat" {\n    model = llama-3-8b\n    device = h100-sxm\n\n'
            f'    workload {{\n        batch = 1\n        context = {context}\n        prefix = {prefix}\n    }}\n}}\n')


def _kv125(text: str) -> list[Any]:
    return [d for d in check_source(text, "chat.kvp").diagnostics if d.code == "KV125"]


def _apply(text: str, span: Any, replacement: str) -> str:
    """The text with the diagnostic's span (one line) replaced."""
    lines = text.split("\n")
    ln = lines[span.line - 1]
    lines[span.line - 1] = ln[: span.column - 1] + replacement + ln[span.end_column - 1:]
    return "\n".join(lines)


def test_upper_case_k_warns_with_both_readings_and_each_suggestion_clears_it() -> None:
    text = _spec("128K")
    (d,) = _kv125(text)
    assert d.severity.value == "warning"
    assert "128,000" in d.message and "131,072" in d.message and "vLLM" in d.message
    spellings = re.findall(r"`([^`]+)` for ([\d,]+)", d.help or "")
    assert spellings == [("128k", "128,000"), ("128Ki", "131,072")]
    for spelling, tokens in spellings:
        fixed = _apply(text, d.span, spelling)
        result = check_source(fixed, "chat.kvp")
        assert not _kv125(fixed) and not [x for x in result.diagnostics if x.severity.value == "error"]
        (sc,) = result.scenarios
        assert sc.context == int(tokens.replace(",", ""))
    (sc,) = check_source(text, "chat.kvp").scenarios
    assert sc.context == 128_000                          # the warning changes nothing: kvplan still reads 1000


@pytest.mark.parametrize("written", ["1.5K", "2 K"])
def test_k_warning_for_decimals_and_spaced_units_offers_spellings_that_work(written: str) -> None:
    text = _spec("32k", prefix=written)
    (d,) = _kv125(text)
    for spelling, tokens in re.findall(r"`([^`]+)` for ([\d,]+)", d.help or ""):
        fixed = _apply(text, d.span, spelling)
        assert not _kv125(fixed)
        (sc,) = check_source(fixed, "chat.kvp").scenarios
        assert sc.prefix == int(tokens.replace(",", ""))


def test_lower_case_k_ki_and_m_do_not_warn() -> None:
    assert not _kv125(_spec("[128k, 128Ki, 1M, 2Mi, 4096]"))


# ------------------------------------------------------------------ fmt keeps values

def _quantities(text: str) -> list[tuple[str, float, str]]:
    """Every quantity of a file: (text as written, number, unit), in order."""
    def values(items: Any) -> Iterator[Quantity]:
        for item in items:
            if isinstance(item, Block):
                yield from values(item.items)
            elif isinstance(item, Entry) and item.value is not None:
                v = item.value
                for x in (v.items if isinstance(v, ListValue) else (v.limit if isinstance(v, Bound) else v,)):
                    if isinstance(x, Quantity):
                        yield x
    spec = parse(text, "x.kvp")
    return [(q.text.strip(), q.number, q.unit) for d in spec.declarations for q in values(d.items)]


def _every_unit_spelling() -> str:
    """A file holding every unit kvplan knows, glued and spaced, in scalars, lists and bounds."""
    units = sorted({u for table in UNITS.values() for u in table} | {"K", "x", "GIB", "MS"})
    lines = ['kvplan 1', '', 'deployment "u" {', '    every {']
    for i, u in enumerate(units):
        lines += [f"        glued{i} = 32{u}", f"        spaced{i} = 1.5 {u}", f"        listed{i} = [2{u}, 3  {u}]",
                  f"        bounded{i} = <= 4{u}", f"        compared{i} >= 5 {u}"]
    return "\n".join(lines + ["    }", "}", ""])


FMT_CORPUS = [(str(p.relative_to(ROOT)), p.read_text(encoding="utf-8")) for p in sorted(ROOT.glob("examples/**/*.kvp"))]
FMT_CORPUS += [("every-unit", _every_unit_spelling())]


@pytest.mark.parametrize("name, text", FMT_CORPUS, ids=[n for n, _ in FMT_CORPUS])
def test_fmt_prints_every_value_exactly_as_written(name: str, text: str) -> None:
    before = _quantities(text)
    assert before
    out = format_source(text, name)
    assert _quantities(out) == before                     # same tokens, same numbers, same units


def test_fmt_keeps_32k_upper_case_glued() -> None:
    out = format_source('deployment "x" {\n    workload {\n        context = 32K\n    }\n}\n', "x.kvp")
    assert "context = 32K\n" in out and "32 K" not in out


# ------------------------------------------------------------------ import: each engine's reading

@pytest.mark.parametrize("engine, value, tokens, note", [
    ("vllm", "128K", 131_072, "vLLM reads K as 2^10: 131,072 tokens"),
    ("vllm", "128k", 128_000, ""),
    ("vllm", "1M", 1_048_576, "vLLM reads M as 2^20: 1,048,576 tokens"),
    ("vllm", "1m", 1_000_000, ""),
    ("vllm", "1G", 2**30, "vLLM reads G as 2^30: 1,073,741,824 tokens"),
    ("vllm", "25.6k", 25_600, ""),
    ("vllm", "32768", 32_768, ""),
    ("vllm", "1_000", 1_000, ""),                       # int() takes an underscore
    ("sglang", "128k", 128_000, ""),
    ("sglang", "1M", 1_000_000, ""),                      # SGLang's M is SI, unlike vLLM's
    ("sglang", "128Ki", 131_072, "SGLang reads Ki as 2^10: 131,072 tokens"),
    ("trtllm", "131072", 131_072, ""),
])
def test_each_engine_reads_its_own_suffixes(engine: str, value: str, tokens: int, note: str) -> None:
    read = getattr(importer, f"{engine}_tokens")
    assert read(value, "--flag") == (tokens, note)
    assert parse_quantity(importer.tokens_text(tokens), Dim.TOKENS) == tokens   # written so kvplan reads the same


@pytest.mark.parametrize("engine, value, words", [
    ("vllm", "1.5K", "decimal before the binary suffix"),
    ("vllm", "128Ki", "not a token count vLLM reads"),
    ("vllm", "9" * 400, "between 1 and 1,073,741,824, got a 400-digit number"),
    ("vllm", "0", "between 1 and 1,073,741,824, got 0"),
    ("sglang", "128K", "SGLang refuses this suffix"),
    ("sglang", "1.5Ki", "decimal"),
    ("trtllm", "128k", "not a token count TensorRT-LLM reads"),
])
def test_a_suffix_the_engine_would_refuse_is_refused_in_one_line(engine: str, value: str, words: str) -> None:
    read = getattr(importer, f"{engine}_tokens")
    with pytest.raises(importer.DeploymentReadError) as info:
        read(value, "--flag")
    assert words in str(info.value) and len(str(info.value)) < 300


def test_imported_binary_context_is_written_exactly_with_how_the_engine_read_it() -> None:
    out = importer.import_deployment("vllm", "vllm serve x --max-model-len 128K --max-num-seqs 8",
                                     importer.Options(model="llama-3-8b", device="h100-sxm"))
    line = next(ln for ln in out.text.splitlines() if ln.strip().startswith("context"))
    assert line.split("#")[0].split("=")[1].strip() == "128Ki"
    assert "--max-model-len 128K (vLLM reads K as 2^10: 131,072 tokens)" in line
    (sc,) = check_source(out.text, "i.kvp").scenarios
    assert sc.context == 131_072 and not _kv125(out.text)


def test_vllm_max_model_len_auto_takes_the_models_limit() -> None:
    out = importer.import_deployment("vllm", "vllm serve x --max-model-len auto --max-num-seqs 8",
                                     importer.Options(model="llama-3-8b", device="h100-sxm"))
    assert "vLLM derives the limit from the model config" in out.text
    assert "the model's max context" in out.text


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
