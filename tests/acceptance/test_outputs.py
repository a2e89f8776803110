"""`emit -o` and `report -o`: one folder per scenario, no overwriting, no writing through links.

Each test states the finding it guards (issue 9, "Outputs"); each failed on main.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from kvplan.base.outputs import MAX_NAME, folder_name
from kvplan.cli import main

DEPLOYMENT = '''deployment "{name}" {{
    model  = llama-3-8b
    device = h100
    devices = 1
    workload {{
        batch   = 1
        context = 4k
    }}
}}
'''


def spec(tmp: Path, *names: str) -> Path:
    path = tmp / "s.kvp"
    path.write_text("kvplan 1\n\n" + "\n".join(DEPLOYMENT.format(name=n) for n in names), encoding="utf-8")
    return path


def run(*args: str) -> Any:
    return CliRunner().invoke(main, list(args))


def _error_line(res: Any) -> str:
    assert res.exit_code == 2, res.output
    lines = [ln for ln in res.output.splitlines() if ln.startswith("kvplan: error:")]
    assert len(lines) == 1 and "Traceback" not in res.output, res.output
    return lines[0]


def _files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")) if root.exists() else []


EMIT = ("emit", "--target", "vllm")
COMMANDS = [pytest.param(EMIT, id="emit"), pytest.param(("report",), id="report")]


# ------------------------------------------------------------------ two names, one folder

@pytest.mark.parametrize("cmd", COMMANDS)
@pytest.mark.parametrize("names", [("Chat", "chat"), ("Чат", "ЧАТ"), ("chat 1", "Chat_1"), ("ﬁle", "file")])
def test_two_deployments_that_share_a_folder_are_refused_naming_both(tmp_path: Path, cmd: tuple[str, ...],
                                                                     names: tuple[str, str]) -> None:
    out = tmp_path / "out"
    res = run(cmd[0], str(spec(tmp_path, *names)), *cmd[1:], "-o", str(out))
    _error_line(res)
    # the checker's KV103 (lint reports it too), located at the second deployment, naming both
    found = re.findall(r"s\.kvp:(\d+):(\d+): KV103 deployment `(.+?)` writes the same output folder `(.+?)/` "
                       r"as `(.+?)` \(line 3\)", res.output)
    assert found == [("13", "12", names[1], folder_name(names[0]), names[0])], res.output
    assert _files(out) == []  # refused before anything was written


@pytest.mark.parametrize("names", [("Chat", "chat"), ("straße", "strasse"), ("caf\u00e9", "cafe\u0301"),
                                   ("Чат", "ЧАТ"), ("chat 1", "Chat_1"), ("ﬁle", "file")])
def test_lint_reports_a_folder_collision_at_the_second_deployment(tmp_path: Path, names: tuple[str, str]) -> None:
    """On main lint passed these files (exit 0) that emit -o and report -o then refused."""
    path = spec(tmp_path, *names)
    assert folder_name(names[0]) == folder_name(names[1]) and names[0] != names[1]
    res = run("lint", str(path))
    assert res.exit_code == 1, res.output
    assert f"{path}:13:12: KV103 deployment `{names[1]}` writes the same output folder" in res.output, res.output
    assert res.output.count("KV103") == 1, res.output
    # names whose folders differ stay clean
    assert run("lint", str(spec(tmp_path, names[0], names[0] + "-2"))).exit_code == 0


@pytest.mark.parametrize("cmd", COMMANDS)
def test_names_in_other_scripts_get_folders_of_their_own(tmp_path: Path, cmd: tuple[str, ...]) -> None:
    """On main both went to out/plan/ and the second overwrote the first."""
    out = tmp_path / "out"
    res = run(cmd[0], str(spec(tmp_path, "Чат", "Мир", "聊天")), *cmd[1:], "-o", str(out))
    assert res.exit_code in (0, 1), res.output
    assert sorted(p.name for p in out.iterdir()) == sorted(["чат", "мир", "聊天"])
    if cmd[0] == "emit":
        for name in ("Чат", "Мир", "聊天"):
            assert f"scenario {name}" in (out / folder_name(name) / "vllm.sh").read_text(encoding="utf-8")


# ------------------------------------------------------------------ links in the output tree

def _victim(tmp: Path) -> Path:
    victim = tmp / "elsewhere" / "precious.txt"
    victim.parent.mkdir()
    victim.write_text("keep me\n", encoding="utf-8")
    return victim


@pytest.mark.parametrize("cmd,name", [pytest.param(EMIT, "vllm.sh", id="emit"),
                                      pytest.param(("report",), "index.md", id="report")])
def test_a_file_symlink_in_the_output_tree_is_refused_not_followed(tmp_path: Path, cmd: tuple[str, ...],
                                                                   name: str) -> None:
    victim = _victim(tmp_path)
    out = tmp_path / "out"
    (out / "chat").mkdir(parents=True)
    (out / "chat" / name).symlink_to(victim)
    line = _error_line(run(cmd[0], str(spec(tmp_path, "chat")), *cmd[1:], "-o", str(out)))
    assert "symbolic link" in line and name in line, line
    assert victim.read_text(encoding="utf-8") == "keep me\n"


@pytest.mark.parametrize("cmd", COMMANDS)
def test_a_folder_symlink_in_the_output_tree_is_refused_not_followed(tmp_path: Path, cmd: tuple[str, ...]) -> None:
    victim = _victim(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    (out / "chat").symlink_to(victim.parent, target_is_directory=True)
    line = _error_line(run(cmd[0], str(spec(tmp_path, "chat")), *cmd[1:], "-o", str(out)))
    assert "symbolic link" in line and "chat" in line, line
    assert sorted(p.name for p in victim.parent.iterdir()) == ["precious.txt"]


@pytest.mark.parametrize("cmd", COMMANDS)
def test_an_output_directory_that_is_a_symlink_is_refused(tmp_path: Path, cmd: tuple[str, ...]) -> None:
    victim = _victim(tmp_path)
    (tmp_path / "s.kvplan").symlink_to(victim.parent, target_is_directory=True)
    line = _error_line(run(cmd[0], str(spec(tmp_path, "chat")), *cmd[1:], "-o", str(tmp_path / "s.kvplan")))
    assert "symbolic link" in line, line
    assert sorted(p.name for p in victim.parent.iterdir()) == ["precious.txt"]


def test_a_hard_link_or_a_fifo_in_the_output_tree_is_refused(tmp_path: Path) -> None:
    victim = _victim(tmp_path)
    out = tmp_path / "out"
    (out / "chat").mkdir(parents=True)
    os.link(victim, out / "chat" / "vllm.sh")
    line = _error_line(run(*EMIT[:1], str(spec(tmp_path, "chat")), *EMIT[1:], "-o", str(out)))
    assert "hard link" in line, line
    assert victim.read_text(encoding="utf-8") == "keep me\n"
    (out / "chat" / "vllm.sh").unlink()
    os.mkfifo(out / "chat" / "vllm.sh")  # no reader: an open for writing must not block
    line = _error_line(run(*EMIT[:1], str(spec(tmp_path, "chat")), *EMIT[1:], "-o", str(out)))
    assert "not a regular file" in line, line


def test_an_ordinary_rerun_overwrites_its_own_files(tmp_path: Path) -> None:
    out = tmp_path / "out"
    s = str(spec(tmp_path, "chat"))
    first = run("emit", s, "--target", "vllm", "-o", str(out))
    text = (out / "chat" / "vllm.sh").read_text(encoding="utf-8")
    (out / "chat" / "vllm.sh").write_text("stale\n", encoding="utf-8")
    second = run("emit", s, "--target", "vllm", "-o", str(out))
    assert first.exit_code == second.exit_code and first.output == second.output
    assert (out / "chat" / "vllm.sh").read_text(encoding="utf-8") == text
    assert os.access(out / "chat" / "vllm.sh", os.X_OK)


# ------------------------------------------------------------------ long names, empty paths

def test_a_256_character_name_lints_and_emits_into_a_deterministic_short_folder(tmp_path: Path) -> None:
    """On main: lint clean, then emit failed with "File name too long"."""
    a, b = "x" * 300, "x" * 299 + "y"
    s = str(spec(tmp_path, a, b))
    assert run("lint", s).exit_code in (0, 1)
    for cmd in ("emit", "report"):
        out = tmp_path / cmd
        res = run(cmd, s, *(("--target", "vllm") if cmd == "emit" else ()), "-o", str(out))
        assert res.exit_code in (0, 1), res.output
        folders = sorted(p.name for p in out.iterdir())
        expect = sorted(f"{'x' * (MAX_NAME - 11)}-{hashlib.sha256(n.encode()).hexdigest()[:10]}" for n in (a, b))
        assert folders == expect
        assert all(len(f.encode()) <= 255 for f in folders)
    assert folder_name(a) == folder_name(a) != folder_name(b)


@pytest.mark.parametrize("cmd", COMMANDS)
@pytest.mark.parametrize("empty", ["", "   "])
def test_an_empty_output_path_is_refused(tmp_path: Path, cmd: tuple[str, ...], empty: str,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    s = str(spec(tmp_path, "chat"))
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    line = _error_line(run(cmd[0], s, *cmd[1:], "-o", empty))
    assert "-o names no directory" in line, line
    assert _files(work) == []
