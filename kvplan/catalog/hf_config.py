"""Hugging Face config.json → Model (SPEC §2): geometry, per-layer windows, parameter counts.

The rules follow what transformers itself does with the same fields; where a
rule comes from a model family's configuration class, the comment names the
file (read at huggingface/transformers @ the commits in
tests/data/hf/SOURCES.md).

Parameter counts are exact for the families in `_KNOWN_FAMILIES`; for another
`model_type` they assume a Llama-shaped layer (gated MLP, RMSNorm, bias only
where `attention_bias`/`mlp_bias` say so) and the Model's note says so.

Active parameters: for a dense model, all of them (SPEC §4: P_active = P, so
the short-context intensity limit is 2b/w_p exactly, and a config.json gives
the same figures as the catalog entry built from it). For a mixture of
experts, all but the routed experts a token does not pick and, when it is not
tied to the LM head, the input embedding table (a lookup reads one row of it):
the convention of DeepSeek-V2's "21B active" and gpt-oss-120b's "5.13B
active"; Mistral's "12.9B active" for Mixtral counts the embedding table too.
"""

from __future__ import annotations

import json
import math
import os
import re
from typing import Mapping, NoReturn, Optional, Sequence, Union

from kvplan.base import files, limits
from kvplan.base.errors import ConfigError, KvplanError, Span
from kvplan.base.json_types import JSONScalar
from kvplan.catalog import Model, get_model

# model_types whose layer layout the parameter count below reproduces exactly.
_KNOWN_FAMILIES = frozenset({
    "llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "phi3",
    "gemma", "gemma2", "gemma3_text", "gpt_oss", "deepseek_v2", "deepseek_v3",
})
# transformers' per-family defaults for keys a config.json may leave out.
# tie_word_embeddings: Gemma*Config default True; these classes default False;
# PretrainedConfig (any other family) defaults True.
_UNTIED_BY_DEFAULT = frozenset({
    "llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "phi3",
    "gpt_oss", "deepseek_v2", "deepseek_v3",
})
# Families whose configuration class has a fixed head_dim default instead of
# hidden_size // num_attention_heads (Qwen3Config 128, Gemma*Config 256, GptOssConfig 64).
_HEAD_DIM_DEFAULT = {"qwen3": 128, "qwen3_moe": 128, "gemma": 256, "gemma2": 256,
                     "gemma3_text": 256, "gpt_oss": 64}
# Qwen2Config/Qwen3Config default use_sliding_window=False: a stated window is inert.
_QWEN = frozenset({"qwen2", "qwen2_moe", "qwen3", "qwen3_moe"})
# Qwen2Attention hard-codes bias=True on q/k/v and False on o, whatever attention_bias says
# (transformers models/qwen2/modular_qwen2.py).
_QKV_BIAS = frozenset({"qwen2", "qwen2_moe"})
_QK_NORM = frozenset({"qwen3", "qwen3_moe", "gemma3_text"})
_FOUR_NORMS = frozenset({"gemma2", "gemma3_text"})  # pre/post norm around attention and MLP
_LAYER_TYPES = {"full_attention": False, "sliding_attention": True}

# The largest value of each integer field kvplan reads (kvplan.base.limits; docs/config-json.md).
_LAYER_KEYS = ("num_hidden_layers", "sliding_window_pattern", "max_window_layers", "first_k_dense_replace",
               "moe_layer_freq", "decoder_sparse_step")
_WIDTH_KEYS = ("hidden_size", "head_dim", "intermediate_size", "moe_intermediate_size",
               "shared_expert_intermediate_size", "vocab_size", "kv_lora_rank", "q_lora_rank", "qk_rope_head_dim",
               "qk_nope_head_dim", "v_head_dim")
_EXPERT_KEYS = ("num_local_experts", "n_routed_experts", "num_experts", "num_experts_per_tok", "experts_per_token",
                "n_shared_experts")
