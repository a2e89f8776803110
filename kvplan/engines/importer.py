"""Read an existing engine deployment (vLLM / SGLang command line, TensorRT-LLM YAML) into a .kvp spec.

    import_deployment(engine, text, ...) -> Imported(text, warnings)

The engine's current KV choices become `pin`s (kv dtype, page size, prefix
caching, device count, host tier); its batch and context limits become the
workload. Flag names and defaults come from shared/reference/engines.md (vLLM
0.33.0, SGLang 0.5.23, TensorRT-LLM main). Nothing is dropped silently: a flag
that was removed, that kvplan does not know, or that has no .kvp equivalent is
a warning and a comment in the spec; flags that cannot touch the KV cache
(host, port, ...) are listed in one comment.
"""

from __future__ import annotations

import json
import math
import os
import re
import shlex
from typing import Any, Callable, Mapping, Optional, Sequence

import attrs

from kvplan.base import files, limits
from kvplan.base.errors import KvplanError, Span
from kvplan.catalog import Model, aliases, get_device, get_model, models, suggest
from kvplan.catalog.hf import load_config
from kvplan.lang.fmt import format_source
from kvplan.planner.search import closest_tp, tp_options

ENGINES = ("vllm", "sglang", "trtllm")
ENGINE_NAMES = {"vllm": "vLLM 0.33.0", "sglang": "SGLang 0.5.23", "trtllm": "TensorRT-LLM (main, > 1.2.1)"}


class DeploymentReadError(KvplanError):
    """The deployment cannot be read: a malformed flag value, no model, no device."""


@attrs.frozen(slots=True)
class Imported:
    """The .kvp text and the warnings to print (each also a comment in the text)."""

    text: str
    warnings: tuple[str, ...]
    model: str
    device: str
    pins: tuple[tuple[str, str], ...]


# ----------------------------------------------------------------- accumulator

@attrs.define
class _Read:
    """What one engine configuration says, in kvplan's terms, with where each came from."""

    engine: str
    model_ref: Optional[str] = None
    batch: Optional[tuple[int, str]] = None
    context: Optional[tuple[int, str]] = None
    tp: tuple[int, str] = (1, "")
    pp: tuple[int, str] = (1, "")
    kv_dtype: Optional[tuple[str, str]] = None
    block_size: Optional[tuple[int, str]] = None
    prefix_caching: Optional[tuple[bool, str]] = None
    tier: Optional[tuple[str, str]] = None
    weights: Optional[tuple[str, str]] = None
    kv_dtype_given: bool = False     # set even when the engine's dtype has no kvplan equivalent
    warnings: list[str] = attrs.Factory(list)
    notes: list[str] = attrs.Factory(list)
    ignored: list[str] = attrs.Factory(list)

    def warn(self, text: str) -> None:
        self.warnings.append(text)

    def note(self, text: str) -> None:
        self.notes.append(text)

    def defaults(self, prefix_caching: str, block: int, block_why: str, kv_why: str) -> None:
        """Fill what the configuration left to the engine's defaults (engines.md), saying so."""
        if self.prefix_caching is None:
            self.prefix_caching = (True, prefix_caching)
        if self.block_size is None:
            self.block_size = (block, block_why)
        if self.kv_dtype is None and not self.kv_dtype_given:
            self.kv_dtype = ("bf16", kv_why + ": the model's dtype, bf16 assumed")


#: The largest value of each whole-number setting: the .kvp key it becomes takes the same range
#: (kvplan.base.limits), so an imported spec never fails `kvplan lint` on a range.
MAXIMUM: Mapping[str, int] = {"batch": limits.MAX_BATCH, "context": limits.MAX_TOKENS,
                              "block_size": limits.MAX_TOKENS, "tp": limits.MAX_DEVICES, "pp": limits.MAX_DEVICES}
_LIMIT = "kvplan's limit, docs/cli-import.md"


def _written(value: str) -> str:
    """A flag value for a message, cut when it is too long to repeat whole."""
    value = str(value)
    return f"'{value}'" if len(value) <= 40 else f"'{value[:20]}…' ({len(value):,} characters)"


def _in_range(n: int, flag: str, maximum: int, what: str = "") -> int:
    if not 1 <= n <= maximum:
        raise DeploymentReadError(f"{flag} must be {what or 'a whole number'} {limits.between(1, maximum)}, "
                                  f"got {n:,}", help=_LIMIT)
    return n


def _int(value: str, flag: str, maximum: int = limits.MAX_BATCH) -> int:
    text = str(value).strip()
    if not re.fullmatch(r"[+-]?\d+(_\d+)*", text):  # what Python's int() reads, as the engines' parsers do
        raise DeploymentReadError(f"{flag} takes a whole number, got {_written(value)}")
    text = text.replace("_", "")
    if limits.digits_of(text) > limits.MAX_DIGITS:
        raise DeploymentReadError(f"{flag} must be a whole number {limits.between(1, maximum)}, got a "
                                  f"{limits.digits_of(text):,}-digit number", help=_LIMIT)
    return _in_range(int(text), flag, maximum)


def _bounded(attr: str) -> Callable[[str, str], int]:
    """_int with the range of the .kvp setting `attr` becomes."""
    return lambda v, flag: _int(v, flag, MAXIMUM[attr])


