"""Fuzzers, and the findings they made (issue 9, "Fuzz findings"), each pinned by a regression test.

Every run goes through the CLI in-process (click's CliRunner) with the warnings that reveal a
kvplan bug turned into errors (`bug_warnings`: RuntimeWarnings, and warnings from kvplan's own
modules; a dependency's deprecation warnings are not kvplan's), so a numpy RuntimeWarning that
would have reached the user surfaces as an "internal error" here. Each run must keep the laws of `_law`:

- the exit code is 0, 1 or 2, and the output holds no traceback and no "internal error";
- an exit-2 run says why on one line of stderr, `kvplan: error: ...`;
- no number is printed as `inf` or `nan` (a value that overflowed is named instead).

The fuzzers are bounded and deterministic: hypothesis with `derandomize=True` and a fixed
`max_examples`, or `random.Random(seed)`; they assert outcomes, never wall-clock time.
Together they run in well under a minute on two cores.
"""

from __future__ import annotations

import contextlib
import json
import random
import re
import warnings
from pathlib import Path
from typing import Any, Callable, Iterator, Optional, Sequence

import pytest
from click.testing import CliRunner, Result
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvplan.base import limits
from kvplan.cli import main
from kvplan.lang import check_source
from kvplan.lang.fmt import format_source
from tests.paths import ROOT
from tests.unit.lang.test_fuzz import spec

# Slow: hypothesis drives every command through mutated specs (about 45 s on 2 cores).
# The default `python -m pytest` leaves it out; --run-slow and CI run it.
pytestmark = pytest.mark.slow

HF = ROOT / "tests" / "data" / "hf"
LLAMA_8B = json.loads((HF / "meta-llama--Meta-Llama-3.1-8B.json").read_text(encoding="utf-8"))