MAXIMUM: Mapping[str, int] = {
    **{k: limits.MAX_LAYERS for k in _LAYER_KEYS},
    **{k: limits.MAX_WIDTH for k in _WIDTH_KEYS},
    **{k: limits.MAX_EXPERTS for k in _EXPERT_KEYS},
    "num_attention_heads": limits.MAX_HEADS, "num_key_value_heads": limits.MAX_HEADS,
    "max_position_embeddings": limits.MAX_TOKENS, "sliding_window": limits.MAX_TOKENS,
}
#: A number field (attn_logit_softcapping) is a positive finite number at most this.
MAX_NUMBER = 1e6


class _Huge:
    """A number in the JSON text beyond every field's range, kept unconverted: an integer of more
    digits than any range admits (Python refuses to convert one of more than 4,300), or a number
    beyond a float's range (which Python would read as infinity)."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __str__(self) -> str:
        if re.fullmatch(r"-?\d+", self.text):
            return f"a {limits.digits_of(self.text):,}-digit number"
        return f"{self.text[:24]} (beyond a float's range)"


#: A value of a parsed config.json: JSON, with a number beyond every range kept as a `_Huge`.
HFConfigValue = Union[JSONScalar, _Huge, list["HFConfigValue"], dict[str, "HFConfigValue"]]


def _json_int(text: str) -> Union[int, _Huge]:
    return int(text) if limits.digits_of(text) <= limits.MAX_DIGITS else _Huge(text)


def _json_float(text: str) -> Union[float, _Huge]:
    x = float(text)
    return x if math.isfinite(x) else _Huge(text)


class _Constant(Exception):
    """NaN, Infinity or -Infinity: Python's json module reads them; JSON has no such values."""


def _json_constant(name: str) -> NoReturn:
    raise _Constant(name)


def _show(value: HFConfigValue) -> str:
    """A config value for a message: JSON as written, a huge integer by its digits, cut when long."""
    text = str(value) if isinstance(value, _Huge) else json.dumps(value, default=str)
    return text if len(text) <= 60 else text[:40] + f"… ({len(text):,} characters)"


# ------------------------------------------------------------------ reading

class _Config:
    """A config mapping plus where it came from, so that every error names file and key."""

    def __init__(self, data: Mapping[str, HFConfigValue], where: str, text: Optional[str] = None) -> None:
        self.data = data
        self.where = where
        self.text = text
        mt = data.get("model_type")
        self.model_type = mt if isinstance(mt, str) else ""

    def span(self, key: Optional[str] = None) -> Span:
        """The place of `"key":` in the file text, else the file's start."""
        if key is not None and self.text is not None:
            m = re.search(r'"' + re.escape(key) + r'"\s*:', self.text)
            if m is not None:
                line = self.text.count("\n", 0, m.start()) + 1
                col = m.start() - (self.text.rfind("\n", 0, m.start()) + 1) + 1
                return Span(self.where, line, col, line, col + len(key) + 2)
        return Span(self.where, 1, 1, 1, 1)

    def fail(self, key: str, message: str, help: Optional[str] = None) -> NoReturn:
        # a key the top level lacks has no place of its own: point at the file's start
        span = self.span(key if key in self.data else None)
        raise ConfigError(f"'{key}' {message}", help=help, span=span)

    def has(self, key: str) -> bool:
        return self.data.get(key) is not None

    def integer(self, key: str, *, default: Optional[int] = None, minimum: int = 1,
            help: Optional[str] = None) -> int:
        raw = self.data.get(key)
        if raw is None:
            if default is not None:
                return default
            self.fail(key, "is missing" if key not in self.data else "is null",
                      help or f"config.json must state {key} as an integer")
        maximum = MAXIMUM.get(key, limits.MAX_WIDTH)
        in_range = f"{limits.between(minimum, maximum)} (kvplan's limit, docs/config-json.md)"
        if isinstance(raw, _Huge):
            self.fail(key, f"must be an integer {in_range}, got {raw}", help)
        # JSON true/false are Python bools, which are ints: refuse them explicitly.
        if isinstance(raw, bool) or not isinstance(raw, int):
            self.fail(key, f"must be an integer, got {_kind(raw)}", help)
        if raw < minimum:
            what = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
            self.fail(key, f"must be {what}, got {raw}", help)
        if raw > maximum:
            self.fail(key, f"must be an integer {in_range}, got {raw:,}", help)
        return raw

    def opt_integer(self, key: str, *, minimum: int = 1) -> Optional[int]:
        return self.integer(key, minimum=minimum) if self.has(key) else None

    def flag(self, key: str, default: Optional[bool]) -> Optional[bool]:
        raw = self.data.get(key)
        if raw is None:
            return default
        if not isinstance(raw, bool):
            self.fail(key, f"must be true or false, got {_kind(raw)}")
        return raw

    def number(self, key: str) -> Optional[float]:
        raw = self.data.get(key)
        if raw is None:
            return None
        if isinstance(raw, bool) or not isinstance(raw, (int, float)) or not 0 < raw <= MAX_NUMBER:
            self.fail(key, f"must be a positive number at most {MAX_NUMBER:g}, or null, got {_kind(raw)}")
        return float(raw)


