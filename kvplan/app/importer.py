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

import json
import os
import re
from typing import Callable, Mapping, Optional, Sequence

import attrs

from kvplan.base import controls, files, limits
from kvplan.base.errors import CatalogError
from kvplan.base.records import record
from kvplan.base.units import fmt_unit
from kvplan.catalog import Model, aliases, by_repo_id, get_device, hub, models, settings, suggest, weight_bytes
from kvplan.catalog.engines import get_engine
from kvplan.catalog.quality import BUDGETS, admissible
from kvplan.engines import TARGETS
from kvplan.engines.flagparse import LIMIT_HELP, MAX_TOKENS, DeploymentReadError, Read, in_range, split_command
from kvplan.engines.sglang import sglang_tokens
from kvplan.engines.trtllm import trtllm_tokens
from kvplan.engines.vllm import vllm_tokens
from kvplan.lang import check_source
from kvplan.lang.fmt import format_source
from kvplan.lang.spec import quote
from kvplan.planner.batch import fits_at
from kvplan.planner.search import closest_tp, tp_options


@record
class Imported:
    """The .kvp text and the warnings to print (each also a comment in the text)."""

    text: str
    warnings: tuple[str, ...]
    model: str
    device: str
    pins: tuple[tuple[str, str], ...]
    #: Files to write beside the spec, (path relative to the spec's folder, text): a --model-config from outside
    #: that folder, copied so that the spec reads it where it lies (a spec reads only its own tree).
    copies: tuple[tuple[str, str], ...] = ()


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
    by_hf = by_repo_id()
    if low in by_hf:
        return by_hf[low], f"catalog {by_hf[low].id} (one of its Hugging Face repos)"
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
    copies: tuple[tuple[str, str], ...] = ()  # the files `block` names, copied beside the spec (Imported.copies)
    source: Optional[str] = None              # the config path the copies come from, for checking before writing


def _model(engine: str, r: Read, opts: Options) -> _ModelChoice:
    """--model, else --model-config, else the model the engine serves, if the catalog has it."""
    if opts.model and opts.model_config:
        raise DeploymentReadError("give --model or --model-config, not both")
    if opts.model:
        m = hub.resolve(opts.model).model
        why = f"--model {opts.model}"
        if r.model_ref:
            why += f" (the engine serves {r.model_ref})"
        return _ModelChoice(m, m.id, why)
    if opts.model_config:
        # fails here, not at lint time, if the config is unreadable; the checkpoint's weight bytes as lint reads them
        m = hub.resolve_path(opts.model_config).model
        model_id = _ident(r.model_ref.rstrip("/").rsplit("/", 1)[-1] if r.model_ref else m.id)
        why = (f"--model-config {opts.model_config}"
               + (f" (the engine serves {r.model_ref})" if r.model_ref else ""))
        return _config_block(r, opts, opts.model_config, m, model_id, why)
    if not r.model_ref:
        raise DeploymentReadError(f"the {get_engine(engine).described} configuration names no model",
                           help="pass --model ID (kvplan models) or --model-config PATH")
    ref = r.model_ref.strip().rstrip("/")
    found = match_model(r.model_ref)
    if found is None and hub.is_repo_id(ref):
        found = _from_hub(ref)
    if found is None:
        raise DeploymentReadError(f"model '{r.model_ref}' is not in the catalog",
                           help="pass --model ID (kvplan models lists them) or --model-config PATH "
                                "(its Hugging Face config.json)")
    m, why = found
    # a repo id the catalog lists is written as the engine named it: the spec serves that repo
    return _ModelChoice(m, ref if ref.lower() in by_repo_id() else m.id, why)


#: Where a --model-config from outside the spec's folder is copied, relative to that folder (examples/ does the same).
COPIED = "models/{id}/"


