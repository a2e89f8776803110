"""Launch files safe to paste (issue 21 item 5) and the report's SLO table (item 6): `kvplan emit` writes nothing
for a plan that misses its spec unless --allow-unmet, and the suggestion it prints works; every file's header
states the service verdict; a layout larger than a node is one launcher a host, each asking for no more GPUs than
a node holds and stopping with a clear message when host 0's address is not set; a pod requests the host memory
its /dev/shm and KV tier keep; `kvplan report` puts each SLO beside its prediction."""

from __future__ import annotations

import json
import math
import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from kvplan.cli import main
from kvplan.lang import check_file
from kvplan.planner import plans_for
from tests.paths import ROOT

SLO = ROOT / "examples" / "service-slo.kvp"
TWO_NODES = ROOT / "tests" / "data" / "engine-check" / "two-nodes.kvp"


def _unmet(tmp_path: Path) -> Path:
    """service-slo on 2 H100s: 20 req/s is past the saturation rate of one 2-GPU replica."""
    spec = tmp_path / "unmet.kvp"
    spec.write_text(SLO.read_text().replace("devices = auto", "devices = 2"))
    return spec


def _plan(spec: Path, name: str | None = None):  # type: ignore[no-untyped-def]
    plans = plans_for(check_file(str(spec)))
    return plans[0] if name is None else next(p for p in plans if p.scenario.name == name)


def test_emit_writes_nothing_for_a_plan_that_misses_its_spec(tmp_path: Path) -> None:
    """On main emit exited 0 and wrote vllm.sh for a plan advise rejects (past saturation)."""
    spec = _unmet(tmp_path)
    out = tmp_path / "out"
    r = CliRunner().invoke(main, ["emit", str(spec), "-o", str(out)])
    assert r.exit_code == 1, r.output
    assert not out.exists() or not any(out.rglob("*"))
    assert "the plan misses its spec, so no file is written" in r.stderr
    assert "--allow-unmet" in r.stderr
    assert re.search(rf"{re.escape(str(spec))}:\d+:\d+: KV303 ", r.stderr)  # located: file, line, column


def test_allow_unmet_writes_the_files_and_every_header_says_unmet(tmp_path: Path) -> None:
    spec = _unmet(tmp_path)
    out = tmp_path / "out"
    r = CliRunner().invoke(main, ["emit", str(spec), "-o", str(out), "--allow-unmet", "--target", "vllm,sglang,trtllm"])
    assert r.exit_code == 1, r.output  # written, and still a finding
    written = sorted(p for p in out.rglob("*") if p.is_file())
    assert {p.name for p in written} >= {"vllm.sh", "sglang.sh", "trtllm.yaml", "trtllm.sh"}
    for p in written:
        assert "# service verdict: UNMET (" in p.read_text(), p


def test_the_suggestion_an_unmet_emit_prints_meets_the_spec(tmp_path: Path) -> None:
    spec = _unmet(tmp_path)
    r = CliRunner().invoke(main, ["emit", str(spec), "-o", str(tmp_path / "out")])
    m = re.search(r"would meet it: devices = (\d+)", r.stderr)  # devices is the total over the replicas
    assert m is not None, r.stderr
    spec.write_text(spec.read_text().replace("devices = 2", f"devices = {m[1]}"))
    again = CliRunner().invoke(main, ["emit", str(spec), "-o", str(tmp_path / "fixed")])
    assert again.exit_code == 0, again.output
    texts = [p.read_text() for p in (tmp_path / "fixed").rglob("*.sh")]
    assert texts and all("# service verdict: met (" in t for t in texts)