def _float(value: Any, flag: str) -> float:
    try:
        x = float(value)
    except (TypeError, ValueError, OverflowError):
        raise DeploymentReadError(f"{flag} takes a number, got {_written(value)}") from None
    if not math.isfinite(x) or x < 0:
        raise DeploymentReadError(f"{flag} takes a finite number of at least 0, got {_written(value)}")
    return x


# How each engine reads a token count on its command line (or in its YAML). The three differ, and
# `128K` is the case in point: vLLM 131,072, SGLang an error, TensorRT-LLM an error; kvplan's own
# `.kvp` reads it as 128,000 (KV125). The import keeps the engine's reading and writes it so that
# kvplan reads the same number (tokens_text), with a comment saying how the engine read the flag.
#
# vLLM: human_readable_int (vllm/utils/argparse_utils.py; `--max-model-len` takes
#   human_readable_int_or_auto, which adds `auto` / `-1` = derive from the model config): lower-case
#   k m g t are powers of 1000, upper-case K M G T powers of 1024; a decimal is allowed only before a
#   lower-case suffix (and truncated: int(float(number) * mult)); anything else must be a plain int.
# SGLang: human_readable_int (python/sglang/srt/utils/common.py, the type of --context-length in
#   python/sglang/srt/args/model_args.py): case-sensitive SI k M G T and IEC Ki Mi Gi Ti; `K` is refused.
# TensorRT-LLM: trtllm-serve's --max_seq_len is click type=int and the YAML's max_seq_len a pydantic
#   int: plain digits only.
_VLLM_INT = re.compile(r"(\d+(?:\.\d+)?)([kKmMgGtT])")
_VLLM_MULT = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
_SGLANG_INT = re.compile(r"(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|k|M|G|T)")
_SGLANG_MULT = {"k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}
_PLAIN_INT = re.compile(r"[+-]?\d+(?:_\d+)*")  # what int() takes
#: The most tokens an imported limit may hold: the spec's own limit (kvplan.base.limits), so that
#: `kvplan import` never writes a context that `kvplan lint` refuses.
MAX_TOKENS = limits.MAX_TOKENS


def _shown(value: str) -> str:
    """A flag value for a message, cut if it is long (a value is evidence, not a payload)."""
    return value if len(value) <= 24 else value[:20] + "..."


def _tokens_in_range(n: int, value: str, flag: str) -> int:
    if n < 1 or n > MAX_TOKENS:
        raise DeploymentReadError(f"{flag} must be a token count {limits.between(1, MAX_TOKENS)}, got {n:,}",
                                  help=_LIMIT)
    return n


def _digits_in_range(number: str, value: str, flag: str) -> None:
    """Refuse a number of more digits than any token count has, before float() makes it infinite."""
    if limits.digits_of(number.partition(".")[0]) > limits.MAX_DIGITS:
        raise DeploymentReadError(f"{flag} must be a token count {limits.between(1, MAX_TOKENS)}, got a "
                                  f"{limits.digits_of(number.partition('.')[0]):,}-digit number", help=_LIMIT)


def _plain(value: str, flag: str, engine: str, hint: str) -> int:
    text = value.strip()
    if not _PLAIN_INT.fullmatch(text):
        raise DeploymentReadError(f"{flag} '{_shown(value)}' is not a token count {engine} reads", help=hint)
    _digits_in_range(text, value, flag)
    return _tokens_in_range(int(text), value, flag)


def vllm_tokens(value: str, flag: str) -> tuple[int, str]:
    """A token count as vLLM reads it, and how it read it: '32k' -> 32000, '32K' -> 32768."""
    text = value.strip()
    m = _VLLM_INT.fullmatch(text)
    hint = "vLLM takes a whole number, or k/m/g/t (powers of 1000) or K/M/G/T (powers of 1024) after one"
    if m is None:
        return _plain(value, flag, "vLLM", hint), ""
    number, suffix = m.groups()
    _digits_in_range(number, value, flag)
    if suffix.islower():
        n = int(float(number) * _VLLM_MULT[suffix])
        return _tokens_in_range(n, value, flag), ""
    if "." in number:
        raise DeploymentReadError(f"{flag} '{_shown(value)}': vLLM refuses a decimal before the binary suffix {suffix}",
                                  help=f"did the command mean {number}{suffix.lower()}?")
    n = int(number) * _VLLM_MULT[suffix]
    return _tokens_in_range(n, value, flag), f"vLLM reads {suffix} as 2^{_exp2(suffix)}: {n:,} tokens"


def _exp2(suffix: str) -> int:
    return {"K": 10, "M": 20, "G": 30, "T": 40}[suffix[0].upper()]


def sglang_tokens(value: str, flag: str) -> tuple[int, str]:
    """A token count as SGLang reads it: case-sensitive SI (`128k`, `1M`) and IEC (`128Ki`) suffixes."""
    text = value.strip()
    m = _SGLANG_INT.fullmatch(text)
    hint = "SGLang's suffixes are case-sensitive: k M G T (powers of 1000) or Ki Mi Gi Ti (powers of 1024)"
    if m is None:
        if re.fullmatch(r"\d+(\.\d+)?[A-Za-z]+", text):
            raise DeploymentReadError(f"{flag} '{_shown(value)}': SGLang refuses this suffix", help=hint)
        return _plain(value, flag, "SGLang", hint), ""
    number, suffix = m.groups()
    _digits_in_range(number, value, flag)
    if suffix.endswith("i"):
        if "." in number:
            raise DeploymentReadError(f"{flag} '{_shown(value)}': SGLang refuses a decimal before {suffix}", help=hint)
        n = int(number) * _SGLANG_MULT[suffix]
        return _tokens_in_range(n, value, flag), f"SGLang reads {suffix} as 2^{_exp2(suffix)}: {n:,} tokens"
    n = int(float(number) * _SGLANG_MULT[suffix])
    return _tokens_in_range(n, value, flag), ""


def trtllm_tokens(value: str, flag: str) -> tuple[int, str]:
    """A token count as TensorRT-LLM reads it: plain digits only."""
    return _plain(value, flag, "TensorRT-LLM", "TensorRT-LLM takes plain digits (click type=int, a pydantic int)"), ""


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


# ------------------------------------------------------------- command lines

def split_command(text: str) -> list[str]:
    """Shell words of a command line (a file may continue lines with a backslash and hold comments)."""
    joined = re.sub(r"\\\r?\n", " ", text)
    try:
        return shlex.split(joined, comments=True)
    except ValueError as exc:
        raise DeploymentReadError(f"cannot split the command line: {exc}",
                           help="quote it as a shell would, or give a file holding it") from None


def _strip_env(words: list[str]) -> list[str]:
    """Drop leading `VAR=value` assignments, `env` and `exec` (a launcher script's last line)."""
    i = 0
    while i < len(words) and (re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[i]) or words[i] in ("env", "exec")):
        i += 1
    return words[i:]


