"""One request record per command: the options the command line parsed, checked and in base units.

The click layer (kvplan/cli/) builds a request and hands it to the command's core in this package; the
core reads nothing else of the command line. A request holds what the user wrote (None: not given, the
default applies), so that a message can name the option as it was given.
"""

from __future__ import annotations

from typing import Literal, Optional

from kvplan.base.records import record


@record
class Listing:
    """`kvplan models`, `kvplan devices`, `kvplan tables`: which table, in which format."""

    fmt: str


@record
class MapRequest:
    """`kvplan map`: one point of a model on a device."""

    model_id: Optional[str]
    model_config: Optional[str]
    device_id: str
    n_devices: int
    tp: int
    batch: int
    context: int
    weights: Optional[str]
    kv_dtype: str
    placement: str
    fmt: str
    plot_path: Optional[str]
    roofline_path: Optional[str]
    engine: str
    calibration: Optional[str]


@record
class SweepRequest:
    """`kvplan sweep`: a spec file or --model/--device, and the lists as written (parsed by kvplan.model.sweep)."""

    spec_file: Optional[str]
    model_id: Optional[str]
    model_config: Optional[str]
    device_id: Optional[str]
    devices: Optional[str]
    kv_dtypes: Optional[str]
    batch: Optional[str]
    context: Optional[str]
    weights: Optional[str]
    placement: Optional[str]
    fmt: str
    exact: bool
    jobs: int
    allow_paths: tuple[str, ...]
    calibration: Optional[str]


@record
class PlannerOptions:
    """The planner's assumed defaults a command overrides (None: the default), the calibration profile that
    replaces a deployment's own, and which figures the SLOs are checked against."""

    reserve: Optional[float] = None
    min_gain: Optional[float] = None
    eta: Optional[float] = None
    activation_reserve: Optional[float] = None
    runtime_reserve: Optional[float] = None
    slo_on: str = "expected"
    calibration: Optional[str] = None

    def overrides(self) -> dict[str, float]:
        """The planner's assumed defaults the user chose to override (each still printed as assumed)."""
        given = {"reserve": self.reserve, "min_gain": self.min_gain, "eta": self.eta,
                 "activation_reserve": self.activation_reserve, "runtime_reserve": self.runtime_reserve}
        return {k: v for k, v in given.items() if v is not None}


@record
class LintRequest:
    """`kvplan lint`: the paths, the lint settings given on the command line, the planner's options."""

    paths: tuple[str, ...]
    output_format: str
    select: tuple[str, ...]
    ignore: tuple[str, ...]
    fail_on: Optional[str]
    config: Optional[str]
    check_digest: bool
    online: bool
    planner: PlannerOptions
    allow_paths: tuple[str, ...]


@record
class FmtRequest:
    """`kvplan fmt`: the paths; --check and --diff write nothing."""

    paths: tuple[str, ...]
    check: bool
    diff: bool


@record
class AdviseRequest:
    """`kvplan advise`."""

    spec_file: str
    fmt: str
    scenario: Optional[str]
    planner: PlannerOptions
    allow_paths: tuple[str, ...]


@record
class ParetoRequest:
    """`kvplan pareto`."""

    spec_file: str
    fmt: str
    scenario: Optional[str]
    plot_path: Optional[str]
    planner: PlannerOptions
    allow_paths: tuple[str, ...]


@record
class ReportRequest:
    """`kvplan report`."""

    spec_file: str
    out_dir: str
    scenario: Optional[str]
    planner: PlannerOptions
    allow_paths: tuple[str, ...]


@record
class Deploy:
    """`emit`'s overrides of the k8s target's assumed defaults, as given (None: not given)."""

    image: Optional[str] = None
    namespace: Optional[str] = None
    pvc: Optional[str] = None
    shm_size: Optional[float] = None
    gpus_per_node: Optional[int] = None
    gpu_resource: Optional[str] = None

    def given(self) -> list[str]:
        """The flags given, in the order emit's help lists them."""
        flags = (("--image", self.image), ("--namespace", self.namespace), ("--pvc", self.pvc),
                 ("--shm-size", self.shm_size), ("--gpus-per-node", self.gpus_per_node),
                 ("--gpu-resource", self.gpu_resource))
        return [flag for flag, v in flags if v is not None]


@record
class EmitRequest:
    """`kvplan emit`. The planner options carry the reserves and the expected figures' options only."""

    spec_file: str
    targets: Optional[str]
    out_dir: Optional[str]
    scenario: Optional[str]
    sizing: Literal["fill", "exact"]
    cudagraph_reserve: Optional[float]
    planner: PlannerOptions
    deploy: Deploy
    allow_paths: tuple[str, ...]
    #: write the files of a plan that misses its spec (each header says UNMET; the exit stays 1)
    allow_unmet: bool = False


@record
class ImportRequest:
    """`kvplan import`: the engine's command line or a file holding it, and what the flags do not say."""

    source: str
    engine: str
    model_id: Optional[str]
    model_config: Optional[str]
    device_id: Optional[str]
    batch: Optional[int]
    context: Optional[int]
    output: str


@record
class CalibrateRequest:
    """`kvplan calibrate`: the measurement files, the profile to write, and what a file does not say."""

    paths: tuple[str, ...]
    output: str
    model_id: Optional[str]
    device_id: Optional[str]
    n_devices: Optional[int]
    tp: Optional[int]
    weights: Optional[str]
    kv_dtype: Optional[str]
    engine: Optional[str]
    batch: Optional[int]
    input_len: Optional[int]
    output_len: Optional[int]
