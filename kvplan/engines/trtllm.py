"""TensorRT-LLM (main, newer than 1.2.1): the plan as trtllm.yaml for `trtllm-serve MODEL --config`,
and trtllm.sh with that command.

How TensorRT-LLM sizes its KV pool (docs/engine-memory.md § TensorRT-LLM; NVIDIA/TensorRT-LLM, files at the
commits named):

    bytes per token  = x × 2 (16-bit), x (FP8), ceil(x/2) + ceil(x/16) (NVFP4: FP8 scale per 16 values)
    x                = kv_factor × layers on the rank × head_dim × ceil(n_kv / tp)   (MHA, kv_factor 2)
                       1 × layers × (kv_lora_rank + qk_rope_head_dim)                 (MLA: no TP division)
                       (tensorrt_llm/_torch/pyexecutor/resource_manager.py, KVCacheManager.__init__'s
                        num_kv_heads_per_layer and get_cache_bytes_per_token, commit
                        d2a5560abdadfbdf496ce057696103e0509a71ed)
    free_gpu_memory_fraction of the memory free after the profiling run: (total − peak) × fraction, peak = weights
                       + activations at max_num_tokens + non-torch memory (tensorrt_llm/_torch/pyexecutor/_util.py,
                       KvCacheCreator._cal_max_memory, commit 0004396720054fd8e205cbf616f21f0b57c6b412); kvplan
                       models the peak as weights + its activation and runtime reserves (assumed)
    tokens           = min(max_tokens, fraction × free / bytes per token) when both are set (the field's default
                       fraction is 0.9, so it always applies); blocks = int(tokens // tokens_per_block);
                       host blocks = host_cache_size // bytes per token // tokens_per_block
                       (resource_manager.py calculate_max_num_blocks, same commit; the fraction must be < 1.0)
    KvCacheConfig    = tensorrt_llm/llmapi/llm_args.py (commit 0004396720054fd8e205cbf616f21f0b57c6b412): dtype
                       auto|fp8|fp8_ds_mla|nvfp4, tokens_per_block 32, host_cache_size in bytes

`--sizing exact` writes `max_tokens` = the plan's blocks × tokens_per_block and a fraction that admits them with
the assumed reserves; `--sizing fill` (the default) writes the engine's default fraction 0.9 and states the
tokens it buys, or the exact settings where 0.9 buys fewer than the plan's tokens.

KV dtype: `kv_cache_config.dtype` takes auto|fp8|nvfp4. 16-bit KV is `auto`
(the checkpoint's dtype). INT8 is one of TensorRT-LLM's KV quantization
algorithms but has no `dtype` value: it is written `auto`, which picks up the
KV quantization of a checkpoint quantized with INT8 KV, and a warning says so.

The engine's facts (dtype names, page sizes, defaults, setting names) are its catalog record
(kvplan.catalog.engines); this module holds the code that writes and reads them.
`read` reads the YAML, or a `trtllm-serve MODEL --config x.yaml` line, back for
`kvplan import --from trtllm`.
"""

from __future__ import annotations

import datetime
import math
import os
import re
import shlex
from typing import Callable, Mapping, Protocol, Union

from kvplan.base import files
from kvplan.base.errors import Span
from kvplan.base.evidence import Value, derived
from kvplan.base.units import fmt_bytes
from kvplan.catalog import settings
from kvplan.catalog.engines import get_engine, kv_refusal
from kvplan.engines import common, launchers, speculative, yamlout
from kvplan.engines.common import EmitRequest, Emitted, EmittedFile
from kvplan.engines.flagparse import (
    CHUNK,
    FREE_FRACTION,
    MAXIMUM,
    POOL_CAP,
    DeploymentReadError,
    Read,
    ReadFlag,
    note_flag,
    number,
    parse_flags,
    plain_tokens,
    read_kv_dtype,
    split_command,
    strip_env,
    table_readers,
    whole,
)
from kvplan.model.pools import trtllm as pools
from kvplan.model.pools.query import ceil_div
from kvplan.planner.plan import Plan

ENGINE = get_engine("trtllm")
#: kvplan dtype -> kv_cache_config.dtype (the catalog record's, kvplan.catalog.engines).
KV_DTYPES = ENGINE.kv_names