def test_a_target_written_from_its_engines_unmet_plan_writes_nothing(tmp_path: Path) -> None:
    """The spec's vLLM plan meets chat-8b[context=32k]'s throughput SLO; the plan made for TensorRT-LLM (no int4 KV)
    does not. On main emit wrote trtllm.yaml from it and exited 0."""
    spec = ROOT / "examples" / "llama-3.1-8b-h100-custom.kvp"
    r = CliRunner().invoke(main, ["emit", str(spec), "--target", "trtllm", "-o", str(tmp_path / "t")])
    assert r.exit_code == 1 and not (tmp_path / "t").exists(), r.output
    assert "the plan made for trtllm, which target trtllm is written from, misses its spec" in r.stderr
    ok = CliRunner().invoke(main, ["emit", str(spec), "--target", "vllm", "-o", str(tmp_path / "v")])
    assert ok.exit_code == 0, ok.output  # the help's way out: leave that target out


def test_every_header_states_the_service_verdict_with_the_plans_figures(tmp_path: Path) -> None:
    p = _plan(SLO)
    assert p.load is not None and p.load.goodput is not None and p.load.itl is not None and p.load.ttft is not None
    want = (f"# service verdict: met (rate (goodput) {p.load.goodput.human} (derived), SLO >= 20 req/s: met; "
            f"ITL {p.load.itl.human} (derived), SLO <= 10 ms: met; TTFT {p.load.ttft.human} (derived), "
            "SLO <= 500 ms: met)")
    r = CliRunner().invoke(main, ["emit", str(SLO), "-o", str(tmp_path / "o"), "--target", "vllm,k8s,flashinfer"])
    assert r.exit_code == 0, r.output
    files = [f for f in (tmp_path / "o").rglob("*") if f.is_file()]
    vllm_files = [f for f in files if f.name.startswith("vllm")]
    assert vllm_files and all(want in f.read_text() for f in vllm_files)
    assert all("# service verdict: met (" in f.read_text() for f in files if not f.name.endswith(".json"))
    for f in files:
        if f.name.endswith(".json"):
            assert json.loads(f.read_text())["_kvplan"]["verdict"]["met"] is True


# ------------------------------------------------------------------ a layout over nodes

def _argv(text: str) -> list[str]:
    lines = [ln for ln in text.splitlines() if not ln.startswith(("#", ": ", "export "))]
    words = shlex.split(" ".join(ln.rstrip("\\") for ln in lines))
    assert words[0] == "exec"
    return words[1:]


def _value(argv: list[str], flag: str, default: int) -> int:
    return int(argv[argv.index(flag) + 1]) if flag in argv else default


def _gpus_asked(argv: list[str]) -> int:
    """The GPUs one host's command starts: vLLM's and SGLang's world size over its nodes (vllm arg_utils.py
    2399-2445: --data-parallel-size-local replicas a host, else the world split evenly over --nnodes)."""
    if argv[:2] == ["vllm", "serve"]:
        ranks = _value(argv, "--tensor-parallel-size", 1) * _value(argv, "--pipeline-parallel-size", 1)
        world = ranks * _value(argv, "--data-parallel-size", 1)
        if "--data-parallel-size-local" in argv:
            return ranks * _value(argv, "--data-parallel-size-local", 1)
        return world // _value(argv, "--nnodes", 1)
    ranks = _value(argv, "--tp-size", 1) * _value(argv, "--pp-size", 1)
    return ranks * _value(argv, "--dp-size", 1) // _value(argv, "--nnodes", 1)


def test_no_launcher_asks_one_host_for_more_gpus_than_a_node_holds(tmp_path: Path) -> None:
    """On main TP16 was one vllm.sh asking one host for 16 GPUs, and 2 replicas of TP8 one with
    --tensor-parallel-size 8 --data-parallel-size 2, 16 GPUs on one host; a node holds 8."""
    r = CliRunner().invoke(main, ["emit", str(TWO_NODES), "-o", str(tmp_path / "o"), "--target", "vllm,sglang"])
    assert r.exit_code == 0, r.output
    for name in ("tp16-vllm", "tp16-sglang", "dp2-vllm", "dp2-sglang"):
        p = _plan(TWO_NODES, name)
        node = p.scenario.device.node
        assert node == 8 and p.n_devices * p.scenario.replicas == 16
        folder = tmp_path / "o" / name
        for engine in ("vllm", "sglang"):
            hosts = sorted(folder.glob(f"{engine}-host*.sh"))
            assert [h.name for h in hosts] == [f"{engine}-host0.sh", f"{engine}-host1.sh"], name
            asked = [_gpus_asked(_argv(h.read_text())) for h in hosts]
            assert all(a <= node for a in asked) and sum(asked) == 16, (name, engine, asked)
            for i, h in enumerate(hosts):
                assert f"# runs on host {i} of 2 (" in h.read_text()