@attrs.frozen(slots=True)
class _Flag:
    names: tuple[str, ...]
    takes_value: bool
    handle: Callable[[_Read, str, str], None]   # (read, value, as written)


def _parse_flags(words: Sequence[str], table: Sequence[_Flag], r: _Read, irrelevant: frozenset[str],
                 irrelevant_flags: frozenset[str], normalize: Callable[[str], str],
                 positional: Callable[[str], None]) -> None:
    """Walk the words: known flags run their handler, `irrelevant` ones (taking a value) and
    `irrelevant_flags` (switches) are listed, the rest are warnings."""
    by_name = {n: f for f in table for n in f.names}
    i = 0
    while i < len(words):
        w = words[i]
        if not w.startswith("-") or w == "-":
            positional(w)
            i += 1
            continue
        name, eq, inline = w.partition("=")
        key = normalize(name)
        flag = by_name.get(key)
        takes = flag.takes_value if flag else (key not in irrelevant_flags)
        value: Optional[str] = inline if eq else None
        if takes and value is None:
            nxt = words[i + 1] if i + 1 < len(words) else None
            if flag is not None and nxt is None:
                raise DeploymentReadError(f"{name} needs a value")
            if nxt is not None and (flag is not None or not nxt.startswith("-")):
                value = nxt
                i += 1
        i += 1
        written = f"{name} {value}" if value is not None and not eq else w
        if flag is not None:
            flag.handle(r, value if value is not None else "", written)
            continue
        if value is not None and _SECRET_FLAG.search(key):  # --api-key sk-...: never copied into the spec
            written = f"{name}{'=' if eq else ' '}(value not shown)"
        if key in irrelevant or key in irrelevant_flags:
            r.ignored.append(written)
        else:
            r.warn(f"{written}: not a {ENGINE_NAMES[r.engine]} flag kvplan knows; not imported")


#: Flags whose value is a credential (vLLM's and SGLang's --api-key, a token, a key file): listed by name only.
_SECRET_FLAG = re.compile(r"key|token|secret|passw|credential|auth", re.IGNORECASE)


# ------------------------------------------------------------ shared handlers

Handler = Callable[[_Read, str, str], None]

_NO_RESERVE = "the .kvp has no such key (kvplan keeps an assumed 8% reserve)"
_FREE_FRACTION = "a fraction of FREE memory after weights; " + _NO_RESERVE
_CHUNK = "a per-iteration (prefill chunk) token limit; decode planning ignores it"
_POOL_CAP = "a cap on the KV pool in tokens; kvplan sizes the pool"
_REPLICAS = "data-parallel replicas: the .kvp plans one replica"


def _model(r: _Read, v: str, w: str) -> None:
    r.model_ref = v


def _set(attr: str, conv: Optional[Callable[[str, str], int]] = None, value: Any = None) -> Handler:
    """Store (the flag's value converted, or `value`, and the flag as written) in r.<attr>."""
    def h(r: _Read, v: str, w: str) -> None:
        flag = w.split(" ")[0].split("=")[0]
        setattr(r, attr, (conv(v, flag) if conv is not None else value, w))
    return h


def _context(read: Callable[[str, str], tuple[int, str]]) -> Handler:
    """Store the engine's context limit as the engine reads it, saying how when a suffix was binary."""
    def h(r: _Read, v: str, w: str) -> None:
        flag = w.split(" ")[0].split("=")[0]
        if r.engine == "vllm" and v.strip().lower() in ("auto", "-1"):  # human_readable_int_or_auto
            r.note(f"{w}: vLLM derives the limit from the model config")
            return
        n, how = read(v, flag)
        r.context = (n, f"{w} ({how})" if how else w)
    return h


def _note(why: str) -> Handler:
    def h(r: _Read, v: str, w: str) -> None:
        r.note(f"{w}: {why}")
    return h


def _warn(why: str) -> Handler:
    def h(r: _Read, v: str, w: str) -> None:
        r.warn(f"{w}: {why}")
    return h


def _kv(table: Mapping[str, tuple[Optional[str], str]]) -> Handler:
    def h(r: _Read, v: str, w: str) -> None:
        _kv_dtype(r, table, v, w)
    return h