def _dtype_notes(p: Plan, mapped: common.Mapped, notes: list[str]) -> list[str]:
    """The findings (a dtype TensorRT-LLM refuses on this device) and notes (`auto` for INT8 or 16-bit) on the KV
    dtype written; `notes` gets the notes."""
    sc = p.scenario
    findings: list[str] = []
    why = kv_refusal(ENGINE, p.kv_dtype.id, sc.device, sc.model)
    if why is not None and mapped.dtype.id != p.kv_dtype.id:
        findings.append(f"kv_dtype {p.kv_dtype.id}: {why} ({sc.device.id}); written {mapped.dtype_name}")
    if mapped.dtype.id == "int8":
        notes.append("INT8 KV: kv_cache_config.dtype takes auto|fp8|nvfp4 only, so it is `auto`; quantize the "
                     "checkpoint with the INT8 KV quantization algorithm, or auto stays 16-bit")
    elif mapped.dtype_name == "auto" and sc.weights.id != mapped.dtype.id:
        notes.append(f"KV dtype {mapped.dtype.id} is written `auto` (the checkpoint's dtype); the weights are "
                     f"{sc.weights.id}, so check that auto gives {mapped.dtype.id}")
    return findings


def _pool(req: EmitRequest, sz: common.Sizing, dtype_id: str, findings: list[str]) -> pools.TrtllmMemory:
    """TensorRT-LLM's settings for the plan's pool (kvplan.model.pools.trtllm.memory_for): exact, or fill where the
    default fraction holds it; a pool that does not fit goes to `findings`."""
    q = common.pool_query(req.plan, dtype_id, sz.block, req.reserves)
    mem = pools.memory_for(q, tokens=sz.blocks * sz.block, sizing=req.sizing)
    if not mem.fits:
        findings.append(f"the plan's pool does not fit under TensorRT-LLM: {mem.wanted:,} tokens × {mem.per_token:,} "
                        f"B need more than free_gpu_memory_fraction {mem.fraction:g} of the "
                        f"{fmt_bytes(max(0.0, mem.free))} left after weights and the assumed reserves; it gets "
                        f"{mem.tokens:,}")
    return mem


def _launch(p: Plan, held: int, notes: list[str], findings: list[str], groups: int = 1) -> launchers.Cap:
    """max_batch_size (launchers.concurrency_cap over the `held` sequences the pool holds, each rank's under
    attention DP, `groups`); the note when max_seq_len is input + output exactly, and the finding when a replica is
    more GPUs than a host holds."""
    notes += launchers.pinned_length_note(p.scenario, "max_seq_len")
    hosts = launchers.host_layout(p)
    if hosts is not None and hosts.spans:
        findings.append(f"{p.n_devices} GPUs a replica, and a host holds {hosts.size} ({hosts.size_from}): "
                        "trtllm-serve runs across nodes under an MPI launcher (mpirun, trtllm-llmapi-launch) that "
                        f"kvplan does not write, so trtllm.sh asks one host for all {p.n_devices}; set engine = vllm "
                        "or sglang for files per host")
    return launchers.concurrency_cap(p, held, "max_batch_size", groups=groups)


def _groups(p: Plan, notes: list[str]) -> int:
    """The attention groups TensorRT-LLM runs: its enable_attention_dp makes every rank one, which kvplan writes for
    a mixture of experts planned so (pin.attention_dp = tp); 1 otherwise, a pinned count it does not run said."""
    sc = p.scenario
    if p.tp > 1 and sc.attention_dp == p.tp and sc.model.is_moe:
        return p.tp
    if sc.attention_dp > 1:
        notes.append(f"pin attention_dp = {sc.attention_dp} is not written: TensorRT-LLM's enable_attention_dp makes "
                     f"each of the {p.tp} ranks its own group, and kvplan writes it for a mixture of experts only")
    return 1


def _moe_keys(p: Plan, groups: int) -> dict[str, object]:
    """enable_attention_dp (`groups` > 1) and moe_expert_parallel_size (pin.expert_parallel) where the plan has them."""
    keys: dict[str, object] = {"enable_attention_dp": True} if groups > 1 else {}
    if p.scenario.expert_parallel > 1:
        keys["moe_expert_parallel_size"] = p.scenario.expert_parallel
    return keys