def _kind(raw: HFConfigValue) -> str:
    """What a JSON value is, for a message: a number or true/false as written, else only its type.

    A string's text is never repeated: the file may be anyone's (a spec in a pull request can name
    it), and the key and the expected type identify the problem.
    """
    if isinstance(raw, bool) or raw is None:
        return json.dumps(raw)
    if isinstance(raw, _Huge):  # beyond every range: said by its size, not its digits
        return str(raw)
    if isinstance(raw, (int, float)):
        text = json.dumps(raw)
        return text if len(text) <= 24 else f"a number of {len(text)} characters"
    if isinstance(raw, str):
        return "a string"
    return "a list" if isinstance(raw, list) else "an object" if isinstance(raw, dict) else type(raw).__name__


class _DuplicateKey(Exception):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _no_duplicates(pairs: list[tuple[str, HFConfigValue]]) -> dict[str, HFConfigValue]:
    out: dict[str, HFConfigValue] = {}
    for k, v in pairs:
        if k in out:
            raise _DuplicateKey(k)
        out[k] = v
    return out


def _parse(text: str, where: str) -> _Config:
    deep = limits.json_too_deep(text)
    if deep is not None:
        line, col = limits.line_col(text, deep)
        raise ConfigError(f"nests objects and arrays more than {limits.MAX_JSON_DEPTH} levels deep",
                          help="a config.json is a few levels deep; is this one?",
                          span=Span(where, line, col, line, col + 1))
    try:
        data = json.loads(text, object_pairs_hook=_no_duplicates, parse_int=_json_int, parse_float=_json_float,
                          parse_constant=_json_constant)
    except _Constant as e:
        name = str(e)
        m = re.search(r"(?<![\w\"])" + re.escape(name) + r"(?![\w\"])", text)
        line, col = limits.line_col(text, m.start()) if m is not None else (1, 1)
        raise ConfigError(f"not valid JSON: `{name}` is not a JSON value", help="write a number, or null",
                          span=Span(where, line, col, line, col + len(name))) from None
    except json.JSONDecodeError as e:
        raise ConfigError(f"not valid JSON: {e.msg}", help="a config.json is one JSON object",
                          span=Span(where, e.lineno, e.colno, e.lineno, e.colno + 1)) from None
    except _DuplicateKey as e:
        # point at the second occurrence: that is the one JSON readers silently keep
        found = list(re.finditer(r'"' + re.escape(e.key) + r'"\s*:', text))
        span = _Config({}, where, text).span()
        if len(found) > 1:
            pos = found[1].start()
            line = text.count("\n", 0, pos) + 1
            col = pos - (text.rfind("\n", 0, pos) + 1) + 1
            span = Span(where, line, col, line, col + len(e.key) + 2)
        raise ConfigError(f"'{e.key}' appears twice", help="keep one value for each key",
                          span=span) from None
    if not isinstance(data, dict):
        raise ConfigError(f"the top level is a JSON {type(data).__name__}, not an object",
                          help="a config.json is one JSON object", span=Span(where, 1, 1, 1, 1))
    return _Config(data, where, text)


