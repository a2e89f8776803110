"""Untrusted input files: no code runs from the temp directory, only regular files of bounded size are read,
a spec reads nothing outside its folder, and values read from a file are not echoed back.

A spec is often untrusted input in CI (a pull request); so are the engine configs handed to `kvplan import`.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from tests.paths import ROOT
from tests.unit.lang.test_security import CLEAN_ENV

# Slow: hostile inputs through every command, with FIFOs, links and huge files (about 40 s).
# The default `python -m pytest` leaves it out; --run-slow and CI run it.
pytestmark = pytest.mark.slow

EXAMPLE = ROOT / "examples" / "w2-batch32.kvp"


def _kvplan(args: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: float = 60
            ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kvplan", *args], cwd=cwd, env={**CLEAN_ENV, **(env or {})},
                          capture_output=True, text=True, timeout=timeout, check=False)


# --- the parser: built in, no pickle ----------------------------------------------------------------------------

class _Planted:
    """Unpickling this runs code: it writes a marker file (what an attacker's planted cache would do)."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str, ...]]:
        return (os.system, (f"touch {self.marker}",))


def test_lint_writes_no_parser_cache_to_the_temp_directory_and_runs_no_planted_one(tmp_path: Path) -> None:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    work = tmp_path / "work"
    work.mkdir()
    (work / "w2.kvp").write_bytes(EXAMPLE.read_bytes())
    marker = tmp_path / "planted-code-ran"
    # The name lark's cache=True would use for kvplan's grammar: let lark write it, then swap in the payload.
    make_cache = ("from lark import Lark; from kvplan.lang import syntax; "
                  "Lark(syntax.grammar_text(), parser='lalr', lexer='contextual', propagate_positions=True, "
                  "cache=True)")
    subprocess.run([sys.executable, "-c", make_cache], env={**CLEAN_ENV, "TMPDIR": str(tmp)}, check=True, timeout=60)
    planted = sorted(tmp.glob(".lark_cache_*"))
    assert planted, "lark wrote no cache file to plant into"
    for p in planted:  # lark's cache file: a line with the grammar's hash, then pickles
        first_line = p.read_bytes().split(b"\n", 1)[0]
        p.write_bytes(first_line + b"\n" + pickle.dumps(_Planted(str(marker))))
    before = {p.name for p in tmp.iterdir()}

    out = _kvplan(["lint", "w2.kvp"], work, env={"TMPDIR": str(tmp)})
    assert out.returncode in (0, 1), out.stderr
    assert not marker.exists(), "kvplan lint unpickled a file planted in the temp directory"
    assert {p.name for p in tmp.iterdir()} == before, "kvplan lint wrote to the temp directory"


# --- reading: regular files only, bounded, never blocking -------------------------------------------------------

SPEC = EXAMPLE.read_text(encoding="utf-8")
MODEL_SPEC = """\
kvplan 1

deployment "d" {{
    model = m
    device = h100-sxm
    workload {{
        batch = 1
        context = 8k
    }}
}}

model "m" {{
    config = "{config}"
}}
"""
CONFIG = {"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 256, "num_attention_heads": 4,
          "num_key_value_heads": 2, "intermediate_size": 512, "vocab_size": 1000, "max_position_embeddings": 8192}
SECRET = "SECRET-abc123"

needs_fifo = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes are a POSIX feature")
needs_dev_zero = pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero")


def _one_line_error(out: subprocess.CompletedProcess[str]) -> str:
    assert out.returncode == 2, (out.returncode, out.stdout, out.stderr)
    assert "Traceback" not in out.stderr and "internal error" not in out.stderr, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    return lines[0]


@needs_fifo
def test_a_fifo_as_the_spec_is_refused_without_blocking(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "spec.kvp")  # nobody writes to it: reading it would block forever
    lint = _kvplan(["lint", "spec.kvp"], tmp_path, timeout=30)
    assert lint.returncode == 1
    assert lint.stdout.startswith("spec.kvp:1:1: KV001 cannot read spec.kvp: the spec is a named pipe (FIFO)")
    fmt = _kvplan(["fmt", "--check", "spec.kvp"], tmp_path, timeout=30)
    assert fmt.returncode == 2 and "spec.kvp:1:1: KV001" in fmt.stderr and "named pipe" in fmt.stderr
    advise = _one_line_error(_kvplan(["advise", "spec.kvp"], tmp_path, timeout=30))
    assert advise.startswith("kvplan: error: spec.kvp:1:1: KV001") and "named pipe" in advise


@needs_dev_zero
def test_a_symlink_to_dev_zero_in_a_linted_directory_is_refused(tmp_path: Path) -> None:
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "good.kvp").write_text(SPEC, encoding="utf-8")
    (tmp_path / "specs" / "zero.kvp").symlink_to("/dev/zero")
    out = _kvplan(["lint", "specs"], tmp_path, timeout=30)
    assert out.returncode == 1, out.stderr
    assert out.stdout.startswith("specs/zero.kvp:1:1: KV001 cannot read specs/zero.kvp: it is a symbolic link to a "
                                 "file outside specs")
    assert "specs/good.kvp" not in out.stdout  # the other file is linted as usual (and is clean)
    fmt = _kvplan(["fmt", "--check", "specs"], tmp_path, timeout=30)
    assert fmt.returncode == 2 and "specs/zero.kvp:1:1: KV001" in fmt.stderr
    # named on the command line the link is followed, and the device is refused
    named = _kvplan(["lint", "specs/zero.kvp"], tmp_path, timeout=30)
    assert named.stdout.startswith("specs/zero.kvp:1:1: KV001 cannot read specs/zero.kvp: the spec is a character "
                                   "device; kvplan reads only regular files")
    fmt = _kvplan(["fmt", "--check", "specs/zero.kvp"], tmp_path, timeout=30)
    assert fmt.returncode == 2 and "character device" in fmt.stderr


