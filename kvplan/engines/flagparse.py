"""The shared half of `kvplan import`: reading an engine's command line or settings into kvplan's terms.

    Read            what one configuration says, each value with the flag it came from
    ReadFlag        one flag an engine module's reader knows, and its handler
    parse_flags     walk a command line's words through a table of ReadFlags
    store, context_flag, note_flag, warn_flag, kv_flag, ...   the handlers the engines share

Each engine's own reader (its flag table, its token-count reading, its defaults) sits in its module,
kvplan/engines/<id>.py, next to the code that writes its configuration; the .kvp writer is
kvplan/app/importer.py. Names, versions and defaults come from the engine's catalog record
(kvplan.catalog.engines), facts from shared/reference/engines.md.
"""

from __future__ import annotations

import math
import re
import shlex
from typing import Callable, Mapping, Optional, Sequence, Union

import attrs

from kvplan.base import limits
from kvplan.base.errors import KvplanError
from kvplan.base.records import record
from kvplan.catalog import settings
from kvplan.catalog.engines import get_engine


class DeploymentReadError(KvplanError):
    """The deployment cannot be read: a malformed flag value, no model, no device."""


# ----------------------------------------------------------------- accumulator

@attrs.define
class Read:
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
    #: the engine pins read (kvplan.catalog.settings): pin key -> (its value as a .kvp writes it, the flag as written)
    pins: dict[str, tuple[str, str]] = attrs.Factory(dict)
    dp: Optional[tuple[int, str]] = None                  # vLLM --data-parallel-size, SGLang --dp
    dp_attention: Optional[tuple[bool, str]] = None       # SGLang --enable-dp-attention, and as written
    #: speculative decoding (kvplan.engines.speculative): kvplan's method, the draft tokens k, the draft's repo id
    #: ("" for none), and the flags as written; None where the configuration speculates not
    speculative: Optional[tuple[str, Optional[int], str, str]] = None
    #: SGLang's speculative flags as read, gathered before they are read together (kvplan.engines.speculative)
    speculative_flags: dict[str, str] = attrs.Factory(dict)
    attn_dp: Optional[tuple[int, str]] = None             # SGLang --attn-dp-size
    expert_switch: Optional[tuple[bool, str]] = None      # vLLM --enable-expert-parallel (the experts over DP × TP)
    ep: Optional[tuple[int, str]] = None                  # TensorRT-LLM moe_expert_parallel_size
    #: the pool of disaggregated serving the server runs ("prefill" or "decode"), and as written: SGLang
    #: --disaggregation-mode, vLLM's NixlConnector kv_role (kv_producer, kv_consumer); None: both phases
    pool: Optional[tuple[str, str]] = None
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
                              "block_size": limits.MAX_TOKENS, "tp": limits.MAX_DEVICES, "pp": limits.MAX_DEVICES,
                              "dp": limits.MAX_DEVICES, "attn_dp": limits.MAX_DEVICES, "ep": limits.MAX_DEVICES}
LIMIT_HELP = "kvplan's limit, docs/cli-import.md"


def quoted(value: object) -> str:
    """A flag value (or a value read from YAML) for a message, cut when it is too long to repeat whole."""
    text = str(value)
    return f"'{text}'" if len(text) <= 40 else f"'{text[:20]}…' ({len(text):,} characters)"


def in_range(n: int, flag: str, maximum: int, what: str = "") -> int:
    if not 1 <= n <= maximum:
        raise DeploymentReadError(f"{flag} must be {what or 'a whole number'} {limits.between(1, maximum)}, "
                                  f"got {n:,}", help=LIMIT_HELP)
    return n


