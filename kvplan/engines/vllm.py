"""vLLM 0.33.0: the plan as a `vllm serve` command line, written to vllm.sh.

The KV pool is set with `--kv-cache-memory-bytes` (per GPU), not with
`--gpu-memory-utilization`: the byte count fixes the number of blocks exactly
(num_blocks = bytes // bytes per block, engines.md), whereas the utilization
fraction leaves the pool to whatever the activation peak and non-torch memory
turn out to be at start-up, which kvplan can only assume. The equivalent
utilization under the assumed reserves is written as a comment.

A host tier uses vLLM's own offloading (`--kv-offloading-size`, summed over TP
ranks, with `--kv-offloading-backend native`); an SSD or remote tier goes
through LMCache (`--kv-transfer-config` with LMCacheConnectorV1 and the
lmcache.yaml written beside the script). `--cpu-offload-gb` offloads weights
and `--swap-space` is gone in 0.33.0: neither is ever written.

The engine's facts (dtype names, page sizes, defaults, setting names) are its catalog record
(kvplan.catalog.engines); this module holds the code that writes and reads them.
`read` reads a `vllm serve MODEL --flag ...` line back into kvplan's terms for `kvplan import --from vllm`.
"""

from __future__ import annotations

import json
import math
import re

from kvplan.base import limits
from kvplan.base.evidence import derived
from kvplan.catalog.engines import get_engine
from kvplan.engines import common
from kvplan.engines.common import EmitRequest, Emitted, EmittedFile, Flag
from kvplan.engines.flagparse import (
    DeploymentReadError,
    Read,
    ReadFlag,
    bounded,
    context_flag,
    cut,
    digits_in_range,
    exp2,
    fraction_flag,
    json_float,
    json_int,
    kv_flag,
    model_flag,
    note_flag,
    number,
    parse_flags,
    plain_tokens,
    quantization,
    split_command,
    store,
    strip_env,
    tokens_in_range,
    warn_flag,
    weights_dtype,
)

ENGINE = get_engine("vllm")
F = ENGINE.flags
#: kvplan dtype -> vLLM's --kv-cache-dtype name (the catalog record's, kvplan.catalog.engines).
KV_DTYPES = ENGINE.kv_names

FLAGS = ("--kv-cache-dtype", "--block-size", "--enable-prefix-caching", "--disable-prefix-caching",
         "--tensor-parallel-size", "--pipeline-parallel-size", "--max-model-len", "--max-num-seqs",
         "--kv-cache-memory-bytes", "--kv-offloading-size", "--kv-offloading-backend",
         "--kv-transfer-config", "kv_connector", "kv_role", "LMCacheConnectorV1", "kv_both")

LMCACHE_CONNECTOR = {"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both"}


def _gib_up(x: float) -> int:
    return max(1, math.ceil(x / common.GiB))


def render(req: EmitRequest, *, via_lmcache: bool = False, name: str = "vllm.sh", label: str = "") -> Emitted:
    """vllm.sh for the plan; `via_lmcache` puts any tier behind LMCache (the lmcache target)."""
    p = req.plan
    sc = p.scenario
    mapped = common.map_choices(p, BACKEND)
    sz = common.size(p, mapped, req.reserves)
    notes = common.model_notes(p, BACKEND)
    if sc.attention_dp > 1:
        notes.append(f"pin attention_dp = {sc.attention_dp} (SGLang's DP attention) is not written: kvplan writes no "
                     "vLLM flag for attention groups inside one tensor-parallel group")
    kv_bytes = math.ceil(sz.pool)
    engine_blocks = kv_bytes // math.ceil(sz.block_bytes)
    engine_tokens = engine_blocks * sz.block
    util = math.ceil((sz.weights + kv_bytes + sz.reserves) / sz.total * 1e4) / 1e4
    util_text = f"{util:.4f}"
    if sc.model.kv_kind == "mla" and mapped.dtype.id in ("fp8", "fp4"):
        notes.append(f"docs/engines.md also lists {'fp8' if mapped.dtype.id == 'fp8' else 'nvfp4'}_ds_mla without its "
                     f"page layout; kvplan writes {mapped.dtype_name}, "
                     "whose page bytes follow the docs/engines.md formula")

    flags: list[Flag] = [
        (F.kv_dtype, mapped.dtype_name),
        (F.block, str(mapped.block)),
        ("--enable-prefix-caching" if p.prefix_caching else "--disable-prefix-caching", None),
        (F.tp, str(p.tp)),
    ]
    if p.pp > 1:
        flags.append((F.pp, str(p.pp)))
    flags += [(F.context, str(sc.context_bound)), (F.batch, str(sc.batch)),
              ("--kv-cache-memory-bytes", str(kv_bytes))]
    flags += common.pinned_engine_flags(sc, ("--gpu-memory-utilization", "--max-num-batched-tokens",
                                             "--data-parallel-size", None))
    env: list[tuple[str, str]] = []
    tier_lines: list[str] = []
    tier_gpu = sz.tier_bytes_per_gpu()
    if mapped.tier != "none":
        if mapped.tier == "host" and not via_lmcache:
            size = _gib_up(tier_gpu * p.tp)
            flags += [("--kv-offloading-size", str(size)), ("--kv-offloading-backend", "native")]
            tier_lines.append(f"# host tier: {size} GiB summed over {p.tp} TP rank{'s' if p.tp > 1 else ''} "
                              f"({common.fmt_int(tier_gpu)} B per GPU, the plan's tier bytes in whole blocks)")
        else:
            flags.append(("--kv-transfer-config", json.dumps(LMCACHE_CONNECTOR, separators=(",", ":"))))
            env.append(("LMCACHE_CONFIG_FILE", common.beside("lmcache.yaml")))
            line, more = common.lmcache_tier(mapped.tier, via_lmcache)
            tier_lines.append(line)
            notes += more
    head = [common.header(req, label or BACKEND.label),
            *common.summary_comments(sz, engine_tokens),
            f"# --kv-cache-memory-bytes fixes the pool ({common.fmt_int(engine_blocks)} blocks); under the assumed "
            f"reserves it equals --gpu-memory-utilization {util_text}",
            *tier_lines]
    launch = common.Launch(("vllm", "serve", common.model_ref(p)), tuple(flags), tuple(env), tuple(head[1:]))
    text = common.shell_script(head, launch.program, launch.flags, launch.env)
    how = (f"--kv-cache-memory-bytes {kv_bytes} // {common.fmt_int(sz.block_bytes)} B per block "
           f"× {sz.block} tokens (docs/engines.md)")
    rows = common.capacity(sz, engine_tokens, how) + (
        ("gpu_memory_utilization_equivalent",
         derived(util, "1", "(weights + KV pool + reserves) / memory, rounded up to 0.0001")),)
    return common.finish(BACKEND, mapped, sz, [EmittedFile(name, text)], rows, notes, launch=launch)


