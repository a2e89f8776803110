"""`kvplan emit --target k8s`: the plan's engine on Kubernetes, k8s-<engine>.yaml per scenario.

The manifest runs the command the engine's own target writes (vllm.sh, sglang.sh, trtllm.sh): the
program and every flag come from that target's `Launch` (kvplan/engines/common.py), never re-derived
here. What the pod adds, and nothing else:

- `--host 0.0.0.0 --port N`: SGLang (127.0.0.1) and trtllm-serve (localhost) listen on loopback by
  default, which neither the kubelet's probe nor the Service reaches; N is each engine's default port.
- on more than one node, the engine's own multi-node flags (vLLM `--nnodes --node-rank --master-addr`,
  `--headless` on the workers; SGLang `--nnodes --node-rank --dist-init-addr`), filled in by the
  LeaderWorkerSet's `$(LWS_LEADER_ADDRESS)` and `$(LWS_WORKER_INDEX)`.
- a file the launcher finds beside itself (trtllm.yaml, lmcache.yaml) becomes a ConfigMap mounted at
  /etc/kvplan, and the flag or variable that named it names the mounted path.

One node holds the plan when its GPUs fit the node size: a Deployment (one replica, `Recreate`, so an
update never asks for a second set of GPUs). More than one node: a LeaderWorkerSet
(leaderworkerset.x-k8s.io/v1) of `nodes` pods, the GPUs split evenly over them. The node size is the
catalog's host size (Device.host: an 8-GPU server, a GB200 NVL72 compute tray of 4), else the assumed
DEFAULT_GPUS_PER_NODE (an 8-GPU server); `--gpus-per-node` overrides either. A Service selects the pod
that serves HTTP (the leader). The readiness probe asks the engine's health endpoint; no liveness probe
is written (a model that takes minutes to load would be restarted by one).

Assumed, overridable defaults (documented in docs/cli-emit.md): the image (`--image`), the
model-cache PVC (`--pvc`), the size of /dev/shm (`--shm-size`), the namespace (`--namespace`; none: the
one kubectl applies to), the GPU resource (`--gpu-resource`; else from the device's vendor).
"""

from __future__ import annotations

import hashlib
import math
import re
import shlex
from typing import Mapping, Optional, Sequence

import attrs

from kvplan.base.errors import KvplanError
from kvplan.base.evidence import Value
from kvplan.base.records import record
from kvplan.base.units import fmt_bytes
from kvplan.catalog import Device
from kvplan.catalog.engines import get_engine
from kvplan.engines import common, lmcache, own, sglang, trtllm, vllm, yamlout
from kvplan.engines.common import Backend, DeployOptions, EmitRequest, Emitted, EmittedFile, GiB, Launch
from kvplan.model.scenario import Scenario
from kvplan.planner.plan import Plan

ID = "k8s"
LABEL = "Kubernetes"

#: GPUs per node when nothing says otherwise (assumed): an 8-GPU server (HGX/DGX, an MI300X platform), for a device
#: whose catalog entry gives no host size (Device.host); `--gpus-per-node` overrides it.
DEFAULT_GPUS_PER_NODE = 8
#: /dev/shm (an emptyDir in memory): 16 GiB, the size vLLM's docs give the container
#: (vllm-project/vllm:docs/serving/parallelism_scaling.md, `docker run --shm-size=16G`); `--shm-size` overrides it.
DEFAULT_SHM_BYTES = 16 * GiB
#: The PersistentVolumeClaim that holds the Hugging Face cache; `--pvc` overrides it.
DEFAULT_PVC = "model-cache"
#: The Hugging Face cache: the images run as root, and the hub's default cache is ~/.cache/huggingface.
HF_HOME = "/root/.cache/huggingface"
#: Gated models need a token: read from this Secret when it exists (optional, so the pod starts without it).
HF_TOKEN_SECRET, HF_TOKEN_KEY = "hf-token", "token"
#: Where the ConfigMap of files the launcher reads (trtllm.yaml, lmcache.yaml) is mounted.
CONFIG_DIR = "/etc/kvplan"
#: The port SGLang ranks meet on across nodes (`--dist-init-addr LEADER:PORT`): the SGLang target's.
SGLANG_DIST_PORT = sglang.DIST_PORT

