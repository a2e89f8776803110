"""Exact weight bytes of a checkpoint: what its files hold, what the engine keeps in memory, what a step reads.

Three sources, best first (docs/weights.md):

1. `model.safetensors.index.json` `metadata.total_size`: the bytes of every tensor in the checkpoint's files,
   as the hub publishes them (reported).
2. `quantization_config` in config.json: the parameter count (kvplan.catalog.hf_config) split into what
   the method quantizes and what it keeps at the checkpoint's `torch_dtype`, each at its stored width,
   scales and zero points included (derived). The methods and their layouts:

   - `fp8` (DeepSeek-V3; "FP8 Weight Documentation" in the README_WEIGHTS of the deepseek-ai/DeepSeek-V3
     repository): E4M3 weights, 1 B each, with one float32 `weight_scale_inv` per `weight_block_size` block
     (128 × 128: 4 B per 16,384 weights); without a block size, one scale per tensor (counted as 0 B).
     Embeddings and the LM head stay at `torch_dtype`.
   - `mxfp4` (gpt-oss, OCP Microscaling Formats v1.0 §5: one E8M0 scale per block of 32 FP4 E2M1 values):
     4 bits + 8 bits / 32 = 0.53125 B per weight, on the routed experts only; the expert biases and every
     module in `modules_to_not_convert` (attention, router, embeddings, LM head) stay at `torch_dtype`.
   - `awq` (AutoAWQ GEMM layout) and `gptq` (AutoGPTQ): `bits`-bit packed weights, one fp16 scale and one
     `bits`-bit packed zero point per `group_size` input rows (AWQ only with `zero_point`; GPTQ always
     stores `qzeros`). GPTQ's `g_idx` (4 B per input row, under 0.1% of the weights) is not counted.
     Embeddings and the LM head stay at `torch_dtype`.
   - `compressed-tensors` (llm-compressor): the first config group's `weights`: `num_bits` per weight,
     a scale at `torch_dtype` per group (`strategy = group`) or per block (`block`), an FP8 scale per
     16-value group for `tensor_group` (NVFP4), a zero point of `num_bits` per scale when not symmetric;
     `channel` and `tensor` scales are counted as 0 B. Embeddings and the LM head (`ignore`) stay at
     `torch_dtype`.

   Norms, biases and routers are counted among the quantized weights where the method keeps them at
   16 bits: they are under 0.1% of every catalog model's parameters.
3. The declared `weights` dtype: parameters × its width (what kvplan did before; the caller's fallback).

Held and read are separate for a mixture of experts: `routed` is the part of the held bytes in routed
experts, of which a step reads only the experts the batch touches (kvplan.model.roofline).

DeepSeek-V3's checkpoint also holds its multi-token-prediction module (`num_nextn_predict_layers`; one
more decoder layer, `eh_proj`, two norms and copies of the embedding and LM head: the README_WEIGHTS of the
deepseek-ai/DeepSeek-V3 repository).
vLLM skips those weights unless speculative decoding uses them (`DeepseekV2ForCausalLM.load_weights`,
`get_spec_layer_idx_from_weight_name`), so they count in `checkpoint` but not in `held`.
"""

from __future__ import annotations

import json
import math
from typing import Mapping, Optional

import attrs

from kvplan.base.errors import ConfigError, Span
from kvplan.base.json_types import JSONValue
from kvplan.base.records import record
from kvplan.catalog import DTYPES, Dtype, Model, WeightBytes
from kvplan.catalog.hf_config import HFConfigValue, count_params

#: A parsed config.json (kvplan.catalog.hf_config) or one of its tables.
Config = Mapping[str, HFConfigValue]

#: The quantization methods kvplan computes bytes for (docs/weights.md).
METHODS = ("fp8", "mxfp4", "awq", "gptq", "compressed-tensors")

_TORCH_WIDTH = {"bfloat16": 2.0, "float16": 2.0, "half": 2.0, "float32": 4.0, "float": 4.0}
_TORCH_NAME = {"bfloat16": "bf16", "float16": "fp16", "half": "fp16", "float32": "fp32", "float": "fp32"}


@record
class _Split:
    """A checkpoint's parameters by how a method stores them."""

    total: float        # every parameter of the main model
    routed: float       # routed-expert parameters (biases included)
    embed: float        # the input embedding table
    head: float         # an untied LM head (0 when tied)
    expert_bias: float  # gpt-oss's per-expert biases (kept at torch_dtype by MXFP4)