def _config_block(r: Read, opts: Options, given: str, m: Model, model_id: str, why: str) -> _ModelChoice:
    """The `model` block of a --model-config: its path relative to the spec's folder (the folder of -o, else the
    working directory) when the config lies in it; else, with -o, a copy beside the spec (the config.json and the
    safetensors index beside it, which give the weight bytes), so that lint reads it without --allow-path; else
    (stdout) the path as given, and a warning."""
    spec_dir = opts.out_dir or "."
    cfg = os.path.join(given, hub.CONFIG) if os.path.isdir(given) else given
    if files.within(cfg, (spec_dir,)):
        path = os.path.relpath(os.path.abspath(given), os.path.abspath(spec_dir))
        return _ModelChoice(m, model_id, why, (model_id, path.replace(os.sep, "/")))
    if opts.out_dir is None:
        folder = os.path.dirname(os.path.abspath(cfg))
        r.warn(f"--model-config {given} is outside the working directory, where the spec on stdout is taken to lie: "
               f"a spec reads it only when allowed (`kvplan lint --allow-path {folder}`, docs/cli-lint.md); pass "
               "-o FILE.kvp to have it copied beside the spec")
        return _ModelChoice(m, model_id, why, (model_id, given))
    into = COPIED.format(id=model_id)
    index = os.path.join(os.path.dirname(cfg), hub.INDEX)
    copies = [(into + hub.CONFIG, files.read_text(cfg, what="the model config"))]
    if os.path.isfile(index):
        copies.append((into + hub.INDEX, files.read_text(index, what="the safetensors index")))
    for rel, text in copies:
        _refuse_another(os.path.join(opts.out_dir, rel), text, given)
    r.note(f"--model-config {given} is outside the spec's folder, which is all a spec reads: copied to "
           f"{into}{hub.CONFIG}" + (f" (with its {hub.INDEX})" if len(copies) > 1 else ""))
    return _ModelChoice(m, model_id, why, (model_id, into + hub.CONFIG), tuple(copies), os.path.abspath(cfg))


def _refuse_another(dest: str, text: str, given: str) -> None:
    """A copy may replace only the same text: another file there is the user's."""
    if not os.path.lexists(dest):
        return
    if not os.path.isfile(dest) or os.path.islink(dest) or files.read_text(dest, what="a copied config") != text:
        raise DeploymentReadError(f"{dest} exists and is not a copy of --model-config {given}",
                                  help="move it, or write the spec elsewhere with -o")


def _from_hub(ref: str) -> tuple[Model, str]:
    """A repo id outside the catalog: its config.json through the Hugging Face cache (docs/hub.md)."""
    try:
        return hub.resolve_repo(ref).model, f"{ref} (Hugging Face repo, {hub.CONFIG} from the cache)"
    except CatalogError as e:
        raise DeploymentReadError(e.message, help="pass --model ID (kvplan models lists them) or "
                                  "--model-config PATH (its Hugging Face config.json), or put the repo "
                                  "in the Hugging Face cache (docs/hub.md)") from None


@record
class _Workload:
    """The workload the spec states, each value with why: batch and context are the typical load,
    `bound` the longest sequence the engine admits (workload.max_context when it differs), and
    `derive` names what the pool is to size (batch or context) when neither the engine nor the
    command line gives it."""

    batch: Optional[tuple[int, str]]
    context: tuple[int, str]
    bound: tuple[int, str]
    derive: Optional[str] = None     # "batch", "context" or None