# one file's sections in the order TensorRT-LLM reads them: cut, the reader would have to follow the keys across helpers
def render(req: EmitRequest) -> Emitted:
    p = req.plan
    sc = p.scenario
    mapped = common.map_choices(p, common.runnable(BACKEND, ENGINE, p))
    sz = common.size(p, mapped, req.reserves)
    notes = common.model_notes(p, BACKEND) + common.unwritten_pins(sc, ENGINE.id)
    findings = _dtype_notes(p, mapped, notes)
    mem = _pool(req, sz, mapped.dtype.id, findings)
    per_token, plan_tokens, free_after = mem.per_token, sz.blocks * sz.block, mem.free
    use_exact, fraction, tokens = mem.use_exact, mem.fraction, mem.tokens
    unfit = findings[-1] if tokens < plan_tokens else None  # TensorRT-LLM's pool, not the plan's
    host_tokens = ceil_div(sz.tier_tokens, sz.block) * sz.block if mapped.tier == "host" else 0
    host = host_tokens * per_token
    kv_cfg: dict[str, object] = {"dtype": mapped.dtype_name, "tokens_per_block": mapped.block,
                                 "enable_block_reuse": bool(p.prefix_caching)}
    if use_exact:
        kv_cfg["max_tokens"] = plan_tokens
    kv_cfg["free_gpu_memory_fraction"] = fraction
    if host:
        kv_cfg["host_cache_size"] = host
    groups = _groups(p, notes)  # each rank's pool holds its own share (common.size)
    cap = _launch(p, common.pool_sequences(sz, tokens), notes, findings, groups)
    body: dict[str, object] = {
        "tensor_parallel_size": p.tp,
        "pipeline_parallel_size": p.pp,
        "max_batch_size": cap.value,
        "max_seq_len": sc.context_bound,
        "kv_cache_config": kv_cfg,
    }
    spec_cfg = speculative.trtllm_config(p)
    if spec_cfg is not None:
        body["speculative_config"] = spec_cfg
    notes += speculative.draft_note(p)
    body.update(_moe_keys(p, groups))
    notes_by_key = {
        "kv_cache_config.max_tokens": f"{common.fmt_int(sz.blocks)} blocks of {sz.block} tokens per GPU: the plan's",
        "kv_cache_config.free_gpu_memory_fraction": (
            "of memory free after the profiling run; admits max_tokens with the assumed reserves" if use_exact
            else "KvCacheConfig's default: of memory free after the profiling run"),
    }
    if host:
        notes_by_key["kv_cache_config.host_cache_size"] = (f"bytes per GPU: {host_tokens // sz.block:,} host blocks, "
                                                           "the plan's host tier")
    how = (f"min(max_tokens, {fraction:g} × {fmt_bytes(max(0.0, free_after))} free / {per_token:,} B per token) "
           f"in blocks of {sz.block}" if use_exact else
           f"{fraction:g} × {fmt_bytes(max(0.0, free_after))} free after weights and reserves (assumed) / "
           f"{per_token:,} B per token, in blocks of {sz.block}")
    head = [common.header(req, BACKEND.label),
            f"# KV capacity (derived): {common.capacity_text(sz, tokens * groups)}; the plan stores "
            f"{common.fmt_int(math.ceil(sz.plan_tokens))} tokens for its batch of {sz.batch}",
            f"# per GPU: KV pool {common.fmt_int(tokens)} tokens × {per_token:,} B per token = "
            f"{fmt_bytes(tokens * per_token)} (derived: {how}), weights {fmt_bytes(sz.weights)} (derived), reserves "
            f"{fmt_bytes(sz.activation.value)} activations + {fmt_bytes(sz.runtime.value)} runtime (assumed), "
            f"device {fmt_bytes(sz.total)}",
            f"# sizing {req.sizing}: " + ("max_tokens = the plan's pool" if use_exact and req.sizing == "exact" else
                                          "the default fraction buys fewer than the plan's tokens: max_tokens = "
                                          "the plan's pool" if use_exact else "the default fraction"),
            cap.line,
            f"# serve: trtllm-serve {shlex.quote(common.model_ref(p))} --config trtllm.yaml (trtllm.sh)"]
    yaml = yamlout.text(head, body, notes_by_key)
    launch = common.Launch(("trtllm-serve", common.model_ref(p)), (("--config", common.beside("trtllm.yaml")),),
                           comments=tuple(head[1:-1]))
    script = common.shell_script([common.header(req, BACKEND.label)], launch.program, launch.flags)
    rows = _rows(sz, tokens, per_token, fraction, use_exact, how, groups)
    return common.finish(BACKEND, mapped, None, [EmittedFile("trtllm.yaml", yaml), EmittedFile("trtllm.sh", script)],
                         rows, notes, findings, launch=launch, unfit=unfit)