FUZZ = settings(derandomize=True, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

# `inf`, `nan`, `Infinity` standing as a value (`needs inf TB`, `"value": NaN`); text in backticks
# or quotes is the user's own and is cut out first.
_NONFINITE = re.compile(r"(?<![\w.\-])[-+]?(?:inf(?:inity)?|nan)(?:x\b|(?![\w]))", re.IGNORECASE)
_QUOTED = re.compile(r"`[^`\n]*`|\"[^\"\n]*\"|'[^'\n]*'")
# The input spells a non-finite number itself (`nan`, `.inf`, `Infinity`), which messages may echo.
_NONFINITE_INPUT = re.compile(r"(?<![a-z])(infinity|inf|nan)(?![a-z])", re.IGNORECASE)
# Files named on a command line, whose text counts as the run's input.
_INPUT_FILE = re.compile(r".*\.(kvp|json|ya?ml|sh|txt)$")


@contextlib.contextmanager
def bug_warnings() -> Iterator[None]:
    """Turn into errors the warnings that reveal a kvplan bug: a RuntimeWarning (numpy's overflow,
    invalid value, divide by zero) and any warning attributed to kvplan's own modules. A dependency's
    own warnings (matplotlib 3.8 calling a pyparsing API that the newest pyparsing deprecates) are
    not kvplan's to fix and are silenced, so that they neither fail the run nor print."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        warnings.filterwarnings("error", category=RuntimeWarning)
        warnings.filterwarnings("error", module=r"kvplan(\.|$)")
        yield


def invoke(args: Sequence[str], stdin: Optional[str] = None) -> Result:
    """One CLI run in-process, the warnings that reveal a kvplan bug errors (bug_warnings)."""
    with bug_warnings():
        return CliRunner().invoke(main, list(args), input=stdin)


def _input_text(args: Sequence[str]) -> str:
    """The arguments and the text of every input file they name."""
    parts = list(map(str, args))
    for a in args:
        p = Path(str(a))
        if _INPUT_FILE.match(str(a)) and p.is_file():
            parts.append(p.read_bytes().decode("utf-8", errors="replace"))
    return "\n".join(parts)


def _law(r: Result, args: Sequence[str], finite: Optional[bool] = None) -> None:
    """The laws every run keeps. `finite`: check that no number is printed as inf or nan; by default
    when the input itself spells none (an echoed `nan` the user wrote is not one kvplan computed)."""
    out = r.stdout + r.stderr
    what = f"kvplan {' '.join(str(a)[:80] for a in args)}"
    assert r.exit_code in (0, 1, 2), (what, r.exit_code, repr(r.exception), out[-2000:])
    assert r.exception is None or isinstance(r.exception, SystemExit), (what, repr(r.exception))
    assert "Traceback" not in out and "internal error" not in out, (what, out[-2000:])
    assert "Warning:" not in out, (what, out[-2000:])
    if r.exit_code == 2:
        lines = r.stderr.strip().split("\n")
        if args[0] == "fmt":  # fmt names each file it could not read, located, then sums up
            assert all(re.match(r"\S+:\d+:\d+: KV0\d\d |kvplan: error: ", ln) for ln in lines[:-1]), (what, lines)
        elif "Usage:" in r.stderr:  # click's own usage error: the option and why, on its last line
            assert lines[-1].startswith("Error: "), (what, r.stderr[-2000:])
        else:
            assert lines[-1].startswith("kvplan: error: "), (what, r.stderr[-2000:])
            assert len([ln for ln in lines if ln.startswith("kvplan: error")]) == 1, (what, r.stderr[-2000:])
    if finite is None:
        finite = _NONFINITE_INPUT.search(_input_text(args)) is None
    if finite:
        shown = _QUOTED.sub("", out)
        m = _NONFINITE.search(shown)
        assert m is None, (what, shown[max(0, m.start() - 300):m.end() + 100] if m else "")


def run(args: Sequence[str], finite: Optional[bool] = None, stdin: Optional[str] = None) -> Result:
    r = invoke(args, stdin)
    _law(r, args, finite)
    return r


def write(tmp: Path, text: str, name: str = "s.kvp") -> str:
    p = tmp / name
    p.write_text(text, encoding="utf-8")
    return str(p)


def range_error(r: Result, path: str, line: int, col: int, words: str) -> None:
    """Lint said KV108 at path:line:col, and its help names the range."""
    assert r.exit_code == 1, r.output
    assert f"{path}:{line}:{col}: KV108 " in r.stdout, r.stdout
    assert words in r.stdout, r.stdout


# ================================================================== the harness itself

def test_a_dependency_deprecation_is_not_a_kvplan_bug(monkeypatch: pytest.MonkeyPatch) -> None:
    """At the declared minimums matplotlib 3.8 calls pyparsing's `parseString`, which the newest
    pyparsing deprecates: that warning (raised from a dependency's module) must neither fail a run
    nor print, while a RuntimeWarning or a warning from kvplan's own code still fails it."""
    import kvplan.catalog.hf_config as hf_mod

    def warn_as(category: type[Warning], module: str) -> Callable[..., Any]:
        real = hf_mod.resolve_model

        def patched(*a: Any, **k: Any) -> Any:
            warnings.warn_explicit("'parseString' deprecated", category, f"/site/{module}.py", 1,
                                   module=module, registry={})
            return real(*a, **k)
        return patched

    args = ["map", "--model", "llama-3-8b", "--device", "h100-sxm"]
    monkeypatch.setattr(hf_mod, "resolve_model", warn_as(DeprecationWarning, "pyparsing.util"))
    r = invoke(args)
    assert r.exit_code == 0, r.output
    assert "Warning" not in r.output and "internal error" not in r.output
    for category, module in ((RuntimeWarning, "numpy.core"), (UserWarning, "kvplan.memory")):
        monkeypatch.setattr(hf_mod, "resolve_model", warn_as(category, module))
        r = invoke(args)
        assert r.exit_code != 0 and "internal error" in r.output, (category, module, r.output)


# ================================================================== regression: unbounded work

def test_devices_1e12_is_refused_at_the_edge_before_any_plan(tmp_path: Path) -> None:
    # lint looped up to n; now the checker refuses the value, so nothing is planned
    text = spec(devices="1e12")
    result = check_source(text, "s.kvp")
    assert [d.code for d in result.diagnostics] == ["KV108"] and result.scenarios == ()
    assert (result.diagnostics[0].span.line, result.diagnostics[0].span.column) == (6, 15)
    r = run(["lint", "--output-format", "full", write(tmp_path, text)])
    range_error(r, str(tmp_path / "s.kvp"), 6, 15, "devices must be between 1 and 4,096")


def test_import_refuses_a_device_count_the_spec_could_not_hold() -> None:
    # `import -tp 1000000000` wrote `devices = 1000000000`, which then hung lint
    line = "vllm serve meta-llama/Meta-Llama-3.1-8B -tp 1000000000 --max-num-seqs 8 --max-model-len 8k"
    r = run(["import", "--from", "vllm", line, "--device", "h100-sxm"])
    assert r.exit_code == 2
    assert r.stderr == ("kvplan: error: -tp must be a whole number between 1 and 4,096, got 1,000,000,000 "
                        "(kvplan's limit, docs/cli-import.md)\n")
    r = run(["import", "--from", "vllm", line.replace("1000000000", "64 -pp 128"), "--device", "h100-sxm"])
    assert r.exit_code == 2 and "8,192 devices; a spec takes between 1 and 4,096" in r.stderr
    # 4,096 is the most, and the spec it writes checks; it needs a model that tp 64 × pp 64 splits
    # (Llama-3.1-8B's 32 heads and 32 layers do not: that import is refused, tests/acceptance/test_plan_layout.py)
    big = line.replace("Meta-Llama-3.1-8B", "Meta-Llama-3.1-70B")
    r = run(["import", "--from", "vllm", big.replace("1000000000", "64 -pp 64"), "--device", "h100-sxm"])
    assert r.exit_code == 0, r.output
    assert check_source(r.stdout, "i.kvp").ok


# ================================================================== regression: internal errors

@pytest.mark.parametrize("field, value, line, col, words", [
    ("batch", "1e308", 8, 17, "batch must be between 1 and 1,048,576"),
    ("context", "1e308", 9, 19, "context must be between 1 and 1,073,741,824"),
    ("context", "18446744073709551616", 9, 19, "context must be between 1 and 1,073,741,824"),
    ("pin", "block_size = 1e308", 12, 22, "block_size must be between 1 and 1,073,741,824"),
])
@pytest.mark.parametrize("command", ["lint", "advise", "emit", "report"])
def test_huge_numbers_are_located_range_errors_in_every_command(tmp_path: Path, field: str, value: str, line: int,
                                                                col: int, words: str, command: str) -> None:
    # batch = 1e308 was an OverflowError, context = 1e308 and block_size = 1e308 one in emit,
    # context = 2^64 a numpy TypeError in report; lint printed "needs inf TB" and numpy warnings
    kw: dict[str, Any] = {"pin": value} if field == "pin" else {field: value}
    path = write(tmp_path, spec(**kw))
    args = [command, path] + (["-o", str(tmp_path / "out")] if command in ("emit", "report") else [])
    if command == "lint":
        args += ["--output-format", "full"]
    r = run(args)
    if command == "lint":
        range_error(r, path, line, col, words)
    else:
        assert r.exit_code == 2, r.output
        assert "KV108" in r.stderr or "KV108" in r.stdout, r.output
        assert f"{path}:{line}:{col}" in r.stdout + r.stderr, r.output


def test_fmt_check_on_1000_nested_blocks(tmp_path: Path) -> None:
    # Blocks nest at most limits.MAX_NESTING deep (issue 19: fmt's indented output grew with depth x lines,
    # 4.75 GB for 20,000): 1,000 is one located KV003 at the block that opens the next level, no RecursionError.
    n = 1000
    path = write(tmp_path, 'deployment "d" {\n' + "a {\n" * n + "}\n" * (n + 1))
    r = run(["fmt", "--check", path])
    assert r.exit_code == 2 and "Traceback" not in r.output
    level = limits.MAX_NESTING + 1
    assert r.stderr.startswith(f"{path}:{level}:1: KV003 block `a` opens level {level}"), r.stderr
    n = limits.MAX_NESTING - 1  # at the limit it formats, once and for all
    path = write(tmp_path, 'deployment "d" {\n' + "a {\n" * n + "}\n" * (n + 1))
    r = run(["fmt", "--check", path])
    assert r.exit_code == 1 and r.stdout == f"would reformat {path}\n"
    text = format_source(Path(path).read_text(), path)
    assert text.count("{") == n + 1 and text.split("\n")[n].strip() == "a {"
    assert format_source(text, path) == text


def test_the_syntax_error_explainer_on_500_nested_blocks_on_one_line(tmp_path: Path) -> None:
    path = write(tmp_path, 'deployment "d" {' + "a {" * 500 + "}" * 500 + " x x }\n")
    r = run(["lint", path])
    assert r.exit_code == 1 and r.stdout.startswith(f"{path}:1:2018: KV003 expected `}}` or end of line")


def test_fmt_keeps_a_comment_after_a_byte_order_mark_on_a_later_line(tmp_path: Path) -> None:
    # the BOM before `# second` made fmt think code preceded it: AssertionError "comment lost"
    path = write(tmp_path, '# first\n\ufeff# second\ndeployment "d" {\n}\n')
    r = run(["fmt", path])
    assert r.exit_code == 0, r.output
    assert Path(path).read_text(encoding="utf-8") == '# first\n# second\ndeployment "d" {\n}\n'


def test_a_suppression_after_a_byte_order_mark_applies_to_the_next_line(tmp_path: Path) -> None:
    # the BOM made the comment look like one trailing code, so it applied to its own, empty line
    body = ('kvplan 1\ndeployment "d" {\n    model = llama-3-8b\n    device = h100-sxm\n'
            'BOM# kvplan: ignore[KV201] asserted elsewhere\n    workload {\n        batch = 1\n        context = 1k\n'
            '    }\n}\n')
    plain = run(["lint", write(tmp_path, body.replace("BOM", ""), "plain.kvp")])
    marked = run(["lint", write(tmp_path, body.replace("BOM", "\ufeff"), "marked.kvp")])
    codes = [[ln.split(" ")[1] for ln in r.stdout.splitlines()] for r in (plain, marked)]
    assert codes[0] == codes[1] == ["KV201", "KV901"]  # the finding, and the suppression of line 6 is unused
    assert "not reported on line 6" in plain.stdout and "not reported on line 6" in marked.stdout


def _config(tmp: Path, name: str, text: str) -> str:
    p = tmp / name
    p.write_text(text, encoding="utf-8")
    return str(p)


def _llama(**changes: Any) -> str:
    return json.dumps({**LLAMA_8B, **changes}, indent=2)


_BIG_CONFIGS: list[tuple[str, Callable[[], str], str]] = [
    ("layers-1e9", lambda: _llama(num_hidden_layers=10**9),
     "'num_hidden_layers' must be an integer between 1 and 1,024 (kvplan's limit, docs/config-json.md), "
     "got 1,000,000,000"),
    ("layers-1e400", lambda: _llama(num_hidden_layers=10**400),
     "'num_hidden_layers' must be an integer between 1 and 1,024 (kvplan's limit, docs/config-json.md), "
     "got a 401-digit number"),
    ("layers-5000-digits", lambda: _llama(num_hidden_layers=0).replace('"num_hidden_layers": 0',
                                                                       '"num_hidden_layers": ' + "9" * 5000),
     "got a 5,000-digit number"),
    ("vocab-1e300", lambda: _llama(vocab_size=10**300),
     "'vocab_size' must be an integer between 1 and 16,777,216 (kvplan's limit, docs/config-json.md), "
     "got a 301-digit number"),
    ("nested", lambda: '{"a": ' + "[" * 5000 + "]" * 5000 + "}", "nests objects and arrays more than 64 levels deep"),
    ("nan", lambda: _llama(rope_theta=0).replace('"rope_theta": 0', '"rope_theta": NaN'),
     "not valid JSON: `NaN` is not a JSON value"),
    ("softcap-1e400", lambda: _llama(attn_logit_softcapping=1.5).replace("1.5", "1e400"),
     "'attn_logit_softcapping' must be a positive number at most 1e+06, or null, got 1e400 (beyond a float's range)"),
]


@pytest.mark.parametrize("name, make, message", _BIG_CONFIGS, ids=[c[0] for c in _BIG_CONFIGS])
def test_config_json_numbers_out_of_range_are_located_errors(tmp_path: Path, name: str,
                                                              make: Callable[[], str], message: str) -> None:
    # num_hidden_layers = 10^9 was a MemoryError, 10^400 and 5,000 digits ValueError/OverflowError,
    # deep nesting a RecursionError; vocab_size = 10^300 was accepted
    text = make()
    cfg = _config(tmp_path, "config.json", text)
    r = run(["map", "--model-config", cfg, "--device", "h100-sxm"])
    assert r.exit_code == 2
    at = re.fullmatch(rf"kvplan: error: {re.escape(cfg)}:(\d+):(\d+): .*\n", r.stderr)
    assert at is not None and message in r.stderr, r.stderr
    # the same file through a spec's model block: KV119 at the `config =` value, the same words
    kvp = write(tmp_path, 'kvplan 1\nmodel "m" {\n    config = "config.json"\n}\n'
                + spec(model="m").replace("kvplan 1\n", ""))
    r = run(["lint", kvp])
    assert r.exit_code == 1 and message in r.stdout, r.stdout
    assert r.stdout.startswith(f"{kvp}:3:14: KV119 cannot use `config.json` (line {at[1]}, column {at[2]}): "), r.stdout


def test_config_json_ranges_admit_every_shipped_config(tmp_path: Path) -> None:
    for p in sorted(HF.glob("*.json")):
        r = run(["map", "--model-config", str(p), "--device", "b200"])
        assert r.exit_code == 0, (p.name, r.output)


@pytest.mark.parametrize("flag, value, message", [
    ("--max-model-len", "9" * 400, "--max-model-len must be a token count between 1 and 1,073,741,824, got a "
                                   "400-digit number"),
    ("--max-model-len", "2g", "--max-model-len must be a token count between 1 and 1,073,741,824, got 2,000,000,000"),
    ("--max-num-seqs", "9" * 5000, "--max-num-seqs must be a whole number between 1 and 1,048,576, got a "
                                   "5,000-digit number"),
    ("--block-size", "2000000000", "--block-size must be a whole number between 1 and 1,073,741,824"),
    ("--kv-transfer-config", "[" * 30_000, "--kv-transfer-config nests more than 64 levels deep (at column 65)"),
    ("--kv-offloading-size", "nan", "--kv-offloading-size takes a finite number of at least 0, got 'nan'"),
])
def test_import_flag_values_out_of_range_are_one_line_errors(flag: str, value: str, message: str) -> None:
    # 400 nines were an OverflowError, 30k `[` a RecursionError, nan an accepted host tier
    line = f"vllm serve meta-llama/Meta-Llama-3.1-8B --max-num-seqs 8 --max-model-len 8k {flag} {value}"
    r = run(["import", "--from", "vllm", line, "--device", "h100-sxm"])
    assert r.exit_code == 2, r.output
    assert r.stderr.startswith(f"kvplan: error: {message}") and r.stderr.count("\n") == 1, r.stderr
    assert len(r.stderr) < 300


def test_import_options_take_the_spec_ranges() -> None:
    line = "vllm serve meta-llama/Meta-Llama-3.1-8B"
    r = run(["import", "--from", "vllm", line, "--device", "h100-sxm", "--batch", "100000000000"])
    assert r.exit_code == 2 and "--batch must be a whole number from 1 to 2^20" in r.stderr
    r = run(["import", "--from", "vllm", line, "--device", "h100-sxm", "--batch", "1048576", "--context", "1073741824"])
    assert r.exit_code == 2 and "the longest sequence the engine admits, 131,072 tokens" in r.stderr, r.output
    r = run(["import", "--from", "vllm", line, "--device", "h100-sxm", "--batch", "1048576", "--context", "131072"])
    assert r.exit_code == 0, r.output
    assert check_source(r.stdout, "i.kvp").ok


def test_trtllm_yaml_numbers_out_of_range(tmp_path: Path) -> None:
    y = tmp_path / "c.yaml"
    for text, words in [(f"max_batch_size: {'9' * 5000}\n", "holds an integer too long to read"),
                        (f"max_seq_len: {'9' * 400}\n", "max_seq_len must be a token count between 1 and"),
                        ("tensor_parallel_size: 5000\n", "tensor_parallel_size must be a whole number between 1 and "
                                                          "4,096, got 5,000"),
                        ("kv_cache_config:\n  host_cache_size: .inf\n", "takes a finite number of at least 0")]:
        y.write_text(text, encoding="utf-8")
        r = run(["import", "--from", "trtllm", str(y), "--model", "llama-3-8b", "--device", "b200"])
        assert r.exit_code == 2 and words in r.stderr, (text[:40], r.stderr)


# ================================================================== fuzz: mutated specs

def _corpus() -> list[str]:
    files = sorted(ROOT.glob("examples/**/*.kvp")) + sorted(ROOT.glob("tests/data/lint/**/*.kvp"))
    files += sorted(ROOT.glob("tests/data/valid/**/*.kvp")) + sorted(ROOT.glob("tests/data/invalid/**/*.kvp"))
    return [p.read_bytes().decode("utf-8", errors="replace") for p in files]


CORPUS = _corpus()
TOKEN = re.compile(r'\s+|"[^"\n]*"|#[^\n]*|[A-Za-z0-9_.\-]+|.', re.S)
# Numbers at, inside and outside every range, and ones no float or int conversion survives.
EDGE_NUMBERS = ["0", "1", "-1", "0.5", "1e308", "1e400", "-1e400", "1e-320", "18446744073709551616", "9" * 400,
                "4096", "4097", "1048576", "1048577", "1073741824", "1073741825", "1Gi", "1Mi", "1M", "1e15", "1e16",
                "nan", "inf", "1e6", "1e9", "1e12", "1e18", "1e19"]


@st.composite
def mutated(draw: st.DrawFn) -> bytes:
    """A shipped or test spec with one token deleted, doubled, swapped, replaced by an edge number,
    or with a long run of one token, deep nesting or raw bytes inserted."""
    toks = TOKEN.findall(draw(st.sampled_from(CORPUS)))
    kind = draw(st.sampled_from(["delete", "double", "swap", "bytes", "long", "nest", "number", "number", "bom"]))
    i = draw(st.integers(0, max(len(toks) - 2, 0)))
    if kind == "delete":
        del toks[i]
    elif kind == "double":
        toks.insert(i, toks[i])
    elif kind == "swap":
        toks[i], toks[i + 1] = toks[i + 1], toks[i]
    elif kind == "long":
        toks.insert(i, draw(st.sampled_from(["9", "x", "# ", '"', "{", "[1, "])) * draw(st.integers(1000, 200_000)))
    elif kind == "nest":
        opener = draw(st.sampled_from(["{", "a {", "[", "a = [", "a { "]))
        toks.insert(i, opener * draw(st.integers(50, 5000)))
    elif kind == "number":
        numbers = [j for j, t in enumerate(toks) if t[:1].isdigit()] or [i]
        toks[draw(st.sampled_from(numbers))] = draw(st.sampled_from(EDGE_NUMBERS))
    elif kind == "bom":
        toks.insert(i, "\ufeff")
    data = "".join(toks).encode("utf-8")
    if kind == "bytes":
        at_byte = draw(st.integers(0, len(data)))
        data = data[:at_byte] + draw(st.binary(min_size=1, max_size=16)) + data[at_byte:]
    return data


@settings(FUZZ, max_examples=1000)
@given(mutated())
def test_mutated_specs_never_crash_lint_or_fmt(data: bytes) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "m.kvp"
        path.write_bytes(data)
        r = run(["lint", str(path)])
        if r.exit_code == 1:
            assert r.stdout.strip(), "exit 1 without a diagnostic"
        f = run(["fmt", "--check", str(path)])
        if f.exit_code == 1 and f.stdout:  # would reformat: the result keeps its meaning and is a fixed point
            text = path.read_bytes().decode("utf-8")
            new = format_source(text, str(path))
            assert format_source(new, str(path)) == new


def test_mutated_specs_through_every_command(tmp_path: Path) -> None:
    """random.Random mutation of the examples, then advise, emit and report on what still lints."""
    rng = random.Random(9)
    examples = [p.read_text(encoding="utf-8") for p in sorted((ROOT / "examples").glob("*.kvp"))]
    # mostly values that pass the checker, so that the planner and the backends see them
    values = ["1", "2", "7", "64", "4096", "1048576", "1e3", "1e6", "1e9", "0.001", "99.99"] + EDGE_NUMBERS
    planned = 0
    for n in range(200):
        toks = TOKEN.findall(rng.choice(examples))
        numbers = [j for j, t in enumerate(toks) if t[:1].isdigit()]
        for j in rng.sample(numbers, k=min(len(numbers), rng.randint(1, 2))):
            toks[j] = rng.choice(values)
        path = write(tmp_path, "".join(toks), f"m{n}.kvp")
        if not check_source(Path(path).read_text(encoding="utf-8"), path).ok:
            run(["lint", path])
            continue
        run(["lint", path])
        planned += 1
        run(["advise", path])
        run(["advise", path, "--format", "json"])
        if n % 3 == 0:
            run(["emit", path, "-o", str(tmp_path / f"e{n}")])
            run(["report", path, "-o", str(tmp_path / f"r{n}")])
    assert planned >= 5  # the fuzz reached the planner, not only the checker


# ================================================================== regression: extreme in-range values in report

_EXTREME = """kvplan 1

model "huge" {{
    config = "config.json"
    params = {params}
}}

device "slow" {{
    memory     = {memory}
    bandwidth  = {bandwidth}
    compute    = {compute}
    partitions = {partitions}
}}

deployment "d" {{
    model   = huge
    device  = slow
    devices = <= 4096
    workload {{
        batch   = {batch}
        context = {context}
        prefix  = {context}
        fanout  = {batch}
        reuse   = 1
    }}
    quality {{
        budget   = aggressive
        eviction = allowed
    }}
    slo {{
        step_time  <= 3600 s
        throughput >= 1e12 tok/s
    }}
    expect {{
        speedup >= 1e6
        step_time <= 3600 s
        throughput <= 1e12 tok/s
        kv_bytes <= 1e18 B
        devices <= 4096
    }}
}}
"""
_CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 512,
           "intermediate_size": 1408, "num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 2,
           "head_dim": 64, "vocab_size": 32000, "max_position_embeddings": 2**30, "torch_dtype": "bfloat16"}


@pytest.mark.parametrize("values", [
    # every value at its limit: `params = 1000T` on 1 MB, 1 MB/s, 1 GFLOPS, 2^20-partition devices, batch
    # 2^20 at 2^30 tokens. report's regime-map figure passed matplotlib a y limit of 10**20, a Python
    # int numpy cannot hold: "internal error: TypeError: ufunc 'isfinite' not supported".
    dict(params="1000T", memory="1 MB", bandwidth="1 MB/s", compute="1 GFLOPS", partitions="1048576",
         batch="1048576", context="1024Mi"),
    # the other corner: a one-parameter model on the largest devices, batch 1 at one token
    dict(params="1", memory="1000 TB", bandwidth="1000 TB/s", compute="1e18 FLOPS", partitions="1",
         batch="1", context="1"),
    dict(params="1000T", memory="1000 TB", bandwidth="1000 TB/s", compute="1e18 FLOPS", partitions="1",
         batch="1", context="1024Mi"),
    dict(params="1", memory="1 MB", bandwidth="1 MB/s", compute="1 GFLOPS", partitions="1048576",
         batch="1048576", context="1"),
])
def test_every_command_plans_a_spec_at_the_corners_of_its_ranges(tmp_path: Path, values: dict[str, str]) -> None:
    (tmp_path / "config.json").write_text(json.dumps(_CONFIG), encoding="utf-8")
    path = write(tmp_path, _EXTREME.format(**values))
    assert check_source(Path(path).read_text(encoding="utf-8"), path).ok  # in range: the planner sees it
    for args in (["lint", path], ["advise", path], ["advise", path, "--format", "json"],
                 ["advise", path, "--format", "markdown"], ["emit", path, "-o", str(tmp_path / "e")],
                 ["sweep", path]):
        run(args)
    r = run(["report", path, "-o", str(tmp_path / "r")])
    assert r.exit_code in (0, 1), r.output
    figures = sorted((tmp_path / "r").rglob("*.svg"))
    assert figures, r.output  # the regime map was drawn, not skipped
    for f in sorted((tmp_path / "r").rglob("*.md")):
        text = _QUOTED.sub("", f.read_text(encoding="utf-8"))
        assert _NONFINITE.search(text) is None, (f, _NONFINITE.search(text))


# ================================================================== fuzz: edge values of every field

_KEYS: dict[str, list[str]] = {
    # deployment-level
    "devices": ["1", "8", "4096", "4097", "<= 4096", "<= 4097", "auto", "1e12", "0"],
    "batch": ["1", "64", "1048576", "1048577", "1e308", "0", "[1, 1048576]"],
    "context": ["1", "128k", "1Gi", "1073741825", "1e308", "18446744073709551616", "[1, 1Gi]"],
    "prefix": ["0", "1", "1k", "1Gi", "1e308"],
    "fanout": ["1", "8", "1048576", "1048577"],
    "reuse": ["0", "60%", "1", "1e308"],
    "block_size": ["1", "16", "1Gi", "1073741825", "1e308"],
    "pdevices": ["1", "4096", "4097"],
    "step_time": ["1 us", "0.5 us", "50 ms", "3600 s", "3601 s", "1e308 s"],
    "throughput": ["1 tok/s", "1e12 tok/s", "1.1e12 tok/s", "1e-300 tok/s"],
    "memory": ["1 MB", "0.9 MB", "80 GB", "1000 TB", "1001 TB"],
    "bandwidth": ["1 MB/s", "3.35 TB/s", "1000 TB/s", "1e308 B/s"],
    "compute": ["1 GFLOPS", "989 TFLOPS", "1000000 TFLOPS", "1e308 FLOPS"],
    "partitions": ["1", "2", "1048576", "1048577"],
    "expect": ["kv_bytes <= 1e18 B", "kv_bytes <= 1e19 B", "speedup >= 1000000", "speedup >= 1e7",
               "devices <= 4096", "step_time <= 1e308 s", "fits"],
    "model": ["llama-3-8b", "llama-3-70b", "deepseek-v3", "qwen3-8b"],
    "engine": ["any", "vllm", "sglang", "trtllm"],
}


@st.composite
def edge_spec(draw: st.DrawFn) -> str:
    v = {k: draw(st.sampled_from(vals)) for k, vals in _KEYS.items()}
    on_custom = draw(st.booleans())
    device = "g" if on_custom else draw(st.sampled_from(["h100-sxm", "b200", "mi300x"]))
    return (f'kvplan 1\n\ndevice "g" {{\n    memory = {v["memory"]}\n    bandwidth = {v["bandwidth"]}\n'
            f'    compute = {v["compute"]}\n    partitions = {v["partitions"]}\n}}\n\n'
            f'deployment "d" {{\n    model = {v["model"]}\n    device = {device}\n    devices = {v["devices"]}\n'
            f'    engine = {v["engine"]}\n'
            f'    workload {{\n        batch = {v["batch"]}\n        context = {v["context"]}\n'
            f'        prefix = {v["prefix"]}\n        fanout = {v["fanout"]}\n        reuse = {v["reuse"]}\n    }}\n'
            f'    quality {{\n        budget = aggressive\n    }}\n'
            f'    slo {{\n        step_time <= {v["step_time"]}\n        throughput >= {v["throughput"]}\n    }}\n'
            f'    pin {{\n        block_size = {v["block_size"]}\n        devices = {v["pdevices"]}\n    }}\n'
            f'    expect {{\n        {v["expect"]}\n    }}\n}}\n')


@settings(FUZZ, max_examples=500)
@given(edge_spec(), st.sampled_from(["advise", "emit", "report", "advise-json"]))
def test_edge_values_of_every_field(text: str, command: str) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        path = write(Path(d), text)
        result = check_source(text, path)
        r = run(["lint", path])
        if not result.ok:
            assert r.exit_code == 1
            return
        # every value in range: each number the checker accepted lies inside its limits
        for sc in result.scenarios:
            assert 1 <= sc.batch <= limits.MAX_BATCH and 1 <= sc.context <= limits.MAX_TOKENS
            assert 1 <= sc.devices.n <= limits.MAX_DEVICES
        args = {"advise": ["advise", path], "advise-json": ["advise", path, "--format", "json"],
                "emit": ["emit", path, "-o", str(Path(d) / "out")],
                "report": ["report", path, "-o", str(Path(d) / "out")]}[command]
        run(args)


# ================================================================== fuzz: engine command lines and YAML

_ENGINE_LINES = {
    "vllm": ["vllm serve meta-llama/Meta-Llama-3.1-70B --kv-cache-dtype fp8 --block-size 16 --enable-prefix-caching "
             "-tp 4 --max-model-len 32k --max-num-seqs 64 --swap-space 4 --gpu-memory-utilization 0.9 --port 8000",
             "vllm serve meta-llama/Meta-Llama-3.1-8B --max-num-seqs 8 --max-model-len 8K --kv-offloading-size 16 "
             "--kv-transfer-config '{\"kv_connector\":\"OffloadingConnector\",\"kv_role\":\"kv_both\"}'"],
    "sglang": ["python -m sglang.launch_server --model-path meta-llama/Meta-Llama-3.1-8B --page-size 16 "
               "--context-length 32768 --max-running-requests 32 --tp-size 2 --enable-hierarchical-cache "
               "--mem-fraction-static 0.85"],
    "trtllm": ["trtllm-serve meta-llama/Meta-Llama-3.1-8B --max_batch_size 16 --max_seq_len 16384 --tp_size 2 "
               "--pp_size 1"],
}
_FLAG_VALUES = ["1", "0", "-1", "4096", "4097", "1048577", "1e9", "9" * 400, "nan", "inf", "1K", "1Ki", "2g", "1.5k",
                "1_024", "", "[" * 300, '{"kv_connector": ' * 80,
                '{"kv_connector":"OffloadingConnector","a":' + "9" * 5000 + "}", "x" * 5000, "--", "'", "\\"]


def _mangle(rng: random.Random, line: str) -> str:
    import shlex

    words = shlex.split(line)
    for _ in range(rng.randint(1, 4)):
        op = rng.choice(["value", "value", "value", "drop", "double", "flag"])
        values = [j for j, w in enumerate(words) if j > 0 and not w.startswith("-")]
        if op == "value" and values:
            words[rng.choice(values)] = rng.choice(_FLAG_VALUES)
        elif op == "drop" and len(words) > 2:
            del words[rng.randrange(1, len(words))]
        elif op == "double":
            j = rng.randrange(len(words))
            words.insert(j, words[j])
        elif op == "flag":
            words += [rng.choice(["-tp", "-pp", "--max-num-seqs", "--block-size", "--page-size", "--tp-size",
                                  "--max_seq_len", "--kv-transfer-config", "--max-model-len", "--context-length",
                                  "--unknown-flag"]), rng.choice(_FLAG_VALUES)]
    return " ".join(shlex.quote(w) for w in words)


def test_mangled_engine_command_lines(tmp_path: Path) -> None:
    """Whatever import accepts, lint accepts within its ranges: no imported spec fails on a range."""
    rng = random.Random(2026)
    written = 0
    for n in range(400):
        engine = rng.choice(sorted(_ENGINE_LINES))
        line = _mangle(rng, rng.choice(_ENGINE_LINES[engine]))
        out = tmp_path / f"i{n}.kvp"
        extra = ["--batch", rng.choice(["4", "1048577", "0"])] if rng.random() < 0.2 else []
        r = run(["import", "--from", engine, line, "--device", "h100-sxm", "-o", str(out), *extra])
        if r.exit_code != 0:
            continue
        written += 1
        lint = run(["lint", str(out)])
        assert lint.exit_code in (0, 1)
        assert not re.search(r": KV1(08|09) ", lint.stdout), (line, lint.stdout)
    assert written >= 20


_YAML_VALUES: list[Any] = [1, 0, -1, 4096, 4097, 10**30, 10**400, 1e400, "nan", ".inf", True, None, "32k", "1Ki", [],
                           {}, "x" * 300]


def test_mangled_trtllm_yaml(tmp_path: Path) -> None:
    import yaml

    rng = random.Random(7)
    keys = ["max_batch_size", "max_seq_len", "tensor_parallel_size", "pipeline_parallel_size", "tp_size",
            "max_num_tokens", "unknown_key"]
    kv_keys = ["dtype", "tokens_per_block", "enable_block_reuse", "host_cache_size", "free_gpu_memory_fraction"]
    for n in range(150):
        cfg: dict[str, Any] = {k: rng.choice(_YAML_VALUES) for k in rng.sample(keys, rng.randint(1, 4))}
        if rng.random() < 0.5:
            cfg["kv_cache_config"] = {k: rng.choice(_YAML_VALUES + ["fp8", "auto"]) for k in rng.sample(kv_keys, 2)}
        text = yaml.safe_dump({k: (str(v) if isinstance(v, int) and abs(v) > 10**18 else v) for k, v in cfg.items()})
        if rng.random() < 0.3:  # a huge integer as YAML reads it, unquoted
            text += f"max_batch_size: {rng.choice(['9' * 5000, '9' * 400, '1' + '0' * 30])}\n"
        if rng.random() < 0.1:
            text = "a: " + "[" * 2000 + "]" * 2000 + "\n"
        y = tmp_path / f"c{n}.yaml"
        y.write_text(text, encoding="utf-8")
        out = tmp_path / f"c{n}.kvp"
        r = run(["import", "--from", "trtllm", str(y), "--model", "llama-3-8b", "--device", "b200", "-o", str(out)])
        if r.exit_code == 0:
            lint = run(["lint", str(out)])
            assert not re.search(r": KV1(08|09) ", lint.stdout), (text[:200], lint.stdout)


# ================================================================== fuzz: config.json

_JSON_VALUES: list[Any] = [0, 1, -1, 2, 7, 64, 1024, 1025, 2**24, 2**24 + 1, 10**9, 10**30, 10**31, 10**300, 0.5,
                           1e308, None, True, False, "12", [], {}, [1, 2], {"a": 1}]


def test_mangled_config_json(tmp_path: Path) -> None:
    rng = random.Random(42)
    configs = [json.loads(p.read_text(encoding="utf-8")) for p in sorted(HF.glob("*.json"))]
    for n in range(300):
        cfg = dict(rng.choice(configs))
        ints = [k for k, v in cfg.items() if isinstance(v, (int, float)) and not isinstance(v, bool)]
        for k in rng.sample(ints, k=min(len(ints), rng.randint(1, 3))):
            cfg[k] = rng.choice(_JSON_VALUES)
        if rng.random() < 0.2 and ints:
            del cfg[rng.choice(ints)]
        text = json.dumps(cfg, indent=2)
        r = rng.random()
        if r < 0.1:
            k = rng.choice(ints or ["num_hidden_layers"])
            text = text.replace(f'"{k}": ', f'"{k}": ' + "9" * rng.choice([400, 4301, 6000]) + ", \"_x\": ", 1)
        elif r < 0.15:
            text = text.replace("{", "{" + '"n": ' + "[" * rng.choice([65, 1000, 20000]) + "]" * 20000 + ",", 1)
        elif r < 0.2:
            text = text.replace(": 1", ": NaN", 1).replace(": 2", ": -Infinity", 1)
        path = _config(tmp_path, f"c{n}.json", text)
        m = run(["map", "--model-config", path, "--device", "b200"])
        if m.exit_code == 2:
            assert m.stderr.startswith(f"kvplan: error: {path}"), m.stderr
        if n % 4 == 0:
            kvp = write(tmp_path, 'kvplan 1\nmodel "m" {\n    config = "' + Path(path).name + '"\n}\n'
                        + spec(model="m").replace("kvplan 1\n", ""), f"c{n}.kvp")
            lint = run(["lint", kvp])
            if lint.exit_code == 0 or "KV119" not in lint.stdout:
                run(["advise", kvp])


# ================================================================== fuzz: crafted command-line arguments

_ARG_VALUES = ["0", "1", "-1", "4096", "1e12", "1e400", "nan", "inf", "-inf", "9" * 400, "1k", "128k", "1Gi", "x",
               "", "0.5", "1..8", "1..1000000000", "1,2,4", "bf16", "fp8", "nope"]
# Not given to map and sweep: their options' ranges (`map --context 1e400`, `map --batch` of 400 nines,
# both internal errors today) belong to issue 9's option-type item, with its own tests.
_HUGE_ARGS = frozenset({"1e12", "1e400", "nan", "inf", "-inf", "9" * 400, "1..1000000000"})
# Values each option takes, so that runs also get past click's own checks.
_GOOD_VALUES = {"--devices": ["1", "2", "8", "64", "4096", "1,2,4", "1..8"], "--tp": ["1", "2", "8"],
                "--batch": ["1", "32", "1048576", "1..64:x2"], "--context": ["1", "128k", "1Mi", "1073741824"],
                "--weights": ["bf16", "fp8", "int4"], "--kv-dtype": ["bf16", "fp8", "int2", "bf16,fp8"],
                "--reserve": ["0", "0.5", "0.99"], "--min-gain": ["1", "1.5", "1000"],
                "--prefill-efficiency": ["0.01", "1"], "--scenario": ["chat-70b", "chat"],
                "--select": ["KV1", "KV2,KV3"], "--ignore": ["KV201"], "--fail-on": ["error", "warning", "info"]}


def test_crafted_command_line_arguments(tmp_path: Path) -> None:
    """Each command with options set to odd values. Only the base laws: what an option accepts is
    checked by its own type (issue 9's option-type item), a printed `nan` by its own tests."""
    rng = random.Random(5)
    example = str(ROOT / "examples" / "w2-batch32.kvp")
    commands: dict[str, tuple[list[str], list[str]]] = {
        "map": (["--model", "llama-3-8b", "--device", "h100-sxm"],
                ["--devices", "--tp", "--batch", "--context", "--weights", "--kv-dtype"]),
        "advise": ([example], ["--reserve", "--min-gain", "--prefill-efficiency", "--scenario"]),
        "sweep": (["--model", "llama-3-8b", "--device", "h100-sxm"], ["--devices", "--batch", "--kv-dtype"]),
        "lint": ([example], ["--select", "--ignore", "--fail-on"]),
    }
    for _ in range(400):
        name = rng.choice(sorted(commands))
        base, options = commands[name]
        args = [name, *base]
        for opt in rng.sample(options, k=rng.randint(1, min(3, len(options)))):
            odd = [v for v in _ARG_VALUES if name not in ("map", "sweep") or v not in _HUGE_ARGS]
            args += [opt, rng.choice(odd if rng.random() < 0.4 else _GOOD_VALUES[opt])]
        run(args, finite=False)