def _fail(key: str, within: str, want: str, raw: HFConfigValue, where: str) -> ConfigError:
    shown = raw if isinstance(raw, (int, float, bool)) or raw is None else type(raw).__name__
    return ConfigError(f"{within}'{key}' must be {want}, got {shown!s:.40}", span=Span(where, 1, 1, 1, 1))


def _int(q: Config, key: str, where: str, default: Optional[int] = None, within: str = "quantization_config ") -> int:
    """An integer value of `q` (config.json's top level with `within=""`); a wrong type names file and key."""
    raw = q.get(key, default)
    if isinstance(raw, bool) or not isinstance(raw, int):
        raise _fail(key, within, "an integer", raw, where)
    return raw


def _flag(q: Config, key: str, where: str, default: bool) -> bool:
    raw = q.get(key, default)
    if not isinstance(raw, bool):
        raise _fail(key, "quantization_config ", "true or false", raw, where)
    return raw


def _table(q: Config, key: str, where: str, what: str) -> Config:
    raw = q.get(key)
    if not isinstance(raw, dict):
        raise ConfigError(f"{what} must be an object", span=Span(where, 1, 1, 1, 1))
    return raw


def _split(config: Config, where: str) -> _Split:
    total, _, routed = count_params(config, where)
    vocab, hidden = _int(config, "vocab_size", where, within=""), _int(config, "hidden_size", where, within="")
    mt = config.get("model_type")
    tied = config.get("tie_word_embeddings")
    untied_default = mt in ("llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "phi3",
                            "gpt_oss", "deepseek_v2", "deepseek_v3")
    head = 0.0 if (tied if isinstance(tied, bool) else not untied_default) else float(vocab * hidden)
    bias = 0.0
    if mt == "gpt_oss" and routed:
        n_exp = _int(config, "num_local_experts", where, 0, within="")
        inter = _int(config, "intermediate_size", where, 0, within="")
        bias = float(_int(config, "num_hidden_layers", where, within="") * n_exp * (2 * inter + hidden))
    return _Split(total=total, routed=routed, embed=float(vocab * hidden), head=head, expert_bias=bias)


def torch_width(config: Config, where: str) -> tuple[float, str]:
    """Bytes per unquantized weight, from `torch_dtype` (or transformers' newer `dtype`)."""
    raw = config.get("torch_dtype", config.get("dtype"))
    if raw is None:
        return 2.0, "torch_dtype not stated: unquantized weights assumed 16-bit"
    if not isinstance(raw, str) or raw not in _TORCH_WIDTH:
        raise ConfigError(f"'torch_dtype' is not a dtype kvplan knows (got {raw!r:.40})",
                          help="known: " + ", ".join(sorted(_TORCH_WIDTH)), span=Span(where, 1, 1, 1, 1))
    return _TORCH_WIDTH[raw], f"torch_dtype {raw}"


def _block(q: Config, key: str, within: str, where: str) -> tuple[int, int]:
    """Two positive integers (a block's rows and columns); anything else names file and key."""
    raw = q.get(key)
    pair = [b for b in raw if isinstance(b, int) and not isinstance(b, bool) and b > 0] if isinstance(raw, list) else []
    if not isinstance(raw, list) or len(raw) != 2 or len(pair) != 2:
        shown = json.dumps(raw, default=str)
        raise ConfigError(f"{within}'{key}' must be two positive integers, got {shown:.40}",
                          span=Span(where, 1, 1, 1, 1))
    return pair[0], pair[1]


