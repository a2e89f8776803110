"""The command line: a thin click layer over the pure core. Only this module prints or exits.

Exit codes: 0 clean, 1 findings, 2 could not run.
"""

from __future__ import annotations

import contextlib
import functools
import math
import sys
from typing import IO, TYPE_CHECKING, Any, Callable, Iterator, Literal, Mapping, NoReturn, Optional, ParamSpec, TypeVar

import attrs
import click

from kvplan import __version__
from kvplan.base import limits
from kvplan.base.errors import KvplanError
from kvplan.base.units import MAX_EXACT, UNITS, Dim, parse_quantity, split_quantity

if TYPE_CHECKING:  # the commands import these when they run (start-up stays small); here they are types only
    from typing import Sequence

    from kvplan.base.diagnostics import Diagnostic
    from kvplan.engines import DeployOptions
    from kvplan.engines.common import Emitted
    from kvplan.lang import CheckResult
    from kvplan.lang.lint import Check
    from kvplan.model.profile import Profile
    from kvplan.planner.plan import Plan

F = TypeVar("F", bound=Callable[..., Any])
P = ParamSpec("P")
R = TypeVar("R")

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2

#: click's path types, made once and shared by the options and arguments that take a path: each click.Path()
#: looks up a translation of its name with gettext (~35 µs of every start-up; the commands made 29 of them).
_FILE, _DIR, _ANY_PATH = click.Path(dir_okay=False), click.Path(file_okay=False), click.Path()


def _fail(message: str) -> NoReturn:
    click.echo(f"kvplan: error: {message}", err=True)
    sys.exit(EXIT_ERROR)


def handles_errors(fn: Callable[P, R]) -> Callable[P, R]:
    """Turn a user error into one line on stderr and exit 2; a traceback only with --debug."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except BrokenPipeError:  # `kvplan advise x.kvp | head`: the reader is done, so are we
            _quiet_stdout()
            sys.exit(EXIT_CLEAN)
        except KvplanError as exc:
            if _debug():
                raise
            _fail(str(exc))
        except (OSError, UnicodeDecodeError) as exc:
            if _debug():
                raise
            _fail(f"{getattr(exc, 'filename', '') or ''}{': ' if getattr(exc, 'filename', None) else ''}"
                  f"{getattr(exc, 'strerror', None) or exc}")
        except Exception as exc:  # a bug: say so in one line, keep the traceback for --debug
            if _debug():
                raise
            _fail(f"internal error: {type(exc).__name__}: {exc} (a kvplan bug; rerun with --debug and report it)")

    return wrapper


# ------------------------------------------------------------------ option values

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
            _warn_upper_k(flag, parts[0])
        return int(x) if self.integer else x


def _warn_upper_k(flag: str, number: str) -> None:
    """KV125's warning, on the command line: `128K` is 128,000 here and 131,072 to vLLM."""
    vllm = f"reads {number}K as {int(number) * 1024:,}" if number.isdigit() else f"refuses {number}K"
    click.echo(f"kvplan: warning: {flag} {number}K is read as {float(number) * 1e3:,.0f} tokens, but vLLM {vllm}; "
               f"write {number}k or {number}Ki to say which", err=True)


def _top(hi: int) -> str:
    """An upper bound as docs/cli.md writes it: 2^30 for a large power of two, else the digits (4,096)."""
    return f"2^{hi.bit_length() - 1}" if hi & (hi - 1) == 0 and hi >= 2**20 else f"{hi:,}"


def _count(lo: int = 1, hi: int = MAX_EXACT) -> Number:
    return Number(Dim.COUNT, lo=lo, hi=hi, integer=True, units={"k": 1e3, "M": 1e6},
                  range_words=f"a whole number from {lo} to {_top(hi)}", example="32")


def _tokens_type(hi: int = MAX_EXACT) -> Number:
    return Number(Dim.TOKENS, lo=1, hi=hi, integer=True,
                  range_words=f"a whole number of tokens from 1 to {_top(hi)} (k = 1,000, Ki = 1,024)",
                  example="128k")


def _bytes_type(hi: int = MAX_EXACT) -> Number:
    return Number(Dim.BYTES, lo=0, hi=hi, range_words=f"bytes from 0 to {_top(hi)} B (a plain number is bytes)",
                  example="5000000000, 5 GB or 4.66 GiB")


def _real(lo: float, hi: float, example: str) -> Number:
    words = f"a finite number of at least {lo:g}" if math.isinf(hi) else f"a number from {lo:g} to {hi:g}"
    return Number(Dim.NUMBER, lo=lo, hi=hi, range_words=words, example=example)


class _K8sValue(click.ParamType):  # type: ignore[type-arg, unused-ignore]
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


def _deploy_options(fn: F) -> F:
    """--image, --namespace, --pvc, --shm-size, --gpus-per-node, --gpu-resource: the k8s target's assumed
    defaults, overridable (docs/cli-emit.md, "Kubernetes")."""
    fn = click.option("--gpu-resource", type=click.Choice(["nvidia.com/gpu", "amd.com/gpu"]), default=None,
                      help="k8s: the GPU resource to request  [default: from the device's vendor].")(fn)
    fn = click.option("--gpus-per-node", type=_count(hi=limits.MAX_DEVICES), default=None, metavar="N",
                      help="k8s: GPUs in one node; more GPUs than this make a LeaderWorkerSet  [default: 8, "
                           "assumed].")(fn)
    fn = click.option("--shm-size", type=Number(Dim.BYTES, lo=0, lo_open=True, hi=MAX_EXACT,
                                                 range_words=f"bytes above 0 up to {_top(MAX_EXACT)} B",
                                                 example="16GiB"),
                      default=None, metavar="BYTES", help="k8s: the size of /dev/shm  [default: 16GiB, assumed].")(fn)
    fn = click.option("--pvc", type=_K8sValue("check_pvc"), default=None, metavar="NAME",
                      help="k8s: the PersistentVolumeClaim that holds the Hugging Face cache  "
                           "[default: model-cache].")(fn)
    fn = click.option("--namespace", type=_K8sValue("check_namespace"), default=None, metavar="NAME",
                      help="k8s: the namespace of every object  [default: none, kubectl's current one].")(fn)
    fn = click.option("--image", type=_K8sValue("check_image"), default=None, metavar="IMAGE",
                      help="k8s: the container image  [default: the engine's official image at kvplan's "
                           "version, assumed].")(fn)
    return fn