@needs_fifo
@needs_dev_zero
def test_model_configs_that_are_not_regular_files_are_refused_without_blocking(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "config.json")
    line = _one_line_error(_kvplan(["map", "--model-config", "config.json", "--device", "h100-sxm"], tmp_path,
                                   timeout=30))
    assert line == ("kvplan: error: config.json:1:1: the model config is a named pipe (FIFO); kvplan reads only "
                    "regular files (give the path of a regular file)")
    zero = _one_line_error(_kvplan(["map", "--model-config", "/dev/zero", "--device", "h100-sxm"], tmp_path,
                                   timeout=30))
    assert "the model config is a character device" in zero
    # a FIFO inside the spec's folder: allowed by place, refused by kind
    (tmp_path / "fifo.kvp").write_text(MODEL_SPEC.format(config="config.json"), encoding="utf-8")
    out = _kvplan(["lint", "fifo.kvp"], tmp_path, timeout=30)
    assert "fifo.kvp:13:14: KV119 cannot use `config.json`: the model config is a named pipe (FIFO)" in out.stdout


@needs_fifo
@needs_dev_zero
def test_trtllm_config_files_that_are_not_regular_files_are_refused(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "extra.yaml")
    for config, kind in (("/dev/zero", "a character device"), ("extra.yaml", "a named pipe (FIFO)")):
        cmd = f"trtllm-serve meta-llama/Meta-Llama-3.1-8B --config {config} --max_batch_size 4"
        line = _one_line_error(_kvplan(["import", "--from", "trtllm", cmd, "--device", "b200"], tmp_path,
                                       timeout=30))
        assert f"the --config file is {kind}; kvplan reads only regular files" in line
    line = _one_line_error(_kvplan(["import", "--from", "trtllm", "extra.yaml", "--device", "b200"], tmp_path,
                                   timeout=30))
    assert line.startswith("kvplan: error: extra.yaml:1:1: the file to import is a named pipe (FIFO)")