_WEIGHT_DTYPES = {"bfloat16": "bf16", "float16": "fp16", "half": "fp16", "float32": "fp32", "float": "fp32"}


def _weights_dtype(r: _Read, v: str, w: str) -> None:
    if v in _WEIGHT_DTYPES:
        r.weights = (_WEIGHT_DTYPES[v], w)
    elif v != "auto":
        r.warn(f"{w}: unknown weight dtype; weights left at the default")


def _quantization(r: _Read, v: str, w: str) -> None:
    if v == "fp8":
        r.weights = ("fp8", w)
    else:
        r.warn(f"{w}: weight quantization kvplan does not map; set `weights` by hand")


# ---------------------------------------------------------------------- vLLM

VLLM_KV_DTYPES: Mapping[str, tuple[Optional[str], str]] = {
    "auto": ("bf16", "auto keeps the model's dtype: bf16 assumed"),
    "bfloat16": ("bf16", ""), "float16": ("fp16", ""),
    "fp8": ("fp8", "= fp8_e4m3"), "fp8_e4m3": ("fp8", ""),
    "fp8_e5m2": ("fp8", "E5M2, the width of kvplan's fp8"), "fp8_inc": ("fp8", "Intel Gaudi FP8"),
    "fp8_ds_mla": ("fp8", "DeepSeek MLA FP8 layout"), "fp8_per_token_head": ("fp8", "per-token-head scales"),
    "int8_per_token_head": ("int8", ""), "int4_per_token_head": ("int4", ""),
    "nvfp4": ("fp4", ""), "nvfp4_ds_mla": ("fp4", "DeepSeek MLA NVFP4 layout"), "nvfp4_4over6": ("fp4", ""),
    "turboquant_4bit_nc": ("int4", "a 4-bit scheme, modelled at int4's width"),
    "ultraquant_4bit": ("int4", "a 4-bit scheme, modelled at int4's width"),
    # Mixed or 3-bit widths: no kvplan dtype has them.
    "turboquant_k8v4": (None, "8-bit keys, 4-bit values"), "turboquant_k3v4_nc": (None, "3-bit keys, 4-bit values"),
    "turboquant_3bit_nc": (None, "3-bit"), "octave_k3v4": (None, "3-bit keys, 4-bit values"),
    "octave_k3v3": (None, "3-bit"), "octave_k3v3_compact": (None, "3-bit"),
}
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


def _kv_dtype(r: _Read, table: Mapping[str, tuple[Optional[str], str]], value: str, written: str) -> None:
    r.kv_dtype_given = True
    if value not in table:
        r.warn(f"{written}: {ENGINE_NAMES[r.engine]} has no KV cache dtype '{value}'; not pinned")
        return
    kv, why = table[value]
    if kv is None:
        r.warn(f"{written}: {why}, a width no kvplan dtype has; kv_dtype not pinned")
        return
    r.kv_dtype = (kv, written + (f" ({why})" if why else ""))
    if value == "auto":
        r.note(f"{written}: the KV cache keeps the model's dtype; kv_dtype = bf16 is assumed")


def _vllm_offload_json(r: _Read, value: str, written: str) -> None:
    deep = limits.json_too_deep(value)
    if deep is not None:
        raise DeploymentReadError(f"--kv-transfer-config nests more than {limits.MAX_JSON_DEPTH} levels deep "
                                  f"(at column {deep + 1})", help="give a flat JSON object, as vLLM documents")
    try:
        cfg = json.loads(value, parse_int=_json_int, parse_float=_json_float)
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


def _json_int(text: str) -> Any:
    """An integer of a JSON flag value; one too long for any range stays text (Python refuses to convert
    more than 4,300 digits)."""
    return int(text) if limits.digits_of(text) <= limits.MAX_DIGITS else f"{limits.digits_of(text):,}-digit number"


def _json_float(text: str) -> Any:
    """A float of a JSON flag value; one beyond a float's range stays as written, not infinity."""
    x = float(text)
    return x if math.isfinite(x) else text[:24]


def _vllm_table() -> list[_Flag]:
    def offload_size(r: _Read, v: str, w: str) -> None:
        _float(v, "--kv-offloading-size")
        r.tier = ("host", f"{w} GiB, summed over tensor-parallel ranks")

    def offload_backend(r: _Read, v: str, w: str) -> None:
        if v not in ("native", "lmcache"):
            r.warn(f"{w}: vLLM 0.33.0 takes native or lmcache")
        r.note(f"{w}: host offload through {v}")

    removed = _warn("removed in vLLM 0.33.0 (unrecognized there; the server would not start); not imported")
    return [
        _Flag(("--model",), True, _model),
        _Flag(("--kv-cache-dtype",), True, _kv(VLLM_KV_DTYPES)),
        _Flag(("--block-size",), True, _set("block_size", _bounded("block_size"))),
        _Flag(("--enable-prefix-caching",), False, _set("prefix_caching", value=True)),
        _Flag(("--no-enable-prefix-caching", "--disable-prefix-caching"), False, _set("prefix_caching", value=False)),
        _Flag(("--max-model-len",), True, _context(vllm_tokens)),
        _Flag(("--max-num-seqs",), True, _set("batch", _bounded("batch"))),
        _Flag(("-tp", "--tensor-parallel-size"), True, _set("tp", _bounded("tp"))),
        _Flag(("-pp", "--pipeline-parallel-size"), True, _set("pp", _bounded("pp"))),
        _Flag(("-dcp", "--decode-context-parallel-size"), True,
              _note("decode context parallelism shards the KV cache over tensor-parallel ranks; "
                    "kvplan does not model it")),
        _Flag(("-dp", "--data-parallel-size"), True, _note(_REPLICAS)),
        _Flag(("--gpu-memory-utilization",), True, _note("a fraction of total memory per instance; " + _NO_RESERVE)),
        _Flag(("--kv-cache-memory-bytes",), True,
              _note("a fixed KV budget per GPU; the .kvp has no such key (kvplan sizes the cache)")),
        _Flag(("--max-num-batched-tokens",), True, _note(_CHUNK)),
        _Flag(("--kv-offloading-size",), True, offload_size),
        _Flag(("--kv-offloading-backend",), True, offload_backend),
        _Flag(("--kv-transfer-config",), True, _vllm_offload_json),
        _Flag(("--swap-space",), True, removed),
        _Flag(("--calculate-kv-scales",), False, removed),
        _Flag(("--cpu-offload-gb",), True,
              _warn("offloads model weights to host memory, not the KV cache; no KV tier imported")),
        _Flag(("--dtype",), True, _weights_dtype),
        _Flag(("-q", "--quantization"), True, _quantization),
    ]