def whole(value: str, flag: str, maximum: int = limits.MAX_BATCH) -> int:
    text = str(value).strip()
    if not re.fullmatch(r"[+-]?\d+(_\d+)*", text):  # what Python's int() reads, as the engines' parsers do
        raise DeploymentReadError(f"{flag} takes a whole number, got {quoted(value)}")
    text = text.replace("_", "")
    if limits.digits_of(text) > limits.MAX_DIGITS:
        raise DeploymentReadError(f"{flag} must be a whole number {limits.between(1, maximum)}, got a "
                                  f"{limits.digits_of(text):,}-digit number", help=LIMIT_HELP)
    return in_range(int(text), flag, maximum)


def bounded(attr: str) -> Callable[[str, str], int]:
    """whole with the range of the .kvp setting `attr` becomes."""
    return lambda v, flag: whole(v, flag, MAXIMUM[attr])


def number(value: object, flag: str) -> float:
    """A flag's value, or a value from YAML (str, int, float, bool, bytes, a date, a list, a mapping, null),
    as a finite number of at least 0."""
    try:
        if not isinstance(value, (str, bytes, int, float)):  # what float() takes of what YAML gives
            raise TypeError(type(value).__name__)
        x = float(value)
    except (TypeError, ValueError, OverflowError):
        raise DeploymentReadError(f"{flag} takes a number, got {quoted(value)}") from None
    if not math.isfinite(x) or x < 0:
        raise DeploymentReadError(f"{flag} takes a finite number of at least 0, got {quoted(value)}")
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
PLAIN_INT = re.compile(r"[+-]?\d+(?:_\d+)*")  # what int() takes
#: The most tokens an imported limit may hold: the spec's own limit (kvplan.base.limits), so that
#: `kvplan import` never writes a context that `kvplan lint` refuses.
MAX_TOKENS = limits.MAX_TOKENS


def cut(value: str) -> str:
    """A flag value for a message, cut if it is long (a value is evidence, not a payload)."""
    return value if len(value) <= 24 else value[:20] + "..."


def tokens_in_range(n: int, value: str, flag: str) -> int:
    if n < 1 or n > MAX_TOKENS:
        raise DeploymentReadError(f"{flag} must be a token count {limits.between(1, MAX_TOKENS)}, got {n:,}",
                                  help=LIMIT_HELP)
    return n


def digits_in_range(number: str, value: str, flag: str) -> None:
    """Refuse a number of more digits than any token count has, before float() makes it infinite."""
    if limits.digits_of(number.partition(".")[0]) > limits.MAX_DIGITS:
        raise DeploymentReadError(f"{flag} must be a token count {limits.between(1, MAX_TOKENS)}, got a "
                                  f"{limits.digits_of(number.partition('.')[0]):,}-digit number", help=LIMIT_HELP)


def plain_tokens(value: str, flag: str, engine: str, hint: str) -> int:
    text = value.strip()
    if not PLAIN_INT.fullmatch(text):
        raise DeploymentReadError(f"{flag} '{cut(value)}' is not a token count {engine} reads", help=hint)
    digits_in_range(text, value, flag)
    return tokens_in_range(int(text), value, flag)


def exp2(suffix: str) -> int:
    return {"K": 10, "M": 20, "G": 30, "T": 40}[suffix[0].upper()]


# ------------------------------------------------------------- command lines

def split_command(text: str) -> list[str]:
    """Shell words of a command line (a file may continue lines with a backslash and hold comments)."""
    joined = re.sub(r"\\\r?\n", " ", text)
    try:
        return shlex.split(joined, comments=True)
    except ValueError as exc:
        raise DeploymentReadError(f"cannot split the command line: {exc}",
                           help="quote it as a shell would, or give a file holding it") from None


def strip_env(words: list[str]) -> list[str]:
    """Drop leading `VAR=value` assignments, `env` and `exec` (a launcher script's last line)."""
    i = 0
    while i < len(words) and (re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[i]) or words[i] in ("env", "exec")):
        i += 1
    return words[i:]


@record
class ReadFlag:
    names: tuple[str, ...]
    takes_value: bool
    handle: Callable[[Read, str, str], None]   # (read, value, as written)