def test_fmt_refuses_a_file_larger_than_a_spec_as_lint_does(tmp_path: Path) -> None:
    big = tmp_path / "big.kvp"
    big.write_text(SPEC + "# padding\n" * 600_000, encoding="utf-8")  # 6 MB
    assert big.stat().st_size > 6_000_000
    lint = _kvplan(["lint", "big.kvp"], tmp_path)
    # one statement of the limit, in characters (the review found "1,048,576 bytes" beside "262,144 characters")
    one_limit = ("big.kvp:1:1: KV015 the file has more than 262,144 characters (it was not read past 1 MiB); "
                 "a spec has at most 262,144 characters")
    assert lint.returncode == 1 and lint.stdout.startswith(one_limit), lint.stdout
    assert "bytes" not in lint.stdout
    fmt = _kvplan(["fmt", "--check", "big.kvp"], tmp_path)
    assert fmt.returncode == 2, fmt.stderr
    assert fmt.stderr.startswith(one_limit) and "bytes" not in fmt.stderr, fmt.stderr
    # between the character limit and the byte limit: the same code, counted in characters
    mid = tmp_path / "mid.kvp"
    mid.write_text(SPEC + "#" * 300_000 + "\n", encoding="utf-8")
    fmt = _kvplan(["fmt", "--check", "mid.kvp"], tmp_path)
    assert fmt.returncode == 2 and fmt.stderr.startswith("mid.kvp:1:1: KV015 the file has 300,"), fmt.stderr
    assert "; a spec has at most 262,144 characters" in fmt.stderr, fmt.stderr


def test_bad_utf8_is_located_in_every_input_file(tmp_path: Path) -> None:
    (tmp_path / "bad.kvp").write_bytes(SPEC.encode() + b"# caf\xe9\n")
    n = SPEC.count("\n") + 1
    lint = _kvplan(["lint", "bad.kvp"], tmp_path)
    assert lint.stdout.startswith(f"bad.kvp:{n}:6: KV002 byte 0xe9 is not UTF-8 text")
    fmt = _kvplan(["fmt", "--check", "bad.kvp"], tmp_path)
    assert fmt.returncode == 2 and fmt.stderr.startswith(f"bad.kvp:{n}:6: KV002 byte 0xe9 is not UTF-8 text")
    (tmp_path / "serve.sh").write_bytes(b"vllm serve meta-llama/Meta-Llama-3.1-8B \\\n  --max-num-seqs 8 # \xff\n")
    line = _one_line_error(_kvplan(["import", "--from", "vllm", "serve.sh", "--device", "h100-sxm"], tmp_path))
    assert line == "kvplan: error: serve.sh:2:22: byte 0xff is not UTF-8 text (save the file as UTF-8)"
    (tmp_path / "pyproject.toml").write_bytes(b'[tool.kvplan]\nselect = ["KV1"] # \xfe\n')
    (tmp_path / "ok.kvp").write_text(SPEC, encoding="utf-8")
    line = _one_line_error(_kvplan(["lint", "--config", "pyproject.toml", "ok.kvp"], tmp_path))
    assert line == "kvplan: error: pyproject.toml:2:20: byte 0xfe is not UTF-8 text (save the file as UTF-8)"
    (tmp_path / "config.json").write_bytes(b'{"model_type": "ll\xc3ama"}')
    line = _one_line_error(_kvplan(["map", "--model-config", "config.json", "--device", "h100-sxm"], tmp_path))
    assert line.startswith("kvplan: error: config.json:1:19: byte 0xc3 is not UTF-8 text")


@pytest.mark.parametrize("text,said", [("", "is empty"), ("\n  \n", "is empty"),
                                       ("# to do\n\n# later\n", "holds only comments")])
def test_an_empty_or_comments_only_spec_is_one_located_error_everywhere(tmp_path: Path, text: str, said: str) -> None:
    (tmp_path / "e.kvp").write_text(text, encoding="utf-8")
    lint = _kvplan(["lint", "e.kvp"], tmp_path)
    assert lint.returncode == 1
    assert lint.stdout.strip() == f"e.kvp:1:1: KV017 the file {said}: it declares no deployment"
    for cmd in (["advise", "e.kvp"], ["emit", "e.kvp"]):
        line = _one_line_error(_kvplan(cmd, tmp_path))
        assert line.startswith(f"kvplan: error: e.kvp:1:1: KV017 the file {said}"), cmd