# ------------------------------------------------------------------ geometry

def _head_dim(c: _Config, n_q: int) -> int:
    if c.has("head_dim"):
        return c.integer("head_dim")
    hidden = c.integer("hidden_size")
    derived = hidden // n_q if hidden % n_q == 0 else None
    default = _HEAD_DIM_DEFAULT.get(c.model_type)
    if default is not None and derived != default:
        c.fail("head_dim", f"is missing, and for model_type '{c.model_type}' transformers uses "
               f"{default}, not hidden_size / num_attention_heads "
               f"({hidden} / {n_q}{'' if derived is None else f' = {derived}'})",
               help="state head_dim in the config")
    if derived is None:
        c.fail("head_dim", f"is missing and hidden_size {hidden} is not a multiple of "
               f"num_attention_heads {n_q}", help="state head_dim in the config")
    return derived


def _windows(c: _Config, n_layers: int) -> tuple[Optional[int], ...]:
    """Each layer's sliding window in tokens, or None for full attention; a window at
    least max_position_embeddings long never binds and counts as full attention."""
    limit = c.opt_integer("max_position_embeddings")
    return tuple(None if w is not None and limit is not None and w >= limit else w
                 for w in _layer_windows(c, n_layers))


def _layer_windows(c: _Config, n_layers: int) -> tuple[Optional[int], ...]:
    use_sw = c.flag("use_sliding_window", False if c.model_type in _QWEN else None)
    window = c.opt_integer("sliding_window")
    raw_types = c.data.get("layer_types")
    if raw_types is not None:
        if not isinstance(raw_types, list):
            c.fail("layer_types", f"must be a list, got {_kind(raw_types)}")
        if len(raw_types) != n_layers:
            c.fail("layer_types", f"has {len(raw_types)} entries but num_hidden_layers is {n_layers}",
                   help="give one entry per layer")
        out: list[Optional[int]] = []
        for i, t in enumerate(raw_types):
            if not isinstance(t, str) or t not in _LAYER_TYPES:
                c.fail("layer_types", f"entry {i} is not a layer type kvplan knows (got {_kind(t)})",
                       help="known: " + ", ".join(sorted(_LAYER_TYPES)))
            if not _LAYER_TYPES[t]:
                out.append(None)
                continue
            if use_sw is False:
                c.fail("layer_types", f"marks layer {i} 'sliding_attention' but use_sliding_window "
                       "is false", help="drop one of the two")
            if window is None:
                c.fail("sliding_window", f"is null but layer_types marks layer {i} 'sliding_attention'",
                       help="state the window in tokens")
            out.append(window)
        return tuple(out)
    if use_sw is False or window is None:
        return (None,) * n_layers
    if c.has("sliding_window_pattern") or c.model_type == "gemma3_text":
        # Gemma3TextConfig: layer i is local iff (i + 1) % pattern != 0, pattern defaulting
        # to 6: transformers src/transformers/models/gemma3/modular_gemma3.py @ 00332048,
        # `_sliding_window_pattern = kwargs.get("sliding_window_pattern", 6)`.
        pattern = c.integer("sliding_window_pattern", default=6)
        return tuple(window if (i + 1) % pattern else None for i in range(n_layers))
    if c.model_type in ("gemma2", "gpt_oss"):
        # Gemma2Config / GptOssConfig: "sliding_attention" if bool((i + 1) % 2), i.e. even
        # layers (0, 2, ...) local, odd layers global: transformers src/transformers/models/
        # gemma2/configuration_gemma2.py @ 008e5743 and gpt_oss/configuration_gpt_oss.py @ 02b8f42b.
        return tuple(window if (i + 1) % 2 else None for i in range(n_layers))
    if use_sw and c.has("max_window_layers"):
        # Qwen2Config/Qwen3Config: "sliding_attention" if sliding_window is not None and
        # i >= max_window_layers, i.e. the first max_window_layers layers are full and the
        # rest windowed: transformers src/transformers/models/qwen2/configuration_qwen2.py
        # (and qwen3/) @ 008e5743. Older Qwen2 docstrings said "the bottom layers use SWA
        # while the top use full attention"; the code does the opposite and the code rules.
        first_full = c.integer("max_window_layers", minimum=0)
        return tuple(window if i >= first_full else None for i in range(n_layers))
    return (window,) * n_layers


