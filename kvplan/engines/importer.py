"""Read an existing engine deployment (vLLM / SGLang command line, TensorRT-LLM YAML) into a .kvp spec.

    import_deployment(engine, text, ...) -> Imported(text, warnings)

The engine's current KV choices become `pin`s (kv dtype, page size, prefix
caching, device count, host tier); its batch and context limits become the
workload. Flag names and defaults come from shared/reference/engines.md (vLLM
0.33.0, SGLang 0.5.23, TensorRT-LLM main). Nothing is dropped silently: a flag
that was removed, that kvplan does not know, or that has no .kvp equivalent is
a warning and a comment in the spec; flags that cannot touch the KV cache
(host, port, ...) are listed in one comment.

Each engine's reader is in its own module, next to the code that writes its
configuration (kvplan/engines/<id>.py, `Backend.read`), on the shared flag parser
(kvplan/engines/flagparse.py); this module resolves what was read (model, device,
workload, pins) and writes the .kvp.
"""

from __future__ import annotations

import os
import re
from typing import Callable, Optional, Sequence

from kvplan.base import files, limits
from kvplan.base.records import record
from kvplan.catalog import Model, aliases, get_device, get_model, models, suggest
from kvplan.catalog.engines import get_engine
from kvplan.catalog.hf_config import load_config
from kvplan.engines import TARGETS
from kvplan.engines.flagparse import LIMIT_HELP, MAX_TOKENS, DeploymentReadError, Read, in_range, split_command
from kvplan.engines.sglang import sglang_tokens
from kvplan.engines.trtllm import trtllm_tokens
from kvplan.engines.vllm import vllm_tokens
from kvplan.lang.fmt import format_source
from kvplan.planner.search import closest_tp, tp_options


@record
class Imported:
    """The .kvp text and the warnings to print (each also a comment in the text)."""

    text: str
    warnings: tuple[str, ...]
    model: str
    device: str
    pins: tuple[tuple[str, str], ...]


def human_int(value: str, flag: str) -> int:
    """'32k' -> 32000, '32K' -> 32768, '32768' -> 32768: vLLM's reading (vllm_tokens)."""
    return vllm_tokens(value, flag)[0]


def tokens_text(n: int) -> str:
    """A token count as .kvp text that means exactly n: 32k (= 32,000), 32Ki (= 32,768), or digits."""
    if n % 1000 == 0:
        return f"{n // 1000}k"
    if n % 1024 == 0:
        return f"{n // 1024}Ki"
    return str(n)


# ------------------------------------------------------------------- resolve

def match_model(ref: str) -> Optional[tuple[Model, str]]:
    """The catalog model an engine's model argument names: its hf_id (case-insensitive), a catalog id
    or alias, or a local directory named like an hf_id's last part."""
    low = ref.strip().rstrip("/").lower()
    by_hf = {m.hf_id.lower(): m for m in models().values() if m.hf_id}
    if low in by_hf:
        return by_hf[low], f"{ref} (catalog hf_id)"
    cat = models()
    if low in cat:
        return cat[low], f"{ref} (catalog id)"
    alias = aliases("model").get(low)
    if alias is not None and alias in cat:
        return cat[alias], f"{ref} (catalog alias)"
    base = low.rsplit("/", 1)[-1]
    by_base: dict[str, list[Model]] = {}
    for m in cat.values():
        if m.hf_id:
            by_base.setdefault(m.hf_id.lower().rsplit("/", 1)[-1], []).append(m)
    if base in by_base and len(by_base[base]) == 1:
        return by_base[base][0], f"{ref} (directory named like {by_base[base][0].hf_id})"
    return None


_NAME_RE = re.compile(r"[^A-Za-z0-9_.\-]+")


def _ident(text: str) -> str:
    name = _NAME_RE.sub("-", text).strip("-.") or "model"
    return name if name[0].isalpha() else "m-" + name