def parse_flags(words: Sequence[str], table: Sequence[ReadFlag], r: Read, irrelevant: frozenset[str],
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
        if value is not None and SECRET_FLAG.search(key):  # --api-key sk-...: never copied into the spec
            written = f"{name}{'=' if eq else ' '}(value not shown)"
        if key in irrelevant or key in irrelevant_flags:
            r.ignored.append(written)
        else:
            r.warn(f"{written}: not a {get_engine(r.engine).described} flag kvplan knows; not imported")


#: Flags whose value is a credential (vLLM's and SGLang's --api-key, a token, a key file): listed by name only.
SECRET_FLAG = re.compile(r"key|token|secret|passw|credential|auth", re.IGNORECASE)


# ------------------------------------------------------------ shared handlers

Handler = Callable[[Read, str, str], None]

NO_RESERVE = "the .kvp has no such key (kvplan keeps an assumed 8% reserve)"
FREE_FRACTION = "a fraction of FREE memory after weights; " + NO_RESERVE
CHUNK = settings.CHUNK
POOL_CAP = "a cap on the KV pool in tokens; kvplan sizes the pool"


def model_flag(r: Read, v: str, w: str) -> None:
    r.model_ref = v


def store(attr: str, conv: Optional[Callable[[str, str], int]] = None,
          value: Union[bool, str, None] = None) -> Handler:
    """Store (the flag's value converted, or `value`, and the flag as written) in r.<attr>."""
    def h(r: Read, v: str, w: str) -> None:
        flag = w.split(" ")[0].split("=")[0]
        setattr(r, attr, (conv(v, flag) if conv is not None else value, w))
    return h


def context_flag(read: Callable[[str, str], tuple[int, str]], off: tuple[str, ...] = (), off_note: str = ""
                 ) -> Handler:
    """Store the engine's context limit as the engine reads it, saying how when a suffix was binary.
    `off`: the values (`auto`, `-1`) with which the engine derives the limit itself; `off_note` is said then."""
    def h(r: Read, v: str, w: str) -> None:
        flag = w.split(" ")[0].split("=")[0]
        if v.strip().lower() in off:
            r.note(f"{w}: {off_note}")
            return
        n, how = read(v, flag)
        r.context = (n, f"{w} ({how})" if how else w)
    return h


def fraction_flag(key: str) -> Handler:
    """A fraction above 0 and at most 1 (vLLM --gpu-memory-utilization, SGLang --mem-fraction-static), stored as
    the pin `key`."""
    def h(r: Read, v: str, w: str) -> None:
        flag = w.split(" ")[0].split("=")[0]
        x = number(v, flag)
        if not 0 < x <= 1:
            raise DeploymentReadError(f"{flag} must be a fraction above 0 and at most 1, got {quoted(v)}")
        r.pins[key] = (f"{x:g}", w)
    return h


def whole_flag(key: str, tokens: Callable[[str, str], tuple[int, str]], maximum: int, off: tuple[str, ...] = (),
               off_note: str = "") -> Handler:
    """A whole number stored as the pin `key`: a token count as the engine reads it (`tokens`), else a plain
    count of at most `maximum`; a value among `off` (SGLang's `-1`: no limit) stores nothing, `off_note` said."""
    def h(r: Read, v: str, w: str) -> None:
        if v.strip() in off:
            r.note(f"{w}: {off_note}")
            return
        flag = w.split(" ")[0].split("=")[0]
        n = tokens(v, flag)[0] if maximum == limits.MAX_TOKENS else whole(v, flag, maximum)
        r.pins[key] = (str(n), w)
    return h


def table_readers(engine: str, tokens: Callable[[str, str], tuple[int, str]], cli: bool = False) -> list[ReadFlag]:
    """The readers of every setting the table maps to one of `engine`'s flags, each the way its carrier says
    (settings.Read): into Read's own field where the carrier names one (the batch, the page, the layout, the
    context, the data-parallel size), else into Read.pins. Only Read.OWN is left to the engine module's table.
    `cli`: the command-line names of an engine whose flags differ from its config keys (Carrier.cli), only."""
    R = settings.Read
    out: list[ReadFlag] = []
    for row in settings.SETTINGS:
        c = row.engines.get(engine)
        name = "" if c is None else c.cli if cli else settings.engine_flag(row, engine)
        if c is None or c.read in (R.OWN, R.NONE, R.BOOL) or not name:
            continue
        names = (name,) if cli else (*c.aliases, name)
        if c.switch_into:
            out += [ReadFlag((flag,), False, store(c.switch_into, value=on)) for flag, on in c.switch.items()]
        if c.read is R.SWITCH:
            out += [ReadFlag((flag,), False, store(c.into, value=on)) for flag, on in c.switch.items()]
        elif c.read is R.DTYPE:
            out.append(ReadFlag(names, True, kv_flag(get_engine(engine).kv_reads)))
        elif c.read is R.LIMIT:
            out.append(ReadFlag(names, True, context_flag(tokens, c.off, c.off_note)))
        elif c.into:
            out.append(ReadFlag(names, True, store(c.into, bounded(c.into))))
        elif c.read is R.FRACTION:
            out.append(ReadFlag(names, True, fraction_flag(row.key)))
        else:
            most = int(row.range.hi.value) if row.range.hi else limits.MAX_BATCH
            out.append(ReadFlag(names, True, whole_flag(row.key, tokens, most, c.off, c.off_note)))
    return out


def note_flag(why: str) -> Handler:
    def h(r: Read, v: str, w: str) -> None:
        r.note(f"{w}: {why}")
    return h


def warn_flag(why: str) -> Handler:
    def h(r: Read, v: str, w: str) -> None:
        r.warn(f"{w}: {why}")
    return h


def kv_flag(table: Mapping[str, tuple[Optional[str], str]]) -> Handler:
    def h(r: Read, v: str, w: str) -> None:
        read_kv_dtype(r, table, v, w)
    return h


WEIGHT_DTYPES = {"bfloat16": "bf16", "float16": "fp16", "half": "fp16", "float32": "fp32", "float": "fp32"}


def weights_dtype(r: Read, v: str, w: str) -> None:
    if v in WEIGHT_DTYPES:
        r.weights = (WEIGHT_DTYPES[v], w)
    elif v != "auto":
        r.warn(f"{w}: unknown weight dtype; weights left at the default")


def quantization(r: Read, v: str, w: str) -> None:
    if v == "fp8":
        r.weights = ("fp8", w)
    else:
        r.warn(f"{w}: weight quantization kvplan does not map; set `weights` by hand")


def read_kv_dtype(r: Read, table: Mapping[str, tuple[Optional[str], str]], value: str, written: str) -> None:
    r.kv_dtype_given = True
    if value not in table:
        r.warn(f"{written}: {get_engine(r.engine).described} has no KV cache dtype '{value}'; not pinned")
        return
    kv, why = table[value]
    if kv is None:
        r.warn(f"{written}: {why}, a width no kvplan dtype has; kv_dtype not pinned")
        return
    r.kv_dtype = (kv, written + (f" ({why})" if why else ""))
    if value == "auto":
        r.note(f"{written}: the KV cache keeps the model's dtype; kv_dtype = bf16 is assumed")


def json_int(text: str) -> Union[int, str]:
    """An integer of a JSON flag value; one too long for any range stays text (Python refuses to convert
    more than 4,300 digits)."""
    return int(text) if limits.digits_of(text) <= limits.MAX_DIGITS else f"{limits.digits_of(text):,}-digit number"


def json_float(text: str) -> Union[float, str]:
    """A float of a JSON flag value; one beyond a float's range stays as written, not infinity."""
    x = float(text)
    return x if math.isfinite(x) else text[:24]