def _workload(engine: str, r: Read, opts: Options, m: Model) -> _Workload:
    """The engine's context limit is the bound; --context gives the typical context beneath it. The
    batch is --batch, else the engine's batch limit. What neither gives is derived from the pool the
    deployment's memory buys (_derive): with a batch, the context its sequences average; without
    one, the sequences of the bound's length the pool holds."""
    if opts.batch is not None:  # the engine's own values were checked where their flags were read
        in_range(opts.batch, "--batch", limits.MAX_BATCH)
    if opts.context is not None:
        in_range(opts.context, "--context", limits.MAX_TOKENS, "a token count")
    if r.context is not None:
        bound = r.context
    elif m.max_context:
        bound = (int(m.max_context), f"the model's max context ({get_engine(engine).described} derives its limit "
                                     "from the model config when none is set)")
    elif opts.context is not None:
        bound = (opts.context, f"--context {opts.context} (the engine sets no limit)")
    else:
        raise DeploymentReadError("the configuration sets no context limit and the model declares none",
                                  help="pass --context TOKENS (e.g. 32k)")
    in_range(bound[0], "the context", limits.MAX_TOKENS, "a token count")
    if m.max_context and bound[0] > m.max_context:  # the engine refuses it too (docs/rules/KV126.md)
        raise DeploymentReadError(f"{bound[1]}: context {bound[0]:,} tokens is beyond {m.id}'s limit of "
                                  f"{int(m.max_context):,} positions", help="pass --context at most the model's limit")
    if opts.context is not None and opts.context > bound[0]:
        raise DeploymentReadError(f"--context {opts.context:,} is longer than the longest sequence the engine "
                                  f"admits, {bound[0]:,} tokens ({bound[1]})",
                                  help="--context is the typical sequence: give one at most the engine's limit")
    if opts.batch is not None:
        batch: Optional[tuple[int, str]] = (
            opts.batch, f"--batch {opts.batch}" + (f" (the engine's limit: {r.batch[1]})" if r.batch else ""))
    else:
        batch = r.batch
    if opts.context is not None:
        context = (opts.context, f"--context {opts.context} (typical; the engine's limit is max_context)")
        return _Workload(batch, context, bound, None if batch is not None else "batch")
    return _Workload(batch, bound, bound, "context" if batch is not None else "batch")


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
    return devices, f"tensor parallel {r.tp[0]} × pipeline parallel {r.pp[0]}"


def _least_budget(kv_dtype: Optional[str]) -> Optional[str]:
    """The least lossy quality budget that admits the KV dtype (kvplan.catalog.quality.BUDGETS, in order)."""
    if kv_dtype is None:
        return None
    return next((b for b in BUDGETS if kv_dtype in admissible(b).kv_dtypes), None)


def _attention_groups(engine: str, r: Read, m: Model) -> None:
    """Fold an engine's attention data parallelism into the tensor-parallel group it splits (kvplan's layout:
    tp ranks in d attention groups, pin.attention_dp): SGLang's --attn-dp-size d (or the deprecated --dp-size d
    --enable-dp-attention) over --tp-size; vLLM's --data-parallel-size d of an MoE model, whose d engines of
    --tensor-parallel-size t share their expert layers (t·d ranks in d attention groups, not d replicas)."""
    if r.attn_dp is not None and r.attn_dp[0] > 1:
        if r.dp is not None and r.dp[0] > 1:
            raise DeploymentReadError(f"{r.dp[1]} beside {r.attn_dp[1]}: SGLang refuses replicas combined with "
                                      "attention data parallelism", help="drop one of them")
        r.dp, r.dp_attention = (r.attn_dp[0], r.attn_dp[1]), (True, "")
    elif r.dp is not None and r.dp_attention is not None:
        r.note(f"{r.dp[1]} {r.dp_attention[1]}: the deprecated spelling of --attn-dp-size {r.dp[0]} (SGLang 0.5.23)")
    if engine == "vllm" and m.is_moe and r.dp is not None and r.dp[0] > 1 and r.pp[0] == 1:
        d, t = r.dp[0], r.tp[0]
        r.tp = (t * d, f"{r.tp[1] or 'tensor parallel ' + str(t)} × {r.dp[1]}: the expert layers' group")
        r.dp_attention = (True, "")
        if r.batch is not None:  # --max-num-seqs is each engine's
            r.batch = (r.batch[0] * d, f"{r.batch[1]} on each of {d} data-parallel engines")
        r.note(f"{r.dp[1]}: {m.id} is a mixture of experts, so vLLM's {d} data-parallel engines share their expert "
               f"layers over {t * d} ranks: {d} attention groups of tensor parallel {t}, not {d} replicas")
    if engine == "trtllm" and r.dp_attention is not None and r.dp_attention[0] and r.tp[0] > 1:
        r.dp = (r.tp[0], r.dp_attention[1])  # TensorRT-LLM's attention DP: every tensor-parallel rank a group
        r.dp_attention = (True, "")
        if r.batch is not None:  # max_batch_size is each rank's
            r.batch = (r.batch[0] * r.tp[0], f"{r.batch[1]} on each of {r.tp[0]} attention-DP ranks")
    ep = settings.row("pin.expert_parallel").key
    if r.ep is not None and r.ep[0] > 1:
        r.pins[ep] = (str(r.ep[0]), r.ep[1])
    if engine == "vllm" and r.expert_switch is not None and r.expert_switch[0] and m.is_moe:
        r.pins[ep] = (str(r.tp[0]), f"{r.expert_switch[1]}: the experts over all {r.tp[0]} ranks")