@record
class Options:
    """What the command line adds to the engine's flags."""

    model: Optional[str] = None          # a catalog id
    model_config: Optional[str] = None   # a config.json path (as the user gave it)
    device: Optional[str] = None
    batch: Optional[int] = None
    context: Optional[int] = None
    out_dir: Optional[str] = None        # where the .kvp will be written (config paths are made relative to it)
    source: str = ""                     # what was imported, for the header comment
    source_path: Optional[str] = None    # the file it was read from, for the places in messages


def readers() -> dict[str, Callable[[str, str, str], Read]]:
    """The engines `kvplan import --from` reads: every engine target with a reader."""
    return {t: b.read for t, b in TARGETS.items() if b.read is not None}


def read(engine: str, text: str, base_dir: str = ".", where: str = "config") -> Read:
    known = readers()
    if engine not in known:
        raise DeploymentReadError(f"unknown engine '{engine}'", help=suggest(engine, known))
    return known[engine](text, base_dir, where)


@record
class _ModelChoice:
    """The model the spec names, why, and its `model` block when it comes from a config.json."""

    model: Model
    id: str
    why: str
    block: Optional[tuple[str, str]] = None   # (block name, config.json path relative to the spec)


def _model(engine: str, r: Read, opts: Options) -> _ModelChoice:
    """--model, else --model-config, else the model the engine serves, if the catalog has it."""
    if opts.model and opts.model_config:
        raise DeploymentReadError("give --model or --model-config, not both")
    if opts.model:
        m = get_model(opts.model)
        why = f"--model {opts.model}"
        if r.model_ref:
            why += f" (the engine serves {r.model_ref})"
        return _ModelChoice(m, m.id, why)
    if opts.model_config:
        m = load_config(opts.model_config)   # fails here, not at lint time, if the config is unreadable
        path = opts.model_config
        if opts.out_dir is not None:
            path = os.path.relpath(os.path.abspath(path), os.path.abspath(opts.out_dir))
            if not files.within(opts.model_config, (opts.out_dir,)):
                folder = os.path.dirname(os.path.abspath(opts.model_config))
                r.warn(f"--model-config {opts.model_config} is outside the spec's folder: kvplan reads it from the "
                       f"spec only when allowed (`kvplan lint --allow-path {folder}`, docs/cli-lint.md)")
        model_id = _ident(r.model_ref.rstrip("/").rsplit("/", 1)[-1] if r.model_ref else m.id)
        why = (f"--model-config {opts.model_config}"
               + (f" (the engine serves {r.model_ref})" if r.model_ref else ""))
        return _ModelChoice(m, model_id, why, (model_id, path.replace(os.sep, "/")))
    if not r.model_ref:
        raise DeploymentReadError(f"the {get_engine(engine).described} configuration names no model",
                           help="pass --model ID (kvplan models) or --model-config PATH")
    found = match_model(r.model_ref)
    if found is None:
        raise DeploymentReadError(f"model '{r.model_ref}' is not in the catalog",
                           help="pass --model ID (kvplan models lists them) or --model-config PATH "
                                "(its Hugging Face config.json)")
    m, why = found
    return _ModelChoice(m, m.id, why)