# ------------------------------------------------------------------ experts

def _experts(c: _Config) -> tuple[int, int]:
    """(routed experts per MoE layer, experts chosen per token); (0, 0) for a dense model."""
    def one_of(keys: Sequence[str], minimum: int) -> Optional[int]:
        found = {k: c.integer(k, minimum=minimum) for k in keys if c.has(k)}
        if len(set(found.values())) > 1:
            a, b = list(found)[:2]
            c.fail(b, f"is {found[b]} but '{a}' is {found[a]}", help="the two must agree")
        return next(iter(found.values()), None)

    n_exp = one_of(("num_local_experts", "n_routed_experts", "num_experts"), 0) or 0
    if n_exp == 0:
        return 0, 0
    k = one_of(("num_experts_per_tok", "experts_per_token"), 1)
    if k is None:
        c.fail("num_experts_per_tok", "is missing but the model has routed experts",
               help="state how many experts each token picks")
    if k > n_exp:
        c.fail("num_experts_per_tok", f"is {k}, more than the {n_exp} routed experts")
    return n_exp, k


def _moe_layers(c: _Config, n_layers: int, n_exp: int) -> list[bool]:
    if n_exp == 0:
        return [False] * n_layers
    if c.has("first_k_dense_replace") or c.has("moe_layer_freq") or c.has("n_routed_experts"):
        # DeepSeek-V2/V3: MoE iff i >= first_k_dense_replace and i % moe_layer_freq == 0
        first = c.integer("first_k_dense_replace", default=0, minimum=0)
        freq = c.integer("moe_layer_freq", default=1)
        return [i >= first and i % freq == 0 for i in range(n_layers)]
    if c.has("decoder_sparse_step") or c.has("mlp_only_layers"):
        # Qwen2-MoE/Qwen3-MoE: sparse iff i not in mlp_only_layers and (i + 1) % step == 0
        step = c.integer("decoder_sparse_step", default=1)
        only = c.data.get("mlp_only_layers") or []
        if not isinstance(only, list) or not all(isinstance(i, int) for i in only):
            c.fail("mlp_only_layers", f"must be a list of layer indices, got {_kind(only)}")
        return [i not in only and (i + 1) % step == 0 for i in range(n_layers)]
    return [True] * n_layers


# ------------------------------------------------------------------ counting