def _per_weight(method: str, q: Config, width: float, where: str) -> tuple[float, str]:
    """(bytes per quantized weight, how) for one method."""
    if method == "fp8":
        if q.get("weight_block_size") is None:
            return 1.0, "fp8: 1 B per weight, one scale per tensor"
        rows, cols = _block(q, "weight_block_size", "quantization_config ", where)
        return (1.0 + 4.0 / (rows * cols), f"fp8: 1 B per weight + a float32 scale per {rows}×{cols} block")
    if method == "mxfp4":
        return 0.5 + 1.0 / 32, "mxfp4: 4 bits per weight + an E8M0 scale per 32"
    if method in ("awq", "gptq"):
        bits = _int(q, "bits", where, _int(q, "w_bit", where, 4) if "w_bit" in q else None)
        group = _int(q, "group_size", where, _int(q, "q_group_size", where, 128) if "q_group_size" in q else None)
        zeros = method == "gptq" or _flag(q, "zero_point", where, True)
        if group == -1:  # one scale per output column: negligible
            return bits / 8, f"{method}: {bits} bits per weight, per-channel scales"
        if group <= 0:
            raise ConfigError(f"quantization_config 'group_size' must be positive or -1, got {group}",
                              span=Span(where, 1, 1, 1, 1))
        per = bits / 8 + 2.0 / group + ((bits / 8) / group if zeros else 0.0)
        return per, (f"{method}: {bits} bits per weight + an fp16 scale{' and a zero point' if zeros else ''} "
                     f"per {group}")
    return _compressed(q, width, where)


def _compressed(q: Config, width: float, where: str) -> tuple[float, str]:
    """compressed-tensors: (bytes per quantized weight, how), from the first config group's `weights`."""
    groups = q.get("config_groups")
    if not isinstance(groups, dict) or not groups:
        raise ConfigError("quantization_config of compressed-tensors has no 'config_groups'",
                          span=Span(where, 1, 1, 1, 1))
    first = groups[sorted(groups)[0]]
    w = first.get("weights") if isinstance(first, dict) else None
    if not isinstance(w, dict):
        raise ConfigError("compressed-tensors config group has no 'weights'", span=Span(where, 1, 1, 1, 1))
    bits = _int(w, "num_bits", where)
    strategy = w.get("strategy", "tensor")
    if not isinstance(strategy, str):
        raise _fail("strategy", "compressed-tensors ", "a string", strategy, where)
    symmetric = _flag(w, "symmetric", where, True)
    if strategy == "group":
        group = _int(w, "group_size", where)
        scale, n = width, group
    elif strategy == "tensor_group":
        group = _int(w, "group_size", where, 16)
        scale, n = 1.0, group
    elif strategy == "block":
        rows, cols = _block(w, "block_structure", "compressed-tensors ", where)
        scale, n = width, rows * cols
    elif strategy in ("channel", "tensor", "token"):
        return bits / 8, f"compressed-tensors: {bits} bits per weight, {strategy} scales"
    else:
        raise ConfigError(f"compressed-tensors strategy '{strategy!s:.30}' is not one kvplan knows",
                          help="known: group, tensor_group, block, channel, tensor", span=Span(where, 1, 1, 1, 1))
    per = bits / 8 + scale / n + (0.0 if symmetric else (bits / 8) / n)
    return per, f"compressed-tensors: {bits} bits per weight + a scale per {n} ({strategy})"


def method_of(config: Config, where: str) -> Optional[str]:
    """The checkpoint's quantization method, or None; an unknown method is an error naming it."""
    q = config.get("quantization_config")
    if q is None:
        return None
    if not isinstance(q, dict):
        raise ConfigError("'quantization_config' must be an object", span=Span(where, 1, 1, 1, 1))
    method = q.get("quant_method")
    if not isinstance(method, str):
        raise ConfigError("'quantization_config' has no quant_method", help="known: " + ", ".join(METHODS),
                          span=Span(where, 1, 1, 1, 1))
    if method not in METHODS:
        shown = method if len(method) <= 40 else method[:40] + "…"
        raise ConfigError(f"quantization method '{shown}' is not one kvplan knows",
                          help="known: " + ", ".join(METHODS) + "; or name a checkpoint without quantization_config "
                               "and declare `weights`", span=Span(where, 1, 1, 1, 1))
    return method


def _mtp_params(config: Config, where: str) -> float:
    """DeepSeek's multi-token-prediction module: one more decoder layer, eh_proj (2H × H), two norms."""
    n = config.get("num_nextn_predict_layers")
    if not isinstance(n, int) or isinstance(n, bool) or n <= 0:
        return 0.0
    layers = _int(config, "num_hidden_layers", where, within="")
    more = dict(config, num_hidden_layers=layers + n)
    more.pop("quantization_config", None)
    extra_layers = count_params(more, where)[0] - count_params(config, where)[0]
    hidden = _int(config, "hidden_size", where, within="")
    return extra_layers + n * (2 * hidden * hidden + 2 * hidden)


