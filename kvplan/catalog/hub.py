"""Models by Hugging Face repo id: the catalog first, then the checkpoint's own config.json (docs/hub.md).

`resolve(name)` gives the Model a name stands for:

1. a catalog id, alias or any repo id a catalog entry lists (`hf_id`, `hf_ids`), with no file read;
2. a local checkpoint directory (or a config.json path): its config.json, and its
   model.safetensors.index.json when there is one;
3. any other `org/name`: the same two files through `huggingface_hub`, from the local Hugging Face cache
   first (`HF_HUB_CACHE`, else `HF_HOME`/hub, else ~/.cache/huggingface/hub), from the hub only when the
   cache lacks the config.json, `HF_HUB_OFFLINE` is not set and the run allows the network (`network()`:
   `kvplan lint` does not unless `--online`). One short attempt per repo and run, no retries; once the hub
   cannot be reached, no other repo tries in that run. The index of a repo whose config.json is cached is
   read from the cache or not at all.

The files read are returned with their revision (the commit hash of the cache's
`snapshots/<commit>/` folder) and go into the plan's inputs (`Model.weight_bytes.source`, `Model.source`).
Weight bytes come from kvplan.catalog.weight_bytes: the index's `metadata.total_size`, else the
config's `quantization_config`, else (no `weight_bytes`) the spec's declared `weights` dtype.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
import os
import re
from typing import Iterator, Mapping, Optional, Union

import attrs

from kvplan.base import files, limits
from kvplan.base.errors import CatalogError, ConfigError, KvplanError, Span
from kvplan.base.json_types import JSONObject, JSONValue
from kvplan.base.records import record
from kvplan.catalog import Model, WeightBytes, get_model, hf_config, weight_bytes

#: `org/name`, as the hub spells repo ids (letters, digits, `-`, `_`, `.`; at most 96 characters each).
REPO_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}")
CONFIG = "config.json"
INDEX = "model.safetensors.index.json"
_TRUE = frozenset({"1", "on", "yes", "true"})
#: Seconds the one attempt to reach the hub for a repo may take (no retries: docs/hub.md).
ATTEMPT_SECONDS = 3.0
#: A commit hash, as the cache's refs/<branch> files hold it.
_COMMIT = re.compile(r"[0-9a-f]{40}")


class _Run:
    """Whether a run may reach the hub, and its failed attempts by repo ("" once the hub could not be reached
    at all): a repo is never tried twice in a run. Mutable, and no record: it records what the run has tried."""

    __slots__ = ("failed", "online")

    def __init__(self, online: bool) -> None:
        self.online = online
        self.failed: dict[str, str] = {}


_RUN: contextvars.ContextVar[Optional[_Run]] = contextvars.ContextVar("kvplan_hub_run", default=None)
_PROCESS = _Run(True)  # the run outside any network() block: the whole process


def _run() -> _Run:
    return _RUN.get() or _PROCESS


@record
class HubFile:
    """One file read for a model: the repo (or local folder), its name, the revision, where it lies."""

    repo: str
    filename: str
    revision: str
    path: str

    @property
    def cited(self) -> str:
        return f"{self.filename} of {self.repo} @ {self.revision}"


@record
class Resolved:
    model: Model
    files: tuple[HubFile, ...] = ()


def is_repo_id(name: str) -> bool:
    return REPO_ID.fullmatch(name) is not None and ".." not in name and not looks_like_path(name)


def looks_like_path(name: str) -> bool:
    """A file or folder path, not a repo id: a `.json` name, a path that starts at a root, `.` or `~`, a
    backslash, or more than one `/` (a repo id has exactly one)."""
    return (name.lower().endswith(".json") or name.startswith(("/", ".", "~")) or "\\" in name
            or name.count("/") > 1)


def block_name(path: str) -> str:
    """A `model` block name for a config: the name of its folder (or of the repo), where the grammar takes it
    as a name, else `local`."""
    parts = [p for p in re.split(r"[/\\]", path) if p and p not in (".", "..")]
    if parts and parts[-1].lower().endswith(".json"):
        parts.pop()
    tail = parts[-1] if parts else ""
    return tail if re.fullmatch(r"[A-Za-z][A-Za-z0-9_.\-]*", tail) else "local"


def offline() -> bool:
    """HF_HUB_OFFLINE, read when asked (huggingface_hub reads it once, at import)."""
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in _TRUE


@contextlib.contextmanager
def network(allowed: bool) -> Iterator[None]:
    """Within the block, whether a repo the cache lacks may be fetched from the hub (`kvplan lint`: only with
    --online, so that a spec gives the same findings with and without a network)."""
    token = _RUN.set(_Run(allowed))
    try:
        yield
    finally:
        _RUN.reset(token)


def _why_not_online() -> Optional[str]:
    """Why this run does not reach the hub, or None when it may."""
    if offline():
        return "HF_HUB_OFFLINE is set"
    if not _run().online:
        return "`kvplan lint` reads only the cache unless --online is given"
    return None


def cache_dir() -> str:
    """The Hugging Face hub cache, as huggingface_hub.constants computes it, read when asked."""
    for key in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if os.environ.get(key):
            return os.path.expanduser(os.environ[key])
    home = os.environ.get("HF_HOME") or os.path.join(os.environ.get("XDG_CACHE_HOME") or "~/.cache", "huggingface")
    return os.path.join(os.path.expanduser(home), "hub")


def download_command() -> str:
    """The download command of the installed huggingface_hub: `hf` from 0.34 on (1.0 removed
    `huggingface-cli`), `huggingface-cli` before."""
    from huggingface_hub import __version__

    try:
        major, minor = (int(x) for x in re.findall(r"\d+", __version__)[:2])
    except ValueError:  # not numbered as releases are: a development build of a recent one
        return "hf download"
    return "hf download" if (major, minor) >= (0, 34) else "huggingface-cli download"


def _not_found(repo: str, why: str) -> CatalogError:
    tips = [f"download it first (`{download_command()} {repo} {CONFIG} {INDEX}`)"]
    if offline():
        tips.append("unset HF_HUB_OFFLINE")
    elif not _run().online:
        tips.append("pass --online")
    name = block_name(repo)
    tips.append(f'give its config.json: `--model-config path/config.json` on the command line, in a spec '
                f'`model "{name}" {{ config = "path/config.json" }}` and `model = {name}`')
    return CatalogError(f"model '{repo}' is not in the catalog, and {why}",
                        help="`kvplan models` lists the catalog; " + "; or ".join(tips))


_ABSENT = "absent"  # the cache records that the repo has no such file


def _cached(repo: str, filename: str, revision: Optional[str]) -> Union[HubFile, str, None]:
    """One file of a hub repo from the local cache: the file, _ABSENT, or None when the cache does not know."""
    # Lazy: huggingface_hub costs ~0.1 s to import, and only a repo id outside the catalog needs it.
    from huggingface_hub import try_to_load_from_cache

    where = cache_dir()
    _check_ref(repo, revision, where)
    hit = try_to_load_from_cache(repo, filename, cache_dir=where, revision=revision)
    if isinstance(hit, str):
        return HubFile(repo=repo, filename=filename, revision=files.name(files.parent(hit)), path=hit)
    return None if hit is None else _ABSENT


def _check_ref(repo: str, revision: Optional[str], where: str) -> None:
    """A branch's refs file in the cache must hold a commit hash: huggingface_hub builds a path from it."""
    ref = os.path.join(where, "models--" + repo.replace("/", "--"), "refs", revision or "main")
    if revision is not None and _COMMIT.fullmatch(revision) or not os.path.isfile(ref):
        return
    if _COMMIT.fullmatch(files.read_text(ref, limit=4096, what=f"refs/{revision or 'main'}").strip()) is None:
        raise ConfigError(f"the Hugging Face cache's refs/{revision or 'main'} of {repo} ({ref}) does not hold a "
                          "commit hash (40 hexadecimal digits): the cache is damaged",
                          help=f"delete {os.path.dirname(os.path.dirname(ref))} and download the repo again "
                               f"(`{download_command()} {repo} {CONFIG}`)")


