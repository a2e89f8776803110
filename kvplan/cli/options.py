"""The command line's option types and shared options: numbers read once at the edge into their base unit and
checked against their range, the k8s target's text options, and the option groups several commands share."""

from __future__ import annotations

import functools
import math
from typing import IO, Any, Callable, Mapping, Optional, TypeVar, cast

import click

from kvplan.app.requests import Deploy, PlannerOptions
from kvplan.base import limits
from kvplan.base.errors import KvplanError
from kvplan.base.units import MAX_EXACT, UNITS, Dim, parse_quantity, split_quantity
from kvplan.cli.run import EXIT_ERROR

F = TypeVar("F", bound=Callable[..., Any])

#: click's path types, made once and shared by the options and arguments that take a path: each click.Path()
#: looks up a translation of its name with gettext (~35 µs of every start-up; the commands made 29 of them).
FILE, DIR, ANY_PATH = click.Path(dir_okay=False), click.Path(file_okay=False), click.Path()


class OptionValueError(click.ClickException):
    """A bad option value: one line on stderr, exit 2 (click's own errors print the usage first)."""

    exit_code = EXIT_ERROR

    def show(self, file: Optional[IO[str]] = None) -> None:
        click.echo(f"kvplan: error: {self.format_message()}", err=True)


# click's ParamType is generic in newer releases and not in click 8.2: the ignore covers both.
class Number(click.ParamType):  # type: ignore[type-arg, unused-ignore]
    """A numeric option, read once at the edge into its base unit and checked against its range.

    Every numeric option of the CLI has one (tests/acceptance/test_units.py checks that, and docs/cli.md lists
    each range): finite, in [lo, hi] (lo excluded when `lo_open`), whole when `integer`. `units`
    are the units it takes (default: all of `dim`'s); a plain number is in the base unit (tokens,
    bytes, 1), so `--activation-reserve 5000000000` is bytes.
    """

    name = "number"

    def __init__(self, dim: Dim, *, lo: float, hi: float, lo_open: bool = False, integer: bool = False,
                 units: Optional[Mapping[str, float]] = None, range_words: str, example: str) -> None:
        self.dim, self.lo, self.hi, self.lo_open, self.integer = dim, lo, hi, lo_open, integer
        self.units = {"": 1.0, **(units if units is not None else UNITS[dim])}
        self.range_words, self.example = range_words, example

    def convert(self, value: object, param: Optional[click.Parameter], ctx: Optional[click.Context]) -> Any:
        if not isinstance(value, str):           # a default, already converted
            return value
        flag = param.opts[0] if param is not None and param.opts else "value"
        shown = value if len(value) <= 24 else value[:20] + "..."
        try:
            x = parse_quantity(value, self.dim, what=flag, table=self.units)
        except KvplanError as exc:
            hint = f" ({exc.help})" if exc.help and exc.help.startswith("did you mean") else ""
            raise OptionValueError(f"{exc.message}{hint}; {flag} takes {self.range_words} "
                                   f"(e.g. {self.example})") from None
        low_bad = x <= self.lo if self.lo_open else x < self.lo
        if not math.isfinite(x) or low_bad or x > self.hi or (self.integer and x != int(x)):
            raise OptionValueError(f"{flag} must be {self.range_words}, got {shown} (e.g. {self.example})")
        parts = split_quantity(value)
        if self.dim is Dim.TOKENS and parts is not None and parts[1] == "K":
            warn_upper_k(flag, parts[0])
        return int(x) if self.integer else x


def warn_upper_k(flag: str, number: str) -> None:
    """KV125's warning, on the command line: `128K` is 128,000 here and 131,072 to vLLM."""
    vllm = f"reads {number}K as {int(number) * 1024:,}" if number.isdigit() else f"refuses {number}K"
    click.echo(f"kvplan: warning: {flag} {number}K is read as {float(number) * 1e3:,.0f} tokens, but vLLM {vllm}; "
               f"write {number}k or {number}Ki to say which", err=True)


def _top(hi: int) -> str:
    """An upper bound as docs/cli.md writes it: 2^30 for a large power of two, else the digits (4,096)."""
    return f"2^{hi.bit_length() - 1}" if hi & (hi - 1) == 0 and hi >= 2**20 else f"{hi:,}"