LWS_API = "leaderworkerset.x-k8s.io/v1"
LWS_SOURCE = "kubernetes-sigs/lws v0.10.0"
NVIDIA, AMD = "nvidia.com/gpu", "amd.com/gpu"
GPU_RESOURCES = (NVIDIA, AMD)


@record
class Runtime:
    """How an engine's server runs in a container: its image per GPU resource (None: no released image
    carries the names kvplan writes), its default port and its health endpoint, with where they come from."""

    engine: str
    images: Mapping[str, str]
    port: int
    health: str
    source: str
    multi_node: bool


RUNTIMES: Mapping[str, Runtime] = {
    "vllm": Runtime(
        "vllm", {NVIDIA: "vllm/vllm-openai:v0.33.0", AMD: "vllm/vllm-openai-rocm:v0.33.0"}, 8000, "/health",
        "vLLM 0.33.0 vllm/entrypoints/serve/instrumentator/health.py: GET /health answers 200 while the engine "
        "lives, 503 once it is dead; `vllm serve` listens on port 8000 by default", True),
    "sglang": Runtime(
        "sglang", {NVIDIA: "lmsysorg/sglang:v0.5.23", AMD: "lmsysorg/sglang:v0.5.23-rocm700-mi30x"}, 30000,
        "/health",
        "SGLang 0.5.23 python/sglang/srt/entrypoints/http_server.py: GET /health; server_args.py: host "
        "127.0.0.1, port 30000 by default", True),
    "trtllm": Runtime(
        "trtllm", {}, 8000, "/health",
        "NVIDIA/TensorRT-LLM:docs/source/commands/trtllm-serve.rst: trtllm-serve serves /health, on port 8000 "
        "by default", False),
}

#: The engines whose manifest `engine = any` writes: those with a released image at kvplan's version.
ANY_ENGINES = ("vllm", "sglang")
ENGINE_MODULES = {m.ENGINE.id: m for m in (vllm, sglang, trtllm)}

_LABEL_RE = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_SUBDOMAIN_RE = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
#: An image reference: [registry[:port]/]path[:tag][@digest] (the distribution reference grammar, simplified:
#: lower-case path components, a tag of word characters, dots and dashes).
_IMAGE_RE = re.compile(r"(?:[A-Za-z0-9.-]+(?::[0-9]+)?/)?[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
                       r"(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?"
                       r"(?:@sha256:[0-9a-f]{64})?")


# ---------------------------------------------------------------- checked option values (kvplan emit)

def check_namespace(value: str, flag: str = "--namespace") -> str:
    """A namespace is a DNS-1123 label: at most 63 lower-case letters, digits and '-', alphanumeric at the ends."""
    return _checked_name(value, flag, _LABEL_RE, 63, "Kubernetes namespace name", "letters, digits and '-'",
                         "inference")


def check_pvc(value: str, flag: str = "--pvc") -> str:
    """A PersistentVolumeClaim name is a DNS-1123 subdomain: at most 253 characters, dot-separated labels."""
    return _checked_name(value, flag, _SUBDOMAIN_RE, 253, "PersistentVolumeClaim name",
                         "letters, digits, '-' and '.'", "model-cache")


def _checked_name(value: str, flag: str, pattern: re.Pattern[str], limit: int, what: str, takes: str,
                  example: str) -> str:
    if len(value) > limit or not pattern.fullmatch(value):
        raise KvplanError(f"{flag} '{_cut(value)}' is not a {what}",
                          help=f"it takes at most {limit} lower-case {takes}, starting and ending with a letter "
                               f"or digit (e.g. {example})")
    return value


