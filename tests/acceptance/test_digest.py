"""The plan digest covers every input that changes the plan, and nothing that does not.

`lint --check-digest` (KV401) compares the digest in each emitted file's header with the digest of
the plan the spec gives now, so a digest that misses an input passes stale configs, and one that
sees more than the plan reports stale configs that are not.
"""

from __future__ import annotations

import json
import os
import re
import resource
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from kvplan.cli import main
from kvplan.lang import check_source
from kvplan.planner import plans_for
from tests.paths import ROOT

# ------------------------------------------------------------------ lint --check-digest regressions

PREFIX_SPEC = """kvplan 1

deployment "chat" {
    model   = llama-3-70b
    device  = b200
    devices = 8
    engine  = vllm

    workload {
        batch   = 32
        context = 128k
        fanout  = 8
    }

    quality {
        budget = lossless
    }

    expect {
        regime == kv-bound
    }
}
"""


def emit_then(tmp_path: Path, text: str, *extra: str) -> Path:
    spec = tmp_path / "s.kvp"
    spec.write_text(text)
    # the spec's plan does not fit 8 B200s: written anyway, the digest is what these tests are about
    r = CliRunner().invoke(main, ["emit", str(spec), "-o", str(tmp_path / "s.kvplan"), "--allow-unmet", *extra])
    assert r.exit_code in (0, 1), r.output
    return spec


def check_digest(spec: Path) -> Any:
    return CliRunner().invoke(main, ["lint", "--check-digest", str(spec)])


def test_adding_a_prefix_makes_the_emitted_config_stale(tmp_path: Path) -> None:
    """The prefix changes σ and so the KV bytes the config is sized for, not the choices: a digest
    of the choices alone passed the stale vllm.sh."""
    spec = emit_then(tmp_path, PREFIX_SPEC)
    assert "KV401" not in check_digest(spec).stdout
    spec.write_text(PREFIX_SPEC.replace("fanout  = 8", "fanout  = 8\n        prefix  = 96k"))
    r = check_digest(spec)
    assert r.exit_code == 1 and "KV401" in r.stdout and "vllm.sh" in r.stdout


def advised_pins(p: Any) -> str:
    return ("    pin {\n" + "".join(f"        {x}\n" for x in (
        f"kv_dtype       = {p.kv_dtype.id}", f"retention      = {p.retention:g}", f"block_size     = {p.block_size}",
        f"prefix_caching = {'on' if p.prefix_caching else 'off'}", f"tier           = {p.tier.tier}",
        f"placement      = {p.placement}", f"devices        = {p.n_devices}")) + "    }\n")


SINGLE = ["examples/w1-batch1.kvp", "examples/w2-batch32.kvp", "examples/w3-shared-prefix.kvp",
          "examples/w4-reuse.kvp",
          *sorted(f"tests/data/emit/{f.name}" for f in (ROOT / "tests/data/emit").glob("*.kvp"))]


@pytest.mark.parametrize("example", SINGLE)
def test_pinning_every_advised_choice_keeps_the_digest(example: str, tmp_path: Path) -> None:
    """advise → pin every advised choice → the same digest, and no KV401 for the configs emitted
    before (a pinned `tier = none` gave tier bytes 0 where the plan had none)."""
    text = (ROOT / example).read_text()
    spec = emit_then(tmp_path, text)
    (p0,) = plans_for(check_source(text, str(spec)))
    text = re.sub(r"\n\s*pin \{[^}]*\}\n", "\n", text)
    i = text.rindex("}")
    pinned = text[:i] + advised_pins(p0) + text[i:]
    spec.write_text(pinned)
    after = plans_for(check_source(pinned, str(spec)))[0]
    assert after.digest == p0.digest
    r = check_digest(spec)
    # The files of the spec's plan stay current. A target written from another engine's own plan
    # (`# planned for`, kvplan/app/replan.py) may not: the pins now bind that plan too (SGLang's
    # default 1-token pages become the pinned 16), so emit would write it anew.
    stale = re.findall(r"KV401 (\S+) ", r.stdout)
    assert all("# planned for " in Path(f).read_text() for f in stale), r.stdout


def test_emit_overrides_are_in_the_header_and_checked_with_the_same_overrides(tmp_path: Path) -> None:
    spec = emit_then(tmp_path, PREFIX_SPEC, "--runtime-reserve", "4GiB")
    (script,) = (tmp_path / "s.kvplan").rglob("vllm.sh")
    assert re.search(r"· overrides runtime_reserve=4294967296 · vLLM", script.read_text())
    assert "KV401" not in check_digest(spec).stdout  # planned again with the header's reserve
    plain = plans_for(check_source(PREFIX_SPEC, str(spec)))[0]
    assert plain.digest not in script.read_text()  # the reserve is an input of the plan
    spec.write_text(PREFIX_SPEC.replace("batch   = 32", "batch   = 16"))
    assert "KV401" in check_digest(spec).stdout


# ------------------------------------------------------------------ the emitted folder is read as any input is