def _parallel(engine: str, r: Read, tp: int) -> list[tuple[str, str, str]]:
    """The pins of data parallelism: attention groups (_attention_groups) split the tensor-parallel group (the
    devices stay tp × pp); every other --dp / --data-parallel-size is that many replicas of the tp × pp
    deployment."""
    if r.dp_attention is not None and r.dp is None:
        r.note(f"{r.dp_attention[1]} without --dp: one attention group, the same as without DP attention")
        return []
    if r.dp is None or r.dp[0] == 1:
        return []
    if r.dp_attention is not None:
        if tp % r.dp[0]:
            raise DeploymentReadError(f"{r.dp[1]} with {r.dp_attention[1]}: the DP size must divide the "
                                      f"tensor-parallel size {tp}", help="SGLang refuses it; check --dp and --tp")
        said = " ".join(w for w in (r.dp[1], r.dp_attention[1]) if w)
        return [("attention_dp", str(r.dp[0]), f"{said}: {r.dp[0]} attention groups of "
                 f"{tp // r.dp[0]} rank{'s' if tp // r.dp[0] > 1 else ''}, each holding its own sequences' KV")]
    return [("replicas", str(r.dp[0]), f"{r.dp[1]}: {r.dp[0]} data-parallel replicas sharing the devices above")]


def _pins(engine: str, r: Read, devices: int, dev_why: str) -> list[tuple[str, str, str]]:
    """(key, value, why) of each pin: the engine's KV choices, the device count, then its memory,
    step and parallel settings."""
    pins: list[tuple[str, str, str]] = []
    if r.kv_dtype is not None:
        pins.append(("kv_dtype", r.kv_dtype[0], r.kv_dtype[1]))
    if r.block_size is not None:
        pins.append(("block_size", str(r.block_size[0]), r.block_size[1]))
    if r.prefix_caching is not None:
        pins.append(("prefix_caching", "on" if r.prefix_caching[0] else "off", r.prefix_caching[1]))
    if r.tier is not None:
        pins.append(("tier", r.tier[0], r.tier[1]))
    reps = r.dp[0] if r.dp is not None and r.dp_attention is None else 1  # devices are the total (docs/service.md)
    pins.append(("devices", str(devices * reps), dev_why if reps == 1 else f"{dev_why} × {reps} data-parallel "
                 f"replicas ({r.dp[1] if r.dp is not None else ''}): the devices in all"))
    for key, (n, flag) in (("tensor_parallel", r.tp), ("pipeline_parallel", r.pp)):  # the split, not only its count
        pins.append((key, str(n), flag or f"the engine's default: one {'stage' if key[0] == 'p' else 'rank'}"))
    for row in settings.rows("pin"):  # the engine pins read, in the table's order (kvplan.catalog.settings)
        got, carrier = r.pins.get(row.key), row.engines.get(engine)
        if got is not None:
            pins.append((row.key, got[0], f"{got[1]} ({carrier.note})" if carrier and carrier.note else got[1]))
    pins += _parallel(engine, r, r.tp[0])
    return pins


