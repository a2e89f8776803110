"""The catalogs' JSON copies (tools/build_catalog.py): what the generator writes, equal to the TOML, never stale."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kvplan import catalog
from tests.paths import ROOT

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

CATALOG = ROOT / "kvplan" / "catalog"
TOMLS = sorted(CATALOG.glob("*.toml"))


def _clear() -> None:
    for loader in (catalog._load_toml, catalog.models, catalog.devices, catalog.links, catalog.aliases):
        loader.cache_clear()


def test_every_catalog_has_a_json_copy() -> None:
    assert [p.name for p in TOMLS] == ["devices.toml", "intervals.toml", "links.toml", "models.toml",
                                     "performance.toml", "quality.toml", "speculative.toml"]
    assert sorted(p.name for p in CATALOG.glob("*.json")) == [p.with_suffix(".json").name for p in TOMLS]


@pytest.mark.parametrize("toml", TOMLS, ids=lambda p: p.name)
def test_json_copy_equals_tomllib_parse(toml: Path) -> None:
    raw = toml.read_bytes()
    copy = json.loads(toml.with_suffix(".json").read_text(encoding="utf-8"))
    assert copy["source"] == toml.name
    assert copy["source_sha256"] == hashlib.sha256(raw).hexdigest()
    expected = tomllib.loads(raw.decode("utf-8"))
    assert copy["data"] == expected
    assert list(copy["data"]) == list(expected)  # entry order too: listings print the catalog in file order


def test_shipped_copies_are_what_the_generator_writes() -> None:
    # Fails when a TOML was edited and `python tools/build_catalog.py` not run (docs/catalog.md).
    env = {**os.environ, "PYTHONHASHSEED": "7"}
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "build_catalog.py"), "--check"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr


def test_the_generator_is_deterministic(tmp_path: Path) -> None:
    # Two processes with different hash seeds write the same bytes, ASCII only.
    outs = []
    for seed in ("1", "2"):
        tree = tmp_path / seed
        shutil.copytree(ROOT / "tools", tree / "tools")
        (tree / "kvplan" / "catalog").mkdir(parents=True)
        for toml in TOMLS:
            shutil.copy(toml, tree / "kvplan" / "catalog" / toml.name)
        subprocess.run([sys.executable, str(tree / "tools" / "build_catalog.py")], cwd=tree, check=True,
                       env={**os.environ, "PYTHONHASHSEED": seed}, capture_output=True, timeout=120)
        outs.append({p.name: p.read_bytes() for p in sorted((tree / "kvplan" / "catalog").glob("*.json"))})
    assert outs[0] == outs[1]
    assert outs[0] == {p.with_suffix(".json").name: p.with_suffix(".json").read_bytes() for p in TOMLS}
    assert all(b.isascii() for b in outs[0].values())


def test_the_loader_reads_the_json_copy(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_toml(text: str) -> None:
        raise AssertionError("tomllib parsed a catalog whose JSON copy is current")

    _clear()
    monkeypatch.setattr(catalog.tomllib, "loads", no_toml)
    try:
        assert catalog.get_model("llama-3-70b").n_layers == 80
        assert catalog.get_device("h100-sxm").id == "h100-sxm"
    finally:
        monkeypatch.undo()
        _clear()


def test_a_stale_json_copy_is_not_used(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # links.toml edited after its copy was written: the edit is what kvplan reads.
    for p in CATALOG.glob("*.*"):
        if p.suffix in (".toml", ".json"):
            shutil.copy(p, tmp_path / p.name)
    edited = (tmp_path / "links.toml").read_text(encoding="utf-8").replace('bandwidth = "64 GB/s"',
                                                                            'bandwidth = "65 GB/s"', 1)
    assert edited != (tmp_path / "links.toml").read_text(encoding="utf-8")
    (tmp_path / "links.toml").write_text(edited, encoding="utf-8")
    _clear()
    monkeypatch.setattr(catalog, "_HERE", str(tmp_path))
    try:
        assert catalog.get_link("pcie5-x16").bandwidth == 65e9
        assert catalog.get_model("llama-3-70b").n_layers == 80  # the current copies are still read
    finally:
        monkeypatch.undo()
        _clear()
    assert catalog.get_link("pcie5-x16").bandwidth == 64e9