def check_image(value: str, flag: str = "--image") -> str:
    """An image reference as a container registry takes it: `[registry/]name[:tag][@sha256:digest]`."""
    if len(value) > 512 or not _IMAGE_RE.fullmatch(value):
        raise KvplanError(f"{flag} '{_cut(value)}' is not a container image reference",
                          help="give [registry/]name[:tag], lower-case path, e.g. vllm/vllm-openai:v0.33.0")
    return value


def _cut(value: str) -> str:
    return value if len(value) <= 40 else value[:36] + "..."


# ---------------------------------------------------------------- facts of the deployment

def gpu_resource(device: Device, given: Optional[str]) -> str:
    """The extended resource the device is scheduled by: --gpu-resource, else the vendor its catalog name
    says (NVIDIA, AMD), else its scale-up link (NVLink is NVIDIA's, Infinity Fabric AMD's)."""
    if given is not None:
        return given
    vendor = (device.name.split() or [""])[0].lower()
    link = device.scaleup_link or ""
    if vendor == "nvidia" or (vendor not in ("amd", "intel", "google") and link.startswith("nvlink")):
        return NVIDIA
    if vendor == "amd" or (vendor not in ("intel", "google") and link == "infinity-fabric"):
        return AMD
    raise KvplanError(f"device {device.id} ({device.name}): the k8s target schedules NVIDIA ({NVIDIA}) and AMD "
                      f"({AMD}) GPUs, and neither the device's name nor its scale-up link says it is one",
                      help=f"for an NVIDIA or AMD device pass --gpu-resource {NVIDIA} or --gpu-resource {AMD}")


@record
class Layout:
    """The nodes a plan's pods take: `gpus_per_node` and where it comes from (`node_size_from`: given, catalog or
    assumed)."""

    nodes: int
    gpus_per_pod: int
    gpus_per_node: int
    node_size_from: str


def node_size(device: Device, opts: DeployOptions) -> tuple[int, str]:
    """The GPUs a Kubernetes node holds and where the figure comes from: `--gpus-per-node` (given), the catalog's
    host size (Device.host), else DEFAULT_GPUS_PER_NODE (assumed)."""
    if opts.gpus_per_node is not None:
        return opts.gpus_per_node, "given, --gpus-per-node"
    if device.host is not None:
        return device.host, f"catalog: {device.id} host; --gpus-per-node overrides it"
    return DEFAULT_GPUS_PER_NODE, "assumed, --gpus-per-node"