def test_the_host_flags_are_the_engines_own(tmp_path: Path) -> None:
    r = CliRunner().invoke(main, ["emit", str(TWO_NODES), "-o", str(tmp_path / "o"), "--target", "vllm,sglang"])
    assert r.exit_code == 0, r.output
    o = tmp_path / "o"
    h0, h1 = (_argv((o / "tp16-vllm" / f"vllm-host{i}.sh").read_text()) for i in (0, 1))
    assert h0[-6:] == ["--nnodes", "2", "--node-rank", "0", "--master-addr", "$KVPLAN_HOST0_ADDR"]
    assert h1[-7:] == ["--nnodes", "2", "--node-rank", "1", "--master-addr", "$KVPLAN_HOST0_ADDR", "--headless"]
    d0, d1 = (_argv((o / "dp2-vllm" / f"vllm-host{i}.sh").read_text()) for i in (0, 1))
    assert d0[d0.index("--data-parallel-size") + 1] == "2" and "--headless" not in d0
    assert d1[d1.index("--data-parallel-start-rank") + 1] == "1" and d1[-1] == "--headless"
    assert d1[d1.index("--data-parallel-address") + 1] == "$KVPLAN_HOST0_ADDR"
    s1 = _argv((o / "tp16-sglang" / "sglang-host1.sh").read_text())
    assert s1[-6:] == ["--nnodes", "2", "--node-rank", "1", "--dist-init-addr", "$KVPLAN_HOST0_ADDR:20000"]
    g0 = _argv((o / "dp2-sglang" / "sglang-host0.sh").read_text())  # SGLang refuses DP over nodes: a server a host
    assert "--nnodes" not in g0 and "--dp-size" not in g0


def test_a_host_launcher_stops_with_a_clear_message_without_host_0s_address(tmp_path: Path) -> None:
    r = CliRunner().invoke(main, ["emit", str(TWO_NODES), "-o", str(tmp_path / "o"), "--target", "vllm",
                                  "--scenario", "tp16-vllm"])
    assert r.exit_code == 0, r.output
    script = tmp_path / "o" / "tp16-vllm" / "vllm-host1.sh"
    env = {k: v for k, v in os.environ.items() if k != "KVPLAN_HOST0_ADDR"}
    env["PATH"] = str(tmp_path)  # no vllm: the address check comes first
    bare = subprocess.run(["/bin/sh", str(script)], env=env, capture_output=True, text=True, timeout=30)
    assert bare.returncode != 0 and "set KVPLAN_HOST0_ADDR to host 0's address" in bare.stderr
    (tmp_path / "vllm").write_text('#!/bin/sh\nprintf "%s\\n" "$@"\n')
    (tmp_path / "vllm").chmod(0o755)
    ran = subprocess.run(["/bin/sh", str(script)], env={**env, "KVPLAN_HOST0_ADDR": "10.1.2.3"},
                         capture_output=True, text=True, timeout=30)
    assert ran.returncode == 0, ran.stderr
    said = ran.stdout.splitlines()
    assert said[said.index("--master-addr") + 1] == "10.1.2.3"


# ------------------------------------------------------------------ pods request their host memory

def _containers(text: str) -> list[dict[str, object]]:
    out = []
    for doc in yaml.safe_load_all(text):
        if doc and doc["kind"] in ("Deployment", "LeaderWorkerSet"):
            spec = doc["spec"]
            lws = spec.get("leaderWorkerTemplate", {})
            templates = ([spec["template"]] if doc["kind"] == "Deployment" else
                         [lws["leaderTemplate"], lws["workerTemplate"]])
            out += [c for t in templates for c in t["spec"]["containers"]]
    return out


