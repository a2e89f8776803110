"""`kvplan emit --target k8s`: every manifest validated against the Kubernetes OpenAPI schemas (the
`kubernetes-validate` package, strict: an unknown field is an error) and, for a LeaderWorkerSet, against
its CRD's openAPIV3Schema (tests/data/schemas/, kubernetes-sigs/lws v0.10.0); the container's command
compared with the engine target's launcher parsed by shlex; goldens for the shipped examples.

Regenerate the goldens with `python -m pytest tests/acceptance/test_k8s.py --update-goldens` and review the diff.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

import jsonschema
import kubernetes_validate
import pytest
import yaml
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from kvplan.app.digest import check_digests, read_header
from kvplan.app.replan import emit, written_from
from kvplan.cli import main
from kvplan.engines import (
    PACKAGING,
    TARGETS,
    DeployOptions,
    capacity_line,
    common,
    default_targets,
    k8s,
    resolve_targets,
    yamlout,
)
from kvplan.engines.common import Beside, Launch
from kvplan.lang import check_file
from kvplan.planner import plans_for
from kvplan.planner.plan import Plan
from tests.paths import DATA, ROOT, require_engine
from tests.unit.app.test_backends import shell

GOLDEN = DATA / "golden" / "emit"
#: The Kubernetes release whose OpenAPI schemas the manifests are checked against: the newest that the
#: declared minimum of kubernetes-validate (1.29.0) ships, and one that every newer release ships too.
K8S_VERSION = "1.29.0"
LWS_SCHEMA = json.loads((DATA / "schemas" / "leaderworkerset-v1-lws-v0.10.0.json").read_text("utf-8"))
TRT_IMAGE = "nvcr.io/nvidia/tensorrt-llm/release:main-test"
DNS_1035 = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
BESIDE = re.compile(r"\$\(dirname \$0\)/(.+)")


# ------------------------------------------------------------------ helpers

def plans(spec: str) -> list[Plan]:
    result = check_file(str(ROOT / spec))
    assert result.ok, [f"{d.code} {d.message}" for d in result.diagnostics]
    return plans_for(result)


def options(spec: str) -> DeployOptions:
    """The overrides a spec needs: a TensorRT-LLM image (none is released at kvplan's version)."""
    return DeployOptions(image=TRT_IMAGE) if "trtllm" in spec else DeployOptions()


def documents(text: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(text) if d is not None]


def strict(schema: Any) -> Any:
    """The CRD schema as the API server applies it with field validation Strict (`kubectl apply
    --validate=strict`): an object schema that lists its properties and does not preserve unknown fields
    admits no others."""
    if isinstance(schema, list):
        return [strict(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: strict(v) for k, v in schema.items()}
    if "properties" in out and "additionalProperties" not in out \
            and not out.get("x-kubernetes-preserve-unknown-fields"):
        out["additionalProperties"] = False
    return out


LWS_VALIDATOR = jsonschema.Draft7Validator(strict(LWS_SCHEMA))


def pod_templates(doc: dict[str, Any]) -> list[dict[str, Any]]:
    if doc["kind"] == "Deployment":
        return [doc["spec"]["template"]]
    if doc["kind"] == "LeaderWorkerSet":
        t = doc["spec"]["leaderWorkerTemplate"]
        return [t["leaderTemplate"], t["workerTemplate"]]
    return []


def validate(doc: dict[str, Any]) -> None:
    """One manifest document against its schema: core kinds with kubernetes-validate (strict), a
    LeaderWorkerSet against its CRD and each of its pod templates as a core PodTemplate."""
    if doc["kind"] == "LeaderWorkerSet":
        LWS_VALIDATOR.validate(doc)
        for t in pod_templates(doc):
            kubernetes_validate.validate({"apiVersion": "v1", "kind": "PodTemplate",
                                          "metadata": {"name": doc["metadata"]["name"]}, "template": t},
                                         K8S_VERSION, strict=True)
    else:
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


def shell_argv(text: str) -> tuple[dict[str, str], list[str]]:
    """The exports and the exec'd words of a launcher script, by shlex."""
    words = shlex.split("\n".join(ln for ln in text.splitlines() if not ln.startswith("#")).replace("\\\n", " "))
    at = words.index("exec")
    return dict(w.split("=", 1) for w in words[:at] if w != "export"), words[at + 1:]


def in_pod(word: str) -> str:
    """Where a file the launcher finds beside itself is in the pod: the ConfigMap's mount."""
    m = BESIDE.fullmatch(word)
    return f"/etc/kvplan/{m[1]}" if m else word


def all_specs() -> Iterator[tuple[str, Plan]]:
    for spec in [*sorted(f"examples/{p.name}" for p in (ROOT / "examples").glob("*.kvp")),
                 *sorted(f"tests/data/emit/{p.name}" for p in (DATA / "emit").glob("*.kvp")),
                 *sorted(f"tests/data/k8s/{p.name}" for p in (DATA / "k8s").glob("*.kvp"))]:
        result = check_file(str(ROOT / spec))
        if not result.ok:  # the language reference shows errors on purpose
            continue
        for p in plans_for(result):
            if p.feasible:
                yield spec, p


CASES = list(all_specs())
IDS = [f"{Path(s).stem}:{p.scenario.name}" for s, p in CASES]


def run(*args: str) -> Any:
    return CliRunner().invoke(main, list(args))


# ------------------------------------------------------------------ schema validation

def test_the_cases_cover_one_node_several_nodes_and_every_engine() -> None:
    kinds, engines = set(), set()
    for spec, p in CASES:
        out = emit(p, "k8s", spec=spec, deploy=options(spec))
        for f in out.files:
            engines.add(f.name)
            kinds |= {d["kind"] for d in documents(f.text)}
    assert kinds == {"ConfigMap", "Deployment", "LeaderWorkerSet", "Service"}
    assert engines == {"k8s-vllm.yaml", "k8s-sglang.yaml", "k8s-trtllm.yaml"}


@pytest.mark.parametrize("spec,p", CASES, ids=IDS)
def test_every_manifest_is_valid_kubernetes(spec: str, p: Plan) -> None:
    out = emit(p, "k8s", spec=spec, deploy=options(spec))
    assert out.files
    for f in out.files:
        docs = documents(f.text)
        assert [d["kind"] for d in docs][-1] == "Service"
        for doc in docs:
            validate(doc)
            assert DNS_1035.fullmatch(doc["metadata"]["name"]) and len(doc["metadata"]["name"]) <= 63


def deployment(spec: str = "examples/w2-batch32.kvp") -> dict[str, Any]:
    p = plans(spec)[0]
    (f, *_) = emit(p, "k8s", spec=spec).files
    (doc,) = [d for d in documents(f.text) if d["kind"] == "Deployment"]
    return doc


def lws() -> dict[str, Any]:
    (p, _) = plans("tests/data/k8s/two-nodes.kvp")
    (f,) = emit(p, "k8s").files
    (doc,) = [d for d in documents(f.text) if d["kind"] == "LeaderWorkerSet"]
    return doc


@pytest.mark.parametrize("path,value", [
    (("spec", "replica"), 1),                                       # a misspelled field
    (("spec", "template", "spec", "containers", 0, "resources", "limits", "nvidia.com/gpu"), [4]),
    (("spec", "template", "spec", "containers", 0, "readinessProbe", "httpGet", "paths"), "/health"),
    (("spec", "template", "spec", "volumes", 0, "emptyDir", "medium"), 5),
])
def test_the_core_validator_refuses_a_broken_deployment(path: tuple[Any, ...], value: Any) -> None:
    doc = deployment()
    validate(doc)
    broken = copy.deepcopy(doc)
    node = broken
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    with pytest.raises(kubernetes_validate.ValidationError):
        validate(broken)


@pytest.mark.parametrize("mutate", [
    lambda d: d["spec"]["leaderWorkerTemplate"].__setitem__("size", "two"),
    lambda d: d["spec"]["leaderWorkerTemplate"].__setitem__("restartPolicy", "Always"),   # not in the CRD's enum
    lambda d: d["spec"]["leaderWorkerTemplate"].__setitem__("leaderTemplat", {}),          # misspelled
    lambda d: d["spec"].__setitem__("replicas", -1),
], ids=["size", "restart-policy", "misspelled", "replicas"])
def test_the_crd_schema_refuses_a_broken_leaderworkerset(mutate: Callable[[dict[str, Any]], None]) -> None:
    doc = lws()
    validate(doc)
    mutate(doc)
    with pytest.raises(jsonschema.ValidationError):
        validate(doc)


def test_a_leaderworkerset_pod_template_is_checked_by_the_crd_and_as_a_core_pod_template() -> None:
    doc = lws()
    doc["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]["imag"] = "x"
    with pytest.raises(jsonschema.ValidationError):
        LWS_VALIDATOR.validate(doc)
    template = {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "x"},
                "template": doc["spec"]["leaderWorkerTemplate"]["workerTemplate"]}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(template, K8S_VERSION, strict=True)


# ------------------------------------------------------------------ the command is the engine target's

@pytest.mark.parametrize("spec,p", CASES, ids=IDS)
def test_the_container_runs_the_engine_targets_command(spec: str, p: Plan) -> None:
    out = emit(p, "k8s", spec=spec, deploy=options(spec))
    for f in out.files:
        engine = f.name.removeprefix("k8s-").removesuffix(".yaml")
        written = emit(p, engine, spec=spec)
        scripts = [x.text for x in written.files if x.name.endswith(".sh")]
        # a layout over nodes is written one script a host, each with its host's flags (test_hosts.py); the pod runs
        # the command they share, the launch, with the LeaderWorkerSet's node flags
        assert written.launch is not None
        script = scripts[0] if len(scripts) == 1 else common.shell_script(
            ["# the launch"], written.launch.program, written.launch.flags, written.launch.env)
        env, argv = shell_argv(script)
        want = [in_pod(w) for w in argv]
        port = k8s.RUNTIMES[engine].port
        workload = next(d for d in documents(f.text) if d["kind"] in ("Deployment", "LeaderWorkerSet"))
        # the target runs its own plan (kvplan/app/replan.py): SGLang's for w2-h100 pipelines over 16 H100s
        # (tp 8 × pp 2), two nodes of 8, where the spec's plan is 8 GPUs on one
        own = written_from(p, engine)
        # a node is the catalog's host (8 for an HGX server, 4 for a GB200 tray), else the assumed 8
        nodes = math.ceil(own.n_devices / (p.scenario.device.host or 8))
        k = own.scenario.replicas
        if k > 1:  # pin replicas: k copies of one replica's pods, each the command without the data-parallel size
            assert workload["spec"]["replicas"] == k
            i = want.index({"vllm": "--data-parallel-size", "sglang": "--dp-size"}[engine])
            assert want[i + 1] == str(k)
            want = want[:i] + want[i + 2:]
        else:
            assert workload["spec"]["replicas"] == 1
        for i, t in enumerate(pod_templates(workload)):
            (c,) = t["spec"]["containers"]
            got = c["command"] + c["args"]
            leader = i == 0
            serve = ["--host", "0.0.0.0", "--port", str(port)] if leader else []
            if nodes == 1:
                extra = serve
            elif engine == "vllm":
                extra = ["--nnodes", str(nodes), "--node-rank", "$(LWS_WORKER_INDEX)", "--master-addr",
                         "$(LWS_LEADER_ADDRESS)", *(serve if leader else ["--headless"])]
            else:
                extra = ["--nnodes", str(nodes), "--node-rank", "$(LWS_WORKER_INDEX)", "--dist-init-addr",
                         "$(LWS_LEADER_ADDRESS):20000", *serve]
            assert got == want + extra
            pod_env = {e["name"]: e.get("value") for e in c["env"]}
            assert pod_env["HF_HOME"] == "/root/.cache/huggingface"
            for k, v in env.items():
                assert pod_env[k] == in_pod(v)
            mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
            assert mounts["/dev/shm"] == "dshm" and mounts["/root/.cache/huggingface"] == "model-cache"
            assert c["resources"]["limits"] == {k8s.gpu_resource(p.scenario.device, None): own.n_devices // nodes}
            assert ("readinessProbe" in c) == leader
            if leader:
                assert c["readinessProbe"]["httpGet"] == {"path": "/health", "port": "http"}
                assert c["ports"] == [{"name": "http", "containerPort": port, "protocol": "TCP"}]


@pytest.mark.parametrize("spec,target,name", [
    ("tests/data/k8s/trtllm.kvp", "trtllm", "trtllm.yaml"),
    ("tests/data/emit/tier-ssd.kvp", "lmcache", "lmcache.yaml"),
])
def test_the_configmap_holds_the_file_the_launcher_reads(spec: str, target: str, name: str) -> None:
    (p,) = plans(spec)
    for f in emit(p, "k8s", spec=spec, deploy=options(spec)).files:
        # each manifest runs its engine's own plan (kvplan/app/replan.py), and so its files
        own = written_from(p, f.name.removeprefix("k8s-").removesuffix(".yaml"))
        expected = next(x.text for x in emit(own, target, spec=spec).files if x.name == name)
        docs = documents(f.text)
        (cm,) = [d for d in docs if d["kind"] == "ConfigMap"]
        assert cm["data"] == {name: expected}
        spec_ = pod_templates(docs[1])[0]["spec"]
        assert {"name": "kvplan-config", "configMap": {"name": cm["metadata"]["name"]}} in spec_["volumes"]
        assert {"name": "kvplan-config", "mountPath": "/etc/kvplan", "readOnly": True} in \
            spec_["containers"][0]["volumeMounts"]


def test_lmcache_in_the_configmap_drops_the_also_emit_lmcache_warning() -> None:
    (p,) = plans("tests/data/emit/tier-ssd.kvp")
    assert any("also emit --target lmcache" in w for w in emit(p, "vllm").warnings)
    assert not any("also emit --target lmcache" in w for w in emit(p, "k8s").warnings)


def test_a_dollar_paren_from_the_engine_is_escaped_and_the_group_variables_are_not() -> None:
    launch = Launch(("vllm", "serve", "org/$(odd)"), (("--x", "a$(b)"), ("--config", Beside("trtllm.yaml"))),
                    (("LMCACHE_CONFIG_FILE", Beside("lmcache.yaml")),))
    cmd = k8s.container_command(launch)
    assert cmd.command == ("vllm", "serve", "org/$$(odd)")
    assert cmd.args == ("--x", "a$$(b)", "--config", "/etc/kvplan/trtllm.yaml")
    assert cmd.env == (("LMCACHE_CONFIG_FILE", "/etc/kvplan/lmcache.yaml"),)
    assert cmd.files == ("trtllm.yaml", "lmcache.yaml")
    assert "$(LWS_WORKER_INDEX)" in k8s.node_args("sglang", 2, leader=False)


def kubernetes_expand(word: str) -> str:
    """What the kubelet passes for a word with no variables defined (k8s third_party/forked/golang/expansion:
    `$$` is `$`, `$(X)` of an unknown X stays as written)."""
    out, i = [], 0
    while i < len(word):
        if word[i] == "$" and i + 1 < len(word) and word[i + 1] == "$":
            out.append("$")
            i += 2
        else:
            out.append(word[i])
            i += 1
    return "".join(out)


@given(word=st.text(st.sampled_from("$()ab"), max_size=12))
def test_an_escaped_word_reaches_the_engine_as_written(word: str) -> None:
    escaped = k8s.literal(word)
    assert kubernetes_expand(escaped) == word
    assert re.search(r"(?<!\$)(?:\$\$)*\$\(", escaped) is None  # no unescaped reference is left


# ------------------------------------------------------------------ nodes, GPUs, overrides

@pytest.mark.parametrize("spec,device,resource", [
    ("examples/w2-batch32.kvp", "b200", "nvidia.com/gpu"),
    ("examples/deepseek-v3-mi300x.kvp", "mi300x", "amd.com/gpu"),
    ("examples/llama-3.1-8b-h100-custom.kvp", "h100-class", "nvidia.com/gpu"),  # by its NVLink
])
def test_the_gpu_resource_follows_the_vendor(spec: str, device: str, resource: str) -> None:
    p = plans(spec)[0]
    assert p.scenario.device.id == device
    (c,) = pod_templates(deployment(spec))[0]["spec"]["containers"]
    assert list(c["resources"]["limits"]) == [resource]


def test_a_device_of_another_vendor_is_refused_in_one_line(tmp_path: Path) -> None:
    spec = tmp_path / "g.kvp"
    spec.write_text((DATA / "k8s" / "trtllm.kvp").read_text().replace("h100-sxm", "gaudi3")
                    .replace("trtllm", "vllm"))
    r = run("emit", str(spec), "--target", "k8s")
    assert r.exit_code == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "device gaudi3 (Intel Gaudi 3 (OAM))" in r.stderr and "--gpu-resource" in r.stderr
    r = run("emit", str(spec), "--target", "k8s", "--gpu-resource", "amd.com/gpu")
    assert r.exit_code == 0 and "amd.com/gpu: 1" in r.stdout


@pytest.mark.parametrize("per_node,nodes", [(None, 2), (16, 1), (4, 4), (2, 8)])
def test_the_node_count_is_the_gpus_over_the_node_size(per_node: Optional[int], nodes: int) -> None:
    (p, _) = plans("tests/data/k8s/two-nodes.kvp")
    assert p.n_devices == 16
    (f,) = emit(p, "k8s", deploy=DeployOptions(gpus_per_node=per_node)).files
    docs = documents(f.text)
    workload = docs[0]
    if nodes == 1:
        assert workload["kind"] == "Deployment" and workload["spec"]["replicas"] == 1
    else:
        assert workload["kind"] == "LeaderWorkerSet"
        assert workload["spec"]["leaderWorkerTemplate"]["size"] == nodes
        assert docs[1]["spec"]["selector"] == {"leaderworkerset.sigs.k8s.io/name": "two-nodes-vllm",
                                               "role": "leader"}
    for t in pod_templates(workload):
        assert t["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": 16 // nodes}
    # an H100 server holds 8 (the catalog's host size) unless --gpus-per-node says otherwise
    size = "catalog: h100-sxm host; --gpus-per-node overrides it" if per_node is None else "given, --gpus-per-node"
    assert f"{per_node or 8} GPUs per node ({size})" in f.text


def test_gpus_that_do_not_split_evenly_over_nodes_are_refused() -> None:
    r = run("emit", str(ROOT / "tests/data/emit/pipeline.kvp"), "--target", "k8s", "--gpus-per-node", "2")
    assert r.exit_code == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "3 GPUs do not split evenly over 2" in r.stderr and "--gpus-per-node" in r.stderr


def test_tensorrt_llm_across_nodes_is_refused(tmp_path: Path) -> None:
    spec = tmp_path / "t.kvp"
    spec.write_text((DATA / "k8s" / "trtllm.kvp").read_text().replace("devices = 1", "devices = 2"))
    r = run("emit", str(spec), "--target", "k8s", "--image", TRT_IMAGE, "--gpus-per-node", "1")
    assert r.exit_code == 2 and "MPI launcher" in r.stderr, r.stderr


def test_overrides_reach_every_object() -> None:
    r = run("emit", str(ROOT / "examples/llama-3.1-8b-h100-custom.kvp"), "--target", "k8s", "--image",
            "registry.example.com:5000/team/vllm:v0.33.0-patched", "--namespace", "inference", "--pvc", "hf.cache",
            "--shm-size", "8GiB", "--scenario", "chat-8b[context=8k]")
    assert r.exit_code == 0, r.stderr
    text = r.stdout.split("<==\n", 1)[1]
    docs = documents(text)
    assert {d["metadata"].get("namespace") for d in docs} == {"inference"}
    pod = docs[0]["spec"]["template"]["spec"]
    assert pod["containers"][0]["image"] == "registry.example.com:5000/team/vllm:v0.33.0-patched"
    assert {"name": "model-cache", "persistentVolumeClaim": {"claimName": "hf.cache"}} in pod["volumes"]
    assert {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "8Gi"}} in pod["volumes"]
    assert "(given, --image)" in text and "/dev/shm 8Gi = 8.59 GB in memory (given, --shm-size)" in text
    for d in docs:
        validate(d)


def test_the_defaults_are_named_and_marked_assumed() -> None:
    (p,) = plans("examples/w4-reuse.kvp")
    (f, _) = emit(p, "k8s").files
    assert "image vllm/vllm-openai:v0.33.0 (assumed, --image)" in f.text
    assert "/dev/shm 16Gi = 17.18 GB in memory (assumed, --shm-size)" in f.text
    assert "PVC model-cache at /root/.cache/huggingface" in f.text
    assert "metadata:\n  name: w4-reuse-vllm\n  labels:" in f.text  # no namespace unless one is given


@pytest.mark.parametrize("args,needle", [
    (["--namespace", "Bad_NS"], "--namespace 'Bad_NS' is not a Kubernetes namespace name"),
    (["--namespace", "a" * 64], "is not a Kubernetes namespace name"),
    (["--pvc", "-cache"], "--pvc '-cache' is not a PersistentVolumeClaim name"),
    (["--image", "has space:1"], "--image 'has space:1' is not a container image reference"),
    (["--image", "Upper/Case"], "is not a container image reference"),
    (["--shm-size", "5 tokens"], "--shm-size"),
    (["--shm-size", "0"], "--shm-size must be bytes above 0"),
    (["--gpus-per-node", "0"], "--gpus-per-node must be a whole number from 1 to 4,096"),
])
def test_a_bad_override_is_one_line_and_exit_2(args: list[str], needle: str) -> None:
    r = run("emit", str(ROOT / "examples/w4-reuse.kvp"), "--target", "k8s", *args)
    assert r.exit_code == 2, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and needle in r.stderr, r.stderr


def test_an_unknown_gpu_resource_is_refused() -> None:
    r = run("emit", str(ROOT / "examples/w4-reuse.kvp"), "--target", "k8s", "--gpu-resource", "intel.com/gpu")
    assert r.exit_code == 2 and "nvidia.com/gpu" in r.stderr and "amd.com/gpu" in r.stderr


def test_a_deployment_option_without_the_k8s_target_is_refused() -> None:
    r = run("emit", str(ROOT / "examples/w4-reuse.kvp"), "--target", "vllm", "--namespace", "x", "--pvc", "y")
    assert r.exit_code == 2 and "--namespace, --pvc apply to the k8s target only" in r.stderr, r.stderr
    r = run("emit", str(ROOT / "examples/w4-reuse.kvp"), "--namespace", "x")  # engine = any: not k8s either
    assert r.exit_code == 2 and "applies to the k8s target only" in r.stderr


def test_tensorrt_llm_needs_an_image_and_engine_any_takes_none() -> None:
    r = run("emit", str(ROOT / "tests/data/k8s/trtllm.kvp"), "--target", "k8s")
    assert r.exit_code == 2 and "--image" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    r = run("emit", str(ROOT / "examples/w4-reuse.kvp"), "--target", "k8s", "--image", "vllm/vllm-openai:v1")
    assert r.exit_code == 2 and "engine = any" in r.stderr and "set the spec's `engine`" in r.stderr


def test_engine_any_writes_vllm_and_sglang_and_says_why_not_trtllm() -> None:
    (p,) = plans("examples/w4-reuse.kvp")
    out = emit(p, "k8s")
    assert [f.name for f in out.files] == ["k8s-vllm.yaml", "k8s-sglang.yaml"]
    assert any("no TensorRT-LLM manifest" in w and "--image" in w for w in out.warnings)
    assert capacity_line(out) == ""       # two engines: their rows are prefixed, no single capacity line
    assert {k.split(".")[0] for k, _ in out.capacity} == {"vllm", "sglang"}


def test_the_findings_are_the_engine_targets() -> None:
    (p,) = plans("examples/w2-batch32.kvp")
    out = emit(p, "k8s")
    assert set(out.findings) == set(emit(p, "vllm").findings) | set(emit(p, "sglang").findings)
    assert set(out.findings) <= set(out.warnings)
    # each manifest runs its engine's own plan: SGLang's is nvfp4 on B200, nothing moved to the nearest
    assert not out.findings and any("planned for sglang" in line for line in out.planned)
    # vLLM's runs the spec's choices at its own expected factors (its reported t_layer): the same choices
    assert [line for line in out.planned if "planned for vllm" in line and "the same choices" in line]
    assert run("emit", str(ROOT / "examples/w2-batch32.kvp"), "--target", "k8s").exit_code == 0


# ------------------------------------------------------------------ targets, digests, names, YAML

def test_all_and_engine_any_leave_the_packaging_target_out() -> None:
    assert PACKAGING == {"k8s"} and "k8s" in TARGETS
    assert "k8s" not in resolve_targets("all", "vllm") and "k8s" not in default_targets("any")
    assert resolve_targets("k8s", "any") == ("k8s",)
    assert resolve_targets("vllm,k8s", "any") == ("vllm", "k8s")
    assert resolve_targets("all,k8s", "any") == (*default_targets("any"), "k8s")


def test_lint_check_digest_sees_a_stale_manifest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = tmp_path / "nodes.kvp"
    shutil.copy(DATA / "k8s" / "two-nodes.kvp", spec)
    monkeypatch.chdir(tmp_path)
    r = run("emit", "nodes.kvp", "--target", "k8s", "-o", "nodes.kvplan")
    assert r.exit_code == 0, r.stderr
    written = r.stdout.split()
    assert written == ["nodes.kvplan/two-nodes/k8s-vllm.yaml", "nodes.kvplan/two-nodes-sglang/k8s-sglang.yaml"]
    head, _ = read_header(tmp_path / written[0])
    assert head is not None and head["engine"] == "Kubernetes (vLLM 0.33.0)" and head["scenario"] == "two-nodes"
    assert check_digests(check_file(str(spec))) == []
    spec.write_text(spec.read_text().replace("batch   = 16", "batch   = 8", 1))
    stale = check_digests(check_file(str(spec)))
    assert [d.code for d in stale] == ["KV401"] and "k8s-vllm.yaml" in stale[0].message


@pytest.mark.parametrize("scenario,name", [
    ("chat-8b[context=8k]", "chat-8b-context-8k-vllm"),
    ("7B chat", "kv-7b-chat-vllm"),
])
def test_object_names_are_dns_labels(scenario: str, name: str) -> None:
    assert k8s.k8s_name(scenario, "vllm") == name


def test_names_that_lose_letters_keep_a_digest_and_stay_apart() -> None:
    a, b = k8s.k8s_name("Чат", "vllm"), k8s.k8s_name("Беседа", "vllm")
    assert a != b and DNS_1035.fullmatch(a) and DNS_1035.fullmatch(b)
    assert a == "plan-" + hashlib.sha256("Чат".encode()).hexdigest()[:8] + "-vllm"


def test_long_names_stay_63_characters_and_apart() -> None:
    a, b = (k8s.k8s_name("x" * 80 + tail, "sglang") for tail in ("a", "b"))
    assert a != b and len(a) <= 63 and len(b) <= 63
    assert DNS_1035.fullmatch(a) and a.endswith("-sglang")


@pytest.mark.parametrize("nbytes,text", [(16 * 2**30, "16Gi"), (1536 * 2**20, "1536Mi"), (2**40, "1Ti"),
                                         (1000, "1000"), (8.5 * 2**30, "8704Mi")])
def test_quantities_are_exact(nbytes: float, text: str) -> None:
    assert k8s.quantity(nbytes) == text


_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
_SCALARS = st.one_of(_TEXT, st.integers(-10**6, 10**6), st.booleans())
_NODES = st.recursive(_SCALARS, lambda inner: st.one_of(
    st.lists(st.one_of(_SCALARS, st.dictionaries(_TEXT, inner, min_size=1, max_size=3)), max_size=3),
    st.dictionaries(_TEXT, inner, max_size=3)), max_leaves=12)


@given(doc=st.dictionaries(_TEXT, _NODES, max_size=4), block=_TEXT)
@settings(max_examples=200, deadline=None)
def test_the_yaml_writer_reads_back_as_written(doc: dict[str, Any], block: str) -> None:
    """Every string, key and number comes back from PyYAML as it went in, whatever its characters."""
    doc = {**doc, "file.yaml": yamlout.Block(block + "\n")}
    (back,) = yaml.safe_load_all(yamlout.documents(["# head"], [doc]))
    assert back == {k: str(v) if isinstance(v, yamlout.Block) else v for k, v in doc.items()}


# ------------------------------------------------------------------ goldens

#: The shipped examples that plan on one engine or `any`, a tier through LMCache (a ConfigMap), two nodes
#: (a LeaderWorkerSet) and TensorRT-LLM (its YAML in a ConfigMap).
GOLDEN_SPECS = ["examples/w2-batch32.kvp", "examples/deepseek-v3-mi300x.kvp",
                "examples/llama-3.1-8b-h100-custom.kvp", "examples/w4-reuse.kvp", "tests/data/emit/tier-ssd.kvp",
                "tests/data/k8s/two-nodes.kvp", "tests/data/k8s/trtllm.kvp"]


@pytest.mark.parametrize("spec", GOLDEN_SPECS)
def test_k8s_golden(spec: str, golden: Callable[[Path, str], None]) -> None:
    chunks = []
    for p in plans(spec):
        out = emit(p, "k8s", spec=spec, deploy=options(spec))
        chunks.append(f"### {p.scenario.name}")
        chunks += [f"==> {f.name} <==\n{f.text}" for f in out.files]
        chunks += [f"{'finding' if w in out.findings else 'warning'}: {w}" for w in out.warnings]
        chunks.append(f"summary: {capacity_line(out)}")
    golden(GOLDEN / f"{Path(spec).stem}.k8s.txt", "\n".join(chunks) + "\n")


# ------------------------------------------------------------------ the engine's own parser, where installed

VLLM_PARSE = r"""
import json, sys
from vllm.entrypoints.common.cli_args import make_arg_parser
from vllm.utils.argparse_utils import FlexibleArgumentParser
for words in json.loads(sys.stdin.read()):
    ns = make_arg_parser(FlexibleArgumentParser()).parse_args(words)
    print(json.dumps([ns.tensor_parallel_size, ns.nnodes, ns.node_rank, ns.master_addr, ns.headless, ns.host,
                      ns.port, ns.kv_cache_memory_bytes, ns.gpu_memory_utilization]))
"""


@pytest.mark.engines
def test_vllm_0_33_parses_the_pod_arguments() -> None:
    """vLLM's own `vllm serve` parser on the leader's and the worker's words (LWS variables filled in). Fill sizing
    (emit's default) writes vLLM's --gpu-memory-utilization, not --kv-cache-memory-bytes: the same fraction as the
    plain vLLM launcher."""
    require_engine("vllm")
    (p, _) = plans("tests/data/k8s/two-nodes.kvp")
    (f,) = emit(p, "k8s").files
    words = []
    for rank, t in enumerate(pod_templates(documents(f.text)[0])):
        c = t["spec"]["containers"][0]
        words.append([w.replace("$(LWS_WORKER_INDEX)", str(rank)).replace("$(LWS_LEADER_ADDRESS)", "10.0.0.1")
                      for w in c["command"][2:] + c["args"]])
    r = subprocess.run([sys.executable, "-c", VLLM_PARSE], input=json.dumps(words), capture_output=True, text=True,
                       env={**os.environ, "VLLM_TARGET_DEVICE": "cpu"}, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    rows = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("[")]
    _, argv = shell(emit(p, "vllm").files[0].text)
    fraction = float(argv[argv.index("--gpu-memory-utilization") + 1])
    assert rows == [[16, 2, 0, "10.0.0.1", False, "0.0.0.0", 8000, None, fraction],
                    [16, 2, 1, "10.0.0.1", True, None, 8000, None, fraction]]