def from_config(config: Config, where: str, source: str) -> Optional[WeightBytes]:
    """Weight bytes from `quantization_config` (derived), or None for an unquantized checkpoint."""
    method = method_of(config, where)
    if method is None:
        return None
    q = _table(config, "quantization_config", where, "'quantization_config'")
    width, width_note = torch_width(config, where)
    per, how = _per_weight(method, q, width, where)
    s = _split(config, where)
    plain = s.embed + s.head
    if method == "mxfp4":
        quantized = s.routed - s.expert_bias
        routed = quantized * per + s.expert_bias * width
    else:
        quantized = s.total - plain
        routed = s.routed * per
    held = quantized * per + (s.total - quantized) * width
    mtp = _mtp_params(config, where)
    checkpoint = held
    if mtp:
        # the module's own layer and eh_proj quantized like the rest; its embedding and head copies not
        checkpoint += mtp * per + plain * width
    note = f"{how}; the rest at {width_note}"
    return WeightBytes(held=held, routed=routed, checkpoint=checkpoint, evidence="derived",
                       source=f"quantization_config in {source} ({note})", method=method, format=method)


def from_index(index: Mapping[str, JSONValue], config: Config, derived: Optional[WeightBytes],
               source: str, params: float, params_routed: float, width: float, where: str = "<config>"
               ) -> Optional[WeightBytes]:
    """Weight bytes from a safetensors index's `metadata.total_size` (reported), or None without one.

    The routed share and the multi-token-prediction bytes (which the engine does not hold) come from the
    derived split where there is one, else from the parameter counts at one width."""
    meta = index.get("metadata")
    total = meta.get("total_size") if isinstance(meta, dict) else None
    if isinstance(total, bool) or not isinstance(total, (int, float)) or not math.isfinite(total) or total <= 0:
        return None
    total = float(total)
    if derived is not None and derived.checkpoint > 0:
        held = total * derived.held / derived.checkpoint
        routed = held * derived.routed / derived.held if derived.held else 0.0
        method = fmt = derived.method
    else:
        mtp = _mtp_params(config, where) * width
        held = total - mtp if total > mtp else total
        routed = held * params_routed / params if params else 0.0
        method = ""
        raw = config.get("torch_dtype", config.get("dtype"))
        fmt = _TORCH_NAME.get(raw, "bf16") if isinstance(raw, str) else "bf16"
    return WeightBytes(held=held, routed=routed, checkpoint=total, evidence="reported",
                       source=f"metadata.total_size {int(total):,} B in {source}", method=method, format=fmt)


def declared(params: float, params_routed: float, width: float, dtype_id: str) -> WeightBytes:
    """Weight bytes from the declared `weights` dtype: parameters × width."""
    held = params * width
    return WeightBytes(held=held, routed=params_routed * width, checkpoint=held, evidence="assumed",
                       source=f"declared weights = {dtype_id}: parameters × {width:g} B", method="")


#: Bits per quantized weight of the formats `weights` shows (the rest of a checkpoint at its torch_dtype).
_FORMAT_BITS = {"fp8": 8, "mxfp4": 4, "fp32": 32}


def checkpoint_dtype(model: Model) -> Optional[Dtype]:
    """What `weights` is for a model planned at its checkpoint's bytes: the checkpoint's format (fp8, mxfp4, ...)
    at the width the bytes give per parameter (held / params), so that P · w_p is the checkpoint's bytes too;
    None without them."""
    wb = model.weight_bytes
    if wb is None or model.params <= 0:
        return None
    fmt = wb.format or wb.method or "bf16"
    width = wb.held / model.params
    return Dtype(fmt, width, _FORMAT_BITS.get(fmt, max(1, round(8 * width))), bool(wb.method),
                 f"the checkpoint's weight bytes (docs/weights.md): {wb.source}")


def planned(model: Model, declared: Optional[Dtype]) -> tuple[Model, Dtype]:
    """The model and weights dtype a plan uses (docs/weights.md). A declared dtype (`weights = ...` in a spec,
    `--weights`) wins: the user serves another checkpoint, planned at parameters × its width, so the model's
    checkpoint bytes are dropped. Without one, the checkpoint's bytes and format; without those, bf16."""
    if declared is not None:
        return (model if model.weight_bytes is None else attrs.evolve(model, weight_bytes=None)), declared
    return model, checkpoint_dtype(model) or DTYPES["bf16"]