def _attention_params(c: _Config, hidden: int, n_q: int, n_kv: int, d_h: int) -> int:
    mt = c.model_type
    bias = bool(c.flag("attention_bias", mt == "gpt_oss"))  # GptOssConfig defaults it to True
    if c.has("kv_lora_rank"):
        # MLA (modeling_deepseek): q through a low-rank path or direct, a joint KV
        # down-projection with the shared RoPE key, a per-head up-projection, o_proj.
        rank = c.integer("kv_lora_rank")
        rope = c.integer("qk_rope_head_dim")
        nope = c.integer("qk_nope_head_dim")
        v_dim = c.integer("v_head_dim")
        q_lora = c.opt_integer("q_lora_rank")
        if q_lora is not None:
            q = hidden * q_lora + q_lora + q_lora * n_q * (nope + rope) + (q_lora if bias else 0)
        else:
            q = hidden * n_q * (nope + rope)
        kv = hidden * (rank + rope) + rank + rank * n_q * (nope + v_dim) + ((rank + rope) if bias else 0)
        return q + kv + n_q * v_dim * hidden + (hidden if bias else 0)
    params = 2 * hidden * n_q * d_h + 2 * hidden * n_kv * d_h
    if mt in _QKV_BIAS:
        params += n_q * d_h + 2 * n_kv * d_h
    elif bias:
        params += n_q * d_h + 2 * n_kv * d_h + hidden
    if mt in _QK_NORM:
        params += 2 * d_h
    if mt == "gpt_oss":
        params += n_q  # one attention-sink logit per head
    return params


def _mlp_params(hidden: int, inter: int, bias: bool) -> int:
    """A gated MLP (gate, up, down), with bias on all three when `bias`."""
    return 3 * hidden * inter + ((2 * inter + hidden) if bias else 0)


def _count(c: _Config, n_layers: int, n_q: int, n_kv: int, d_h: int) -> tuple[int, int, int]:
    mt = c.model_type
    hidden = c.integer("hidden_size")
    vocab = c.integer("vocab_size")
    tied = bool(c.flag("tie_word_embeddings", mt not in _UNTIED_BY_DEFAULT))
    embed = vocab * hidden
    mlp_bias = bool(c.flag("mlp_bias", False))

    n_exp, k = _experts(c)
    moe = _moe_layers(c, n_layers, n_exp)
    per_layer = _attention_params(c, hidden, n_q, n_kv, d_h)
    per_layer += (4 if mt in _FOUR_NORMS else 2) * hidden
    total = embed + (0 if tied else embed) + hidden + n_layers * per_layer
    n_dense = moe.count(False)
    if n_dense:
        total += n_dense * _mlp_params(hidden, c.integer("intermediate_size"), mlp_bias)

    routed = active_routed = 0
    n_moe = moe.count(True)
    if n_moe:
        inter_e = (c.integer("moe_intermediate_size") if c.has("moe_intermediate_size")
                   else c.integer("intermediate_size"))
        expert = _mlp_params(hidden, inter_e, mt == "gpt_oss")  # gpt-oss experts carry biases
        router = n_exp * hidden + (n_exp if mt == "gpt_oss" else 0)
        if c.data.get("topk_method") == "noaux_tc":
            router += n_exp  # DeepSeek-V3's e_score_correction_bias
        shared = 0
        if c.has("n_shared_experts"):
            shared = _mlp_params(hidden, inter_e * c.integer("n_shared_experts", minimum=0), False)
        if c.has("shared_expert_intermediate_size"):
            # Qwen2-MoE: one shared expert and a scalar gate on it
            shared += _mlp_params(hidden, c.integer("shared_expert_intermediate_size"), False) + hidden
        routed = n_moe * n_exp * expert
        active_routed = n_moe * k * expert
        total += routed + n_moe * (router + shared)
    active = total - routed + active_routed - (0 if tied or not n_moe else embed)
    return total, active, routed


def count_params(config: Mapping[str, HFConfigValue], where: str = "<config>") -> tuple[float, float, float]:
    """(parameters held in memory, parameters read per token at batch 1, routed-expert parameters); errors
    name `where` as the file."""
    c = _Config(config, where)
    n_layers, n_q, n_kv, d_h = _core(c)
    total, active, routed = _count(c, n_layers, n_q, n_kv, d_h)
    return float(total), float(active), float(routed)


# ------------------------------------------------------------------ building