def _rows(sz: common.Sizing, tokens: int, per_token: int, fraction: float, use_exact: bool,
          how: str, groups: int = 1) -> tuple[tuple[str, Value], ...]:
    """The shared capacity rows with TensorRT-LLM's own pool, bytes per token and fraction (`tokens` one GPU's
    pool; the capacity over the `groups` attention-DP ranks' pools)."""
    own = {"kv_pool_per_gpu": derived(float(tokens * per_token), "B", f"{tokens:,} tokens × {per_token:,} B per "
                                                                      "token (TensorRT-LLM's bytes per token)"),
           "memory_needed_per_gpu": derived(sz.weights + tokens * per_token + sz.reserves, "B",
                                            "weights + KV pool + reserves")}
    return tuple((k, own.get(k, v)) for k, v in common.capacity(sz, tokens * groups, how)) + (
        ("kv_token_bytes", derived(per_token, "B", "KVCacheManager.get_cache_size_per_token")),
        ("free_gpu_memory_fraction", derived(fraction, "1", "KV pool / (memory − weights − reserves), rounded up by "
                                                            "less than one block" if use_exact
                                             else "KvCacheConfig's default")),)


# --------------------------------------------------------------- read back (kvplan import)

TRTLLM_QUANT_ALGOS: Mapping[str, str] = {"FP8": "fp8", "INT8": "int8", "NVFP4": "fp4"}
TRTLLM_IRRELEVANT = frozenset({"--host", "--port", "--backend", "--log_level", "--tokenizer", "--served_model_name",
                               "--reasoning_parser", "--num_postprocess_workers"})
TRTLLM_IRRELEVANT_FLAGS = frozenset({"--trust_remote_code"})
TRTLLM_IRRELEVANT_KEYS = frozenset({"backend", "print_iter_log", "cuda_graph_config", "disable_overlap_scheduler",
                                    "trust_remote_code", "return_perf_metrics", "stream_interval"})


def trtllm_tokens(value: str, flag: str) -> tuple[int, str]:
    """A token count as TensorRT-LLM reads it: plain digits only."""
    return plain_tokens(value, flag, "TensorRT-LLM",
                        "TensorRT-LLM takes plain digits (click type=int, a pydantic int)"), ""

#: Deeper YAML is not a TensorRT-LLM config (its deepest field is two levels down).
MAX_YAML_DEPTH = 32

#: What PyYAML's safe_load makes of a scalar: text, bytes (!!binary), numbers, booleans, null, dates and times
#: (a datetime is a date). A mapping's keys are scalars too: YAML keys need not be strings (`1: x`, `true: y`).
YAMLScalar = Union[str, bytes, int, float, bool, None, datetime.date]
#: A YAML document as safe_load returns it: scalars, lists, the (key, value) pairs of !!omap and !!pairs,
#: sets (!!set) and mappings, nested.
YAMLValue = Union[YAMLScalar, list["YAMLValue"], tuple["YAMLValue", "YAMLValue"], set[YAMLScalar],
                  dict[YAMLScalar, "YAMLValue"]]


class _Mark(Protocol):
    """Where PyYAML saw something (yaml.Mark; PyYAML ships no type hints): 0-based line and column."""

    line: int
    column: int