def layout(plan: Plan, opts: DeployOptions) -> Layout:
    """The nodes the plan's GPUs take, and the GPUs of each pod (the engines split ranks evenly over nodes:
    vLLM refuses `--nnodes` that does not divide the world size, vllm/engine/arg_utils.py)."""
    n = int(plan.n_devices)
    per_node, source = node_size(plan.scenario.device, opts)
    nodes = math.ceil(n / per_node)
    if n % nodes:
        raise KvplanError(f"scenario {plan.scenario.name}: {n} GPUs over nodes of {per_node} take {nodes} nodes, "
                          f"and {n} GPUs do not split evenly over {nodes} (the engines run the same number of "
                          "ranks on every node)",
                          help=f"pass --gpus-per-node with a divisor of {n}, or plan a device count that nodes "
                               f"of {per_node} divide")
    return Layout(nodes, n // nodes, per_node, source)


def k8s_name(scenario: str, engine: str) -> str:
    """`<scenario>-<engine>` as a DNS-1035 label (a Service name: lower-case ASCII, a letter first, at most 63).
    A name that loses characters other than punctuation (not ASCII: `Чат`), or is too long, keeps what it can
    and 8 hex digits of the SHA-256 of the scenario's name, so two scenarios stay apart."""
    base = re.sub(r"[^a-z0-9]+", "-", scenario.lower()).strip("-") or "plan"
    if not base[0].isalpha():
        base = "kv-" + base
    name = f"{base}-{engine}"
    if len(name) > 63 or not scenario.isascii():
        digest = hashlib.sha256(scenario.encode("utf-8")).hexdigest()[:8]
        name = f"{base[:63 - len(engine) - 10].rstrip('-')}-{digest}-{engine}"
    return name


def quantity(nbytes: float) -> str:
    """Bytes as a Kubernetes quantity: the largest binary unit that divides it (16Gi), else plain bytes."""
    b = math.ceil(nbytes)
    for unit, size in (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
        if b >= size and b % size == 0:
            return f"{b // size}{unit}"
    return str(b)


# ---------------------------------------------------------------- the container

@record
class Command:
    """The engine target's launch as container words: the ConfigMap files it names, by file name."""

    command: tuple[str, ...]
    args: tuple[str, ...]
    env: tuple[tuple[str, str], ...]
    files: tuple[str, ...]


def container_command(launch: Launch) -> Command:
    """The launcher's program and flags as `command` and `args`; a file found beside the script is read from
    CONFIG_DIR instead."""
    files: list[str] = []

    def word(value: str) -> str:
        if isinstance(value, common.Beside):
            files.append(value.file)
            return f"{CONFIG_DIR}/{value.file}"
        if isinstance(value, common.Raw):
            raise KvplanError(f"the launcher writes the shell word {value} that a container cannot run "
                              "(a kvplan bug: the k8s target does not know it)")
        return literal(value)

    args: list[str] = []
    for flag, value in launch.flags:
        args += [literal(flag)] if value is None else [literal(flag), word(value)]
    env: list[tuple[str, str]] = []
    for key, value in launch.env:
        if isinstance(value, common.Raw):
            env.append((key, word(value)))
        else:
            (single,) = shlex.split(value)  # shell_script writes an env value quoted as one word
            env.append((key, literal(single)))
    return Command(tuple(literal(w) for w in launch.program), tuple(args), tuple(env), tuple(dict.fromkeys(files)))


def literal(word: str) -> str:
    """A word as Kubernetes passes it on: in command, args and env values `$(NAME)` is a variable reference and
    `$$` stands for `$`, so every `$` before `(` or `$` is doubled; nothing the engine target writes is meant
    as a reference."""
    return re.sub(r"\$(?=[$(])", "$$", word)


def serve_args(rt: Runtime) -> list[str]:
    return ["--host", "0.0.0.0", "--port", str(rt.port)]


def node_args(engine: str, nodes: int, leader: bool) -> list[str]:
    """The engine's own flags for one pod of a multi-node group (LeaderWorkerSet fills in the variables)."""
    if engine == "vllm":  # vllm/engine/arg_utils.py, vllm/entrypoints/cli/serve.py (--headless): vLLM 0.33.0
        out = ["--nnodes", str(nodes), "--node-rank", "$(LWS_WORKER_INDEX)", "--master-addr", "$(LWS_LEADER_ADDRESS)"]
        return out if leader else [*out, "--headless"]
    # SGLang: --nnodes, --node-rank, --dist-init-addr HOST:PORT (as kubernetes-sigs/lws:docs/examples/sglang/lws.yaml)
    return ["--nnodes", str(nodes), "--node-rank", "$(LWS_WORKER_INDEX)",
            "--dist-init-addr", f"$(LWS_LEADER_ADDRESS):{SGLANG_DIST_PORT}"]


# ---------------------------------------------------------------- the manifest

@record
class Pod:
    """What every pod of the manifest shares."""

    name: str
    engine: str
    image: str
    resource: str
    gpus: int
    shm: float
    host: float                 # host memory one pod's KV tier keeps, bytes (0: none)
    pvc: str
    config_map: Optional[str]
    cmd: Command
    rt: Runtime

    @property
    def memory(self) -> float:
        """The host memory the pod requests: /dev/shm (a memory-backed emptyDir counts against the pod's memory)
        and its KV tier, in whole MiB."""
        return float(math.ceil((self.shm + self.host) / 2**20) * 2**20)


def _container(pod: Pod, extra: Sequence[str], serves: bool) -> dict[str, object]:
    env: list[dict[str, object]] = [
        {"name": "HF_HOME", "value": HF_HOME},
        {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": HF_TOKEN_SECRET, "key": HF_TOKEN_KEY,
                                                            "optional": True}}},
    ]
    env += [{"name": k, "value": v} for k, v in pod.cmd.env]
    mounts: list[dict[str, object]] = [{"name": "dshm", "mountPath": "/dev/shm"},
                                       {"name": "model-cache", "mountPath": HF_HOME}]
    if pod.config_map is not None:
        mounts.append({"name": "kvplan-config", "mountPath": CONFIG_DIR, "readOnly": True})
    c: dict[str, object] = {"name": pod.engine, "image": pod.image, "command": list(pod.cmd.command),
                            "args": [*pod.cmd.args, *extra], "env": env}
    if serves:
        c["ports"] = [{"name": "http", "containerPort": pod.rt.port, "protocol": "TCP"}]
        c["readinessProbe"] = {"httpGet": {"path": pod.rt.health, "port": "http"}, "periodSeconds": 10,
                               "failureThreshold": 3}
    c["resources"] = {"requests": {"memory": quantity(pod.memory)}, "limits": {pod.resource: pod.gpus}}
    c["volumeMounts"] = mounts
    return c