# --------------------------------------------------------------- read back (kvplan import)

VLLM_OFFLOAD_CONNECTORS = frozenset({"OffloadingConnector", "LMCacheConnectorV1", "LMCacheMPConnector"})
VLLM_IRRELEVANT = frozenset({
    "--host", "--port", "--served-model-name", "--api-key", "--seed", "--uvicorn-log-level", "--tokenizer",
    "--revision", "--download-dir", "--chat-template", "--max-log-len", "--root-path", "--ssl-keyfile",
    "--ssl-certfile", "--tool-call-parser", "--reasoning-parser", "--generation-config", "--config-format",
    "--load-format", "--tokenizer-mode", "--allowed-origins",
})
VLLM_IRRELEVANT_FLAGS = frozenset({
    "--trust-remote-code", "--disable-log-requests", "--disable-log-stats", "--enable-auto-tool-choice",
    "--enable-log-requests", "--disable-fastapi-docs", "--enforce-eager",
})


_VLLM_INT = re.compile(r"(\d+(?:\.\d+)?)([kKmMgGtT])")
_VLLM_MULT = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def vllm_tokens(value: str, flag: str) -> tuple[int, str]:
    """A token count as vLLM reads it, and how it read it: '32k' -> 32000, '32K' -> 32768."""
    text = value.strip()
    m = _VLLM_INT.fullmatch(text)
    hint = "vLLM takes a whole number, or k/m/g/t (powers of 1000) or K/M/G/T (powers of 1024) after one"
    if m is None:
        return plain_tokens(value, flag, "vLLM", hint), ""
    number, suffix = m.groups()
    digits_in_range(number, value, flag)
    if suffix.islower():
        n = int(float(number) * _VLLM_MULT[suffix])
        return tokens_in_range(n, value, flag), ""
    if "." in number:
        raise DeploymentReadError(f"{flag} '{cut(value)}': vLLM refuses a decimal before the binary suffix {suffix}",
                                  help=f"did the command mean {number}{suffix.lower()}?")
    n = int(number) * _VLLM_MULT[suffix]
    return tokens_in_range(n, value, flag), f"vLLM reads {suffix} as 2^{exp2(suffix)}: {n:,} tokens"


def _vllm_offload_json(r: Read, value: str, written: str) -> None:
    deep = limits.json_too_deep(value)
    if deep is not None:
        raise DeploymentReadError(f"--kv-transfer-config nests more than {limits.MAX_JSON_DEPTH} levels deep "
                                  f"(at column {deep + 1})", help="give a flat JSON object, as vLLM documents")
    try:
        cfg = json.loads(value, parse_int=json_int, parse_float=json_float)
    except json.JSONDecodeError as exc:
        raise DeploymentReadError(f"--kv-transfer-config is not JSON: {exc.msg} at column {exc.colno}",
                           help='give a JSON object, e.g. \'{"kv_connector":"OffloadingConnector",...}\'') from None
    if not isinstance(cfg, dict):
        raise DeploymentReadError("--kv-transfer-config must be a JSON object")
    conn = str(cfg.get("kv_connector", ""))
    if conn and "kv_role" not in cfg:
        r.warn(f"--kv-transfer-config: kv_connector {conn} without kv_role (vLLM requires one: "
               "kv_producer, kv_consumer or kv_both)")
    if conn in VLLM_OFFLOAD_CONNECTORS:
        extra = cfg.get("kv_connector_extra_config") or {}
        detail = f"kv_connector {conn}"
        if isinstance(extra, dict) and "cpu_bytes_to_use" in extra:
            detail += f", cpu_bytes_to_use {extra['cpu_bytes_to_use']}"
        r.tier = ("host", f"--kv-transfer-config {detail}")
        if isinstance(extra, dict) and extra.get("secondary_tiers"):
            r.note(f"--kv-transfer-config secondary_tiers {json.dumps(extra['secondary_tiers'], sort_keys=True)}: "
                   "a tier below host memory; the .kvp pins the host tier only")
    elif conn:
        r.warn(f"--kv-transfer-config kv_connector {conn}: moves KV between instances (disaggregated "
               "serving), not a tier kvplan plans; not imported")
    else:
        r.warn("--kv-transfer-config without kv_connector; not imported")