def import_deployment(engine: str, text: str, opts: Options = Options(), base_dir: str = ".") -> Imported:
    """The .kvp equivalent of one engine deployment: read → model → device → weights → workload →
    devices → pins → quality budget, then what the flags leave open derived from the pool (_derive)."""

    if not text.strip():
        raise DeploymentReadError("nothing to import: the command line or file is empty")
    r = read(engine, text, base_dir, opts.source_path or "config")
    model = _model(engine, r, opts)
    if not opts.device:
        raise DeploymentReadError(f"the {get_engine(engine).described} configuration does not say which device "
                                  "it runs on",
                           help="pass --device ID (kvplan devices lists them)")
    dev = get_device(opts.device)
    _checkpoint_weights(r, opts, model.model)
    _attention_groups(engine, r, model.model)
    wl = _workload(engine, r, opts, model.model)
    devices, dev_why = _devices(r, model.model)
    pins = _pins(engine, r, devices, dev_why)
    budget = _least_budget(r.kv_dtype[0] if r.kv_dtype is not None else None)

    def spec(batch: tuple[int, str], context: tuple[int, str], block: Optional[tuple[str, str]] = model.block) -> str:
        return _render(engine, opts, r, _Spec(model.id, model.why, block, dev.id, batch, context, wl.bound,
                                              budget, pins))

    # the copies are written after the spec is made: until then it is checked on the config they copy
    before = model.block if model.source is None else (model.id, model.source)
    batch, context = _derive(engine, wl, lambda b, c: spec(b, c, before), opts)
    warnings = tuple(r.warnings)
    return Imported(text=spec(batch, context), warnings=warnings, model=model.id, device=dev.id,
                    pins=tuple((k, v) for k, v, _ in pins), copies=model.copies)


# --------------------------------------------------------------- checkpoint

_TORCH_DTYPES = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}
#: quantization_config.quant_method -> the weight dtype it stores (by its `bits` where it has them). Only
#: the width: the exact bytes of a quantized checkpoint (scales, unquantized layers) are the catalog's.
_QUANT_METHODS: Mapping[str, Mapping[Optional[int], str]] = {
    "fp8": {None: "fp8"}, "fbgemm_fp8": {None: "fp8"}, "mxfp4": {None: "fp4"},
    "awq": {4: "int4", None: "int4"}, "gptq": {4: "int4", 8: "int8", None: "int4"}, "bitsandbytes": {},
}


def checkpoint_weights(config: Mapping[str, object], where: str) -> tuple[Optional[tuple[str, str]], Optional[str]]:
    """The weight dtype a config.json declares, and why: `quantization_config.quant_method` (fp8,
    mxfp4, awq/gptq by `bits`), else `torch_dtype`. The second item is a warning when the config names
    a quantization kvplan has no width for (None otherwise)."""
    quant = config.get("quantization_config")
    method = quant.get("quant_method") if isinstance(quant, dict) else None
    if isinstance(method, str) and method:
        bits = quant.get("bits") if isinstance(quant, dict) else None
        widths = _QUANT_METHODS.get(method.lower(), {})
        dt = widths.get(bits if isinstance(bits, int) else None) or widths.get(None)
        if dt is None:
            return None, (f"{where}: quantization_config.quant_method {method!r} has no weight width kvplan knows; "
                          "set `weights` by hand")
        return (dt, f"{where}: quantization_config.quant_method {method}"
                + (f", {bits} bits" if isinstance(bits, int) else "")), None
    torch_dtype = config.get("torch_dtype", config.get("dtype"))
    if isinstance(torch_dtype, str) and torch_dtype in _TORCH_DTYPES:
        return (_TORCH_DTYPES[torch_dtype], f"{where}: torch_dtype {torch_dtype}"), None
    return None, None


def _checkpoint_weights(r: Read, opts: Options, model: Model) -> None:
    """The weights the checkpoint stores (config.json, where --model-config gives one) unless the engine
    quantizes them itself (--quantization): a quantized checkpoint stays quantized under --dtype. A quantized
    checkpoint whose bytes kvplan computes (its scales included, docs/weights.md) gets no `weights` row: the
    spec is then planned at those bytes, as lint plans the same config through --model-config or a hub id,
    where `weights = fp8` would plan parameters × 1 B."""
    if opts.model_config is None:
        return
    if r.weights is not None and r.weights[1].split(" ")[0].split("=")[0] in ("-q", "--quantization"):
        return
    path = opts.model_config
    if os.path.isdir(path):
        path = os.path.join(path, "config.json")
    data = json.loads(files.read_text(path, what="the model config"))  # load_config has read it already
    found, warning = checkpoint_weights(data if isinstance(data, dict) else {}, opts.model_config)
    if warning is not None:
        r.warn(warning)
    if found is None:
        return
    if r.weights is not None:
        if "quant_method" not in found[1]:
            return  # --dtype chooses among unquantized widths
        r.note(f"{r.weights[1]}: the checkpoint is quantized, so the weights stay {found[0]}")
    own = weight_bytes.checkpoint_dtype(model) if "quant_method" in found[1] else None
    if own is not None and model.weight_bytes is not None:
        r.note(f"{found[1]}: weights are the checkpoint's own {found[0]} bytes, "
               f"{fmt_unit(model.weight_bytes.held, 'B')} with their scales (docs/weights.md), so no `weights` "
               f"line: `weights = {found[0]}` would plan parameters × its width instead")
        r.weights = None
        return
    r.weights = found


