"""Speculative decoding as each engine writes and reads it (SPEC §15, docs/speculative.md): the flags of a plan
that adopted a draft, and the draft a configuration names, back in kvplan's terms for `kvplan import`.

kvplan plans a chain (one draft token per draft step, k + 1 tokens verified per sequence), so it writes one:

- vLLM 0.33.0: `--speculative-config '{"method": ..., "num_speculative_tokens": k, "model": ...}'`
  (vllm/config/speculative.py: SpeculativeConfig's method, num_speculative_tokens and model);
- SGLang 0.5.23: `--speculative-algorithm EAGLE3|NEXTN|NGRAM --speculative-num-steps k
  --speculative-eagle-topk 1 --speculative-num-draft-tokens k+1 [--speculative-draft-model-path REPO]`
  (sglang/srt/server_args.py);
- TensorRT-LLM: `speculative_config: {decoding_type: Eagle3|MTP|NGram, max_draft_len: k, speculative_model: REPO}`,
  MTP as `num_nextn_predict_layers: k` (tensorrt_llm/llmapi/llm_args.py).
"""

from __future__ import annotations

import json
from typing import Mapping, Optional

from kvplan.catalog import settings
from kvplan.catalog.engines import get_engine
from kvplan.engines.common import Flag
from kvplan.engines.flagparse import DeploymentReadError, Read, json_float, json_int
from kvplan.planner.plan import Plan


def _adopted(p: Plan) -> Optional[tuple[str, int, str]]:
    s = p.speculative
    if s is None or not s.adopted:
        return None
    return s.method, int(s.draft_tokens.value), s.draft_model


def vllm_flags(p: Plan) -> list[Flag]:
    """`--speculative-config` with the plan's method, k and draft (none for MTP and n-gram)."""
    got = _adopted(p)
    if got is None:
        return []
    method, k, draft = got
    cfg: dict[str, object] = {"method": get_engine("vllm").speculative[method], "num_speculative_tokens": k}
    if draft:
        cfg["model"] = draft
    return [("--speculative-config", json.dumps(cfg, separators=(",", ":")))]


def sglang_flags(p: Plan) -> list[Flag]:
    """SGLang's speculative flags for the plan's chain: k steps of top-1 drafts, k + 1 tokens verified."""
    got = _adopted(p)
    if got is None:
        return []
    method, k, draft = got
    flags: list[Flag] = [("--speculative-algorithm", get_engine("sglang").speculative[method])]
    if method != "ngram":
        flags += [("--speculative-num-steps", str(k)), ("--speculative-eagle-topk", "1")]
    flags.append(("--speculative-num-draft-tokens", str(k + 1)))
    if draft:
        flags.append(("--speculative-draft-model-path", draft))
    return flags


def trtllm_config(p: Plan) -> Optional[dict[str, object]]:
    """TensorRT-LLM's speculative_config mapping for the plan, or None."""
    got = _adopted(p)
    if got is None:
        return None
    method, k, draft = got
    cfg: dict[str, object] = {"decoding_type": get_engine("trtllm").speculative[method]}
    cfg["num_nextn_predict_layers" if method == "mtp" else "max_draft_len"] = k
    if draft:
        cfg["speculative_model"] = draft
    return cfg


def draft_note(p: Plan) -> list[str]:
    """What the emitted pool figures leave out: the draft's weights and KV, which the engine takes from its pool."""
    s = p.speculative
    if s is None or not s.adopted:
        return []
    return [f"speculative decoding: {s.method}, {int(s.draft_tokens.value)} draft tokens per verify "
            f"({s.speedup.value:.2f}× per token, derived); its draft's weights and KV "
            f"({s.draft_memory.value / 1e9:.3g} GB) come out of the memory the engine sizes its KV pool from; "
            "kvplan's pool figures do not subtract them"]


# ------------------------------------------------------------------ reading back