def _workload(engine: str, r: Read, opts: Options, m: Model) -> tuple[tuple[int, str], tuple[int, str]]:
    """(batch, why) and (context, why): the command line's, else the engine's, else (context) the model's."""
    if opts.batch is not None:
        batch = (opts.batch, f"--batch {opts.batch}" + (f" (the engine says {r.batch[1]})" if r.batch else ""))
    elif r.batch is not None:
        batch = r.batch
    else:
        flag = get_engine(engine).flags.batch
        raise DeploymentReadError(f"the configuration sets no {flag}, so the batch is the engine's default",
                           help=f"add {flag} to it, or pass --batch N (the concurrency you serve)")
    if opts.context is not None:
        context = (opts.context, f"--context {opts.context}")
    elif r.context is not None:
        context = r.context
    elif m.max_context:
        context = (int(m.max_context), f"the model's max context ({get_engine(engine).described} derives its limit "
                                       "from the model config when none is set)")
    else:
        raise DeploymentReadError("the configuration sets no context limit and the model declares none",
                           help="pass --context TOKENS (e.g. 32k)")
    if opts.batch is not None:  # the engine's own values were checked where their flags were read
        in_range(opts.batch, "--batch", limits.MAX_BATCH)
    if opts.context is not None:
        in_range(opts.context, "--context", limits.MAX_TOKENS, "a token count")
    in_range(context[0], "the context", limits.MAX_TOKENS, "a token count")
    return batch, context


def _devices(r: Read, m: Model) -> tuple[int, str]:
    """The device count tensor × pipeline parallel gives, and why; refused when no plan can split it so."""
    devices = r.tp[0] * r.pp[0]
    if devices > limits.MAX_DEVICES:
        raise DeploymentReadError(f"tensor parallel {r.tp[0]:,} × pipeline parallel {r.pp[0]:,} is {devices:,} "
                                  f"devices; a spec takes {limits.between(1, limits.MAX_DEVICES)}", help=LIMIT_HELP)
    if r.tp[0] not in tp_options(m, devices):  # the engine would refuse it, and no plan can reproduce it
        raise DeploymentReadError(
            f"tensor parallel {r.tp[0]:,} × pipeline parallel {r.pp[0]:,} cannot split {m.id} ({m.n_q} query "
            f"heads, {m.n_kv} KV heads, {m.n_layers} layers): tensor parallel must divide the query heads and "
            "divide or be a multiple of the KV heads, and pipeline parallel must be at most the layers",
            help=f"check -tp/-pp against the model; the nearest split it takes is tensor parallel "
                 f"{closest_tp(m, r.tp[0])} × pipeline parallel {min(r.pp[0], m.n_layers)}")
    if r.pp[0] > 1:
        r.note(f"pipeline parallel {r.pp[0]}: kvplan chooses the tensor-parallel size from the device count, "
               f"so `kvplan emit` may not give back tp {r.tp[0]} × pp {r.pp[0]}")
    return devices, f"tensor parallel {r.tp[0]} × pipeline parallel {r.pp[0]}"


def _pins(r: Read, devices: int, dev_why: str) -> list[tuple[str, str, str]]:
    """(key, value, why) of each pin: the engine's KV choices, then the device count."""
    pins: list[tuple[str, str, str]] = []
    if r.kv_dtype is not None:
        pins.append(("kv_dtype", r.kv_dtype[0], r.kv_dtype[1]))
    if r.block_size is not None:
        pins.append(("block_size", str(r.block_size[0]), r.block_size[1]))
    if r.prefix_caching is not None:
        pins.append(("prefix_caching", "on" if r.prefix_caching[0] else "off", r.prefix_caching[1]))
    if r.tier is not None:
        pins.append(("tier", r.tier[0], r.tier[1]))
    pins.append(("devices", str(devices), dev_why))
    return pins


def import_deployment(engine: str, text: str, opts: Options = Options(), base_dir: str = ".") -> Imported:
    """The .kvp equivalent of one engine deployment: read → model → device → workload → devices → pins."""

    if not text.strip():
        raise DeploymentReadError("nothing to import: the command line or file is empty")
    r = read(engine, text, base_dir, opts.source_path or "config")
    model = _model(engine, r, opts)
    if not opts.device:
        raise DeploymentReadError(f"the {get_engine(engine).described} configuration does not say which device "
                                  "it runs on",
                           help="pass --device ID (kvplan devices lists them)")
    dev = get_device(opts.device)
    batch, context = _workload(engine, r, opts, model.model)
    devices, dev_why = _devices(r, model.model)
    pins = _pins(r, devices, dev_why)

    text_out = _render(engine, opts, r, model.id, model.why, model.block, dev.id, batch, context, pins)
    warnings = tuple(r.warnings)
    return Imported(text=text_out, warnings=warnings, model=model.id, device=dev.id,
                    pins=tuple((k, v) for k, v, _ in pins))