def _vllm_name(flag: str) -> str:
    # vLLM's parser accepts underscores for dashes (--max_model_len).
    return flag if not flag.startswith("--") else "--" + flag[2:].replace("_", "-")


def read_vllm(text: str) -> _Read:
    words = _strip_env(split_command(text))
    if words[:2] == ["vllm", "serve"]:
        words = words[2:]
    elif len(words) >= 3 and words[0].startswith("python") and words[1] == "-m" and words[2].startswith("vllm."):
        words = words[3:]
    r = _Read("vllm")

    def positional(w: str) -> None:
        if r.model_ref is None:
            r.model_ref = w
        else:
            r.warn(f"'{w}': an extra argument vLLM would not accept; not imported")

    _parse_flags(words, _vllm_table(), r, VLLM_IRRELEVANT, VLLM_IRRELEVANT_FLAGS, _vllm_name, positional)
    r.defaults("vLLM's default (V1 engine)", 16, "vLLM's default --block-size",
               "--kv-cache-dtype auto (default)")
    return r


# -------------------------------------------------------------------- SGLang

SGLANG_KV_DTYPES: Mapping[str, tuple[Optional[str], str]] = {
    "auto": ("bf16", "auto keeps the model's dtype: bf16 assumed"),
    "bf16": ("bf16", ""), "bfloat16": ("bf16", ""),
    "fp8_e4m3": ("fp8", ""), "fp8_e5m2": ("fp8", "E5M2, the width of kvplan's fp8"), "mxfp8": ("fp8", "MX block scales"),
    "nvfp4": ("fp4", ""), "fp4_mx_block16": ("fp4", "MX block scales"),
}
SGLANG_IRRELEVANT = frozenset({"--host", "--port", "--served-model-name", "--api-key", "--log-level", "--tokenizer-path",
                               "--chat-template", "--random-seed", "--revision", "--download-dir", "--tool-call-parser",
                               "--reasoning-parser", "--load-format"})
SGLANG_IRRELEVANT_FLAGS = frozenset({"--trust-remote-code", "--log-requests", "--enable-metrics",
                                     "--disable-cuda-graph", "--skip-server-warmup"})


def _sglang_table() -> list[_Flag]:
    tier_sizing = "kvplan sizes the tier from the reuse economics"
    return [
        _Flag(("--model-path", "--model"), True, _model),
        _Flag(("--kv-cache-dtype",), True, _kv(SGLANG_KV_DTYPES)),
        _Flag(("--page-size",), True, _set("block_size", _bounded("block_size"))),
        _Flag(("--disable-radix-cache",), False, _set("prefix_caching", value=False)),
        _Flag(("--context-length",), True, _context(sglang_tokens)),
        _Flag(("--max-running-requests",), True, _set("batch", _bounded("batch"))),
        _Flag(("--tp-size", "--tp"), True, _set("tp", _bounded("tp"))),
        _Flag(("--pp-size", "--pp"), True, _set("pp", _bounded("pp"))),
        _Flag(("--enable-hierarchical-cache",), False, _set("tier", value="host")),
        _Flag(("--enable-lmcache",), False, _set("tier", value="host")),
        _Flag(("--lmcache-config-file",), True, _note("LMCache settings are read by LMCache, not imported")),
        _Flag(("--hicache-storage-backend",), True,
              _note("a storage tier below host memory; the .kvp pins the host tier only")),
        _Flag(("--hicache-ratio",), True, _note(f"host tier size as a multiple of the device pool; {tier_sizing}")),
        _Flag(("--hicache-size",), True, _note(f"host tier size in GB; {tier_sizing}")),
        _Flag(("--hicache-write-policy",), True, _note("how pages reach the host tier; not modelled")),
        _Flag(("--radix-eviction-policy",), True, _note("which cached prefixes leave first; not modelled")),
        _Flag(("--mem-fraction-static",), True, _note("weights + KV pool as a fraction of total memory; "
                                                      + _NO_RESERVE)),
        _Flag(("--max-total-tokens",), True, _note(_POOL_CAP)),
        _Flag(("--attention-backend",), True, _note("the attention kernel; see `kvplan emit --target flashinfer`")),
        _Flag(("--dp-size", "--dp"), True, _note(_REPLICAS)),
        _Flag(("--chunked-prefill-size",), True, _note(_CHUNK)),
        _Flag(("--dtype",), True, _weights_dtype),
        _Flag(("--quantization",), True, _quantization),
    ]