def _fetch(repo: str, filename: str, revision: Optional[str], hit: Optional[str]) -> HubFile:
    """A required file the cache lacks (`hit`: what _cached said): from the hub, in one short attempt, when
    this run may reach it and no attempt for the repo failed before."""
    where = cache_dir()
    if hit == _ABSENT:
        raise _not_found(repo, f"the cached repo has no {filename}")
    why = _why_not_online()
    if why is not None:
        raise _not_found(repo, f"the local cache ({where}) has no {filename} for it ({why})")
    failed = _run().failed
    if repo in failed or "" in failed:
        raise _not_found(repo, failed.get(repo, failed[""]))
    try:
        return _download(repo, filename, revision, where)
    except CatalogError as e:
        failed[repo] = e.message.partition(", and ")[2]
        raise


def _download(repo: str, filename: str, revision: Optional[str], where: str) -> HubFile:
    """One attempt to reach the hub (ATTEMPT_SECONDS, no retries: its file metadata), then the download."""
    from huggingface_hub import get_hf_file_metadata, hf_hub_download, hf_hub_url

    # huggingface_hub.utils exports these from 0.24 (whose huggingface_hub.errors lacks two of them) on; the
    # newest releases keep them there without declaring them in __all__
    from huggingface_hub.utils import EntryNotFoundError, HfHubHTTPError  # type: ignore[attr-defined, unused-ignore]

    quiet = logging.getLogger("huggingface_hub")
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # its messages are not kvplan's one line
    try:
        get_hf_file_metadata(hf_hub_url(repo, filename, revision=revision), timeout=ATTEMPT_SECONDS)
        path = hf_hub_download(repo, filename, revision=revision, cache_dir=where, etag_timeout=ATTEMPT_SECONDS)
    except EntryNotFoundError:
        raise _not_found(repo, f"the repo has no {filename}") from None
    except HfHubHTTPError as e:
        status = getattr(getattr(e, "response", None), "status_code", None)
        raise _not_found(repo, f"the hub answered {status or 'an error'} for it (a private or gated repo "
                               "needs HF_TOKEN)") from None
    except Exception as e:  # noqa: BLE001 - the transport's own errors (requests before 1.0, httpx after)
        if not _unreachable(e):
            raise
        _run().failed[""] = (f"the local cache ({where}) has no {filename} for it, and the hub could not be "
                                 f"reached earlier in this run ({type(e).__name__})")
        raise _not_found(repo, f"it is not in the local cache ({where}) and the hub could not be reached in "
                               f"{ATTEMPT_SECONDS:g} s ({type(e).__name__})") from None
    finally:
        quiet.setLevel(level)
    return HubFile(repo=repo, filename=filename, revision=files.name(files.parent(path)), path=path)