def test_a_pod_requests_its_shm_and_its_host_tier(tmp_path: Path) -> None:
    """On main no pod requested memory: the memory-backed /dev/shm and the KV host tier were unaccounted."""
    spec = ROOT / "tests" / "data" / "emit" / "host-tier.kvp"
    r = CliRunner().invoke(main, ["emit", str(spec), "-o", str(tmp_path / "o"), "--target", "vllm,k8s"])
    assert r.exit_code == 0, r.output
    (script,) = (tmp_path / "o").rglob("vllm.sh")
    argv = _argv(script.read_text())
    tier = int(argv[argv.index("--kv-offloading-size") + 1]) * 2**30 * _value(argv, "--pipeline-parallel-size", 1)
    (manifest,) = (tmp_path / "o").rglob("k8s-vllm.yaml")
    (c,) = _containers(manifest.read_text())
    want = math.ceil((16 * 2**30 + tier) / 2**20) * 2**20
    assert c["resources"]["requests"]["memory"] == f"{want // 2**30}Gi" if want % 2**30 == 0 else str(want)  # type: ignore[index]


def test_the_deepseek_example_pods_request_their_shm(tmp_path: Path) -> None:
    spec = ROOT / "examples" / "deepseek-v3-mi300x.kvp"
    r = CliRunner().invoke(main, ["emit", str(spec), "-o", str(tmp_path / "o"), "--target", "k8s",
                                  "--shm-size", "20GiB"])
    assert r.exit_code == 0, r.output
    manifests = sorted((tmp_path / "o").rglob("k8s-*.yaml"))
    assert len(manifests) == 3
    for m in manifests:
        for c in _containers(m.read_text()):
            assert c["resources"]["requests"]["memory"] == "20Gi"  # type: ignore[index]  # no host tier planned


# ------------------------------------------------------------------ the report's SLO table

def test_the_report_puts_each_slo_beside_its_prediction(tmp_path: Path) -> None:
    """On main the report's index had no SLO at all."""
    p = _plan(SLO)
    assert p.load is not None and p.load.itl is not None
    r = CliRunner().invoke(main, ["report", str(SLO), "-o", str(tmp_path / "rep")])
    assert r.exit_code == 0, r.output
    index = (tmp_path / "rep" / "service-slo" / "index.md").read_text()
    assert "| SLO | bound | predicted | met |" in index
    assert f"| ITL | <= 10 ms | {p.load.itl.human} (derived) | met |" in index
    unmet = _unmet(tmp_path)
    r = CliRunner().invoke(main, ["report", str(unmet), "-o", str(tmp_path / "rep2")])
    index = (tmp_path / "rep2" / "service-slo" / "index.md").read_text()
    assert re.search(r"\| rate \(goodput\) \| >= 20 req/s \| [\d.]+ req/s \(derived\) \| \*\*UNMET\*\* \|", index)
    assert "| ITL | <= 10 ms | no steady state | **UNMET** |" in index


# ------------------------------------------------------------------ hosts are not the scale-up domain

HOSTS = ROOT / "tests" / "data" / "k8s" / "hosts.kvp"
#: GPUs one host holds, as the sources cited in devices.toml's notes give them, written here rather than read from
#: the catalog: a GB200 NVL72 compute tray (2 superchips of 2 GPUs each), an HGX H200 server.
TRAY, HGX = 2 * 2, 8


@pytest.mark.parametrize("name, per_host", [("gb200-vllm", TRAY), ("gb200-sglang", TRAY), ("h200-dp2-vllm", HGX),
                                            ("h200-dp2-sglang", HGX)])