def _yaml_load(text: str, where: str) -> YAMLValue:
    """The YAML document in `text`, read safely: no aliases (`*name`, which can expand a small file into a
    huge one: "billion laughs"), at most MAX_YAML_DEPTH levels of nesting; every error at its line:col."""
    try:
        import yaml  # type: ignore[import-untyped]  # PyYAML ships no stubs; only this function uses it
    except ImportError:
        raise DeploymentReadError("reading a TensorRT-LLM YAML needs PyYAML", help="pip install PyYAML") from None

    def at(mark: _Mark) -> Span:
        return Span(where, mark.line + 1, mark.column + 1, mark.line + 1, mark.column + 2)

    try:  # the event parser is a state machine (no recursion): depth is counted before composing
        depth = 0
        for event in yaml.parse(text, Loader=yaml.SafeLoader):
            if isinstance(event, yaml.AliasEvent):
                raise DeploymentReadError(f"YAML alias `*{event.anchor}`: kvplan reads no aliases",
                                          span=at(event.start_mark),
                                          help="write the value out where the alias stands")
            if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
                depth += 1
                if depth > MAX_YAML_DEPTH:
                    raise DeploymentReadError(f"the YAML nests deeper than {MAX_YAML_DEPTH} levels",
                                              span=at(event.start_mark),
                                              help="a TensorRT-LLM config nests two or three levels")
            elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
                depth -= 1
        document: YAMLValue = yaml.safe_load(text)
        return document
    except yaml.reader.ReaderError as exc:  # a control character: PyYAML gives a character offset
        before = text[:exc.position]
        line, col = before.count("\n") + 1, exc.position - (before.rfind("\n") + 1) + 1
        char = exc.character if isinstance(exc.character, int) else ord(str(exc.character)[:1] or "\0")
        raise DeploymentReadError(f"not valid YAML: character U+{char:04X} is not allowed in YAML",
                                  span=Span(where, line, col, line, col + 1),
                                  help="remove it; YAML takes printable text, tabs and newlines") from None
    except ValueError:  # an integer of more than 4,300 digits: Python refuses to convert it
        raise DeploymentReadError(f"{where}: holds an integer too long to read (more than 4,300 digits)",
                                  help="no setting takes a number of more than a few digits") from None
    except RecursionError:  # PyYAML composes nested collections recursively
        raise DeploymentReadError(f"{where}: nests collections too deeply to read",
                                  help="a TensorRT-LLM config is a few levels deep") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        span = at(mark) if mark is not None else Span(where, 1, 1, 1, 1)
        raise DeploymentReadError(f"not valid YAML: {getattr(exc, 'problem', None) or exc}", span=span) from None


def _yaml_scalar(v: YAMLValue) -> str:
    return ("true" if v else "false") if isinstance(v, bool) else str(v)


def _override(r: Read, attr: str, new: tuple[int, str]) -> None:
    """Set a value from the YAML; say so when it replaces a different command-line value
    (trtllm-serve applies the --config file over its flags)."""
    old = getattr(r, attr)
    if old is not None and old[1] and old[0] != new[0]:
        r.note(f"{new[1]} overrides {old[1]} (the --config file wins)")
    setattr(r, attr, new)


#: (read, the value, the key as the file writes it, the key and value as said) -> None
YamlHandler = Callable[[Read, YAMLValue, str, str], None]


def _yaml_handler(c: settings.Carrier) -> YamlHandler:
    """The reader of one YAML key the settings table maps to TensorRT-LLM, the way its carrier says: a top-level
    key over the command line's value (_override), a kv_cache_config key into Read's field."""
    R = settings.Read

    def h(r: Read, v: YAMLValue, key: str, w: str) -> None:
        if c.read is R.DTYPE:
            read_kv_dtype(r, ENGINE.kv_reads, str(v), w)
        elif c.read is R.BOOL:
            if not isinstance(v, bool):
                raise DeploymentReadError(f"{w}: takes true or false")
            setattr(r, c.into, (v, w))
        elif c.read is R.LIMIT:
            _override(r, "context", (trtllm_tokens(str(v), key)[0], w))
        elif "." in key:
            setattr(r, c.into, (whole(str(v), w, MAXIMUM[c.into]), w))
        else:
            _override(r, c.into, (whole(str(v), key, MAXIMUM[c.into]), w))
    return h