def _pod_spec(pod: Pod, extra: Sequence[str], serves: bool) -> dict[str, object]:
    volumes: list[dict[str, object]] = [
        {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": quantity(pod.shm)}},
        {"name": "model-cache", "persistentVolumeClaim": {"claimName": pod.pvc}},
    ]
    if pod.config_map is not None:
        volumes.append({"name": "kvplan-config", "configMap": {"name": pod.config_map}})
    return {"containers": [_container(pod, extra, serves)], "volumes": volumes}


def _metadata(name: str, namespace: Optional[str], labels: Mapping[str, str]) -> dict[str, object]:
    meta: dict[str, object] = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    meta["labels"] = dict(labels)
    return meta


def _workload(pod: Pod, lay: Layout, namespace: Optional[str], replicas: int = 1
              ) -> tuple[dict[str, object], dict[str, str]]:
    """The Deployment or LeaderWorkerSet, `replicas` copies of it (pin replicas: data-parallel replicas, one per
    pod or pod group, which the Service balances requests over), and the labels its Service selects."""
    labels = {"app.kubernetes.io/name": pod.name, "app.kubernetes.io/managed-by": "kvplan"}
    serve = serve_args(pod.rt)
    if lay.nodes == 1:
        deployment: dict[str, object] = {
            "apiVersion": "apps/v1", "kind": "Deployment", "metadata": _metadata(pod.name, namespace, labels),
            "spec": {"replicas": replicas, "strategy": {"type": "Recreate"},
                     "selector": {"matchLabels": {"app.kubernetes.io/name": pod.name}},
                     "template": {"metadata": {"labels": labels}, "spec": _pod_spec(pod, serve, True)}}}
        return deployment, {"app.kubernetes.io/name": pod.name}
    lead = node_args(pod.engine, lay.nodes, leader=True)
    work = node_args(pod.engine, lay.nodes, leader=False)
    lws: dict[str, object] = {
        "apiVersion": LWS_API, "kind": "LeaderWorkerSet", "metadata": _metadata(pod.name, namespace, labels),
        "spec": {"replicas": replicas, "leaderWorkerTemplate": {
            "size": lay.nodes, "restartPolicy": "RecreateGroupOnPodRestart",
            "leaderTemplate": {"metadata": {"labels": {**labels, "role": "leader"}},
                               "spec": _pod_spec(pod, [*lead, *serve], True)},
            "workerTemplate": {"metadata": {"labels": {**labels, "role": "worker"}},
                               "spec": _pod_spec(pod, work, False)}}}}
    return lws, {"leaderworkerset.sigs.k8s.io/name": pod.name, "role": "leader"}


def _service(pod: Pod, namespace: Optional[str], selector: Mapping[str, str]) -> dict[str, object]:
    labels = {"app.kubernetes.io/name": pod.name, "app.kubernetes.io/managed-by": "kvplan"}
    return {"apiVersion": "v1", "kind": "Service", "metadata": _metadata(pod.name, namespace, labels),
            "spec": {"type": "ClusterIP", "selector": dict(selector),
                     "ports": [{"name": "http", "port": pod.rt.port, "targetPort": "http", "protocol": "TCP"}]}}


def _config_files(req: EmitRequest, engine_out: Emitted, names: Sequence[str]) -> tuple[dict[str, str], Emitted]:
    """The files the launcher names, from the engine target's own output, else the lmcache target's."""
    have = {f.name: f.text for f in engine_out.files}
    tier_out = Emitted(lmcache.BACKEND.id, ())
    if any(n not in have for n in names):
        tier_out = lmcache.BACKEND.build(req)
        have.update((f.name, f.text) for f in tier_out.files if f.name not in have)
    missing = [n for n in names if n not in have]
    if missing:
        raise KvplanError(f"the launcher reads {', '.join(missing)}, which no target writes for this plan "
                          "(a kvplan bug)")
    return {n: have[n] for n in names}, tier_out


def _engines(plan: Plan, opts: DeployOptions) -> tuple[tuple[str, ...], list[str]]:
    engine = plan.scenario.engine
    if engine in RUNTIMES:
        return (engine,), []
    if engine != "any":
        raise KvplanError(f"scenario {plan.scenario.name}: engine {engine} has no Kubernetes manifest in kvplan",
                          help=f"the k8s target runs {', '.join(RUNTIMES)}")
    if opts.image is not None:
        raise KvplanError(f"scenario {plan.scenario.name}: --image names one engine's image, and engine = any "
                          f"writes a manifest for each of {' and '.join(ANY_ENGINES)}",
                          help="set the spec's `engine` to the one the image holds")
    return ANY_ENGINES, [f"{LABEL}: engine = any writes {' and '.join(ANY_ENGINES)}; no TensorRT-LLM manifest "
                         "(no released image carries the TensorRT-LLM main names kvplan writes): set engine = "
                         "trtllm and pass --image for one"]


def _image(rt: Runtime, resource: str, opts: DeployOptions, plan: Plan) -> tuple[str, list[str]]:
    if opts.image is not None:
        return opts.image, []
    image = rt.images.get(resource)
    if image is None:
        if not rt.images:
            raise KvplanError(f"scenario {plan.scenario.name}: {ENGINE_MODULES[rt.engine].BACKEND.label} has no "
                              "released image that carries the names kvplan writes (TensorRT-LLM main, newer than "
                              "1.2.1)", help="pass --image with a TensorRT-LLM build from main")
        raise KvplanError(f"scenario {plan.scenario.name}: kvplan knows no {rt.engine} image for {resource}",
                          help="pass --image")
    notes = []
    if resource == AMD:
        notes.append(f"image {image} is assumed: ROCm image tags name the ROCm release and the GPU family; check "
                     "the tag for your cluster or pass --image")
    return image, notes


def manifest(req: EmitRequest, engine: str) -> tuple[Optional[EmittedFile], Emitted, list[str], list[str]]:
    """k8s-<engine>.yaml for one engine, from the plan made for it (kvplan/engines/own.py): the file (None when
    that plan does not fit: the engine target's error says so), the engine target's output, warnings and findings."""
    backend: Backend = ENGINE_MODULES[engine].BACKEND
    out = own.build_for(engine, req, backend.build, backend.id)
    if out.errors:
        return None, out, [], list(out.findings)
    req = attrs.evolve(req, plan=own.written_from(req, engine))
    p = req.plan
    sc = p.scenario
    opts = req.deploy
    rt = RUNTIMES[engine]
    if out.launch is None:
        raise KvplanError(f"{backend.label} writes no command to serve the plan; no Kubernetes manifest")
    resource = gpu_resource(sc.device, opts.gpu_resource)
    lay = layout(p, opts)
    if lay.nodes > 1 and not rt.multi_node:
        raise KvplanError(f"scenario {sc.name}: {p.n_devices} GPUs take {lay.nodes} nodes of {lay.gpus_per_node}, "
                          f"and {backend.label} runs across nodes under an MPI launcher kvplan does not write",
                          help="plan it on one node (pass --gpus-per-node if your nodes hold more GPUs), or "
                               "set engine = vllm or sglang")
    image, notes = _image(rt, resource, opts, p)
    k, launch = per_replica(out.launch, sc, engine)
    cmd = container_command(launch)
    files, tier_out = _config_files(req, out, cmd.files)
    # each pool of a disaggregated plan is a workload of its own: `<scenario>-prefill-<engine>`, `-decode-`
    name = k8s_name(f"{sc.name}-{sc.pool}" if sc.pool else sc.name, engine)
    shm = opts.shm_bytes if opts.shm_bytes is not None else DEFAULT_SHM_BYTES
    pod = Pod(name, engine, image, resource, lay.gpus_per_pod, shm, _host(launch, tier_out, lay),
              opts.pvc or DEFAULT_PVC,
              f"{name}-config" if files else None, cmd, rt)
    workload, selector = _workload(pod, lay, opts.namespace, k)
    docs: list[dict[str, object]] = []
    if files:
        docs.append({"apiVersion": "v1", "kind": "ConfigMap",
                     "metadata": _metadata(f"{name}-config", opts.namespace,
                                           {"app.kubernetes.io/name": name, "app.kubernetes.io/managed-by": "kvplan"}),
                     "data": {n: yamlout.Block(t) for n, t in files.items()}})
    docs += [workload, _service(pod, opts.namespace, selector)]
    text = yamlout.documents(_head(req, backend, launch, pod, lay, opts, k), docs)
    # lmcache.yaml is in the ConfigMap: the launcher's "also emit --target lmcache" does not apply here
    bundled = {n for t in common.TIERS for n in common.lmcache_tier(t, False)[1]} if "lmcache.yaml" in files \
        else set()
    warnings = [w for w in out.warnings if w not in out.findings and w.split(": ", 1)[-1] not in bundled]
    prefix = f"{lmcache.BACKEND.label}: "  # lmcache.yaml's own findings and warnings (the placeholder disk path)
    findings = list(out.findings) + [f for f in tier_out.findings if f.startswith(prefix)]
    warnings += [w for w in tier_out.warnings if w.startswith(prefix) and w not in tier_out.findings]
    return EmittedFile(f"k8s-{engine}.yaml", text), out, warnings + notes, findings


def _host(launch: Launch, tier_out: Emitted, lay: Layout) -> float:
    """Host memory one pod's KV tier keeps: the engine's own tier over the pods of a replica, or LMCache's host
    bytes per worker (lmcache.yaml) times the pod's GPUs, one worker each."""
    per_worker = dict(tier_out.capacity).get("host_bytes_per_worker")
    lm = 0.0 if per_worker is None else float(per_worker.value) * lay.gpus_per_pod
    return launch.host_memory / lay.nodes + lm


def per_replica(launch: Launch, sc: Scenario, engine: str) -> tuple[int, Launch]:
    """(replicas, the command one pod runs): with pin replicas = k on an engine whose launch sets a data-parallel
    size (catalog Engine.data_parallel), each pod (or pod group) is one replica, so its command is the engine
    target's without that flag and the workload runs k copies; else (1, the launch as it is)."""
    flag = get_engine(engine).data_parallel
    k = sc.replicas
    if flag is None or k == 1:
        return 1, launch
    if sc.attention_dp > 1:
        raise KvplanError(f"scenario {sc.name}: pin replicas = {k} beside attention_dp = {sc.attention_dp}: both "
                          f"are {flag}, and the k8s target cannot tell one replica's command from the other's",
                          help="pin one of them")
    drop = (flag, str(k))
    if drop not in launch.flags:
        raise KvplanError(f"the {engine} launch has no {flag} {k} for pin replicas = {k} (a kvplan bug)")
    return k, attrs.evolve(launch, flags=tuple(f for f in launch.flags if f != drop))


def _head(req: EmitRequest, backend: Backend, launch: Launch, pod: Pod, lay: Layout, opts: DeployOptions,
          replicas: int = 1) -> list[str]:
    per_node = f"{lay.gpus_per_node} GPUs per node ({lay.node_size_from})"
    dp = ([f"# {replicas} data-parallel replicas (pin replicas): {replicas} copies of the workload below, each one "
           f"replica's command without {get_engine(pod.engine).data_parallel}; the Service balances the requests "
           "over them, each serving its share of the rate"] if replicas > 1 else [])
    if lay.nodes == 1:
        where = f"# one node: a Deployment of 1 pod with {pod.gpus} {pod.resource}; {per_node}" if replicas == 1 else (
            f"# one node a replica: a Deployment of {replicas} pods with {pod.gpus} {pod.resource} each; {per_node}")
    else:
        where = (f"# {lay.nodes} nodes: a LeaderWorkerSet ({LWS_API}, {LWS_SOURCE}) of {lay.nodes} pods with "
                 f"{pod.gpus} {pod.resource} each; {per_node}\n"
                 f"# the leader adds {' '.join(node_args(pod.engine, lay.nodes, True))}, the workers "
                 f"{' '.join(node_args(pod.engine, lay.nodes, False))} (the LeaderWorkerSet sets the variables)")
    shm_class = "assumed" if opts.shm_bytes is None else "given"
    mounted = ([f"# {', '.join(pod.cmd.files)}: ConfigMap {pod.config_map}, mounted at {CONFIG_DIR}"]
               if pod.config_map is not None else [])
    return [
        common.header(req, f"{LABEL} ({backend.label})"),
        *launch.comments,
        *mounted,
        *dp,
        where,
        f"# image {pod.image} ({'given' if opts.image else 'assumed'}, --image); /dev/shm {quantity(pod.shm)} = "
        f"{fmt_bytes(math.ceil(pod.shm))} in memory "
        f"({shm_class}, --shm-size); model cache: PVC {pod.pvc} at {HF_HOME} (HF_HOME; --pvc)",
        f"# memory request {quantity(pod.memory)} per pod: /dev/shm {quantity(pod.shm)} (memory-backed, it counts "
        f"against the pod) + the KV tier's host memory {fmt_bytes(pod.host)}; no memory limit: the engine's own "
        "process memory (weights staging, Python) is not modelled, and a limit below it gets the pod OOM-killed",
        f"# command and flags: {backend.id} target's, then --host 0.0.0.0 --port {pod.rt.port}; readiness: GET "
        f"{pod.rt.health} ({pod.rt.source})",
    ]


def build(req: EmitRequest) -> Emitted:
    engines, notes = _engines(req.plan, req.deploy)
    files: list[EmittedFile] = []
    warnings: list[str] = list(notes)
    findings: list[str] = []
    capacity: list[tuple[str, Value]] = []
    errors: list[str] = []
    planned: list[str] = []
    for engine in engines:
        f, out, warn, found = manifest(req, engine)
        if f is not None:
            files.append(f)
        warnings += warn
        findings += found
        errors += out.errors
        planned += out.planned
        capacity += out.capacity if len(engines) == 1 else [(f"{engine}.{k}", v) for k, v in out.capacity]
    return Emitted(ID, tuple(files), tuple(findings + warnings), tuple(capacity), tuple(findings),
                   errors=tuple(errors), planned=tuple(planned))


BACKEND = Backend(
    # version: the Kubernetes release whose API schemas the manifests are tested against (tests/acceptance/test_k8s.py)
    id=ID, engine=LABEL, version="1.29", kv_dtypes={}, block_sizes=(), default_block=16, prefix_caching=True,
    tiers=(), eviction=False, flags=("--host", "--port", "--nnodes", "--node-rank", "--master-addr", "--headless",
                                     "--dist-init-addr"),
    source="kvplan/engines/k8s.py (the engine targets' launch; kubernetes-sigs/lws v0.10.0 for several nodes)",
    build=build, writes_for=lambda engine: (engine,) if engine in RUNTIMES else ANY_ENGINES if engine == "any" else (),
)