def read_sglang(text: str) -> _Read:
    words = _strip_env(split_command(text))
    if len(words) >= 3 and words[0].startswith("python") and words[1] == "-m" and words[2].startswith("sglang"):
        words = words[3:]
    elif words[:2] == ["sglang", "serve"]:
        words = words[2:]
    elif words[:1] == ["sglang.launch_server"]:
        words = words[1:]
    r = _Read("sglang")

    def positional(w: str) -> None:
        r.warn(f"'{w}': SGLang takes the model as --model-path; not imported")

    _parse_flags(words, _sglang_table(), r, SGLANG_IRRELEVANT, SGLANG_IRRELEVANT_FLAGS, lambda f: f, positional)
    r.defaults("SGLang's radix cache is on by default", 1, "SGLang's default --page-size on CUDA",
               "--kv-cache-dtype auto (default)")
    return r


# --------------------------------------------------------------- TensorRT-LLM

TRTLLM_KV_DTYPES: Mapping[str, tuple[Optional[str], str]] = {
    "auto": ("bf16", "auto keeps the model's dtype: bf16 assumed"),
    "fp8": ("fp8", ""), "nvfp4": ("fp4", ""),
}
TRTLLM_QUANT_ALGOS: Mapping[str, str] = {"FP8": "fp8", "INT8": "int8", "NVFP4": "fp4"}
TRTLLM_IRRELEVANT = frozenset({"--host", "--port", "--backend", "--log_level", "--tokenizer", "--served_model_name",
                               "--reasoning_parser", "--num_postprocess_workers"})
TRTLLM_IRRELEVANT_FLAGS = frozenset({"--trust_remote_code"})
TRTLLM_IRRELEVANT_KEYS = frozenset({"backend", "print_iter_log", "cuda_graph_config", "disable_overlap_scheduler",
                                    "trust_remote_code", "return_perf_metrics", "stream_interval"})


#: Deeper YAML is not a TensorRT-LLM config (its deepest field is two levels down).
MAX_YAML_DEPTH = 32


def _yaml_load(text: str, where: str) -> Any:
    """The YAML document in `text`, read safely: no aliases (`*name`, which can expand a small file into a
    huge one: "billion laughs"), at most MAX_YAML_DEPTH levels of nesting; every error at its line:col."""
    try:
        import yaml  # type: ignore[import-untyped]  # PyYAML ships no stubs; only this function uses it
    except ImportError:
        raise DeploymentReadError("reading a TensorRT-LLM YAML needs PyYAML", help="pip install PyYAML") from None

    def at(mark: Any) -> Span:
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
        return yaml.safe_load(text)
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


def _yaml_scalar(v: Any) -> str:
    return ("true" if v else "false") if isinstance(v, bool) else str(v)


def _override(r: _Read, attr: str, new: tuple[Any, str]) -> None:
    """Set a value from the YAML; say so when it replaces a different command-line value
    (trtllm-serve applies the --config file over its flags)."""
    old = getattr(r, attr)
    if old is not None and old[1] and old[0] != new[0]:
        r.note(f"{new[1]} overrides {old[1]} (the --config file wins)")
    setattr(r, attr, new)


def _trtllm_yaml(r: _Read, cfg: Mapping[Any, Any], where: str) -> None:
    """Apply a TensorRT-LLM YAML mapping. Values of the keys kvplan imports are quoted as the reason for
    a pin; keys it does not know or ignores are named without their value (the file may hold anything)."""
    for raw_key in sorted(cfg, key=str):
        val = cfg[raw_key]
        key = str(raw_key)
        w = f"{key}: {_yaml_scalar(val)}" if not isinstance(val, (dict, list)) else key
        if key == "model":
            r.model_ref = str(val)
        elif key == "max_batch_size":
            _override(r, "batch", (_int(str(val), key, MAXIMUM["batch"]), w))
        elif key == "max_seq_len":
            _override(r, "context", (trtllm_tokens(str(val), key)[0], w))
        elif key in ("tensor_parallel_size", "tp_size"):
            _override(r, "tp", (_int(str(val), key, MAXIMUM["tp"]), w))
        elif key in ("pipeline_parallel_size", "pp_size"):
            _override(r, "pp", (_int(str(val), key, MAXIMUM["pp"]), w))
        elif key == "max_num_tokens":
            r.note(f"{w}: {_CHUNK}")
        elif key == "kv_cache_config":
            if not isinstance(val, dict):
                raise DeploymentReadError(f"{where}: kv_cache_config must be a mapping")
            _trtllm_kv_cache(r, val)
        elif key == "quant_config":
            algo = val.get("kv_cache_quant_algo") if isinstance(val, dict) else None
            if algo is not None:
                r.kv_dtype_given = True
                if str(algo).upper() in TRTLLM_QUANT_ALGOS:
                    r.kv_dtype = (TRTLLM_QUANT_ALGOS[str(algo).upper()], f"quant_config.kv_cache_quant_algo: {algo}")
                else:
                    r.warn(f"quant_config.kv_cache_quant_algo: {algo}: not FP8, INT8 or NVFP4; not pinned")
            for k in sorted(val) if isinstance(val, dict) else ():
                if k != "kv_cache_quant_algo":
                    r.note(f"quant_config.{k}: {val[k]}: weight quantization; set `weights` by hand if it applies")
        elif key in TRTLLM_IRRELEVANT_KEYS:
            r.ignored.append(key)
        else:
            r.warn(f"{key}: not a TensorRT-LLM setting kvplan knows; not imported (nor its value)")