# ------------------------------------------------------------------ derive

def _derive(engine: str, wl: _Workload, spec: Callable[[tuple[int, str], tuple[int, str]], str],
            opts: Options) -> tuple[tuple[int, str], tuple[int, str]]:
    """(batch, context): what the flags left open is what the deployment's pool holds, by kvplan's own
    memory model and the engine's own pool at the memory setting the flags give (kvplan.planner.batch.fits_at
    over kvplan.model.pools, the formulas the engine's file is written from: no plan and no emitted file per
    probe), so that lint sees the deployment the engine runs: with a
    batch limit, the longest context its sequences fit at (the engine runs them at any length up to the
    bound, within the pool); without one, the sequences at the context the pool holds. Where even the
    least does not fit, the bound stays and lint reports it."""
    context = wl.context
    if wl.derive is None:
        assert wl.batch is not None
        return wl.batch, context
    provisional = spec(wl.batch or (1, ""), (1, ""))
    where = os.path.join(opts.out_dir or ".", "imported.kvp")
    allow = (os.path.dirname(os.path.abspath(opts.model_config)),) if opts.model_config else ()
    checked = check_source(provisional, where, allow)
    if len(checked.scenarios) != 1:
        raise DeploymentReadError("the imported spec does not check: " + "; ".join(
            d.message for d in checked.diagnostics if d.severity.value == "error")[:300])
    sc = attrs.evolve(checked.scenarios[0], max_context=wl.bound[0])
    # the share of memory the deployment gives its engine: its own flag (a pin), else the engine's default
    # (vLLM's 0.92, not raised: the deployment runs at it); None: the engine sizes its pool by its own rule
    default = get_engine(engine).memory
    fraction = sc.memory_fraction if sc.memory_fraction is not None else default.fraction if default else None

    def fits(b: int, c: int) -> bool:
        # kvplan's memory model and the engine's own pool at the setting the flags give (kvplan.model.pools, the
        # formula the engine's writer sizes by): no plan and no emitted file per probe
        return fits_at(attrs.evolve(sc, batch=b, context=c), fraction)

    flag = get_engine(engine).flags.batch
    if wl.derive == "context":
        assert wl.batch is not None
        b = wl.batch[0]
        if fits(b, context[0]) or not fits(b, 1):
            return wl.batch, context
        c = _largest(1, context[0], lambda x: fits(b, x))
        rounded = ", rounded down to 1Ki" if c >= 1024 else ""
        c = c - c % 1024 if c >= 1024 else c
        return wl.batch, (c, f"derived: the longest context at which {b} sequences fit the KV pool the "
                             f"pinned memory leaves (kvplan's memory model and the engine's sizing{rounded}); "
                             "pass --context for the typical one")
    if not fits(1, context[0]):
        return (1, f"{flag} is not set, and the pool holds no sequence of {context[0]:,} tokens"), context
    b = _largest(1, limits.MAX_BATCH, lambda x: fits(x, context[0]))
    return (b, f"derived: {flag} is not set; the sequences of {context[0]:,} tokens the KV pool holds "
               "(kvplan's memory model and the engine's sizing); pass --batch for the concurrency you serve"), context


def _largest(lo: int, hi: int, works: Callable[[int], bool]) -> int:
    """The largest x in [lo, hi] with works(x), given works(lo) and works monotone (true up to a point)."""
    if works(hi):
        return hi
    a, b = lo, hi
    while b - a > 1:
        mid = (a + b) // 2
        if works(mid):
            a = mid
        else:
            b = mid
    return a