def _quiet_stdout() -> None:
    """Point stdout at /dev/null so Python's exit flush does not raise again on the closed pipe."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # no real file descriptor (e.g. under a test runner)
        pass


def _debug() -> bool:
    ctx = click.get_current_context(silent=True)
    while ctx is not None:
        if ctx.obj and ctx.obj.get("debug"):
            return True
        ctx = ctx.parent
    return False


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="kvplan")
@click.option("--debug", is_flag=True, hidden=True, help="Show tracebacks (for bug reports).")
@click.pass_context
def main(ctx: click.Context, debug: bool) -> None:
    """Plan the KV cache of long-context LLM serving.

    \b
    kvplan map      the regime map of a model on a device (s*, s_cap, effective bandwidth)
    kvplan advise   a justified plan for a .kvp deployment spec
    kvplan pareto   the plans that trade tokens/s per user against tokens/s per device
    kvplan emit     the plan as vLLM, SGLang, TensorRT-LLM and LMCache configs
    kvplan lint     check .kvp specs in CI (exit 0 clean, 1 findings, 2 could not run)
    """
    ctx.ensure_object(dict)
    ctx.obj["debug"] = debug


@main.command("models")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@handles_errors
def models_cmd(fmt: str) -> None:
    """List the model catalog."""
    from kvplan import catalog
    from kvplan.render import catalog_view

    click.echo(catalog_view.models(list(catalog.models().values()), fmt), nl=False)


@main.command("devices")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@handles_errors
def devices_cmd(fmt: str) -> None:
    """List the device catalog."""
    from kvplan import catalog
    from kvplan.render import catalog_view

    click.echo(catalog_view.devices(list(catalog.devices().values()), fmt), nl=False)


def _allow_path_option(fn: F) -> F:
    """--allow-path DIR: a folder outside the spec's own that its `config = "..."` paths may name."""
    return click.option("--allow-path", "allow_paths", multiple=True, type=_DIR,
                        metavar="DIR", help="Let a spec's config paths name files in this folder too (repeatable); "
                                            "without it they must lie beside the spec or below it.")(fn)


def _calibration_option(fn: F) -> F:
    """--calibration FILE: a profile `kvplan calibrate` wrote, whose fits replace kvplan's default factors of the
    expected figures (docs/expected.md)."""
    return click.option("--calibration", "calibration", type=_FILE, default=None,
                        metavar="PROFILE.toml",
                        help="A calibration profile (kvplan calibrate): its fitted factors replace the defaults of "
                             "the expected step and TTFT; for a spec, it replaces a deployment's `calibration`.")(fn)


def _load_calibration(path: str | None) -> Profile | None:
    """The profile --calibration names, read and checked (a located error, exit 2, when it is bad)."""
    if path is None:
        return None
    from kvplan.model.profile import load_profile

    return load_profile(path)


@main.command("map")
@click.option("--model", "model_id", metavar="ID",
              help="Catalog model id (kvplan models), or a Hugging Face repo id (docs/hub.md).")
@click.option("--model-config", type=_FILE, metavar="PATH",
              help="A Hugging Face config.json instead of a catalog id.")
@click.option("--device", "device_id", required=True, metavar="ID", help="Catalog device id (kvplan devices).")
@click.option("--devices", "n_devices", type=_count(hi=limits.MAX_DEVICES), default=1, show_default=True, metavar="N",
              help="Devices holding the model.")
@click.option("--tp", type=_count(0, limits.MAX_DEVICES), default=0, metavar="N",
              help="Tensor-parallel size (default 0: all devices).")
@click.option("--batch", type=_count(hi=limits.MAX_BATCH), default=1, show_default=True, metavar="N",
              help="Concurrent sequences.")
@click.option("--context", type=_tokens_type(limits.MAX_TOKENS), default="128k", show_default=True, metavar="TOKENS",
              help="Tokens per sequence (128k = 128,000; 128Ki = 131,072).")
@click.option("--weights", default=None,
              help="Weight dtype: parameters × its width  [default: the checkpoint's own bytes where the model "
                   "has them (docs/weights.md), else bf16]")
@click.option("--kv-dtype", default="bf16", show_default=True, help="KV cache dtype.")
@click.option("--placement", type=click.Choice(["striped", "pinned", "affinity"]), default="striped",
              show_default=True, help="KV page placement on multi-partition devices.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--plot", "plot_path", type=_FILE, metavar="FILE.png|svg",
              help="Also draw the regime map (context against batch) to this file "
                   "(needs matplotlib: pip install matplotlib).")
@click.option("--roofline", "roofline_path", type=_FILE, metavar="FILE.png|svg",
              help="Also draw the roofline with this point to this file (needs matplotlib: pip install matplotlib).")
@click.option("--engine", default="any", show_default=True, metavar="NAME",
              help="The engine of the expected figures' per-step overhead and calibration fit: vllm, sglang, trtllm "
                   "or any.")
@_calibration_option
@handles_errors
def map_cmd(model_id: str | None, model_config: str | None, device_id: str, n_devices: int, tp: int,
            batch: int, context: int, weights: str | None, kv_dtype: str, placement: str, fmt: str,
            plot_path: str | None, roofline_path: str | None, engine: str, calibration: str | None) -> None:
    """The regime map at one point: κ, s*, s_cap, β_eff, intensity, step time, regime, by KV dtype."""
    from kvplan import catalog
    from kvplan.catalog import weight_bytes
    from kvplan.catalog.hub import resolve_model
    from kvplan.model import roofline as rf
    from kvplan.model.regime import regime_map
    from kvplan.render import map_view

    device = catalog.get_device(device_id)
    b, s = batch, context
    rf.check_batch_context(b, s)
    model, w = weight_bytes.planned(resolve_model(model_id, model_config),
                                    catalog.dtype(weights) if weights is not None else None)
    kv = catalog.dtype(kv_dtype)
    cfg = rf.Config(model, device, n_devices=n_devices, tp=tp, w_p=w.width, w_kv=kv.width, placement=placement)
    from kvplan.catalog.engines import get_engine
    from kvplan.model.profile import missing_fit

    get_engine(engine)  # an unknown engine is a catalog error, one line
    profile = _load_calibration(calibration)
    rm = regime_map(cfg, b, s, weights=w, kv=kv, engine=engine, profile=profile)
    gap = missing_fit(profile, device.id, engine)
    if gap:
        rm = attrs.evolve(rm, notes=(*rm.notes, gap))
    if plot_path or roofline_path:
        from kvplan.model.regime import DEFAULT_KV_DTYPES
        from kvplan.render import plot

        if plot_path:
            plot.regime_map_figure(cfg, b, s, list(dict.fromkeys([kv.id, *DEFAULT_KV_DTYPES])), plot_path,
                                   kv_name=kv.id)
        if roofline_path:
            plot.roofline_figure(cfg, b, s, roofline_path)
    click.echo(map_view.text(rm) if fmt == "text" else map_view.json_text(rm), nl=False)