def _trtllm_kv_cache(r: _Read, kc: Mapping[Any, Any]) -> None:
    for raw in sorted(kc, key=str):
        v = kc[raw]
        k = str(raw)
        w = f"kv_cache_config.{k}: {_yaml_scalar(v)}"
        if k == "dtype":
            _kv_dtype(r, TRTLLM_KV_DTYPES, str(v), w)
        elif k == "tokens_per_block":
            r.block_size = (_int(str(v), w, MAXIMUM["block_size"]), w)
        elif k == "enable_block_reuse":
            if not isinstance(v, bool):
                raise DeploymentReadError(f"{w}: takes true or false")
            r.prefix_caching = (v, w)
        elif k == "host_cache_size":
            if _float(v, w) > 0:
                r.tier = ("host", f"{w} bytes")
        elif k == "free_gpu_memory_fraction":
            r.note(f"{w}: {_FREE_FRACTION}")
        elif k == "max_tokens":
            r.note(f"{w}: {_POOL_CAP}")
        elif k == "max_attention_window":
            r.note(f"{w}: per-layer attention windows; kvplan takes windows from the model")
        elif k == "sink_token_length":
            r.warn(f"{w}: deprecated on the PyTorch backend; not imported")
        else:
            r.warn(f"kv_cache_config.{k}: not a kv_cache_config field kvplan knows; not imported (nor its value)")


_YAML_HOLDS = "a YAML mapping of TensorRT-LLM settings, such as `max_batch_size: 32`"


def read_trtllm(text: str, base_dir: str = ".", where: str = "config") -> _Read:
    """A YAML config (the `--config` file), or a `trtllm-serve MODEL --config x.yaml ...` line.

    `where` names the text in messages (the file it came from); a `--config` file is read relative to
    `base_dir`, as kvplan reads every input file (kvplan.base.files: a regular file, bounded, UTF-8).
    """
    r = _Read("trtllm")
    stripped = text.lstrip()
    words = _strip_env(split_command(text)) if stripped.startswith(("trtllm-serve", "env ")) or re.match(
        r"^[A-Za-z_][A-Za-z0-9_]*=\S*\s", stripped) else None
    if words is None:
        files.refuse_blank(text, where, what="the TensorRT-LLM config", holds=_YAML_HOLDS)
        cfg = _yaml_load(text, where)
        if not isinstance(cfg, dict):
            raise DeploymentReadError("a TensorRT-LLM config must be a YAML mapping", span=files.start(where),
                               help="give the --config YAML or a `trtllm-serve MODEL --config x.yaml` line")
        _trtllm_yaml(r, cfg, where)
    else:
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

        def config(rr: _Read, v: str, w: str) -> None:
            yaml_path.append(v)

        table = [
            _Flag(("--config", "--extra_llm_api_options"), True, config),
            _Flag(("--max_batch_size",), True, _set("batch", _bounded("batch"))),
            _Flag(("--max_seq_len",), True, _context(trtllm_tokens)),
            _Flag(("--tp_size",), True, _set("tp", _bounded("tp"))),
            _Flag(("--pp_size",), True, _set("pp", _bounded("pp"))),
            _Flag(("--ep_size",), True, _note("expert parallelism is not modelled; devices = tensor × pipeline")),
            _Flag(("--max_num_tokens",), True, _note(_CHUNK)),
            _Flag(("--kv_cache_free_gpu_memory_fraction", "--free_gpu_memory_fraction"), True, _note(_FREE_FRACTION)),
        ]
        _parse_flags(words, table, r, TRTLLM_IRRELEVANT, TRTLLM_IRRELEVANT_FLAGS, lambda f: f, positional)
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
    r.defaults("TensorRT-LLM's default enable_block_reuse: true", 32, "TensorRT-LLM's default tokens_per_block",
               "kv_cache_config.dtype auto (default)")
    return r


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


@attrs.frozen(slots=True)
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


def read(engine: str, text: str, base_dir: str = ".", where: str = "config") -> _Read:
    if engine == "vllm":
        return read_vllm(text)
    if engine == "sglang":
        return read_sglang(text)
    if engine == "trtllm":
        return read_trtllm(text, base_dir, where)

    raise DeploymentReadError(f"unknown engine '{engine}'", help=suggest(engine, ENGINES))