def _lint_digest_child(spec: Path) -> subprocess.CompletedProcess[str]:
    """`kvplan lint --check-digest` in a child process with a timeout and 4 GiB of address space: on main a link
    to /dev/zero in the folder was read until memory ran out (7.6 GB) and a FIFO blocked the read forever."""

    def cap() -> None:  # pragma: no cover - runs in the child
        resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))

    return subprocess.run([sys.executable, "-m", "kvplan", "lint", "--check-digest", "--output-format", "json",
                           spec.name], cwd=spec.parent, capture_output=True, text=True, timeout=120,
                          preexec_fn=cap, env={**os.environ, "HF_HUB_OFFLINE": "1"})


@pytest.mark.skipif(not hasattr(os, "mkfifo") or not os.path.exists("/dev/zero"), reason="POSIX FIFOs and devices")
def test_links_fifos_devices_and_huge_files_in_the_emitted_folder_are_findings_not_reads(tmp_path: Path) -> None:
    spec = emit_then(tmp_path, PREFIX_SPEC)
    folder = tmp_path / "s.kvplan"
    assert sorted(p.name for p in folder.iterdir()) == ["chat"]
    (folder / "chat" / "zero.sh").symlink_to("/dev/zero")
    os.mkfifo(folder / "chat" / "pipe.sh")
    (folder / "huge.yaml").write_bytes(b"# kvplan 0.1.0\n" + b" " * (2 << 20))
    (folder / "outside").symlink_to(tmp_path, target_is_directory=True)
    try:
        res = _lint_digest_child(spec)
    except subprocess.TimeoutExpired:
        pytest.fail("lint --check-digest blocked on a FIFO in the emitted folder")
    assert res.returncode == 1 and "Traceback" not in res.stderr, res.stderr
    found = {d["message"].split(" ", 1)[0]: d for d in json.loads(res.stdout)["diagnostics"] if d["code"] == "KV401"}
    assert set(found) == {"s.kvplan/chat/zero.sh", "s.kvplan/chat/pipe.sh", "s.kvplan/huge.yaml", "s.kvplan/outside"}
    assert all(d["path"] == "s.kvp" and d["range"]["start"] == {"line": 1, "column": 1} for d in found.values())
    assert "is a symbolic link" in found["s.kvplan/chat/zero.sh"]["message"]
    assert "named pipe (FIFO)" in found["s.kvplan/chat/pipe.sh"]["message"]
    assert "more than 1,048,576 bytes" in found["s.kvplan/huge.yaml"]["message"]
    assert "symbolic link to a folder" in found["s.kvplan/outside"]["message"]
    # the configs emit wrote are still checked: the spec changed, so vllm.sh is stale too
    spec.write_text(PREFIX_SPEC.replace("fanout  = 8", "fanout  = 8\n        prefix  = 96k"))
    stale = check_digest(spec)
    assert "s.kvplan/chat/vllm.sh" in stale.stdout and "was emitted from plan" in stale.stdout


def test_the_fix_for_a_link_in_the_emitted_folder_works(tmp_path: Path) -> None:
    spec = emit_then(tmp_path, (ROOT / "examples" / "w1-batch1.kvp").read_text(encoding="utf-8"))
    assert check_digest(spec).exit_code == 0
    vllm = tmp_path / "s.kvplan" / "w1-batch1" / "vllm.sh"
    elsewhere = tmp_path / "old-vllm.sh"
    vllm.rename(elsewhere)
    vllm.symlink_to(elsewhere)  # a link to a copy of the script: what runs is not what the folder holds
    r = CliRunner().invoke(main, ["lint", "--check-digest", "--output-format", "json", str(spec)])
    assert r.exit_code == 1, r.output
    (d,) = json.loads(r.stdout)["diagnostics"]
    assert d["code"] == "KV401" and d["message"].startswith(f"{vllm} is a symbolic link"), d
    fix = re.fullmatch(r"remove it, then rerun `(kvplan emit [^`]+)`", d["help"])
    assert fix is not None, d["help"]
    vllm.unlink()
    again = CliRunner().invoke(main, shlex.split(fix.group(1))[1:])
    assert again.exit_code == 0, again.output
    assert check_digest(spec).exit_code == 0 and not vllm.is_symlink() and elsewhere.exists()


def test_check_digest_plans_without_searching_suggestions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A digest covers what is unmet, not the changes that would meet it: lint --check-digest planned every
    scenario (and each engine's plan of a stale one) with its full suggestion search, outside lint's budget."""
    from kvplan.app.digest import check_digests
    from kvplan.planner import suggest
    from tests.unit.planner.test_suggestions import _unfit_list

    spec = tmp_path / "unfit.kvp"
    spec.write_text(_unfit_list(3, 4))
    result = check_source(spec.read_text(), str(spec))
    first = result.scenarios[0].name
    (tmp_path / "unfit.kvplan").mkdir()
    (tmp_path / "unfit.kvplan" / "vllm.sh").write_text(
        f"# kvplan 0.1 · spec unfit.kvp · scenario {first} · plan sha256:0123456789abcdef · vllm\n")
    searched: list[str] = []
    real = suggest.replan  # what plans a changed scenario to verify a suggestion

    def counted(sc: Any, *args: Any) -> Any:
        searched.append(sc.name)
        return real(sc, *args)

    monkeypatch.setattr(suggest, "replan", counted)
    (stale,) = check_digests(result)
    assert stale.code == "KV401" and not searched