#: The packages whose exceptions mean the hub was not reached: huggingface_hub's transports, by release.
_TRANSPORTS = frozenset({"huggingface_hub", "requests", "urllib3", "httpx", "httpx2", "httpcore"})


def _unreachable(e: Exception) -> bool:
    """Whether an error of the attempt says the hub was not reached (not a bug to let through)."""
    return isinstance(e, (OSError, ValueError)) or type(e).__module__.partition(".")[0] in _TRANSPORTS


def _read_json(f: HubFile) -> JSONObject:
    text = files.read_text(f.path, what=f.filename)
    deep = limits.json_too_deep(text)
    if deep is not None:  # json recurses once per level: RecursionError past about a thousand
        line, col = limits.line_col(text, deep)
        raise ConfigError(f"{f.cited} nests objects and arrays more than {limits.MAX_JSON_DEPTH} levels deep",
                          span=Span(f.path, line, col, line, col + 1),
                          help=f"a {f.filename} is two levels deep; download it again")
    try:
        data: JSONValue = json.loads(text)
    except ValueError as e:
        raise ConfigError(f"{f.cited} is not valid JSON: {e}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{f.cited} is not a JSON object")
    return data


def checkpoint_bytes(config: Mapping[str, hf_config.HFConfigValue], model: Model, cfg: HubFile,
                     index: Optional[HubFile]) -> Optional[WeightBytes]:
    """The checkpoint's weight bytes: index total_size (reported), else quantization_config (derived), else None."""
    derived = weight_bytes.from_config(config, cfg.path, cfg.cited)
    if index is not None:
        width, _ = weight_bytes.torch_width(config, cfg.path)
        found = weight_bytes.from_index(_read_json(index), config, derived, index.cited, model.params,
                                        model.params_routed, width, cfg.path)
        if found is not None:
            return found
    return derived