def import_deployment(engine: str, text: str, opts: Options = Options(), base_dir: str = ".") -> Imported:
    """The .kvp equivalent of one engine deployment."""

    if not text.strip():
        raise DeploymentReadError("nothing to import: the command line or file is empty")
    r = read(engine, text, base_dir, opts.source_path or "config")

    # model
    model_block: Optional[tuple[str, str]] = None
    if opts.model and opts.model_config:
        raise DeploymentReadError("give --model or --model-config, not both")
    if opts.model:
        m = get_model(opts.model)
        model_id, model_why = m.id, f"--model {opts.model}"
        if r.model_ref:
            model_why += f" (the engine serves {r.model_ref})"
    elif opts.model_config:
        m = load_config(opts.model_config)   # fails here, not at lint time, if the config is unreadable
        path = opts.model_config
        if opts.out_dir is not None:
            path = os.path.relpath(os.path.abspath(path), os.path.abspath(opts.out_dir))
            if not files.within(opts.model_config, (opts.out_dir,)):
                folder = os.path.dirname(os.path.abspath(opts.model_config))
                r.warn(f"--model-config {opts.model_config} is outside the spec's folder: kvplan reads it from the "
                       f"spec only when allowed (`kvplan lint --allow-path {folder}`, docs/cli-lint.md)")
        model_id = _ident(r.model_ref.rstrip("/").rsplit("/", 1)[-1] if r.model_ref else m.id)
        model_block = (model_id, path.replace(os.sep, "/"))
        model_why = f"--model-config {opts.model_config}" + (f" (the engine serves {r.model_ref})" if r.model_ref else "")
    else:
        if not r.model_ref:
            raise DeploymentReadError(f"the {ENGINE_NAMES[engine]} configuration names no model",
                               help="pass --model ID (kvplan models) or --model-config PATH")
        found = match_model(r.model_ref)
        if found is None:
            raise DeploymentReadError(f"model '{r.model_ref}' is not in the catalog",
                               help="pass --model ID (kvplan models lists them) or --model-config PATH "
                                    "(its Hugging Face config.json)")
        m, model_why = found
        model_id = m.id

    # device
    if not opts.device:
        raise DeploymentReadError(f"the {ENGINE_NAMES[engine]} configuration does not say which device it runs on",
                           help="pass --device ID (kvplan devices lists them)")
    dev = get_device(opts.device)

    # workload
    if opts.batch is not None:
        batch = (opts.batch, f"--batch {opts.batch}" + (f" (the engine says {r.batch[1]})" if r.batch else ""))
    elif r.batch is not None:
        batch = r.batch
    else:
        flag = {"vllm": "--max-num-seqs", "sglang": "--max-running-requests", "trtllm": "max_batch_size"}[engine]
        raise DeploymentReadError(f"the configuration sets no {flag}, so the batch is the engine's default",
                           help=f"add {flag} to it, or pass --batch N (the concurrency you serve)")
    if opts.context is not None:
        context = (opts.context, f"--context {opts.context}")
    elif r.context is not None:
        context = r.context
    elif m.max_context:
        context = (int(m.max_context), f"the model's max context ({ENGINE_NAMES[engine]} derives its limit "
                                       "from the model config when none is set)")
    else:
        raise DeploymentReadError("the configuration sets no context limit and the model declares none",
                           help="pass --context TOKENS (e.g. 32k)")
    if opts.batch is not None:  # the engine's own values were checked where their flags were read
        _in_range(opts.batch, "--batch", limits.MAX_BATCH)
    if opts.context is not None:
        _in_range(opts.context, "--context", limits.MAX_TOKENS, "a token count")
    _in_range(context[0], "the context", limits.MAX_TOKENS, "a token count")

    devices = r.tp[0] * r.pp[0]
    if devices > limits.MAX_DEVICES:
        raise DeploymentReadError(f"tensor parallel {r.tp[0]:,} × pipeline parallel {r.pp[0]:,} is {devices:,} "
                                  f"devices; a spec takes {limits.between(1, limits.MAX_DEVICES)}", help=_LIMIT)
    if r.tp[0] not in tp_options(m, devices):  # the engine would refuse it, and no plan can reproduce it
        raise DeploymentReadError(
            f"tensor parallel {r.tp[0]:,} × pipeline parallel {r.pp[0]:,} cannot split {m.id} ({m.n_q} query "
            f"heads, {m.n_kv} KV heads, {m.n_layers} layers): tensor parallel must divide the query heads and "
            "divide or be a multiple of the KV heads, and pipeline parallel must be at most the layers",
            help=f"check -tp/-pp against the model; the nearest split it takes is tensor parallel "
                 f"{closest_tp(m, r.tp[0])} × pipeline parallel {min(r.pp[0], m.n_layers)}")
    dev_why = f"tensor parallel {r.tp[0]} × pipeline parallel {r.pp[0]}"
    if r.pp[0] > 1:
        r.note(f"pipeline parallel {r.pp[0]}: kvplan chooses the tensor-parallel size from the device count, "
               f"so `kvplan emit` may not give back tp {r.tp[0]} × pp {r.pp[0]}")

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

    text_out = _render(engine, opts, r, model_id, model_why, model_block, dev.id, batch, context, pins)
    warnings = tuple(r.warnings)
    return Imported(text=text_out, warnings=warnings, model=model_id, device=dev.id,
                    pins=tuple((k, v) for k, v, _ in pins))


def _comment(text: str) -> str:
    return " ".join(text.split())


def _render(engine: str, opts: Options, r: _Read, model_id: str, model_why: str,
            model_block: Optional[tuple[str, str]], device: str, batch: tuple[int, str],
            context: tuple[int, str], pins: list[tuple[str, str, str]]) -> str:
    out = ["kvplan 1",
           f"# Imported from a {ENGINE_NAMES[engine]} deployment by `kvplan import --from {engine}`.",
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
    rows.append(("engine", engine, ENGINE_NAMES[engine]))
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


__all__ = ["ENGINES", "MAX_TOKENS", "DeploymentReadError", "Imported", "Options", "human_int", "import_deployment",
           "match_model", "read_source", "sglang_tokens", "split_command", "tokens_text", "trtllm_tokens",
           "vllm_tokens"]
