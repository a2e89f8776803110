"""Models by Hugging Face repo id: the catalog first, then the checkpoint's own config.json (docs/hub.md).

`resolve(name)` gives the Model a name stands for:

1. a catalog id, alias or any repo id a catalog entry lists (`hf_id`, `hf_ids`), with no file read;
2. a local checkpoint directory (or a config.json path): its config.json, and its
   model.safetensors.index.json when there is one;
3. any other `org/name`: the same two files through `huggingface_hub`, from the local Hugging Face cache
   first (`HF_HUB_CACHE`, else `HF_HOME`/hub, else ~/.cache/huggingface/hub), from the hub only when the
   cache lacks them and `HF_HUB_OFFLINE` is not set.

The files read are returned with their revision (the commit hash of the cache's
`snapshots/<commit>/` folder) and go into the plan's inputs (`Model.weight_bytes.source`, `Model.source`).
Weight bytes come from kvplan.catalog.weight_bytes: the index's `metadata.total_size`, else the
config's `quantization_config`, else (no `weight_bytes`) the spec's declared `weights` dtype.
"""

from __future__ import annotations

import json
import logging
import os
import re
from typing import Mapping, Optional

import attrs

from kvplan.base import files
from kvplan.base.errors import CatalogError, ConfigError, KvplanError
from kvplan.base.json_types import JSONObject, JSONValue
from kvplan.base.records import record
from kvplan.catalog import Model, WeightBytes, get_model, hf_config, weight_bytes

#: `org/name`, as the hub spells repo ids (letters, digits, `-`, `_`, `.`; at most 96 characters each).
REPO_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}")
CONFIG = "config.json"
INDEX = "model.safetensors.index.json"
_TRUE = frozenset({"1", "on", "yes", "true"})


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
    return REPO_ID.fullmatch(name) is not None and ".." not in name


def offline() -> bool:
    """HF_HUB_OFFLINE, read when asked (huggingface_hub reads it once, at import)."""
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in _TRUE


def cache_dir() -> str:
    """The Hugging Face hub cache, as huggingface_hub.constants computes it, read when asked."""
    for key in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if os.environ.get(key):
            return os.path.expanduser(os.environ[key])
    home = os.environ.get("HF_HOME") or os.path.join(os.environ.get("XDG_CACHE_HOME") or "~/.cache", "huggingface")
    return os.path.join(os.path.expanduser(home), "hub")


def _not_found(repo: str, why: str) -> CatalogError:
    return CatalogError(f"model '{repo}' is not in the catalog, and {why}",
                        help="`kvplan models` lists the catalog; download it first "
                             f"(`huggingface-cli download {repo} config.json model.safetensors.index.json`), "
                             "unset HF_HUB_OFFLINE, or give the path of its config.json")


def _fetch(repo: str, filename: str, revision: Optional[str], required: bool) -> Optional[HubFile]:
    """One file of a hub repo, from the cache first; None for an optional file the repo or cache lacks."""
    # Lazy: huggingface_hub costs ~0.1 s to import, and only a repo id outside the catalog needs it.
    from huggingface_hub import hf_hub_download, try_to_load_from_cache

    # huggingface_hub.utils exports these from 0.24 (whose huggingface_hub.errors lacks two of them) on; the
    # newest releases keep them there without declaring them in __all__
    from huggingface_hub.utils import (  # type: ignore[attr-defined, unused-ignore]
        EntryNotFoundError,
        HfHubHTTPError,
        LocalEntryNotFoundError,
    )

    where = cache_dir()
    hit = try_to_load_from_cache(repo, filename, cache_dir=where, revision=revision)
    path: Optional[str] = hit if isinstance(hit, str) else None
    if path is None and hit is not None:  # the cache records that the repo has no such file
        if required:
            raise _not_found(repo, f"the cached repo has no {filename}")
        return None
    if path is None:
        if offline():
            if required:
                raise _not_found(repo, f"HF_HUB_OFFLINE is set and the local cache ({where}) has no {filename} for it")
            return None
        quiet = logging.getLogger("huggingface_hub")
        level = quiet.level
        quiet.setLevel(logging.ERROR)  # its retry messages are not kvplan's one line
        try:
            path = hf_hub_download(repo, filename, revision=revision, cache_dir=where, etag_timeout=5)
        except LocalEntryNotFoundError:  # a subclass of EntryNotFoundError in huggingface_hub 1.x: first
            if required:
                raise _not_found(repo, f"it is not in the local cache ({where}) and the hub cannot be "
                                       "reached") from None
            return None
        except EntryNotFoundError:
            if required:
                raise _not_found(repo, f"the repo has no {filename}") from None
            return None
        except HfHubHTTPError as e:
            status = getattr(getattr(e, "response", None), "status_code", None)
            raise _not_found(repo, f"the hub answered {status or 'an error'} for it (a private or gated repo "
                                   "needs HF_TOKEN)") from None
        except OSError as e:
            raise _not_found(repo, f"it could not be fetched: {e.strerror or e}") from None
        finally:
            quiet.setLevel(level)
    assert path is not None
    return HubFile(repo=repo, filename=filename, revision=files.name(files.parent(path)), path=path)


def _read_json(f: HubFile) -> JSONObject:
    text = files.read_text(f.path, what=f.filename)
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
    cfg = _fetch(repo, CONFIG, revision, required=True)
    assert cfg is not None
    index = _fetch(repo, INDEX, cfg.revision, required=False)
    return _from_files(repo, cfg, index, repo)


def resolve(name: str) -> Resolved:
    """The model `name` stands for: catalog (id, alias, repo id), local checkpoint path, or hub repo id."""
    try:
        return Resolved(get_model(name))
    except KvplanError:
        if not (is_repo_id(name) or os.path.exists(name)):
            raise
    if os.path.exists(name):
        return resolve_path(name)
    return resolve_repo(name)


def resolve_model(name: Optional[str], config_path: Optional[str]) -> Model:
    """`--model NAME` (catalog, local checkpoint or repo id) or `--model-config PATH`: exactly one of the two."""
    if config_path is not None and name is None:
        return resolve_path(config_path).model
    try:
        return hf_config.resolve_model(name, config_path)
    except CatalogError:
        if name is None or config_path is not None or not (is_repo_id(name) or os.path.exists(name)):
            raise
    return resolve(name).model


__all__ = ["CONFIG", "INDEX", "HubFile", "Resolved", "cache_dir", "checkpoint_bytes", "is_repo_id", "offline",
           "resolve", "resolve_model", "resolve_path", "resolve_repo"]