def _core(c: _Config) -> tuple[int, int, int, int]:
    """(layers, query heads, KV heads, head dim), checked."""
    multimodal = ("the language model's fields are under 'text_config'; kvplan reads text-only "
                  "configs: pass a catalog model or a text model's config.json"
                  if isinstance(c.data.get("text_config"), dict) else None)
    n_layers = c.integer("num_hidden_layers", help=multimodal)
    n_q = c.integer("num_attention_heads", help=multimodal)
    c.integer("hidden_size", help=multimodal)
    n_kv = c.integer("num_key_value_heads", default=n_q)
    if n_q % n_kv:
        c.fail("num_key_value_heads", f"is {n_kv}, which does not divide num_attention_heads {n_q}",
               help="each KV head serves a whole group of query heads")
    if c.has("kv_lora_rank"):
        # MLA: the cache holds one latent per layer (kv_elems_per_layer), whatever n_kv says;
        # heads and head_dim describe the non-absorbed attention, as the catalog does.
        return n_layers, n_q, n_kv, c.integer("qk_nope_head_dim") + c.integer("qk_rope_head_dim")
    return n_layers, n_q, n_kv, _head_dim(c, n_q)


def _build(c: _Config, mid: str, source: str, params: Optional[float]) -> Model:
    n_layers, n_q, n_kv, d_h = _core(c)
    windows = _windows(c, n_layers)
    mla = c.has("kv_lora_rank")
    n_exp, k = _experts(c)
    notes = []
    if c.model_type not in _KNOWN_FAMILIES:
        # named only when it reads like a transformers model_type (lowercase, `_`): the file may be anyone's
        named = f" '{c.model_type}'" if re.fullmatch(r"[a-z][a-z0-9_]{0,39}", c.model_type) else ""
        notes.append(f"model_type{named} is not one kvplan knows: parameter count assumes a "
                     "Llama-shaped layer")
        if not c.has("tie_word_embeddings"):
            notes.append("tie_word_embeddings not stated: counted tied (transformers' default)")
    if params is not None and params <= 0:
        raise ConfigError(f"stated parameter count must be positive, got {params:g}",
                          span=Span(c.where, 1, 1, 1, 1))
    try:
        total, active, routed = (float(x) for x in _count(c, n_layers, n_q, n_kv, d_h))
    except ConfigError:
        # a stated count stands in for a dense model whose sizes we cannot count
        if params is None or n_exp:
            raise
        total, active, routed = params, params, 0.0
    if params is not None:
        if not n_exp:  # dense: the stated count is the total and what a step reads (SPEC §4)
            total = active = params
        elif active > params:
            raise ConfigError(f"stated parameter count {params:,.0f} is below the {active:,.0f} the "
                              "config's sizes give for one token", span=Span(c.where, 1, 1, 1, 1))
        else:
            total = params
    return Model(
        id=mid, name=mid, n_layers=n_layers, n_q=n_q, n_kv=n_kv, head_dim=d_h,
        params=total, params_active=active, windows=windows,
        kv_kind="mla" if mla else "gqa",
        mla_kv_rank=c.integer("kv_lora_rank") if mla else 0,
        mla_rope_dim=c.integer("qk_rope_head_dim") if mla else 0,
        v_head_dim=c.integer("v_head_dim") if mla and c.has("v_head_dim") else 0,
        hidden_size=c.integer("hidden_size"),
        n_experts=n_exp, experts_per_token=k, params_routed=routed,
        soft_cap=c.number("attn_logit_softcapping"),
        max_context=_context_limit(c),
        source=source, confidence="V", note="; ".join(notes), architecture=_architecture(c),
    )


def _architecture(c: _Config) -> str:
    """The checkpoint's class, `architectures[0]` (engines pick pool layouts by it); "" when not stated."""
    archs = c.data.get("architectures")
    first = archs[0] if isinstance(archs, list) and archs else None
    return first if isinstance(first, str) and re.fullmatch(r"[A-Za-z][A-Za-z0-9_]{0,99}", first) else ""