def test_empty_and_comments_only_input_files_get_a_located_message(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("\n", encoding="utf-8")
    line = _one_line_error(_kvplan(["map", "--model-config", "config.json", "--device", "h100-sxm"], tmp_path))
    assert line.startswith("kvplan: error: config.json:1:1: the model config is empty (it should hold one JSON "
                           "object")
    (tmp_path / "serve.sh").write_text("#!/bin/sh\n# set later\n", encoding="utf-8")
    line = _one_line_error(_kvplan(["import", "--from", "vllm", "serve.sh", "--device", "h100-sxm"], tmp_path))
    assert line.startswith("kvplan: error: serve.sh:1:1: the file to import holds only comments")
    (tmp_path / "extra.yaml").write_text("# nothing yet\n", encoding="utf-8")
    cmd = "trtllm-serve meta-llama/Meta-Llama-3.1-8B --config extra.yaml --max_batch_size 4"
    line = _one_line_error(_kvplan(["import", "--from", "trtllm", cmd, "--device", "b200"], tmp_path))
    assert line.startswith("kvplan: error: extra.yaml:1:1: the --config file holds only comments")
    (tmp_path / "lint.toml").write_text("", encoding="utf-8")
    (tmp_path / "ok.kvp").write_text(SPEC, encoding="utf-8")
    line = _one_line_error(_kvplan(["lint", "--config", "lint.toml", "ok.kvp"], tmp_path))
    assert line.startswith("kvplan: error: lint.toml:1:1: the lint config is empty (it should hold a [tool.kvplan]")


# --- paths in a spec stay in its folder; values are not echoed --------------------------------------------------

def _tree(tmp_path: Path) -> Path:
    """repo/specs/*.kvp, repo/models/m/config.json, and a secret outside the repository."""
    import json

    (tmp_path / "secret").mkdir()
    (tmp_path / "secret" / "config.json").write_text(json.dumps({**CONFIG, "num_hidden_layers": SECRET}))
    (tmp_path / "repo" / "specs" / "models").mkdir(parents=True)
    (tmp_path / "repo" / "models" / "m").mkdir(parents=True)
    (tmp_path / "repo" / "models" / "m" / "config.json").write_text(json.dumps(CONFIG))
    (tmp_path / "repo" / "specs" / "models" / "m.json").write_text(json.dumps(CONFIG))
    return tmp_path / "repo"


def test_a_spec_cannot_read_a_config_outside_its_folder(tmp_path: Path) -> None:
    repo = _tree(tmp_path)
    secret = tmp_path / "secret" / "config.json"
    (repo / "specs" / "models" / "link.json").symlink_to(secret)
    for name, config in (("up", "../../secret/config.json"), ("abs", str(secret)), ("link", "models/link.json"),
                         ("dir", "../../secret")):
        (repo / "specs" / f"{name}.kvp").write_text(MODEL_SPEC.format(config=config), encoding="utf-8")
        out = _kvplan(["lint", f"specs/{name}.kvp"], repo)
        assert out.returncode == 1, out.stderr
        assert out.stdout.startswith(f"specs/{name}.kvp:13:14: KV119 `{config}` is outside the folder of the spec")
        assert SECRET not in out.stdout + out.stderr
        advise = _kvplan(["advise", f"specs/{name}.kvp"], repo)
        assert advise.returncode == 2 and SECRET not in advise.stdout + advise.stderr
    (repo / "specs" / "inside.kvp").write_text(MODEL_SPEC.format(config="models/m.json"), encoding="utf-8")
    assert _kvplan(["lint", "specs/inside.kvp"], repo).returncode == 0


def test_allow_path_and_allow_paths_let_a_spec_name_another_folder(tmp_path: Path) -> None:
    repo = _tree(tmp_path)
    (repo / "specs" / "sib.kvp").write_text(MODEL_SPEC.format(config="../models/m/config.json"), encoding="utf-8")
    assert _kvplan(["lint", "specs/sib.kvp"], repo).returncode == 1
    assert _kvplan(["lint", "--allow-path", "models", "specs/sib.kvp"], repo).returncode == 0
    advise = _kvplan(["advise", "--allow-path", "models", "specs/sib.kvp"], repo)
    assert advise.returncode in (0, 1) and advise.stdout.startswith("plan for d:"), advise.stderr
    # [tool.kvplan] allow-paths is relative to the pyproject.toml, and serves lint and advise alike
    (repo / "pyproject.toml").write_text('[tool.kvplan]\nallow-paths = ["models"]\n', encoding="utf-8")
    assert _kvplan(["lint", "sib.kvp"], repo / "specs").returncode == 0
    assert _kvplan(["advise", "sib.kvp"], repo / "specs").returncode in (0, 1)
    # allowing one folder does not open the others
    (repo / "specs" / "up.kvp").write_text(MODEL_SPEC.format(config="../../secret/config.json"), encoding="utf-8")
    out = _kvplan(["lint", "up.kvp"], repo / "specs")
    assert "KV119 `../../secret/config.json` is outside the folder of the spec" in out.stdout
    line = _one_line_error(_kvplan(["lint", "--allow-path", "nowhere", "sib.kvp"], repo / "specs"))
    assert line.startswith("kvplan: error: --allow-path: 'nowhere' is not a directory")


def test_a_config_value_of_the_wrong_type_is_named_by_key_and_type_not_echoed(tmp_path: Path) -> None:
    import json

    (tmp_path / "config.json").write_text(json.dumps({**CONFIG, "num_hidden_layers": SECRET,
                                                      "model_type": SECRET}))
    (tmp_path / "s.kvp").write_text(MODEL_SPEC.format(config="config.json"), encoding="utf-8")
    out = _kvplan(["lint", "s.kvp"], tmp_path)
    assert "'num_hidden_layers' must be an integer, got a string" in out.stdout
    assert SECRET not in out.stdout + out.stderr
    (tmp_path / "config.json").write_text(json.dumps({**CONFIG, "model_type": SECRET, "layer_types": [SECRET] * 2}))
    out = _kvplan(["lint", "s.kvp"], tmp_path)
    assert "'layer_types' entry 0 is not a layer type kvplan knows (got a string)" in out.stdout
    assert SECRET not in out.stdout + out.stderr


def test_import_names_unknown_yaml_keys_without_copying_their_values(tmp_path: Path) -> None:
    (tmp_path / "c.yaml").write_text(f"max_batch_size: 8\nmax_seq_len: 8192\napi_token: {SECRET}\n"
                                     f"backend: {SECRET}\nkv_cache_config:\n  url: {SECRET}\n", encoding="utf-8")
    out = _kvplan(["import", "--from", "trtllm", "c.yaml", "--model", "llama-3-8b", "--device", "b200"], tmp_path)
    assert out.returncode == 0, out.stderr
    assert "api_token: not a TensorRT-LLM setting kvplan knows; not imported (nor its value)" in out.stderr
    assert "kv_cache_config.url: not a kv_cache_config field kvplan knows" in out.stderr
    assert "backend" in out.stdout  # an ignored key is listed by name
    assert SECRET not in out.stdout + out.stderr


# --- YAML: no alias bombs, bounded, located ---------------------------------------------------------------------

BILLION_LAUGHS = "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
    f"{n}: &{n} [{', '.join([f'*{p}'] * 9)}]\n" for p, n in zip("abcdefgh", "bcdefghi")) + "max_batch_size: 8\n"