def _written(stream: Iterator[tuple[int, str]], out: IO[bytes]) -> Iterator[int]:
    """Write a sweep's text pieces to `out` as UTF-8, yielding each piece's rows (for the progress bar)."""
    for n, text in stream:
        out.write(text.encode("utf-8"))
        yield n


@contextlib.contextmanager
def _sweep_output(output: str) -> Iterator[IO[bytes]]:
    """The sweep's output, binary in every format: stdout's buffer, or a file that replaces `output` once the
    sweep is complete (kvplan.base.outputs: no link or device written through)."""
    if output == "-":
        sys.stdout.flush()
        yield sys.stdout.buffer
        return
    from kvplan.base.outputs import replaced_file

    with replaced_file(output) as fh:
        yield fh


def _csv_only(fmt: str, exact: bool, jobs: int) -> None:
    """sweep's --exact and --jobs shape the CSV writer only: with another format they are an error, not ignored."""
    if fmt != "csv" and (exact or jobs != 1):
        raise KvplanError(f"{'--exact' if exact else '--jobs'} applies to --format csv only",
                          help=f"--format {fmt} writes every number exactly, in one process: drop the option, or "
                               "write --format csv")


@main.command("sweep")
@click.argument("spec_file", required=False, type=_FILE, metavar="[FILE.kvp]")
@click.option("--model", "model_id", metavar="ID",
              help="Catalog model id or Hugging Face repo id (without FILE).")
@click.option("--model-config", type=_FILE, metavar="PATH",
              help="A Hugging Face config.json instead of a catalog id.")
@click.option("--device", "device_id", metavar="ID", help="Catalog device id (without FILE).")
@click.option("--devices", "devices", metavar="LIST", help="Device counts: 1,2,4,8 or 1..8  [default: 1]")
@click.option("--kv-dtype", "kv_dtypes", metavar="LIST", help="KV dtypes: bf16,fp8,int4,int2  [default: bf16]")
@click.option("--batch", metavar="LIST", help="Batch sizes: 1,8,32 or 1..64 or 1..1024:x2  [default: 1]")
@click.option("--context", metavar="LIST",
              help="Contexts: 32k,128k or 4k..1M:x2 or 8k..128k:+8k  [default: 128k]")
@click.option("--weights", default=None,
              help="Weight dtype  [default: the checkpoint's own bytes where known (docs/weights.md), else bf16]")
@click.option("--placement", type=click.Choice(["striped", "pinned", "affinity"]), default=None,
              help="KV page placement  [default: striped]")
@click.option("--format", "fmt", type=click.Choice(["csv", "json", "parquet"]), default="csv", show_default=True,
              help="parquet needs the `parquet` extra (pyarrow)")
@click.option("-o", "--output", type=_FILE, default="-", metavar="FILE",
              help="Write here instead of stdout.")
@click.option("--exact", is_flag=True,
              help="CSV: write every number as its shortest round-trip repr, not to 6 significant digits (slower).")
@click.option("--jobs", type=_count(hi=64), default=1, show_default=True, metavar="N",
              help="CSV: processes that make the rows of a large sweep (helps only where cores are free)")
@_allow_path_option
@_calibration_option
@handles_errors
def sweep_cmd(spec_file: str | None, model_id: str | None, model_config: str | None, device_id: str | None,
              devices: str | None, kv_dtypes: str | None, batch: str | None, context: str | None,
              weights: str | None, placement: str | None, fmt: str, output: str, exact: bool,
              jobs: int, allow_paths: tuple[str, ...], calibration: str | None) -> None:
    """Evaluate every point of devices × KV dtype × batch × context; stream CSV or JSON rows.

    Without FILE, --model (or --model-config) and --device name the deployment; with a .kvp
    FILE each of its deployments is swept, the lists defaulting to the file's values.
    """
    import re

    from kvplan.model import sweep as sw

    for number in re.findall(r"(?<!\w)(?<!\d\.)(\d+(?:\.\d+)?)\s*K(?![A-Za-z])", context or ""):
        _warn_upper_k("--context", number)
    _csv_only(fmt, exact, jobs)
    lists = {"devices": devices, "kv_dtypes": kv_dtypes, "batch": batch, "context": context}
    if spec_file is not None:
        if model_id or model_config or device_id:
            raise KvplanError("give FILE or --model/--device, not both")
        specs = sw.specs_from_scenarios(_checked(spec_file, allow_paths).scenarios, weights=weights,
                                        placement=placement, **lists)
    else:
        from kvplan import catalog
        from kvplan.catalog.hub import resolve_model

        if device_id is None:
            raise KvplanError("missing --device", help="name a catalog device (kvplan devices), or give a .kvp FILE")
        given = {k: v for k, v in lists.items() if v is not None}
        specs = [sw.spec_from_flags(resolve_model(model_id, model_config), catalog.get_device(device_id),
                                    weights=weights, placement=placement or "striped", **given)]
    profile = _load_calibration(calibration)
    if profile is not None:  # the option replaces each deployment's own `calibration`
        specs = [attrs.evolve(x, calibration=profile) for x in specs]
    total = sw.total_points(specs)
    if fmt == "parquet":
        sw.parquet_schema(False)  # without pyarrow: the one-line error, before the output file is made
    try:
        with _sweep_output(output) as out:
            if fmt == "parquet":
                steps: Iterator[int] = sw.parquet_write(specs, out)
            elif fmt == "csv":
                steps = sw.csv_write(specs, out, exact=exact, jobs=int(jobs))
            else:
                steps = _written(sw.json_text(specs), out)
            if total > 100_000 and sys.stderr.isatty():
                with click.progressbar(length=total, label="sweep", file=sys.stderr) as bar:
                    for n in steps:
                        bar.update(n)
            else:
                for _ in steps:
                    pass
            out.flush()
    except BrokenPipeError:  # the reader stopped early (| head): not an error of ours
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