def _yaml_readers() -> dict[str, YamlHandler]:
    """The YAML keys (`max_batch_size`, `kv_cache_config.dtype`, and the carriers' aliases) the settings table
    maps to TensorRT-LLM and reads the table's way, with their readers; Read.OWN ones are this module's own."""
    out: dict[str, YamlHandler] = {}
    for row in settings.SETTINGS:
        c = row.engines.get(ENGINE.id)
        if c is None or c.read in (settings.Read.OWN, settings.Read.NONE):
            continue
        for key in (settings.engine_flag(row, ENGINE.id), *c.aliases):
            out[key] = _yaml_handler(c)
    return out


def _trtllm_yaml(r: Read, cfg: Mapping[YAMLScalar, YAMLValue], where: str) -> None:
    """Apply a TensorRT-LLM YAML mapping. Values of the keys kvplan imports are quoted as the reason for
    a pin; keys it does not know or ignores are named without their value (the file may hold anything)."""
    readers = _yaml_readers()
    for raw_key in sorted(cfg, key=str):
        val = cfg[raw_key]
        key = str(raw_key)
        w = f"{key}: {_yaml_scalar(val)}" if not isinstance(val, (dict, list)) else key
        if key == "model":
            r.model_ref = str(val)
        elif key in readers:
            readers[key](r, val, key, w)
        elif key == "max_num_tokens":
            r.note(f"{w}: {CHUNK}")
        elif key == "kv_cache_config":
            if not isinstance(val, dict):
                raise DeploymentReadError(f"{where}: kv_cache_config must be a mapping")
            _trtllm_kv_cache(r, val)
        elif key == "quant_config":
            _trtllm_quant(r, val if isinstance(val, dict) else {})
        elif key == "speculative_config":
            if not isinstance(val, dict):
                raise DeploymentReadError(f"{where}: speculative_config must be a mapping")
            speculative.read_trtllm(r, {str(k): v for k, v in val.items()})
        elif key in TRTLLM_IRRELEVANT_KEYS:
            r.ignored.append(key)
        else:
            r.warn(f"{key}: not a TensorRT-LLM setting kvplan knows; not imported (nor its value)")


def _trtllm_quant(r: Read, qc: Mapping[YAMLScalar, YAMLValue]) -> None:
    """quant_config: the KV quantization pins kv_dtype; the other keys are weight quantization, named."""
    algo = qc.get("kv_cache_quant_algo")
    if algo is not None:
        text = str(algo)
        r.kv_dtype_given = True
        if text.upper() in TRTLLM_QUANT_ALGOS:
            r.kv_dtype = (TRTLLM_QUANT_ALGOS[text.upper()], f"quant_config.kv_cache_quant_algo: {text}")
        else:
            r.warn(f"quant_config.kv_cache_quant_algo: {text}: not FP8, INT8 or NVFP4; not pinned")
    for k in sorted(qc, key=str):  # YAML keys need not be strings, nor of one type
        if k != "kv_cache_quant_algo":
            r.note(f"quant_config.{str(k)}: {str(qc[k])}: weight quantization; set `weights` by hand if it applies")


def _trtllm_kv_cache(r: Read, kc: Mapping[YAMLScalar, YAMLValue]) -> None:
    readers = _yaml_readers()
    for raw in sorted(kc, key=str):
        v = kc[raw]
        k = str(raw)
        w = f"kv_cache_config.{k}: {_yaml_scalar(v)}"
        if f"kv_cache_config.{k}" in readers:
            readers[f"kv_cache_config.{k}"](r, v, f"kv_cache_config.{k}", w)
        elif k == "host_cache_size":
            if number(v, w) > 0:
                r.tier = ("host", f"{w} bytes")
        elif k == "free_gpu_memory_fraction":
            r.note(f"{w}: {FREE_FRACTION}")
        elif k == "max_tokens":
            r.note(f"{w}: {POOL_CAP}")
        elif k == "max_attention_window":
            r.note(f"{w}: per-layer attention windows; kvplan takes windows from the model")
        elif k == "sink_token_length":
            r.warn(f"{w}: deprecated on the PyTorch backend; not imported")
        else:
            r.warn(f"kv_cache_config.{k}: not a kv_cache_config field kvplan knows; not imported (nor its value)")


