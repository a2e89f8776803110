"""advise and emit print what `kvplan lint` reports at warning and above, each with its help inline, and a spec
with errors gets each error's fix, not only "run kvplan lint" (issue 19 item 5)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from kvplan.cli import main
from tests.acceptance.test_service import _applied
from tests.paths import DATA

CONTEXT_128K = """kvplan 1

deployment "d" {
    model  = llama-3-8b
    device = h100-sxm

    workload {
        batch   = 8
        context = 128K
    }
}
"""

SPECS = {"context-128K.kvp": CONTEXT_128K,
         **{p.name: p.read_text() for p in (DATA / "emit" / "pipeline.kvp", DATA / "valid" / "pins-and-quality.kvp",
                                             DATA / "valid" / "units-glued-and-spaced.kvp")}}


def lint_json(spec: Path) -> list[dict[str, object]]:
    r = CliRunner().invoke(main, ["lint", "--output-format", "json", str(spec)])
    found: list[dict[str, object]] = json.loads(r.stdout)["diagnostics"]
    return [d for d in found if d["severity"] in ("warning", "error")]


def said(d: dict[str, object]) -> str:
    return f"{d['code']} {d['message']}" + (f" (help: {d['help']})" if d.get("help") else "")


@pytest.mark.parametrize("name", sorted(SPECS))
@pytest.mark.parametrize("command", ["advise", "emit"])
def test_advise_and_emit_print_what_lint_reports(name: str, command: str, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # no pyproject.toml above: lint's default settings, for all three commands
    spec = tmp_path / name
    spec.write_text(SPECS[name])
    want = lint_json(spec)
    assert want, "a spec lint warns about"
    r = CliRunner().invoke(main, [command, str(spec)])
    assert r.exit_code in (0, 1), r.output
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith(f"{spec}:")]
    for d in want:
        assert f"{spec}:{d['range']['start']['line']}:{d['range']['start']['column']}: {said(d)}" in lines  # type: ignore[index]
    assert len(lines) == len(want)  # nothing lint does not report (its infos are lint's own)


def test_a_suppressed_warning_is_not_printed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    spec = tmp_path / "s.kvp"
    spec.write_text(CONTEXT_128K.replace("context = 128K", "context = 128K  # kvplan: ignore[KV125] kvplan's reading"))
    assert lint_json(spec) == []
    r = CliRunner().invoke(main, ["advise", str(spec)])
    assert r.exit_code == 0 and "KV125" not in r.stderr


def test_a_spec_with_an_error_gets_the_fix_lint_gives(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    spec = tmp_path / "e.kvp"
    spec.write_text(CONTEXT_128K.replace("h100-sxm", "h100-sx"))
    want = lint_json(spec)
    assert {d["code"] for d in want} == {"KV112", "KV125"}
    for command in ("advise", "emit"):
        r = CliRunner().invoke(main, [command, str(spec)])
        assert r.exit_code == 2
        for d in want:
            assert said(d) in r.stderr
        assert "did you mean `h100-sxm`?" in r.stderr
    # the fix works: applied as lint applies it, advise plans
    r = CliRunner().invoke(main, ["lint", "--output-format", "json", str(spec)])
    (fix,) = next(d for d in json.loads(r.stdout)["diagnostics"] if d["code"] == "KV112")["fixes"]
    spec.write_text(_applied(spec.read_text(), fix))
    r = CliRunner().invoke(main, ["advise", str(spec)])
    assert r.exit_code == 0 and "plan for d" in r.stdout