# ------------------------------------------------------------------ render

def _comment(text: str) -> str:
    """`text` on one comment line: runs of white space as one space, any other control or bidirectional-formatting
    character escaped (the command line imported is untrusted: an override would reorder the spec's text)."""
    return controls.escaped(" ".join(text.split()))


@record
class _Spec:
    """What the written .kvp states, each value with why."""

    model_id: str
    model_why: str
    model_block: Optional[tuple[str, str]]
    device: str
    batch: tuple[int, str]
    context: tuple[int, str]
    bound: tuple[int, str]
    budget: Optional[str]
    pins: list[tuple[str, str, str]]


def _render(engine: str, opts: Options, r: Read, s: _Spec) -> str:
    out = ["kvplan 1",
           f"# Imported from a {get_engine(engine).described} deployment by `kvplan import --from {engine}`.",
           "# Each pin is the engine's current choice; `kvplan lint` checks it against the rules."]
    if opts.source:
        out.append(f"# source: {_comment(opts.source)}")
    out.append("")
    repo = "/" in s.model_id  # a Hugging Face repo id outside the catalog: a quoted string in the spec
    name = f"{_ident(s.model_id.rsplit('/', 1)[-1]) if repo else s.model_id}-{engine}"
    out.append(f'deployment "{name}" {{')
    for w in r.warnings:
        out.append(f"    # warning: {_comment(w)}")
    for n in r.notes:
        out.append(f"    # note: {_comment(n)}")
    if r.ignored:
        out.append(f"    # ignored (no effect on the KV cache): {_comment(' '.join(r.ignored))}")
    rows = [("model", quote(s.model_id) if repo else s.model_id, s.model_why), ("device", s.device,
                                                                                f"--device {s.device}")]
    if r.weights is not None:
        rows.append(("weights", r.weights[0], r.weights[1]))
    rows.append(("engine", engine, get_engine(engine).described))
    out += _aligned(rows, "    ")
    out += ["", "    workload {"]
    work = [("batch", str(s.batch[0]), s.batch[1]), ("context", tokens_text(s.context[0]), s.context[1])]
    if s.bound[0] != s.context[0]:
        work.append(("max_context", tokens_text(s.bound[0]), s.bound[1] + " (the longest sequence the engine admits)"))
    out += _aligned(work, "        ")
    out += ["    }"]
    out += _speculative_block(r)
    if s.budget is not None and s.budget != "lossless":
        kv = next(v for k, v, _ in s.pins if k == "kv_dtype")
        out += ["", "    quality {"]
        out += _aligned([("budget", s.budget, f"the least budget that admits the engine's kv_dtype {kv} (the "
                          "default, lossless, admits 16-bit KV only; kvplan.catalog.quality)")], "        ")
        out += ["    }"]
    out += ["", "    pin {"]
    out += _aligned(s.pins, "        ")
    out += ["    }", "}"]
    if s.model_block is not None:
        out += ["", f"model {quote(s.model_block[0])} {{", f"    config = {quote(s.model_block[1])}", "}"]

    return format_source("\n".join(out) + "\n", f"{name}.kvp")  # `kvplan fmt`'s layout, aligned


def _speculative_block(r: Read) -> list[str]:
    """The engine's speculative decoding as a `speculative` block (docs/speculative.md): its method, its draft
    tokens and its draft, each as the configuration wrote it; none where it speculates not."""
    if r.speculative is None:
        return []
    method, k, draft, written = r.speculative
    rows = [("method", method, written)]
    if k is not None:
        rows.append(("draft_tokens", str(k), ""))
    if draft and method != "ngram":
        rows.append(("draft", quote(draft), ""))
    return ["", "    speculative {", *_aligned(rows, "        "), "    }"]


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


__all__ = ["MAX_TOKENS", "DeploymentReadError", "Imported", "Options", "checkpoint_weights", "human_int",
           "import_deployment",
           "match_model", "read_source", "sglang_tokens", "split_command", "tokens_text", "trtllm_tokens",
           "vllm_tokens"]