@main.command("tables")
@click.option("--format", "fmt", type=click.Choice(["text", "markdown", "json"]), default="text", show_default=True)
@handles_errors
def tables_cmd(fmt: str) -> None:
    """Regenerate the derived parts of the paper's Tables 1, 3, 4, 5, 7 and the W4 economics."""
    from kvplan.model import paper
    from kvplan.render import tables_view

    tables, inputs = paper.all_tables(), paper.paper_inputs()
    render = {"text": tables_view.text, "markdown": tables_view.markdown, "json": tables_view.json_text}[fmt]
    click.echo(render(tables, inputs), nl=False)


def _reserve_options(fn: F) -> F:
    """--activation-reserve, --runtime-reserve: the per-device reserves of kvplan.model.memory, one memory model
    for every command that plans (advise, report, lint, emit)."""
    fn = click.option("--runtime-reserve", type=_bytes_type(), default=None, metavar="BYTES",
                      help="Runtime memory per GPU (CUDA context, communication buffers); 0 is allowed  "
                           "[default: 1GiB, assumed].")(fn)
    fn = click.option("--activation-reserve", type=_bytes_type(), default=None, metavar="BYTES",
                      help="Activation memory per GPU outside the KV pool, e.g. 5000000000 or 5 GB  [default: 8% of "
                           "the device less the runtime reserve, assumed].")(fn)
    return fn


def _expected_options(fn: F) -> F:
    """--calibration and --slo-on: the expected figures' profile, and which figures the SLOs are checked against."""
    fn = click.option("--slo-on", "slo_on", type=click.Choice(["expected", "bound"]), default="expected",
                      show_default=True,
                      help="Check the SLOs against the expected figures, or against the lower bounds "
                           "(docs/expected.md).")(fn)
    return _calibration_option(fn)


def _with_expected(checked: CheckResult, calibration: str | None, slo_on: str) -> CheckResult:
    """The checked spec's scenarios with --calibration (it replaces a deployment's own) and --slo-on applied."""
    profile = _load_calibration(calibration)
    if profile is None and slo_on == "expected":
        return checked
    return attrs.evolve(checked, scenarios=tuple(
        attrs.evolve(sc, slo_on=slo_on, calibration=profile or sc.calibration) for sc in checked.scenarios))


def _planner_options(fn: F) -> F:
    """--reserve, --min-gain, --prefill-efficiency and the reserves: the planner's assumed defaults, overridable;
    --calibration and --slo-on."""
    fn = _expected_options(fn)
    fn = _reserve_options(fn)
    fn = click.option("--prefill-efficiency", type=_real(0.01, 1.0, "0.7"), default=None, metavar="ETA",
                      help="Fraction of dense peak prefill runs at, for reuse economics  "
                           "[assumed default: 0.7].")(fn)
    fn = click.option("--min-gain", type=_real(1.0, math.inf, "1.1"), default=None, metavar="X",
                      help="Step-time factor a lossier option must buy to be chosen  [assumed default: 1.1].")(fn)
    fn = click.option("--reserve", type=_real(0, 0.99, "0.08"), default=None, metavar="FRACTION",
                      help="Memory kept free per device for activations and runtime  "
                           "[assumed default: 0.08].")(fn)
    return fn


_LINT_FORMATS = ["concise", "full", "json", "github", "sarif"]


def _lint_checks(overrides: dict[str, float] | None = None, calibration: str | None = None,
                 slo_on: str = "expected") -> tuple[Check, ...]:
    """Extra per-file checks for `kvplan lint`: each takes a CheckResult, returns Diagnostics.

    The planner's KV2xx/KV3xx rules: it plans every scenario of a file that checks clean, with the
    planner options given (the same as advise's).
    """

    def planner_check(result: CheckResult) -> list[Diagnostic]:
        from kvplan.planner.lint import check  # numpy and the planner load only if a file checks clean

        return check(_with_expected(result, calibration, slo_on), **(overrides or {}))

    return (planner_check,)


def _digest_check(result: CheckResult) -> list[Diagnostic]:
    from kvplan.engines.digest import check_digests

    return check_digests(result)


@main.command("lint")
@click.argument("paths", nargs=-1, type=_ANY_PATH)
@click.option("--output-format", type=click.Choice(_LINT_FORMATS), default="concise", show_default=True,
              help="How to print diagnostics (stdout).")
@click.option("--select", multiple=True, metavar="CODES",
              help="Report only codes with these prefixes, comma-separated (KV1,KV201); replaces the config's.")
@click.option("--ignore", multiple=True, metavar="CODES", help="Also leave out codes with these prefixes.")
@click.option("--fail-on", type=click.Choice(["error", "warning", "info"]), default=None,
              help="Lowest severity that makes the exit status 1  [config, else error].")
@click.option("--config", type=_FILE, default=None, metavar="PYPROJECT",
              help="Read [tool.kvplan] from this file instead of the nearest pyproject.toml.")
@click.option("--check-digest", is_flag=True,
              help="Also report configs emitted into <spec>.kvplan/ whose plan digest is stale (KV401).")
@click.option("--online", is_flag=True,
              help="Fetch a repo id's config.json from the Hugging Face hub when the local cache lacks it "
                   "(default: the cache only, so findings do not depend on the network; docs/hub.md).")
@_planner_options
@_allow_path_option
@handles_errors
def lint_cmd(paths: tuple[str, ...], output_format: str, select: tuple[str, ...], ignore: tuple[str, ...],
             fail_on: str | None, config: str | None, check_digest: bool, online: bool, reserve: float | None,
             min_gain: float | None, prefill_efficiency: float | None, activation_reserve: float | None,
             runtime_reserve: float | None, slo_on: str, calibration: str | None, allow_paths: tuple[str, ...]) -> None:
    """Check .kvp files and directories: diagnostics on stdout, a summary on stderr.

    Exit 0 when nothing reaches --fail-on, 1 when something does, 2 when lint could not run.
    """
    from kvplan.catalog.hub import network
    from kvplan.lang import lint
    from kvplan.render import diagnostics as diag_view

    settings = lint.load_settings(".", config).with_overrides(
        select=lint.split_codes(select) if select else None, ignore=lint.split_codes(ignore), fail_on=fail_on,
        allow_paths=allow_paths)
    overrides = _overrides(reserve, min_gain, prefill_efficiency, activation_reserve, runtime_reserve)
    _load_calibration(calibration)  # a bad profile is one located error before any file is linted
    checks = _lint_checks(overrides, calibration, slo_on) + ((_digest_check,) if check_digest else ())
    with network(online):
        report = lint.lint_paths(paths, settings, checks=checks)
    click.echo(diag_view.render(output_format, report.files), nl=False)
    click.echo(report.summary(), err=True)
    sys.exit(report.exit_code())