def test_a_yaml_alias_bomb_is_refused_at_its_first_alias(tmp_path: Path) -> None:
    (tmp_path / "laughs.yaml").write_text(BILLION_LAUGHS, encoding="utf-8")
    line = _one_line_error(_kvplan(["import", "--from", "trtllm", "laughs.yaml", "--model", "llama-3-8b",
                                    "--device", "b200"], tmp_path, timeout=30))
    assert line.startswith("kvplan: error: laughs.yaml:2:8: YAML alias `*a`: kvplan reads no aliases")


def test_a_huge_or_deep_yaml_is_refused(tmp_path: Path) -> None:
    big = tmp_path / "big.yaml"
    with big.open("w", encoding="utf-8") as fh:
        fh.write("max_batch_size: 8\n")
        fh.write("# padding padding padding padding padding padding\n" * 1_000_000)  # 50 MB
    line = _one_line_error(_kvplan(["import", "--from", "trtllm", "big.yaml", "--model", "llama-3-8b",
                                    "--device", "b200"], tmp_path, timeout=30))
    assert line.startswith("kvplan: error: big.yaml:1:1: the file to import has more than 1,048,576 bytes")
    (tmp_path / "deep.yaml").write_text("max_batch_size: 8\nx: " + "[" * 5000 + "]" * 5000 + "\n", encoding="utf-8")
    line = _one_line_error(_kvplan(["import", "--from", "trtllm", "deep.yaml", "--model", "llama-3-8b",
                                    "--device", "b200"], tmp_path, timeout=30))
    assert line.startswith("kvplan: error: deep.yaml:2:35: the YAML nests deeper than 32 levels"), line