_YAML_HOLDS = "a YAML mapping of TensorRT-LLM settings, such as `max_batch_size: 32`"


def _read_command(r: Read, words: list[str], base_dir: str) -> None:
    """A `trtllm-serve [serve] MODEL --config x.yaml ...` line: its flags, then each --config file over them."""
    if words[:2] == ["trtllm-serve", "serve"]:
        words = words[2:]
    elif words[:1] == ["trtllm-serve"]:
        words = words[1:]
    yaml_path: list[str] = []

    def positional(w: str) -> None:
        if r.model_ref is None:
            r.model_ref = w
        else:
            r.warn(f"'{w}': an extra argument trtllm-serve would not accept; not imported")

    def config(rr: Read, v: str, w: str) -> None:
        yaml_path.append(v)

    table = [
        ReadFlag(("--config", "--extra_llm_api_options"), True, config),
        *table_readers(ENGINE.id, trtllm_tokens, cli=True),
        ReadFlag(("--ep_size",), True,
                 note_flag("expert parallelism is not modelled; devices = tensor × pipeline")),
        ReadFlag(("--max_num_tokens",), True, note_flag(CHUNK)),
        ReadFlag(("--kv_cache_free_gpu_memory_fraction", "--free_gpu_memory_fraction"), True,
                 note_flag(FREE_FRACTION)),
    ]
    parse_flags(words, table, r, TRTLLM_IRRELEVANT, TRTLLM_IRRELEVANT_FLAGS, lambda f: f, positional)
    for p in yaml_path:
        full = os.path.join(base_dir, p)  # an absolute p stays absolute
        try:
            yaml_text = files.read_text(full, what="the --config file")
        except OSError as exc:
            raise DeploymentReadError(f"cannot read the --config file '{p}': {exc.strerror}",
                               help="run from the directory the command line was written for") from None
        files.refuse_blank(yaml_text, p, what="the --config file", holds=_YAML_HOLDS)
        cfg = _yaml_load(yaml_text, p)
        if not isinstance(cfg, dict):
            raise DeploymentReadError("a TensorRT-LLM config must be a YAML mapping", span=files.start(p))
        # The YAML overrides the command line, as trtllm-serve applies it.
        _trtllm_yaml(r, cfg, p)


def read(text: str, base_dir: str = ".", where: str = "config") -> Read:
    """A YAML config (the `--config` file), or a `trtllm-serve MODEL --config x.yaml ...` line.

    `where` names the text in messages (the file it came from); a `--config` file is read relative to
    `base_dir`, as kvplan reads every input file (kvplan.base.files: a regular file, bounded, UTF-8).
    """
    r = Read(ENGINE.id)
    stripped = text.lstrip()
    words = strip_env(split_command(text)) if stripped.startswith(("trtllm-serve", "env ")) or re.match(
        r"^[A-Za-z_][A-Za-z0-9_]*=\S*\s", stripped) else None
    if words is None:
        files.refuse_blank(text, where, what="the TensorRT-LLM config", holds=_YAML_HOLDS)
        cfg = _yaml_load(text, where)
        if not isinstance(cfg, dict):
            raise DeploymentReadError("a TensorRT-LLM config must be a YAML mapping", span=files.start(where),
                               help="give the --config YAML or a `trtllm-serve MODEL --config x.yaml` line")
        _trtllm_yaml(r, cfg, where)
    else:
        _read_command(r, words, base_dir)
    r.defaults("TensorRT-LLM's default enable_block_reuse: true", ENGINE.default_block,
               "TensorRT-LLM's default tokens_per_block",
               "kv_cache_config.dtype auto (default)")
    return r


BACKEND = common.engine_backend(
    ENGINE,
    source="docs/engines.md § TensorRT-LLM (tensorrt_llm/llmapi/llm_args.py, main newer than 1.2.1)",
    build=render, read=read,
)
#: Every key trtllm.yaml may hold and flag trtllm.sh may write (the settings table's, kvplan.engines.common.flag_set).
FLAGS = BACKEND.flags