@main.command("fmt")
@click.argument("paths", nargs=-1, type=_ANY_PATH)
@click.option("--check", is_flag=True, help="Write nothing; list files that would change; exit 1 if any.")
@click.option("--diff", is_flag=True, help="Write nothing; print what would change as a diff; exit 1 if any.")
@handles_errors
def fmt_cmd(paths: tuple[str, ...], check: bool, diff: bool) -> None:
    """Rewrite .kvp files in the canonical layout (comments kept). Exit 2 on a syntax error."""
    import difflib

    from kvplan.base.outputs import write_file
    from kvplan.lang import read_spec
    from kvplan.lang.fmt import format_source
    from kvplan.lang.lint import collect

    changed, broken, found = [], 0, collect(paths)
    files = [path for path, _ in found]
    for path, root in found:
        try:
            old = read_spec(path, root)  # as lint reads it: a regular file, at most a spec's size, UTF-8
            new = format_source(old, path)
        except KvplanError as exc:
            code = getattr(exc, "code", None)
            click.echo(f"{exc.span}: {code} {exc.message}" + (f" ({exc.help})" if exc.help else "")
                       if exc.span is not None and code else str(exc), err=True)
            broken += 1
            continue
        if new == old:
            continue
        changed.append(path)
        if diff:
            for line in difflib.unified_diff(old.splitlines(True), new.splitlines(True), path, path):
                click.echo(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n", nl=False)
        elif check:
            click.echo(f"would reformat {path}")
        else:
            try:  # a spec that is a link, a hard link or no regular file is refused, not written through
                write_file(path, new, option="fmt")
            except KvplanError as exc:
                click.echo(f"kvplan: error: {exc}", err=True)
                changed.pop()
                broken += 1
    dry = check or diff
    n = len(changed)
    verb = "would be reformatted" if dry else "reformatted"
    click.echo(f"{n} file{'' if n == 1 else 's'} {verb}, {len(files) - n - broken} unchanged"
               + (f", {broken} not formatted (errors above)" if broken else ""), err=True)
    sys.exit(EXIT_ERROR if broken else EXIT_FINDINGS if dry and changed else EXIT_CLEAN)


def _checked(path: str, allow_paths: tuple[str, ...] = ()) -> CheckResult:
    """Check a spec; on errors print them (concise) to stderr and exit 2: there is nothing to plan.

    Its config paths may name the spec's folder, the --allow-path folders and [tool.kvplan] allow-paths.
    """
    from kvplan.base.codes import Severity
    from kvplan.lang import check_file
    from kvplan.lang.settings import load_settings  # not kvplan.lang.lint: the linter is not needed here

    result = check_file(path, load_settings(".").with_overrides(allow_paths=allow_paths).allow_paths)
    errors = [d for d in result.diagnostics if d.severity is Severity.ERROR]
    if len(errors) == 1 and errors[0].code.startswith("KV0"):  # unreadable, empty, not .kvp: one line says it
        d = errors[0]
        _fail(f"{d.span or path}: {d.code} {d.message}" + (f" ({d.help})" if d.help else ""))
    if errors:
        _say_findings(path, result, allow_paths, errors)
        _fail(f"{path} has {len(errors)} error{'s' if len(errors) > 1 else ''}; `kvplan lint {path}` shows each "
              "in its line")
    return result


def _say_findings(path: str, result: CheckResult, allow_paths: tuple[str, ...], errors: Sequence[Diagnostic] = (),
                  plans: Optional[Sequence[Plan]] = None) -> None:
    """What `kvplan lint` reports on the spec at warning or above, on stderr, each with its help inline: the
    checker's diagnostics and, given the plans advise or emit made, their findings (KV2xx, KV3xx). The settings'
    select and ignore and the file's suppressions apply as in lint; an error that stops the command is said even
    when ignored."""
    from kvplan.base.codes import Severity

    raw = list(result.diagnostics)
    if plans is not None:
        from kvplan.planner.lint import check_plans

        raw += check_plans(result, plans)
    if not any(d.severity.rank >= Severity.WARNING.rank for d in raw) and "kvplan:" not in result.source:
        return  # nothing for lint to print at warning, no suppression to judge: the linter stays unloaded
    from kvplan.lang import lint
    from kvplan.render import diagnostics as diag_view

    settings = lint.load_settings(".").with_overrides(allow_paths=allow_paths)
    report = lint.report(path, result, raw, settings, planned=plans is not None)
    shown = report.diagnostics + tuple(e for e in errors if e not in report.diagnostics)
    click.echo(diag_view.inline([attrs.evolve(report, diagnostics=shown)]), err=True, nl=False)


@main.command("advise")
@click.argument("spec_file", type=_FILE, metavar="FILE.kvp")
@click.option("--format", "fmt", type=click.Choice(["text", "json", "markdown"]), default="text", show_default=True)
@click.option("--scenario", default=None, help="Plan only this scenario (a deployment name or an expanded name).")
@_planner_options
@_allow_path_option
@handles_errors
def advise_cmd(spec_file: str, fmt: str, scenario: str | None, reserve: float | None, min_gain: float | None,
               prefill_efficiency: float | None, activation_reserve: float | None,
               runtime_reserve: float | None, slo_on: str, calibration: str | None,
               allow_paths: tuple[str, ...]) -> None:
    """Plan a deployment: the regime map, then each decision with its numbers, rules and evidence.

    Exit 0 when every plan meets the spec, 1 when a plan misses a constraint (does not fit, an SLO), 2 when
    the spec cannot be planned.
    """
    checked = _checked(spec_file, allow_paths)  # first: a spec with errors never loads the planner (nor numpy)
    checked = _with_expected(checked, calibration, slo_on)
    from kvplan.planner import plans_for, with_engines
    from kvplan.render import plan_view

    plans = [with_engines(p) for p in plans_for(checked, scenario, **_overrides(reserve, min_gain, prefill_efficiency,
                                                                               activation_reserve, runtime_reserve))]
    render = {"text": plan_view.text, "json": plan_view.json_text, "markdown": plan_view.markdown}[fmt]
    click.echo(render(plans), nl=False)
    _say_findings(spec_file, checked, allow_paths, plans=plans)
    if any(p.unmet or not p.feasible for p in plans):
        sys.exit(EXIT_FINDINGS)


def _overrides(reserve: float | None, min_gain: float | None, eta: float | None,
               activation_reserve: float | None = None, runtime_reserve: float | None = None) -> dict[str, float]:
    """The planner's assumed defaults the user chose to override (each still printed as assumed)."""
    given = {"reserve": reserve, "min_gain": min_gain, "eta": eta, "activation_reserve": activation_reserve,
             "runtime_reserve": runtime_reserve}
    return {k: v for k, v in given.items() if v is not None}


@main.command("pareto")
@click.argument("spec_file", type=_FILE, metavar="FILE.kvp")
@click.option("--format", "fmt", type=click.Choice(["text", "csv", "json"]), default="text", show_default=True)
@click.option("--scenario", default=None, help="Only this scenario (a deployment name or an expanded name).")
@click.option("--plot", "plot_path", type=_FILE, metavar="FILE.png|svg",
              help="Also draw the front to this file, one scenario's (needs matplotlib: pip install matplotlib).")
@_planner_options
@_allow_path_option
@handles_errors
def pareto_cmd(spec_file: str, fmt: str, scenario: str | None, plot_path: str | None, reserve: float | None,
               min_gain: float | None, prefill_efficiency: float | None, activation_reserve: float | None,
               runtime_reserve: float | None, slo_on: str, calibration: str | None,
               allow_paths: tuple[str, ...]) -> None:
    """The plans no other beats on both tokens/s per user and tokens/s per device, each with the pins that make
    `kvplan advise` choose it.

    The candidates are advise's own, after its rules, fit and SLO checks. Exit 0 when every scenario has a front,
    1 when one has no feasible candidate, 2 when the spec cannot be planned.
    """
    checked = _with_expected(_checked(spec_file, allow_paths), calibration, slo_on)
    from kvplan.planner import pareto, scenarios_for
    from kvplan.render import pareto_view

    scenarios = scenarios_for(checked, scenario)
    if plot_path is not None and len(scenarios) > 1:
        raise KvplanError(f"--plot draws one scenario's front, and {spec_file} has {len(scenarios)}",
                          help="name one with --scenario: " + ", ".join(sc.name for sc in scenarios))
    overrides = _overrides(reserve, min_gain, prefill_efficiency, activation_reserve, runtime_reserve)
    fronts = pareto.fronts(scenarios, **overrides)
    advise = _advise_command(spec_file, scenario if len(scenarios) == 1 else None, reserve, min_gain,
                             prefill_efficiency, activation_reserve, runtime_reserve, slo_on, calibration, allow_paths)
    if plot_path is not None:
        from kvplan.render import plot

        plot.pareto_figure(fronts[0], plot_path)
    out = (pareto_view.csv_text(fronts) if fmt == "csv" else pareto_view.json_text(fronts, advise) if fmt == "json"
           else pareto_view.text(fronts, advise))
    click.echo(out, nl=False)
    if any(not f.points for f in fronts):
        sys.exit(EXIT_FINDINGS)


def _advise_command(spec_file: str, scenario: str | None, reserve: float | None, min_gain: float | None,
                    eta: float | None, activation_reserve: float | None, runtime_reserve: float | None, slo_on: str,
                    calibration: str | None, allow_paths: tuple[str, ...]) -> str:
    """The `kvplan advise` command line that plans a pareto point once its pins are added: the same file, scenario
    and planner options."""
    import shlex

    args = ["kvplan", "advise", spec_file] + (["--scenario", scenario] if scenario else [])
    for flag, v in (("--reserve", reserve), ("--min-gain", min_gain), ("--prefill-efficiency", eta),
                    ("--activation-reserve", activation_reserve), ("--runtime-reserve", runtime_reserve)):
        if v is not None:  # exactly the number given: a whole number without a point, else its shortest repr
            args += [flag, str(int(v)) if float(v).is_integer() else repr(float(v))]
    if slo_on != "expected":
        args += ["--slo-on", slo_on]
    if calibration is not None:
        args += ["--calibration", calibration]
    for d in allow_paths:
        args += ["--allow-path", d]
    return shlex.join(args)


@main.command("report")
@click.argument("spec_file", type=_FILE, metavar="FILE.kvp")
@click.option("-o", "--out", "out_dir", type=_DIR, required=True,
              help="Directory for the rationale documents (created if missing).")
@click.option("--scenario", default=None, help="Only this scenario.")
@_planner_options
@_allow_path_option
@handles_errors
def report_cmd(spec_file: str, out_dir: str, scenario: str | None, reserve: float | None, min_gain: float | None,
               prefill_efficiency: float | None, activation_reserve: float | None,
               runtime_reserve: float | None, slo_on: str, calibration: str | None,
               allow_paths: tuple[str, ...]) -> None:
    """Write MADR-shaped design-rationale documents, one per decision, ready to commit and review."""
    from kvplan.base.outputs import check_out_dir

    check_out_dir(out_dir)
    checked = _with_expected(_checked(spec_file, allow_paths), calibration, slo_on)  # errors: no planner loaded
    from kvplan.planner import plans_for
    from kvplan.render import report

    plans = plans_for(checked, scenario, **_overrides(reserve, min_gain, prefill_efficiency, activation_reserve,
                                                      runtime_reserve))
    for path in report.write(plans, out_dir, spec_file):
        click.echo(path)


def _deploy(targets: str | None, image: str | None, namespace: str | None, pvc: str | None,
            shm_size: float | None, gpus_per_node: int | None, gpu_resource: str | None) -> DeployOptions:
    """emit's k8s overrides as DeployOptions; one given without the k8s target is refused."""
    from kvplan.engines import DeployOptions, resolve_targets

    given = (("--image", image), ("--namespace", namespace), ("--pvc", pvc), ("--shm-size", shm_size),
             ("--gpus-per-node", gpus_per_node), ("--gpu-resource", gpu_resource))
    named = [flag for flag, v in given if v is not None]
    if named and "k8s" not in resolve_targets(targets, "any"):
        raise KvplanError(f"{', '.join(named)} appl{'ies' if len(named) == 1 else 'y'} to the k8s "
                          "target only", help="add --target k8s, or leave the option out")
    return DeployOptions(image, namespace, pvc, shm_size, gpus_per_node, gpu_resource)


@main.command("emit")
@click.argument("spec_file", type=_FILE, metavar="FILE.kvp")
@click.option("--target", "targets", default=None, metavar="NAME[,NAME]",
              help="vllm, sglang, trtllm, lmcache, flashinfer, k8s or all (all but k8s)  [default: the spec's "
                   "engine; any: all].")
@click.option("-o", "--out", "out_dir", type=_DIR, default=None, metavar="DIR",
              help="Write DIR/<scenario>/<file> instead of printing; `kvplan lint --check-digest` looks in "
                   "<spec>.kvplan/.")
@click.option("--scenario", default=None, help="Only this scenario (a deployment name or an expanded name).")
@click.option("--sizing", type=click.Choice(["fill", "exact"]), default="fill", show_default=True,
              help="fill: the engine's usual memory fraction, and the capacity it buys; exact: a KV pool of exactly "
                   "the plan's footprint.")
@click.option("--cudagraph-reserve", type=_bytes_type(), default=None, metavar="BYTES",
              help="CUDA-graph memory per GPU an engine subtracts in fill sizing  [default: the engine's, assumed; "
                   "vLLM 1GiB].")
@_reserve_options
@_expected_options
@_deploy_options
@_allow_path_option
@handles_errors
def emit_cmd(spec_file: str, targets: str | None, out_dir: str | None, scenario: str | None,
             sizing: Literal["fill", "exact"], cudagraph_reserve: float | None,
             activation_reserve: float | None, runtime_reserve: float | None, slo_on: str, calibration: str | None,
             image: str | None, namespace: str | None, pvc: str | None, shm_size: float | None,
             gpus_per_node: int | None, gpu_resource: str | None, allow_paths: tuple[str, ...]) -> None:
    """Write the engine configurations of a plan: command lines and YAML the engine takes as written.

    Without -o the files go to stdout, each after a `==> scenario/name <==` line; warnings and the KV
    capacity each config gives go to stderr. A target other than the spec's engine (each one for `engine =
    any`) is written from the plan made for its engine, and says so. Exit 0 when every config was written
    from a plan that fits, 1 when a pinned choice was changed to the nearest the target has, a config does
    not fit the device, or a target's own plan does not fit (an error: nothing is written for it), 2 when
    the spec cannot be planned.
    """
    from kvplan.base.outputs import OutputTree, check_out_dir, scenario_folders
    from kvplan.catalog.settings import pin as pin_row
    from kvplan.engines import Reserves, capacity_line, emit, resolve_targets
    from kvplan.planner import plans_for, with_engines

    reserves = Reserves(activation=activation_reserve, runtime=runtime_reserve, cudagraph=cudagraph_reserve)
    deploy = _deploy(targets, image, namespace, pvc, shm_size, gpus_per_node, gpu_resource)
    if out_dir is not None:
        check_out_dir(out_dir)
    # one memory model: the plan is made under the reserves its configs are sized with
    given = {"activation_reserve": reserves.activation, "runtime_reserve": reserves.runtime}
    checked = _with_expected(_checked(spec_file, allow_paths), calibration, slo_on)
    plans = [with_engines(p) for p in plans_for(checked, scenario, **{k: v for k, v in given.items() if v is not None})]
    for p in plans:  # a count the model cannot split has no configuration to write
        gap = next((u for u in p.unmet if u.constraint == "layout"), None)
        if gap is not None:
            raise KvplanError(f"scenario {p.scenario.name}: {gap.message}",
                              help=("try " + "; or ".join(gap.suggestions)) if gap.suggestions else None,
                              span=p.scenario.pinned.span(pin_row("devices")) or p.scenario.spans.get("devices"))
    folders = scenario_folders(plans, out_dir)
    tree = None if out_dir is None else OutputTree(out_dir)
    findings = 0
    chunks: list[str] = []
    for p in plans:
        where = folders[p.scenario.name]
        for target in resolve_targets(targets, p.scenario.engine):
            # the reserves the plan was made with (its memory fraction, the reserve options), and the CUDA-graph
            # reserve, which only an engine's own fraction holds
            plan_reserves = (None if reserves.cudagraph is None
                             else attrs.evolve(p.reserves, cudagraph=reserves.cudagraph))
            out = emit(p, target, spec=spec_file, reserves=plan_reserves, deploy=deploy, sizing=sizing)
            findings += len(out.findings)
            _say_emitted(where, target, out)
            for f in out.files:
                if tree is None:
                    chunks.append(f"==> {where}/{f.name} <==\n{f.text}")
                    continue
                click.echo(tree.write((where, f.name), f.text, executable=f.executable))
            line = capacity_line(out)
            if line:
                click.echo(f"kvplan: {where}/{target}: {line}", err=True)
    if chunks:
        click.echo("\n".join(chunks), nl=False)
    _say_findings(spec_file, checked, allow_paths, plans=plans)  # last: an error that stops emit stays one line
    if findings:
        sys.exit(EXIT_FINDINGS)


def _say_emitted(where: str, target: str, out: Emitted) -> None:
    """A target's lines on stderr: the plan it was written from when not the spec's, its errors (nothing was
    written for it), then its warnings."""
    for line in out.planned:
        click.echo(f"kvplan: {where}/{target}: {line}", err=True)
    for e in out.errors:
        click.echo(f"kvplan: error: {where}: {e}", err=True)
    for w in out.warnings:
        if w not in out.errors:
            click.echo(f"kvplan: warning: {where}: {w}", err=True)


class _Readers(click.Choice):  # type: ignore[type-arg, unused-ignore]
    """`import --from`'s choices: the engines kvplan reads back (kvplan.engines.importer.readers, derived
    from the engine targets), looked up when the option is parsed or its help shown, so that start-up
    imports no engine module."""

    def __init__(self) -> None:
        super().__init__(())

    @property  # type: ignore[override, misc, unused-ignore]
    def choices(self) -> tuple[str, ...]:
        from kvplan.engines.importer import readers
        return tuple(readers())

    @choices.setter
    def choices(self, value: object) -> None:  # click's __init__ assigns it; the live table wins
        pass


@main.command("import")
@click.argument("source", metavar="ARGS-OR-FILE")
@click.option("--from", "engine", type=_Readers(), required=True,
              help="The engine whose command line (vllm, sglang) or YAML/command line (trtllm) this is.")
@click.option("--model", "model_id", metavar="ID",
              help="Catalog model id or Hugging Face repo id, when the engine's model is not in the catalog.")
@click.option("--model-config", type=_FILE, metavar="PATH",
              help="A Hugging Face config.json for a model beside the catalog.")
@click.option("--device", "device_id", metavar="ID", help="Catalog device id (engine flags do not name it).")
@click.option("--batch", type=_count(hi=limits.MAX_BATCH), default=None, metavar="N",
              help="Concurrent sequences served (default: the engine's batch limit, else what the KV pool holds).")
@click.option("--context", type=_tokens_type(limits.MAX_TOKENS), default=None, metavar="TOKENS",
              help="The typical tokens per sequence, at most the engine's limit, which becomes max_context "
                   "(default: what the KV pool holds for the batch; 32k = 32,000; 32Ki = 32,768).")
@click.option("-o", "--output", type=_FILE, default="-", metavar="FILE.kvp",
              help="Write the spec here instead of stdout.")
@handles_errors
def import_cmd(source: str, engine: str, model_id: str | None, model_config: str | None, device_id: str | None,
               batch: int | None, context: int | None, output: str) -> None:
    """Write the .kvp equivalent of an existing deployment: its KV choices become pins.

    ARGS-OR-FILE is the engine's command line as one quoted argument (`vllm serve MODEL --flag ...`),
    or a file holding it; for trtllm, the --config YAML or a `trtllm-serve MODEL --config x.yaml` line.
    Flags that were removed or that kvplan does not know are warnings on stderr and comments in the spec.
    """
    import os

    from kvplan.engines import importer

    text, base_dir, what, source_path = importer.read_source(source)
    opts = importer.Options(model=model_id, model_config=model_config, device=device_id, batch=batch,
                            context=context,
                            out_dir=None if output == "-" else (os.path.dirname(output) or "."), source=what,
                            source_path=source_path)
    result = importer.import_deployment(engine, text, opts, base_dir)
    for w in result.warnings:
        click.echo(f"kvplan: warning: {w}", err=True)
    if output == "-":
        click.echo(result.text, nl=False)
    else:
        from kvplan.base.outputs import OutputTree, write_file

        if result.copies:  # first, so that the spec never names a file not yet written
            tree = OutputTree(os.path.dirname(output) or ".")
            for rel, text in result.copies:
                click.echo(f"wrote {tree.write(rel.split('/'), text)}", err=True)
        click.echo(f"wrote {write_file(output, result.text)}", err=True)


@main.command("calibrate")
@click.argument("paths", nargs=-1, required=True, type=_FILE, metavar="FILE...")
@click.option("-o", "--output", type=_FILE, required=True, metavar="PROFILE.toml",
              help="Write the calibration profile here.")
@click.option("--model", "model_id", metavar="ID", help="The model the runs served, where a file does not say it.")
@click.option("--device", "device_id", metavar="ID", help="Catalog device id of the runs (kvplan devices).")
@click.option("--devices", "n_devices", type=_count(hi=limits.MAX_DEVICES), default=None, metavar="N",
              help="Devices of the deployment  [default: the tensor-parallel size, else 1, assumed].")
@click.option("--tensor-parallel", "tp", type=_count(hi=limits.MAX_DEVICES), default=None, metavar="N",
              help="Tensor-parallel size  [default: the devices, else 1, assumed].")
@click.option("--weights", default=None, help="Weight dtype  [default: the checkpoint's own bytes].")
@click.option("--kv-dtype", default=None, help="KV cache dtype  [default: bf16, assumed].")
@click.option("--engine", default=None, metavar="ENGINE",
              help="vllm, sglang, trtllm or any  [default: the benchmark's engine; a CSV without one: any].")
@click.option("--batch", type=_count(hi=limits.MAX_BATCH), default=None, metavar="N",
              help="Batch of the runs (vllm bench latency's --batch-size, a serve run's concurrency).")
@click.option("--input-len", type=_tokens_type(limits.MAX_TOKENS), default=None, metavar="TOKENS",
              help="Prompt tokens of each request (vllm bench latency's --input-len).")
@click.option("--output-len", type=_tokens_type(limits.MAX_TOKENS), default=None, metavar="TOKENS",
              help="Generated tokens of each request (vllm bench latency's --output-len).")
@handles_errors
def calibrate_cmd(paths: tuple[str, ...], output: str, model_id: str | None, device_id: str | None,
                  n_devices: int | None, tp: int | None, weights: str | None, kv_dtype: str | None,
                  engine: str | None, batch: int | None, input_len: int | None, output_len: int | None) -> None:
    """Fit the expected model's factors to your own measurements; write a calibration profile.

    FILE is a `vllm bench latency --output-json` or `vllm bench serve --save-result` JSON, SGLang's
    bench_one_batch or bench_serving JSON lines, or the CSV of docs/calibrate.md. The options say what a file
    does not. Exit 0 when the profile is written, 2 when nothing could be fitted.
    """
    import os

    from kvplan.engines import measurements
    from kvplan.model import calibrate
    from kvplan.render import calibrate_view

    if any(os.path.exists(p) and os.path.exists(output) and os.path.samefile(p, output) for p in paths):
        raise KvplanError(f"-o {output} is one of the measurement files", help="write the profile elsewhere")
    given = measurements.Given(model_id, device_id, n_devices, tp, weights, kv_dtype,
                               None if engine is None else measurements.engine_id(engine), batch, input_len,
                               output_len)
    reads = measurements.read_all(paths, given)
    for note in dict.fromkeys(n for r in reads for n in r.notes):
        click.echo(f"kvplan: note: {note}", err=True)
    fits = calibrate.fit([m for r in reads for m in r.measurements], output)
    click.echo(calibrate_view.text(fits, ()), nl=False)
    if not any(f.written for f in fits):
        _fail("the measurements determine no parameter; no profile written (see above what each would need)")
    from kvplan.base.outputs import write_file

    click.echo(f"wrote {write_file(output, calibrate_view.profile(fits, paths, output))}", err=True)


@main.command("completion")
@click.argument("shell", type=click.Choice(["bash", "zsh", "fish"]), metavar="SHELL")
@handles_errors
def completion_cmd(shell: str) -> None:
    """Print the shell completion script for bash, zsh or fish.

    The same text as `_KVPLAN_COMPLETE=SHELL_source kvplan`. Load it at shell start:

    \b
    bash:  eval "$(kvplan completion bash)"      (in ~/.bashrc)
    zsh:   eval "$(kvplan completion zsh)"       (in ~/.zshrc)
    fish:  kvplan completion fish > ~/.config/fish/completions/kvplan.fish
    """
    from click.shell_completion import get_completion_class

    cls = get_completion_class(shell)
    if cls is None:  # click.Choice admits only the shells click knows
        raise KvplanError(f"no completion for {shell}", help="choose bash, zsh or fish")
    # click's template ends in a newline in some releases and not in others: print exactly one.
    click.echo(cls(main, {}, "kvplan", "_KVPLAN_COMPLETE").source().rstrip("\n"))