def count_type(lo: int = 1, hi: int = MAX_EXACT) -> Number:
    return Number(Dim.COUNT, lo=lo, hi=hi, integer=True, units={"k": 1e3, "M": 1e6},
                  range_words=f"a whole number from {lo} to {_top(hi)}", example="32")


def tokens_type(hi: int = MAX_EXACT) -> Number:
    return Number(Dim.TOKENS, lo=1, hi=hi, integer=True,
                  range_words=f"a whole number of tokens from 1 to {_top(hi)} (k = 1,000, Ki = 1,024)",
                  example="128k")


def bytes_type(hi: int = MAX_EXACT) -> Number:
    return Number(Dim.BYTES, lo=0, hi=hi, range_words=f"bytes from 0 to {_top(hi)} B (a plain number is bytes)",
                  example="5000000000, 5 GB or 4.66 GiB")


def real_type(lo: float, hi: float, example: str) -> Number:
    words = f"a finite number of at least {lo:g}" if math.isinf(hi) else f"a number from {lo:g} to {hi:g}"
    return Number(Dim.NUMBER, lo=lo, hi=hi, range_words=words, example=example)


class K8sValue(click.ParamType):  # type: ignore[type-arg, unused-ignore]
    """A text option of `emit --target k8s` (an image, a namespace, a claim name), checked by its function in
    kvplan/engines/k8s.py, which is imported only when such an option is given."""

    name = "text"

    def __init__(self, check: str) -> None:
        self.check = check

    def convert(self, value: object, param: Optional[click.Parameter], ctx: Optional[click.Context]) -> Any:
        if not isinstance(value, str):
            return value
        from kvplan.engines import k8s

        flag = param.opts[0] if param is not None and param.opts else "value"
        try:
            return getattr(k8s, self.check)(value, flag)
        except KvplanError as exc:
            raise OptionValueError(str(exc)) from None


def deploy_options(fn: F) -> F:
    """--image, --namespace, --pvc, --shm-size, --gpus-per-node, --gpu-resource: the k8s target's assumed
    defaults, overridable (docs/cli-emit.md, "Kubernetes"); the command gets them as one `deploy`."""
    fn = _gathered(fn, "deploy", Deploy, {k: k for k in ("image", "namespace", "pvc", "shm_size", "gpus_per_node",
                                                         "gpu_resource")})
    fn = click.option("--gpu-resource", type=click.Choice(["nvidia.com/gpu", "amd.com/gpu"]), default=None,
                      help="k8s: the GPU resource to request  [default: from the device's vendor].")(fn)
    fn = click.option("--gpus-per-node", type=count_type(hi=limits.MAX_DEVICES), default=None, metavar="N",
                      help="k8s: GPUs in one node; more GPUs than this make a LeaderWorkerSet  [default: the "
                           "device's host size in the catalog, else 8, assumed].")(fn)
    fn = click.option("--shm-size", type=Number(Dim.BYTES, lo=0, lo_open=True, hi=MAX_EXACT,
                                                 range_words=f"bytes above 0 up to {_top(MAX_EXACT)} B",
                                                 example="16GiB"),
                      default=None, metavar="BYTES", help="k8s: the size of /dev/shm  [default: 16GiB, assumed].")(fn)
    fn = click.option("--pvc", type=K8sValue("check_pvc"), default=None, metavar="NAME",
                      help="k8s: the PersistentVolumeClaim that holds the Hugging Face cache  "
                           "[default: model-cache].")(fn)
    fn = click.option("--namespace", type=K8sValue("check_namespace"), default=None, metavar="NAME",
                      help="k8s: the namespace of every object  [default: none, kubectl's current one].")(fn)
    fn = click.option("--image", type=K8sValue("check_image"), default=None, metavar="IMAGE",
                      help="k8s: the container image  [default: the engine's official image at kvplan's "
                           "version, assumed].")(fn)
    return fn


def allow_path_option(fn: F) -> F:
    """--allow-path DIR: a folder outside the spec's own that its `config = "..."` paths may name."""
    return click.option("--allow-path", "allow_paths", multiple=True, type=DIR,
                        metavar="DIR", help="Let a spec's config paths name files in this folder too (repeatable); "
                                            "without it they must lie beside the spec or below it.")(fn)