def _from_files(name: Optional[str], cfg: HubFile, index: Optional[HubFile], hub_id: str) -> Resolved:
    """The model the files give, with the checkpoint's weight bytes; `name` None keeps load_config's id."""
    model = hf_config.load_config(cfg.path)
    config = hf_config.load_config_data(cfg.path)
    wb = checkpoint_bytes(config, model, cfg, index)
    read = (cfg, *([index] if index is not None else []))
    source = "; ".join(f.path if f.revision == "local" else f.cited for f in read)  # a local file by its path
    name = model.id if name is None else name
    model = attrs.evolve(model, id=name, name=name, hf_id=hub_id, hf_ids=(hub_id,) if hub_id else (),
                         source=source, weight_bytes=wb)
    return Resolved(model, read)


def resolve_path(path: str) -> Resolved:
    """A local checkpoint: a directory holding config.json (and maybe the index), or a config.json path.

    Every local config (`--model-config`, a spec's `model { config = ... }`, `checkpoint = "dir"`) comes
    through here, so that it is planned at the same weight bytes as the same files through the hub. The id is
    load_config's: the file's stem, or the folder's name for a config.json."""
    p = files.pure_path(path)  # paths as text, as pathlib writes them (kvplan.base.files: no pathlib at start-up)
    is_dir = os.path.isdir(p)
    folder = p if is_dir else files.parent(p)
    cfg_path = files.pure_path(os.path.join(p, CONFIG)) if is_dir else p
    if not os.path.lexists(cfg_path):  # anything else there is load_config's to refuse (a FIFO, a device)
        raise ConfigError(f"config file '{cfg_path}' does not exist",  # as load_config says it
                          help="give the path of a Hugging Face config.json")
    cfg = HubFile(repo=folder, filename=files.name(cfg_path), revision="local", path=cfg_path)
    idx_path = files.pure_path(os.path.join(folder, INDEX))
    index = (HubFile(repo=folder, filename=INDEX, revision="local", path=idx_path)
             if os.path.isfile(idx_path) else None)
    return _from_files(None, cfg, index, "")


def resolve_repo(repo: str, revision: Optional[str] = None) -> Resolved:
    """A hub repo outside the catalog, through the cache (offline when HF_HUB_OFFLINE is set)."""
    if not is_repo_id(repo):
        raise CatalogError(f"'{repo[:100]}' is not a Hugging Face repo id", help="write it as `org/name`")
    hit = _cached(repo, CONFIG, revision)
    cfg = hit if isinstance(hit, HubFile) else _fetch(repo, CONFIG, revision, hit)
    index = _cached(repo, INDEX, cfg.revision)  # optional: a cached repo without it never goes online
    if index is None and not isinstance(hit, HubFile):  # the config was just downloaded: its index too, if any
        try:
            index = _download(repo, INDEX, cfg.revision, cache_dir())
        except CatalogError:
            index = None
    return _from_files(repo, cfg, index if isinstance(index, HubFile) else None, repo)


def resolve(name: str) -> Resolved:
    """The model `name` stands for: catalog (id, alias, repo id), local checkpoint path, or hub repo id."""
    try:
        return Resolved(get_model(name))
    except KvplanError:
        if not (is_repo_id(name) or os.path.exists(name) or looks_like_path(name)):
            raise
    if os.path.exists(name) or looks_like_path(name):  # a path that does not exist is refused as a path
        return resolve_path(name)
    return resolve_repo(name)


def resolve_model(name: Optional[str], config_path: Optional[str]) -> Model:
    """`--model NAME` (catalog, local checkpoint or repo id) or `--model-config PATH`: exactly one of the two."""
    if config_path is not None and name is None:
        return resolve_path(config_path).model
    try:
        return hf_config.resolve_model(name, config_path)
    except CatalogError:
        if name is None or config_path is not None or not (
                is_repo_id(name) or os.path.exists(name) or looks_like_path(name)):
            raise
    return resolve(name).model


__all__ = ["ATTEMPT_SECONDS", "CONFIG", "INDEX", "HubFile", "Resolved", "block_name", "cache_dir",
           "checkpoint_bytes", "download_command", "is_repo_id", "looks_like_path", "network", "offline", "resolve",
           "resolve_model", "resolve_path", "resolve_repo"]