def _method(engine: str, name: str, written: str) -> str:
    names = {v.lower(): k for k, v in get_engine(engine).speculative.items()}
    if name.lower() in ("eagle",) and engine == "trtllm":  # TensorRT-LLM's backward-compatible alias of Eagle3
        return "eagle3"
    if name.lower() not in names:
        raise DeploymentReadError(f"{written}: {get_engine(engine).described} speculation `{name}` is not one kvplan "
                                  f"plans ({', '.join(get_engine(engine).speculative.values())})",
                                  help="remove it to import the rest, or plan it with `method = ...` by hand")
    return names[name.lower()]


def _tokens(value: object, written: str) -> int:
    hi = settings.MAX_DRAFT_TOKENS
    if isinstance(value, bool) or not isinstance(value, (int, str)) or not str(value).strip().isdigit() \
            or not 1 <= int(str(value)) <= hi:
        raise DeploymentReadError(f"{written}: the draft tokens must be a whole number from 1 to {hi}")
    return int(str(value))


def read_vllm_config(r: Read, value: str, written: str) -> None:
    """vLLM's `--speculative-config` JSON: its method, num_speculative_tokens and model."""
    try:
        cfg = json.loads(value, parse_int=json_int, parse_float=json_float)
    except json.JSONDecodeError as exc:
        raise DeploymentReadError(f"--speculative-config is not JSON: {exc.msg} at column {exc.colno}",
                                  help='give a JSON object, e.g. \'{"method":"eagle3","num_speculative_tokens":3}\'') \
            from None
    if not isinstance(cfg, dict) or not isinstance(cfg.get("method"), str):
        raise DeploymentReadError("--speculative-config must be a JSON object with a method",
                                  help='e.g. \'{"method":"eagle3","model":"owner/name","num_speculative_tokens":3}\'')
    k = _tokens(cfg["num_speculative_tokens"], "--speculative-config num_speculative_tokens") \
        if "num_speculative_tokens" in cfg else None
    draft = cfg.get("model")
    r.speculative = (_method("vllm", cfg["method"], "--speculative-config method"), k,
                     draft if isinstance(draft, str) else "", f"--speculative-config {value}")


def read_sglang(r: Read, flags: Mapping[str, str]) -> None:
    """SGLang's speculative flags, gathered: the algorithm, its steps (k) and draft path."""
    algorithm = flags.get("--speculative-algorithm")
    if algorithm is None:
        if flags:
            r.warn(f"{', '.join(sorted(flags))} without --speculative-algorithm: no speculation; not imported")
        return
    method = _method("sglang", algorithm, "--speculative-algorithm")
    steps = flags.get("--speculative-num-steps")
    drafts = flags.get("--speculative-num-draft-tokens")
    k = _tokens(steps, "--speculative-num-steps") if steps is not None else (
        _tokens(int(drafts) - 1, "--speculative-num-draft-tokens") if drafts is not None and drafts.isdigit() else None)
    topk = flags.get("--speculative-eagle-topk")
    if topk is not None and topk != "1":
        r.note(f"--speculative-eagle-topk {topk}: a draft tree; kvplan plans a chain of top-1 drafts")
    written = " ".join(f"{f} {v}" for f, v in sorted(flags.items()))
    r.speculative = (method, k, flags.get("--speculative-draft-model-path", ""), written)


def read_trtllm(r: Read, cfg: Mapping[str, object]) -> None:
    """TensorRT-LLM's speculative_config mapping."""
    kind = cfg.get("decoding_type")
    if not isinstance(kind, str):
        raise DeploymentReadError("speculative_config needs a decoding_type", help="Eagle3, MTP or NGram")
    method = _method("trtllm", kind, "speculative_config.decoding_type")
    key = "num_nextn_predict_layers" if method == "mtp" else "max_draft_len"
    k = _tokens(cfg[key], f"speculative_config.{key}") if key in cfg else None
    draft = cfg.get("speculative_model", cfg.get("speculative_model_dir", ""))
    r.speculative = (method, k, draft if isinstance(draft, str) else "", f"speculative_config.decoding_type: {kind}")


__all__ = ["draft_note", "read_sglang", "read_trtllm", "read_vllm_config", "sglang_flags", "trtllm_config",
           "vllm_flags"]
