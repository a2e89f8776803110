"""Outputs and docs cite only what ships: every file a printed line or a docs page names exists.

A user has the package, the repository's docs/ and the catalog's upstream sources; the project's
internal specification (SPEC, LANGUAGE.md, STYLE.md, shared/reference/...) is not theirs. This runs
every command on every example in every format, collects what it prints and writes, and checks each
reference to a Markdown file: it exists in the repository, and a `§N` / `§ Name` after it names a
heading of that page. Upstream paths are written `owner/repo:path` and are not repository files.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Iterator

import pytest
from click.testing import CliRunner

from kvplan.cli import main
from tests.paths import ROOT

# Slow: runs every command on every example to collect what they cite (about 13 s).
# The default `python -m pytest` leaves it out; --run-slow and CI run it.
pytestmark = pytest.mark.slow

EXAMPLES = sorted((ROOT / "examples").glob("*.kvp"))
DOCS = sorted((ROOT / "docs").rglob("*.md"))

#: Names of documents a user does not have. Bare `engines.md` / `devices.md` / `quality.md` are the
#: project's reference pages (the shipped ones are docs/engines.md, docs/catalog.md,
#: docs/quality-evidence.md).
UNSHIPPED = re.compile(r"\bSPEC\b|LANGUAGE\.md|STYLE\.md|shared/|(?<![\w/:.-])(?:engines|devices|quality)\.md")
#: In docs/, `[engines.md](engines.md)` is a link to the shipped page beside it; a bare name that is
#: not beside the page is caught by the existence check instead.
UNSHIPPED_IN_DOCS = re.compile(r"\bSPEC\b|LANGUAGE\.md|STYLE\.md|shared/")
#: A Markdown file name as a path; `owner/repo:path.md` (an upstream file) is not matched.
#: An upstream file written as a quoted path after its repository (`jy-yuan/KIVI \`docs/long_bench.md\``)
#: or after an engine's name (`vLLM \`docs/features/...\``), as the quality catalog's cells do.
UPSTREAM_BEFORE = re.compile(r"(?:[\w.-]+/[\w.-]+|vLLM|SGLang|LMCache|FlashInfer|TensorRT-LLM)\s+`?$")
MD_REF = re.compile(r"(?<![\w:/.#-])((?:\.\./)?(?:[\w.-]+/)*[\w.-]+\.md)\b(?:\s*§\s*([^\s),;:]+(?: [\w.]+)?))?")


def _invoke(*args: str) -> str:
    res = CliRunner().invoke(main, list(args))
    assert res.exit_code in (0, 1, 2), (args, res.output)
    if res.exception is not None and not isinstance(res.exception, SystemExit):
        raise res.exception
    out = res.output
    assert not re.search(r"^Error: (No such|Missing|Invalid value|Got unexpected)", out, re.M), (args, out)
    try:
        out += res.stderr
    except (ValueError, AttributeError):  # click < 8.2 mixes stderr into output
        pass
    return out


def _outputs(tmp: Path) -> Iterator[tuple[str, str, Path]]:
    """(what ran, text, the directory relative names resolve against)."""
    yield "--help", _invoke("--help"), ROOT
    for cmd in sorted(main.commands):  # type: ignore[attr-defined]
        yield f"{cmd} --help", _invoke(cmd, "--help"), ROOT
    for fmt in ("text", "json"):
        yield f"models {fmt}", _invoke("models", "--format", fmt), ROOT
        yield f"devices {fmt}", _invoke("devices", "--format", fmt), ROOT
    for fmt in ("text", "markdown", "json"):
        yield f"tables {fmt}", _invoke("tables", "--format", fmt), ROOT
    for args in (("--model", "llama-3-70b", "--device", "b200", "--batch", "32", "--context", "128k"),
                 ("--model", "deepseek-v3", "--device", "mi300x", "--devices", "8", "--batch", "8", "--context", "32k"),
                 ("--model", "gemma-2-9b", "--device", "h100-sxm")):
        for fmt in ("text", "json"):
            yield f"map {' '.join(args)} {fmt}", _invoke("map", *args, "--format", fmt), ROOT
    for lint_fmt in ("concise", "full", "json", "github", "sarif"):
        yield f"lint examples {lint_fmt}", _invoke("lint", str(ROOT / "examples"), "--output-format", lint_fmt), ROOT
        yield (f"lint invalid {lint_fmt}",
               _invoke("lint", str(ROOT / "tests" / "data" / "invalid"), "--output-format", lint_fmt), ROOT)
    for spec in EXAMPLES:
        s = str(spec)
        for fmt in ("text", "markdown", "json"):
            yield f"advise {spec.name} {fmt}", _invoke("advise", s, "--format", fmt), ROOT
        yield f"emit {spec.name}", _invoke("emit", s, "--target", "all"), ROOT
        out = tmp / spec.stem
        yield f"report {spec.name}", _invoke("report", s, "-o", str(out / "report")), ROOT
        yield f"emit -o {spec.name}", _invoke("emit", s, "--target", "all", "-o", str(out / "emit")), ROOT
        for f in sorted(out.rglob("*")):
            if f.is_file() and f.suffix in (".md", ".sh", ".yaml", ".json", ".txt", ".py", ".env"):
                yield f"{spec.name}: {f.relative_to(out)}", f.read_text(encoding="utf-8"), f.parent
        for fmt in ("json", "csv"):
            yield f"sweep {spec.name} {fmt}", _invoke("sweep", s, "--format", fmt), ROOT
        yield f"fmt --diff {spec.name}", _invoke("fmt", "--check", "--diff", s), ROOT
    yield ("import vllm", _invoke("import", "--from", "vllm", "vllm serve meta-llama/Meta-Llama-3.1-70B "
                                  "--kv-cache-dtype fp8 -tp 4 --max-model-len 128k", "--device", "b200"), ROOT)
    yield ("import sglang", _invoke("import", "--from", "sglang", "python -m sglang.launch_server --model-path "
                                    "Qwen/Qwen3-8B --kv-cache-dtype fp8_e4m3 --tp-size 2 --context-length 32768",
                                    "--device", "h100", "--batch", "8"), ROOT)
    config = tmp / "trtllm.yaml"
    config.write_text("kv_cache_config:\n  dtype: fp8\n  free_gpu_memory_fraction: 0.85\n"
                      "tensor_parallel_size: 2\nmax_seq_len: 32768\n", encoding="utf-8")
    yield ("import trtllm", _invoke("import", "--from", "trtllm", f"trtllm-serve meta-llama/Meta-Llama-3.1-8B "
                                    f"--config {config}", "--device", "h100", "--batch", "8"), ROOT)


def _headings(page: Path) -> list[str]:
    return [line.lstrip("#").strip() for line in page.read_text(encoding="utf-8").splitlines()
            if line.startswith("#")]


def _prose(markdown: str) -> str:
    """A docs page without its fenced blocks: those show commands and what they print, whose file
    names (`rationale/w2-batch32/index.md`) are outputs; the printed text itself is checked above."""
    return re.sub(r"^```.*?^```", "", markdown, flags=re.S | re.M)


def problems(text: str, base: Path, *, markdown: bool = False) -> list[str]:
    """What in `text` names a file that does not ship, or a section its page does not have."""
    unshipped = UNSHIPPED_IN_DOCS if markdown else UNSHIPPED
    out = [f"cites {m.group(0)!r}, which a user does not have" for m in unshipped.finditer(text)]
    if markdown:  # the page's code blocks show kvplan's output, which names no bare reference page
        shown = "\n".join(re.findall(r"^```.*?^```", text, flags=re.S | re.M))
        out += [f"shows {m.group(0)!r}, which a user does not have" for m in UNSHIPPED.finditer(shown)]
    text = _prose(text) if markdown else text
    for m in MD_REF.finditer(text):
        name, section = m.group(1), m.group(2)
        if UPSTREAM_BEFORE.search(text[max(0, m.start() - 60):m.start()]):
            continue
        if text.startswith("](", m.end(1)):  # a link's text: its target, after it, is checked
            continue
        page = next((p for p in (ROOT / name, base / name) if p.is_file()), None)
        if page is None:
            out.append(f"names {name}, which is not in the repository")
            continue
        if section is None or page.suffix != ".md":
            continue
        heads = _headings(page)
        number = re.match(r"(\d+)", section)
        if number:
            for n in re.findall(r"\d+", section.split()[0]):
                if not any(h.startswith(f"{n}.") for h in heads):
                    out.append(f"cites {name} §{n}, which has no section {n}")
        elif not any(h.startswith(section.strip()) for h in heads):
            out.append(f"cites {name} § {section}, which has no such heading")
    return out


@pytest.fixture(scope="module")
def outputs(tmp_path_factory: Any) -> list[tuple[str, str, Path]]:
    return list(_outputs(tmp_path_factory.mktemp("cite")))


def test_every_printed_output_cites_only_shipped_files(outputs: list[tuple[str, str, Path]]) -> None:
    assert len(outputs) > 100
    bad = [f"{what}: {p}" for what, text, base in outputs for p in sorted(set(problems(text, base)))]
    assert not bad, "\n".join(bad[:40])


@pytest.mark.parametrize("page", DOCS, ids=[str(p.relative_to(ROOT)) for p in DOCS])
def test_docs_cite_only_shipped_files(page: Path) -> None:
    bad = problems(page.read_text(encoding="utf-8"), page.parent, markdown=True)
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("path", [ROOT / "README.md", *EXAMPLES, *sorted((ROOT / "kvplan" / "catalog").glob("*.toml"))],
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_readme_examples_and_catalog_cite_only_shipped_files(path: Path) -> None:
    bad = problems(path.read_text(encoding="utf-8"), path.parent, markdown=path.suffix == ".md")
    assert not bad, "\n".join(bad)


def test_the_checker_catches_what_it_is_for() -> None:
    """The checks above cannot pass vacuously: each kind of bad citation is caught."""
    assert problems("derived (SPEC §4)", ROOT)
    assert problems("engines.md § vLLM 0.33.0", ROOT)
    assert problems("see ../shared/reference/devices.md [5]", ROOT)
    assert problems("docs/nowhere.md", ROOT)
    assert problems("docs/model.md §42", ROOT)
    assert problems("docs/engines.md § vLLM 9.9", ROOT)
    assert not problems("docs/model.md §4, §7 and docs/engines.md § vLLM 0.33.0", ROOT)
    assert not problems("ROCm/ROCm:docs/conceptual/gpu-arch/mi300.md peak table", ROOT)
    assert not problems("authors' repo jy-yuan/KIVI `docs/long_bench.md` @876b4d2", ROOT)
    assert problems("see `docs/long_bench.md`", ROOT)
    assert problems("```\n  memory  192 GB  reported  devices.md [5]: 192 GB\n```\n", ROOT, markdown=True)
    assert not problems("[engines.md](engines.md)", ROOT / "docs", markdown=True)