def _comment(text: str) -> str:
    return " ".join(text.split())


def _render(engine: str, opts: Options, r: Read, model_id: str, model_why: str,
            model_block: Optional[tuple[str, str]], device: str, batch: tuple[int, str],
            context: tuple[int, str], pins: list[tuple[str, str, str]]) -> str:
    out = ["kvplan 1",
           f"# Imported from a {get_engine(engine).described} deployment by `kvplan import --from {engine}`.",
           "# Each pin is the engine's current choice; `kvplan lint` checks it against the rules."]
    if opts.source:
        out.append(f"# source: {_comment(opts.source)}")
    out.append("")
    name = f"{model_id}-{engine}"
    out.append(f'deployment "{name}" {{')
    for w in r.warnings:
        out.append(f"    # warning: {_comment(w)}")
    for n in r.notes:
        out.append(f"    # note: {_comment(n)}")
    if r.ignored:
        out.append(f"    # ignored (no effect on the KV cache): {_comment(' '.join(r.ignored))}")
    rows = [("model", model_id, model_why), ("device", device, f"--device {device}")]
    if r.weights is not None:
        rows.append(("weights", r.weights[0], r.weights[1]))
    rows.append(("engine", engine, get_engine(engine).described))
    out += _aligned(rows, "    ")
    out += ["", "    workload {"]
    out += _aligned([("batch", str(batch[0]), batch[1]), ("context", tokens_text(context[0]), context[1])], "        ")
    out += ["    }", "", "    pin {"]
    out += _aligned(pins, "        ")
    out += ["    }", "}"]
    if model_block is not None:
        out += ["", f'model "{model_block[0]}" {{', f'    config = "{model_block[1]}"', "}"]

    return format_source("\n".join(out) + "\n", f"{name}.kvp")  # `kvplan fmt`'s layout, aligned


def _aligned(rows: Sequence[tuple[str, str, str]], indent: str) -> list[str]:
    """`key = value  # why`, in `kvplan fmt`'s canonical layout (no column alignment)."""
    return [f"{indent}{k} = {v}" + (f"  # {_comment(c)}" if c else "") for k, v, c in rows]


def read_source(arg: str) -> tuple[str, str, str, Optional[str]]:
    """The text to import: the contents of `arg` when it names a file, else `arg` itself.
    Returns (text, base directory for relative paths inside it, a one-line description, the file or None).

    A file is read as kvplan reads every input (kvplan.base.files): a regular file only, never a FIFO or a
    device, at most MAX_INPUT_BYTES, UTF-8 with the place of a bad byte; empty or comments only is refused.
    """
    if "\n" not in arg and "\0" not in arg and os.path.lexists(arg):
        text = files.read_text(arg, what="the file to import")
        files.refuse_blank(text, arg, what="the file to import",
                           holds="the engine's command line (`vllm serve MODEL --flag ...`) or a TensorRT-LLM YAML")
        return text, os.path.dirname(arg) or ".", f"file {os.path.basename(arg)}", arg
    if "\n" not in arg and (arg.endswith((".yaml", ".yml", ".sh", ".txt")) and " " not in arg):
        raise DeploymentReadError(f"file '{arg}' does not exist",
                           help="give an existing file, or the command line itself as one quoted argument")
    return arg, ".", " ".join(arg.split()), None


__all__ = ["MAX_TOKENS", "DeploymentReadError", "Imported", "Options", "human_int", "import_deployment",
           "match_model", "read_source", "sglang_tokens", "split_command", "tokens_text", "trtllm_tokens",
           "vllm_tokens"]