def test_a_layout_is_one_launcher_a_host_of_the_hosts_gpus_not_of_the_scale_up_domain(
        tmp_path: Path, name: str, per_host: int) -> None:
    """On main a GB200 TP8 was one launcher asking one host for 8 GPUs: a node (the NVLink domain) holds 72, and
    the launchers took it for a host; a tray holds 4."""
    r = CliRunner().invoke(main, ["emit", str(HOSTS), "-o", str(tmp_path), "--target", "vllm,sglang",
                                  "--scenario", name])
    assert r.exit_code == 0, r.output
    p = _plan(HOSTS, name)
    total = p.n_devices * p.scenario.replicas
    assert total == {TRAY: 8, HGX: 16}[per_host]
    hosts = total // per_host
    assert hosts == 2
    for engine in ("vllm", "sglang"):
        files = sorted((tmp_path / name).glob(f"{engine}-host*.sh"))
        assert [f.name for f in files] == [f"{engine}-host{i}.sh" for i in range(hosts)], (name, engine)
        assert [_gpus_asked(_argv(f.read_text())) for f in files] == [per_host] * hosts, (name, engine)
        for i, f in enumerate(files):
            assert (f"# runs on host {i} of {hosts} ({per_host} GPUs; a host holds {per_host}, catalog: "
                    f"{p.scenario.device.id} host)") in f.read_text()


def test_the_link_model_still_sees_one_nvlink_domain_over_the_gb200_trays() -> None:
    from kvplan.model import expected as ex

    p = _plan(HOSTS, "gb200-vllm")
    d = p.scenario.device
    assert (d.node, p.n_devices) == (72, 8)
    assert ex.spanned_link(d, 8, 8) == d.scaleup_link == "nvlink5"  # TP8 over two trays stays on NVLink


def _k8s(spec: Path, name: str, out: Path, *extra: str) -> tuple[list[dict[str, object]], str]:
    """The documents of the scenario's manifest, and its text."""
    r = CliRunner().invoke(main, ["emit", str(spec), "-o", str(out), "--target", "k8s", "--scenario", name, *extra])
    assert r.exit_code == 0, r.output
    (manifest,) = (out / name).glob("k8s-*.yaml")
    text = manifest.read_text()
    return [d for d in yaml.safe_load_all(text) if d], text


def test_k8s_runs_a_gb200_replica_as_two_pods_of_a_tray_each_unless_told_otherwise(tmp_path: Path) -> None:
    docs, text = _k8s(HOSTS, "gb200-vllm", tmp_path / "catalog")
    (lws,) = [d for d in docs if d["kind"] == "LeaderWorkerSet"]
    assert lws["spec"]["leaderWorkerTemplate"]["size"] == 8 // TRAY  # type: ignore[index]
    assert {c["resources"]["limits"]["nvidia.com/gpu"] for c in _containers(text)} == {TRAY}  # type: ignore[index]
    assert f"{TRAY} GPUs per node (catalog: gb200 host; --gpus-per-node overrides it)" in text
    docs, text = _k8s(HOSTS, "gb200-vllm", tmp_path / "given", "--gpus-per-node", "8")
    assert [d["kind"] for d in docs if d["kind"] in ("Deployment", "LeaderWorkerSet")] == ["Deployment"]
    assert {c["resources"]["limits"]["nvidia.com/gpu"] for c in _containers(text)} == {8}  # type: ignore[index]
    assert "8 GPUs per node (given, --gpus-per-node)" in text


NO_HOST = ROOT / "tests" / "data" / "k8s" / "no-host.kvp"


def test_a_device_without_a_host_size_is_split_by_its_node_and_says_it_is_assumed(tmp_path: Path) -> None:
    p = _plan(NO_HOST)
    assert p.n_devices * p.scenario.replicas == 16 and p.scenario.device.host is None
    r = CliRunner().invoke(main, ["emit", str(NO_HOST), "-o", str(tmp_path / "o"), "--target", "vllm"])
    assert r.exit_code == 0, r.output
    files = sorted((tmp_path / "o" / "d").glob("vllm-host*.sh"))
    assert [_gpus_asked(_argv(f.read_text())) for f in files] == [8, 8]
    assert all("a host holds 8, assumed: box node, its scale-up domain, as one host)" in f.read_text() for f in files)
    _, text = _k8s(NO_HOST, "d", tmp_path / "k8s")
    assert "8 GPUs per node (assumed, --gpus-per-node)" in text