def _vllm_table() -> list[ReadFlag]:
    def offload_size(r: Read, v: str, w: str) -> None:
        number(v, "--kv-offloading-size")
        r.tier = ("host", f"{w} GiB, summed over tensor-parallel ranks")

    def offload_backend(r: Read, v: str, w: str) -> None:
        if v not in ("native", "lmcache"):
            r.warn(f"{w}: {ENGINE.label} takes native or lmcache")
        r.note(f"{w}: host offload through {v}")

    removed = warn_flag(f"removed in {ENGINE.label} (unrecognized there; the server would not start); not imported")
    return [
        ReadFlag(("--model",), True, model_flag),
        ReadFlag((F.kv_dtype,), True, kv_flag(ENGINE.kv_reads)),
        ReadFlag((F.block,), True, store("block_size", bounded("block_size"))),
        ReadFlag(("--enable-prefix-caching",), False, store("prefix_caching", value=True)),
        ReadFlag(("--no-enable-prefix-caching", "--disable-prefix-caching"), False,
                 store("prefix_caching", value=False)),
        ReadFlag((F.context,), True, context_flag(vllm_tokens, auto=True)),
        ReadFlag((F.batch,), True, store("batch", bounded("batch"))),
        ReadFlag(("-tp", F.tp), True, store("tp", bounded("tp"))),
        ReadFlag(("-pp", F.pp), True, store("pp", bounded("pp"))),
        ReadFlag(("-dcp", "--decode-context-parallel-size"), True,
              note_flag("decode context parallelism shards the KV cache over tensor-parallel ranks; "
                    "kvplan does not model it")),
        ReadFlag(("-dp", "--data-parallel-size"), True, store("dp", bounded("tp"))),
        ReadFlag(("--gpu-memory-utilization",), True, fraction_flag),
        ReadFlag(("--kv-cache-memory-bytes",), True,
              note_flag("a fixed KV budget per GPU; the .kvp has no such key (kvplan sizes the cache)")),
        ReadFlag(("--max-num-batched-tokens",), True,
                 store("max_batched_tokens", lambda v, flag: vllm_tokens(v, flag)[0])),
        ReadFlag(("--kv-offloading-size",), True, offload_size),
        ReadFlag(("--kv-offloading-backend",), True, offload_backend),
        ReadFlag(("--kv-transfer-config",), True, _vllm_offload_json),
        ReadFlag(("--swap-space",), True, removed),
        ReadFlag(("--calculate-kv-scales",), False, removed),
        ReadFlag(("--cpu-offload-gb",), True,
              warn_flag("offloads model weights to host memory, not the KV cache; no KV tier imported")),
        ReadFlag(("--dtype",), True, weights_dtype),
        ReadFlag(("-q", "--quantization"), True, quantization),
    ]


def _vllm_name(flag: str) -> str:
    # vLLM's parser accepts underscores for dashes (--max_model_len).
    return flag if not flag.startswith("--") else "--" + flag[2:].replace("_", "-")


def read(text: str, base_dir: str = ".", where: str = "config") -> Read:
    """A `vllm serve MODEL --flag ...` line (or `python -m vllm.entrypoints...`) in kvplan's terms."""
    words = strip_env(split_command(text))
    if words[:2] == ["vllm", "serve"]:
        words = words[2:]
    elif len(words) >= 3 and words[0].startswith("python") and words[1] == "-m" and words[2].startswith("vllm."):
        words = words[3:]
    r = Read(ENGINE.id)

    def positional(w: str) -> None:
        if r.model_ref is None:
            r.model_ref = w
        else:
            r.warn(f"'{w}': an extra argument vLLM would not accept; not imported")

    parse_flags(words, _vllm_table(), r, VLLM_IRRELEVANT, VLLM_IRRELEVANT_FLAGS, _vllm_name, positional)
    r.defaults("vLLM's default (V1 engine)", ENGINE.default_block, f"vLLM's default {F.block}",
               f"{F.kv_dtype} auto (default)")
    return r


BACKEND = common.engine_backend(
    ENGINE, flags=FLAGS,
    source="docs/engines.md § vLLM 0.33.0 (vllm/config/cache.py, vllm/engine/arg_utils.py, vllm/config/kv_transfer.py)",
    build=lambda req: render(req), read=read,
)