def test_a_yaml_control_character_is_reported_at_line_and_column(tmp_path: Path) -> None:
    (tmp_path / "c.yaml").write_text("max_batch_size: 8\nmodel: ab\x01c\n", encoding="utf-8")
    line = _one_line_error(_kvplan(["import", "--from", "trtllm", "c.yaml", "--model", "llama-3-8b",
                                    "--device", "b200"], tmp_path))
    assert line.startswith("kvplan: error: c.yaml:2:10: not valid YAML: character U+0001 is not allowed")
    assert "position" not in line


# --- a JSON or YAML file given as a spec ------------------------------------------------------------------------

@pytest.mark.parametrize("text,kind,where", [
    ('{\n  "model_type": "llama",\n  "num_hidden_layers": 32\n}\n', "JSON", "1:1"),
    ('  [1, 2]\n', "JSON", "1:3"),
    ("# engine config\nmax_batch_size: 32\nkv_cache_config:\n  dtype: fp8\n", "YAML", "2:1"),
    ("---\n- a\n", "YAML", "1:1"),
])
def test_a_json_or_yaml_file_given_as_a_spec_gets_one_clear_line(tmp_path: Path, text: str, kind: str,
                                                                 where: str) -> None:
    (tmp_path / "x.kvp").write_text(text, encoding="utf-8")
    lint = _kvplan(["lint", "x.kvp"], tmp_path)
    assert lint.returncode == 1
    assert lint.stdout.strip() == (f'x.kvp:{where}: KV018 this looks like {kind}; a .kvp file is '
                                   '`deployment "name" { ... }` (docs/language.md)')
    fmt = _kvplan(["fmt", "--check", "x.kvp"], tmp_path)
    assert fmt.returncode == 2 and fmt.stderr.startswith(f"x.kvp:{where}: KV018 this looks like {kind}")
    advise = _one_line_error(_kvplan(["advise", "x.kvp"], tmp_path))
    assert f"x.kvp:{where}: KV018 this looks like {kind}" in advise


def test_import_does_not_copy_a_credential_from_a_launcher_script(tmp_path: Path) -> None:
    (tmp_path / "serve.sh").write_text(f"vllm serve meta-llama/Meta-Llama-3.1-8B --max-num-seqs 8 --max-model-len 8k "
                                       f"--api-key {SECRET} --port 8000 --my-auth-token={SECRET}\n", encoding="utf-8")
    out = _kvplan(["import", "--from", "vllm", "serve.sh", "--device", "h100-sxm"], tmp_path)
    assert out.returncode == 0, out.stderr
    assert "--api-key (value not shown)" in out.stdout and "--port 8000" in out.stdout
    assert "--my-auth-token=(value not shown): not a vLLM 0.33.0 flag kvplan knows" in out.stderr
    assert SECRET not in out.stdout + out.stderr