def calibration_option(fn: F) -> F:
    """--calibration FILE: a profile `kvplan calibrate` wrote, whose fits replace kvplan's default factors of the
    expected figures (docs/expected.md)."""
    return click.option("--calibration", "calibration", type=FILE, default=None,
                        metavar="PROFILE.toml",
                        help="A calibration profile (kvplan calibrate): its fitted factors replace the defaults of "
                             "the expected step and TTFT; for a spec, it replaces a deployment's `calibration`.")(fn)


def reserve_options(fn: F) -> F:
    """--activation-reserve, --runtime-reserve: the per-device reserves of kvplan.model.memory, one memory model
    for every command that plans (advise, report, lint, emit)."""
    fn = click.option("--runtime-reserve", type=bytes_type(), default=None, metavar="BYTES",
                      help="Runtime memory per GPU (CUDA context, communication buffers); 0 is allowed  "
                           "[default: 1GiB, assumed].")(fn)
    fn = click.option("--activation-reserve", type=bytes_type(), default=None, metavar="BYTES",
                      help="Activation memory per GPU outside the KV pool, e.g. 5000000000 or 5 GB  [default: 8% of "
                           "the device less the runtime reserve, assumed].")(fn)
    return fn


def expected_options(fn: F) -> F:
    """--calibration and --slo-on: the expected figures' profile, and which figures the SLOs are checked against."""
    fn = click.option("--slo-on", "slo_on", type=click.Choice(["expected", "bound"]), default="expected",
                      show_default=True,
                      help="Check the SLOs against the expected figures, or against the lower bounds "
                           "(docs/expected.md).")(fn)
    return calibration_option(fn)


#: The planner's options as the command line names them, and as PlannerOptions does.
_PLANNER = {"reserve": "reserve", "min_gain": "min_gain", "prefill_efficiency": "eta",
            "activation_reserve": "activation_reserve", "runtime_reserve": "runtime_reserve", "slo_on": "slo_on",
            "calibration": "calibration"}


def _gathered(fn: F, name: str, record: Callable[..., object], keys: Mapping[str, str]) -> F:
    """`fn` called with the options in `keys` (parameter -> field) gathered into one `record`, passed as `name`."""

    @functools.wraps(fn)
    def wrapper(*args: object, **kwargs: object) -> object:
        fields = {keys[k]: kwargs.pop(k) for k in list(kwargs) if k in keys}
        return fn(*args, **{name: record(**fields)}, **kwargs)

    return cast(F, wrapper)


def plan_reserve_options(fn: F) -> F:
    """emit's part of the planner's options: the reserves, --calibration and --slo-on, as one `planner`."""
    fn = expected_options(_gathered(fn, "planner", PlannerOptions, _PLANNER))
    return reserve_options(fn)


def planner_options(fn: F) -> F:
    """--reserve, --min-gain, --prefill-efficiency and the reserves: the planner's assumed defaults, overridable;
    --calibration and --slo-on; the command gets them as one `planner`."""
    fn = plan_reserve_options(fn)
    fn = click.option("--prefill-efficiency", type=real_type(0.01, 1.0, "0.7"), default=None, metavar="ETA",
                      help="Fraction of dense peak prefill runs at, for reuse economics  "
                           "[assumed default: 0.7].")(fn)
    fn = click.option("--min-gain", type=real_type(1.0, math.inf, "1.1"), default=None, metavar="X",
                      help="Step-time factor a lossier option must buy to be chosen  [assumed default: 1.1].")(fn)
    fn = click.option("--reserve", type=real_type(0, 0.99, "0.08"), default=None, metavar="FRACTION",
                      help="Memory kept free per device for activations and runtime  "
                           "[assumed default: 0.08].")(fn)
    return fn


LINT_FORMATS = ["concise", "full", "json", "github", "sarif"]


class Readers(click.Choice):  # type: ignore[type-arg, unused-ignore]
    """`import --from`'s choices: the engines kvplan reads back (kvplan.app.importer.readers, derived
    from the engine targets), looked up when the option is parsed or its help shown, so that start-up
    imports no engine module."""

    def __init__(self) -> None:
        super().__init__(())

    @property  # type: ignore[override, misc, unused-ignore]
    def choices(self) -> tuple[str, ...]:
        from kvplan.app.importer import readers
        return tuple(readers())

    @choices.setter
    def choices(self, value: object) -> None:  # click's __init__ assigns it; the live table wins
        pass

