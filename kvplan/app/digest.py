"""Stale engine configs: `kvplan lint --check-digest` (KV401).

Convention: configs for `path/name.kvp` are emitted into `path/name.kvplan/`
(`kvplan emit path/name.kvp -o path/name.kvplan`), one directory per scenario.
Every emitted file carries a header comment near its top,

    # kvplan 0.1.0 · spec path/name.kvp · scenario chat · plan sha256:… · vLLM 0.33.0

and the check plans the spec again and compares each file's digest with the
digest of its scenario's plan now, or of the plan made for one of the engines
(a target other than the spec's engine is written from its own plan). The digest covers the plan's canonical form
(Plan.canonical: every choice and number, the assumptions and overrides, the
catalog records used), so a spec change that changes the plan — a prefix, a
fanout, an SLO that is now missed — makes the config stale, and one that does
not — pinning the plan's own choices — does not. A header that names overrides
(`· overrides runtime_reserve=… ·`, from `kvplan emit --runtime-reserve`) is
checked against the plan made with the same overrides. The check is opt-in, so a stale config is an
error: whoever asks for it wants CI to fail when the configs lag the spec. Files without a header are not kvplan's and
are left alone; a directory that does not exist means nothing was emitted. The folder is read as any input is
(kvplan.base.files): a link (to a file or a folder, or the folder itself), a FIFO, a device or a file larger than
MAX_BYTES is not followed nor read, and is reported (KV401: kvplan emits none, so its plan cannot be checked).
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Optional, cast

from kvplan.base import limits
from kvplan.base.codes import STALE_CONFIG
from kvplan.base.diagnostics import Diagnostic, make
from kvplan.base.errors import Span
from kvplan.base.files import InputFileError, read_bytes
from kvplan.catalog.engines import concrete
from kvplan.engines.common import HEADER, HEADER_OVERRIDES, header_field
from kvplan.lang import CheckResult
from kvplan.model.scenario import Scenario
from kvplan.planner import Overrides, for_engine, plan, scenarios_for
from kvplan.planner.plan import Plan

#: How far into a file the header may sit (a shell script has its shebang first).
HEADER_LINES = 3
#: Emitted files are small text; anything bigger in the directory is not ours.
MAX_BYTES = 1 << 20


def emitted_dir(spec_path: str) -> Path:
    """Where the configs of `spec_path` live: `<dir>/<stem>.kvplan/`."""
    p = Path(spec_path)
    return p.with_name(p.stem + ".kvplan")


def read_header(path: Path) -> tuple[Optional[dict[str, str]], Optional[str]]:
    """The fields of a file's kvplan header (None when it has none), and why the file cannot be an emitted config
    (None when it can): it is a link, a FIFO, a device or larger than MAX_BYTES. Read without following a link,
    without blocking and at most MAX_BYTES (kvplan.base.files)."""
    try:
        data = read_bytes(str(path), limit=MAX_BYTES, what=os.path.normpath(str(path)), follow_links=False)
    except InputFileError as exc:
        return None, exc.message
    except OSError:  # gone since the walk, or not readable: not a file kvplan can check
        return None, None
    text = data.decode("utf-8", errors="replace")
    if text.lstrip().startswith("{"):
        return _json_header(text), None
    for line in text.splitlines()[:HEADER_LINES]:
        m = HEADER.match(line)
        if m:
            fields = m.groupdict()
            return {**fields, "spec": header_field(fields["spec"]), "scenario": header_field(fields["scenario"])}, None
    return None, None


def _json_header(text: str) -> Optional[dict[str, str]]:
    """A JSON artifact's `_kvplan` key (common.json_header) in the header's field names."""

    if limits.json_too_deep(text) is not None:  # json recurses once per level: not a file kvplan wrote
        return None
    try:
        head = json.loads(text).get("_kvplan")
    except (ValueError, AttributeError):
        return None
    if not isinstance(head, dict) or not {"scenario", "plan"} <= head.keys():
        return None
    over = head.get("overrides")
    over_text = ""
    if isinstance(over, dict):
        over_text = ",".join(f"{k}={v}" for k, v in sorted(over.items()))
    return {"version": str(head.get("version", "")), "spec": str(head.get("spec", "")),
            "scenario": str(head["scenario"]), "digest": str(head["plan"]), "overrides": over_text,
            "engine": f"{head.get('engine', '')} {head.get('engine_version', '')}".strip()}


def parse_overrides(text: Optional[str]) -> Optional[dict[str, float]]:
    """`runtime_reserve=2147483648,...` → {name: bytes}; None when a name or value is not one kvplan
    writes (then the file's plan cannot be reproduced and is reported stale)."""


    out: dict[str, float] = {}
    for part in filter(None, (text or "").split(",")):
        key, _, raw = part.partition("=")
        try:
            value = float(raw)
        except ValueError:
            return None
        if key not in HEADER_OVERRIDES or key in out or not math.isfinite(value) or value < 0:
            return None
        out[key] = value
    return out


def _files(root: Path) -> tuple[list[Path], list[Path]]:
    """The files under `root` in a stable order, and the folder links among them (listed, never followed)."""
    out, links = [], []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        links += [Path(dirpath) / d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]
        out += [Path(dirpath) / f for f in sorted(filenames)]
    return out, links


def _not_emitted(result: CheckResult, root: Path, why: str) -> Diagnostic:
    """KV401 for a path in the emitted folder that no `kvplan emit` wrote: its plan cannot be checked."""
    return make(STALE_CONFIG, f"{why} (no `kvplan emit` writes one), so its plan digest is not checked",
                _span(result, None),
                help=f"remove it, then rerun `kvplan emit {result.path} -o {os.path.normpath(str(root))}`")


def _span(result: CheckResult, sc: Optional[Scenario]) -> Span:
    if sc is not None and "deployment" in sc.spans:
        return sc.spans["deployment"]
    return Span(str(result.path), 1, 1, 1, 1)


def _engine_digests(p: Plan) -> set[str]:
    """The digests of the plans made for each engine (an engine target other than the spec's engine is written
    from its own plan, kvplan/app/replan.py)."""
    return {for_engine(p, e, suggest=False).digest for e in concrete()}


def _memo(seen: dict[int, set[str]], p: Plan) -> set[str]:
    if id(p) not in seen:
        seen[id(p)] = _engine_digests(p)
    return seen[id(p)]


def check_digests(result: CheckResult) -> list[Diagnostic]:
    """KV401 for each emitted file whose plan digest differs from the spec's plan now."""
    root = emitted_dir(str(result.path))
    if root.is_symlink():
        return [_not_emitted(result, root, f"{os.path.normpath(str(root))} is a symbolic link")]
    if not root.is_dir():
        return []
    paths, links = _files(root)
    out = [_not_emitted(result, root, f"{os.path.normpath(str(d))} is a symbolic link to a folder") for d in links]
    found = []
    for f in paths:
        h, why = read_header(f)
        if why is not None:
            out.append(_not_emitted(result, root, why))
        elif h is not None:
            found.append((f, h))
    if not found:
        return out

    by_overrides: dict[str, dict[str, Plan]] = {}

    def plans(over_text: str) -> Optional[dict[str, Plan]]:
        over = parse_overrides(over_text)
        if over is None:
            return None
        key = ",".join(f"{k}={v!r}" for k, v in sorted(over.items()))
        if key not in by_overrides:
            # a digest covers what is unmet, not the suggestions: they are not searched (lint bounds that search)
            made = (plan(sc, suggest=False, **cast(Overrides, over)) for sc in scenarios_for(result))
            by_overrides[key] = {p.scenario.name: p for p in made}
        return by_overrides[key]

    engine_digests: dict[int, set[str]] = {}
    for path, h in found:
        shown = os.path.normpath(str(path))
        now = plans(h.get("overrides") or "")
        if now is None:
            out.append(make(STALE_CONFIG, f"{shown} names overrides kvplan does not write ({h.get('overrides')}); "
                                          "its plan cannot be made again", _span(result, None),
                            help=f"rerun `kvplan emit {result.path} -o {os.path.normpath(str(root))}`"))
            continue
        p = now.get(h["scenario"])
        if p is None:
            out.append(make(STALE_CONFIG, f"{shown} was emitted for scenario '{h['scenario']}', which the spec no "
                                          "longer has", _span(result, None),
                            help=f"delete it, or rerun `kvplan emit {result.path} -o {os.path.normpath(str(root))}`"))
        elif h["digest"] != p.digest and h["digest"] not in _memo(engine_digests, p):
            out.append(make(STALE_CONFIG, f"{shown} ({h['engine']}) was emitted from plan {h['digest']}; the spec now "
                                          f"plans {p.digest}", _span(result, p.scenario),
                            help=f"rerun `kvplan emit {result.path} -o {os.path.normpath(str(root))}`"))
    return out