def _context_limit(c: _Config) -> Optional[int]:
    """The model's context limit as vLLM derives it (`_get_and_verify_max_len`, vllm/config/model.py):
    max_position_embeddings, times rope_scaling's `factor` unless the rope type is su, longrope or llama3
    (or the model Gemma-3, whose limit is already scaled); for yarn, original_max_position_embeddings times
    the factor."""
    limit = c.opt_integer("max_position_embeddings")
    rope = c.data.get("rope_scaling")
    if limit is None or not isinstance(rope, dict) or c.model_type.startswith("gemma3"):
        return limit
    kind = rope.get("rope_type", rope.get("type"))
    factor = rope.get("factor", 1.0)
    if kind in ("su", "longrope", "llama3") or isinstance(factor, bool) or not isinstance(factor, (int, float)):
        return limit
    if not 0 < factor <= MAX_NUMBER:
        c.fail("rope_scaling", f"factor must be a positive number at most {MAX_NUMBER:g}, got {_kind(factor)}")
    base = limit
    if kind == "yarn":
        orig = rope.get("original_max_position_embeddings")
        if isinstance(orig, int) and not isinstance(orig, bool) and 0 < orig <= limits.MAX_TOKENS:
            base = orig
    return min(int(base * factor), limits.MAX_TOKENS)


def model_from_config(config: Mapping[str, HFConfigValue], *, id: str, source: str = "",  # noqa: A002 - the public name callers use
                      params: Optional[float] = None) -> Model:
    """A Model from an already-parsed config.json mapping; `params` overrides the counted total.

    Errors name `source` (else the id) as the file.
    """
    if not isinstance(config, Mapping):
        raise ConfigError(f"a config must be a JSON object, got {type(config).__name__}",
                          span=Span(source or id, 1, 1, 1, 1))
    return _build(_Config(config, source or id), id, source, params)


def _read(path: str | os.PathLike[str]) -> tuple[str, _Config]:
    """A config.json file (or a directory holding one), read and parsed, every error naming the file."""
    where = files.pure_path(path)
    if os.path.isdir(where):
        where = files.pure_path(os.path.join(where, "config.json"))
    try:
        # a regular file of bounded size only (never a FIFO or /dev/zero); bad UTF-8 is located
        text = files.read_text(where, what="the model config")
    except FileNotFoundError:
        raise ConfigError(f"config file '{where}' does not exist",
                          help="give the path of a Hugging Face config.json") from None
    except OSError as e:
        raise ConfigError(f"cannot read config file '{where}': {e.strerror}") from None
    files.refuse_blank(text, where, what="the model config", holds="one JSON object (a Hugging Face config.json)",
                       comment=None)
    return where, _parse(text, where)


def load_config(path: str | os.PathLike[str]) -> Model:
    """A Model from a config.json file (or a directory holding one); the id is the file stem,
    or the directory name for a file called config.json."""
    where, c = _read(path)
    mid = files.stem(where)
    if mid == "config" and files.name(files.parent(where)):
        mid = files.name(files.parent(where))
    return _build(c, mid, where, None)


def load_config_data(path: str | os.PathLike[str]) -> Mapping[str, HFConfigValue]:
    """The values of a config.json file, parsed as load_config parses them (a number beyond every range kept
    unconverted), for readers of keys the Model does not carry (kvplan.catalog.weight_bytes)."""
    return _read(path)[1].data


def resolve_model(name: str | None, config_path: str | None) -> Model:
    """The model named in the catalog, or read from a config.json: exactly one of the two."""
    if (name is None) == (config_path is None):
        raise KvplanError("give a catalog model name or a config.json path" if name is None
                          else "give a catalog model name or a config.json path, not both",
                          help="`kvplan models` lists the catalog")
    if config_path is not None:
        return load_config(config_path)
    assert name is not None
    return get_model(name)