def test_a_walked_directory_follows_no_link_out_of_it(tmp_path: Path) -> None:
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "id_rsa").write_text(f"-----BEGIN KEY-----\n{SECRET}\n", encoding="utf-8")
    (tmp_path / "repo" / "specs").mkdir(parents=True)
    (tmp_path / "repo" / "specs" / "good.kvp").write_text(SPEC, encoding="utf-8")
    (tmp_path / "repo" / "specs" / "shared.kvp").symlink_to("good.kvp")          # a link inside: followed
    (tmp_path / "repo" / "specs" / "evil.kvp").symlink_to(tmp_path / "home" / "id_rsa")
    for fmt in ("concise", "full", "github"):
        out = _kvplan(["lint", "specs", "--output-format", fmt], tmp_path / "repo")
        assert out.returncode == 1, out.stderr
        assert "specs/evil.kvp" in out.stdout and "symbolic link to a file outside specs" in out.stdout
        assert SECRET not in out.stdout + out.stderr and "BEGIN" not in out.stdout
        assert "specs/shared.kvp" not in out.stdout  # linted, clean
    fmt_out = _kvplan(["fmt", "--check", "specs"], tmp_path / "repo")
    assert fmt_out.returncode == 2 and "specs/evil.kvp:1:1: KV001" in fmt_out.stderr
    assert SECRET not in fmt_out.stdout + fmt_out.stderr
    named = _kvplan(["lint", "specs/evil.kvp"], tmp_path / "repo")  # named on the command line: the user's choice
    assert named.returncode == 1 and "symbolic link" not in named.stdout and "specs/evil.kvp:1:" in named.stdout


# --- nesting: every JSON and TOML reader refuses 2,000 levels at the place, not with RecursionError ---------------

DEEP_TOML = "[fit]\nx = " + "[" * 2000 + "]" * 2000 + "\n"


def _deep_at(text: str) -> str:
    """`line:column` of the bracket that opens level 65 (MAX_JSON_DEPTH + 1), counted here from the text."""
    from kvplan.base.limits import MAX_JSON_DEPTH

    at = text.index("[" * (MAX_JSON_DEPTH + 1)) + MAX_JSON_DEPTH
    before = text[:at]
    return f"{before.count(chr(10)) + 1}:{at - (before.rfind(chr(10)) + 1) + 1}"


def _lint(args: list[str]) -> tuple[int, str, str]:
    from click.testing import CliRunner

    from kvplan.cli import main

    r = CliRunner().invoke(main, ["lint", *args])
    assert "RecursionError" not in r.output and "internal error" not in r.output, r.output
    return r.exit_code, r.stdout, r.stderr


def test_a_calibration_profile_nested_2000_deep_is_located(tmp_path: Path) -> None:
    profile = tmp_path / "deep.toml"
    profile.write_text(DEEP_TOML)
    spec = tmp_path / "w2.kvp"
    spec.write_text(EXAMPLE.read_text())
    rc, _, err = _lint(["--calibration", str(profile), str(spec)])
    assert rc == 2 and f"deep.toml:{_deep_at(DEEP_TOML)}: " in err and "64 levels deep" in err, err
    # named by the spec: KV119 at the `calibration` value, with the profile's own line and column
    spec.write_text(EXAMPLE.read_text().replace('deployment "w2-batch32" {',
                                                'deployment "w2-batch32" {\n    calibration = "deep.toml"'))
    rc, out, _ = _lint([str(spec)])
    line, col = _deep_at(DEEP_TOML).split(":")
    assert rc == 1 and "KV119" in out and f"(line {line}, column {col})" in out, out


def test_a_pyproject_nested_2000_deep_is_located(tmp_path: Path) -> None:
    text = "[tool.kvplan]\nselect = " + "[" * 2000 + "]" * 2000 + "\n"
    (tmp_path / "pyproject.toml").write_text(text)
    spec = tmp_path / "w2.kvp"
    spec.write_text(EXAMPLE.read_text())
    rc, _, err = _lint(["--config", str(tmp_path / "pyproject.toml"), str(spec)])
    assert rc == 2 and f"pyproject.toml:{_deep_at(text)}: " in err and "64 levels deep" in err, err


def test_an_emitted_file_nested_2000_deep_is_not_a_header_and_no_crash(tmp_path: Path) -> None:
    spec = tmp_path / "w2.kvp"
    spec.write_text(EXAMPLE.read_text())
    (tmp_path / "w2.kvplan").mkdir()
    (tmp_path / "w2.kvplan" / "x.json").write_text('{"_kvplan": ' + "[" * 2000 + "]" * 2000 + "}")
    rc, out, _ = _lint(["--check-digest", str(spec)])
    assert rc in (0, 1) and "KV401" not in out, out
