"""What a launcher needs beyond the pool to be safe to paste: the concurrency cap (never the mean), the warning when
a fixed-length workload pins the longest request to input + output exactly, and the hosts a layout larger than a
host takes (Device.host, else Device.node), each written its own launcher by the engine's writer (`scripts`)."""

from __future__ import annotations

import math
from typing import Callable, Optional, Sequence

from kvplan.base.records import record
from kvplan.catalog import Device
from kvplan.engines.common import EmittedFile, Flag, Launch, fmt_int, shell_script
from kvplan.model.pools.query import whole as round_whole
from kvplan.model.pools.vllm import default_max_seqs
from kvplan.model.scenario import Scenario
from kvplan.planner.plan import Plan

#: The headroom of the concurrency cap above the mean running count N̄: N̄ + 3·√N̄ (assumed: the in-flight count of
#: Poisson arrivals served in parallel is Poisson with mean N̄, whose mean + 3σ is about its 99.9th percentile).
CAP_SIGMAS = 3.0


@record
class Cap:
    """An engine's concurrency cap (vLLM --max-num-seqs, SGLang --max-running-requests, TensorRT-LLM
    max_batch_size) and the comment line that says which rule set it."""

    value: int
    line: str


def concurrency_cap(plan: Plan, held: int, flag: str, comment: str = "#", groups: int = 1) -> Cap:
    """The cap on the sequences the engine runs at once: what its pool holds at the plan's context (`held`),
    or, where smaller, the mean running count N̄ of a request workload plus CAP_SIGMAS·√N̄ headroom; a batch
    workload runs its fixed batch (no arrivals, no spread), a closed loop its clients (per replica). Never the
    mean itself: half the time more run. `groups` > 1: the cap of one of that many attention data-parallel ranks
    that each schedule their own share of the sequences (vLLM's --max-num-seqs is per data-parallel engine),
    `held` that rank's pool."""
    sc = plan.scenario
    ld = plan.load
    per = f" per attention data-parallel rank (1 of {groups})" if groups > 1 else ""
    pool = (f"the {fmt_int(held)} sequence{'s' if held != 1 else ''} of {sc.context:,} tokens the KV pool{per} "
            "holds (sharing and paging as planned)")
    if ld is None:
        batch = math.ceil(sc.batch / groups)
        said = f"the batch of {sc.batch}" + (f", {batch} on each of {groups} ranks" if groups > 1 else "")
        if held < batch:
            return Cap(max(1, held), f"{comment} {flag} {max(1, held)}: {pool}, fewer than {said}")
        return Cap(batch, f"{comment} {flag} {batch}: the spec's batch, a fixed number of sequences (no "
                          f"arrivals to spread it){f' ({said})' if groups > 1 else ''}, within {pool}")
    if sc.concurrency is not None:  # a closed loop: each client has at most one request in flight
        clients = math.ceil(sc.concurrency / max(1, sc.replicas) / groups)
        loop = (f"the closed loop's {clients:,} client{'s' if clients != 1 else ''}"
                + (f" per replica ({sc.concurrency:,} over {sc.replicas})" if sc.replicas > 1 else "")
                + (f" per attention data-parallel rank (over {groups})" if groups > 1 else "")
                + ", at most one request in flight each")
        most, why = default_max_seqs(sc.device.memory, sc.device.id)
        if clients > most and most <= held:  # the load model queues the clients above it (docs/service.md)
            return Cap(most, f"{comment} {flag} {most}: {why} (assumed), fewer than {loop}: the rest wait in the "
                             "engine's queue, as the plan's TTFT counts them")
        if clients <= held:
            return Cap(clients, f"{comment} {flag} {clients}: {loop}, within {pool}")
        return Cap(max(1, held), f"{comment} {flag} {max(1, held)}: {pool}, fewer than {loop}")
    if ld.running is None:  # past saturation: no steady state, no mean to add headroom to
        return Cap(max(1, held), f"{comment} {flag} {max(1, held)}: {pool} (the rate is past saturation: no mean "
                                 "running count)")
    mean = float(ld.running.value) / groups  # the ranks share the arrivals evenly: each a Poisson count of N̄/groups
    head = math.ceil(round_whole(mean + CAP_SIGMAS * math.sqrt(mean)))
    of = f" ({float(ld.running.value):,.1f} over {groups} ranks)" if groups > 1 else ""
    why = (f"the mean running count {mean:,.1f}{of} (derived, load model) + {CAP_SIGMAS:g}·√{mean:,.1f} headroom "
           f"(assumed: a Poisson count's mean + {CAP_SIGMAS:g}σ, about its 99.9th percentile) = {head:,}")
    if head <= held:
        return Cap(head, f"{comment} {flag} {head}: {why}, within {pool}")
    return Cap(max(1, held), f"{comment} {flag} {max(1, held)}: {pool}, fewer than {why}")


def pinned_length_note(sc: Scenario, flag: str) -> list[str]:
    """A warning when a fixed-length request workload pins the engine's longest sequence (`flag`) to input +
    output exactly (no workload.max_context): a request a token longer (a chat template, a longer prompt) is
    refused, so the note names the key that raises the bound."""
    if not sc.requests or sc.input_min is not None or sc.output_min is not None or "workload.max_context" in sc.spans:
        return []
    room = 1 << max(0, sc.context_bound - 1).bit_length()
    room = room if room > sc.context_bound else room * 2
    at = sc.spans.get("workload.input")
    return [f"{flag} {sc.context_bound} is input + output exactly{f' ({at})' if at else ''}: a request one token "
            f"longer (a chat template, a longer prompt) is refused; set the longest request the service admits in "
            f"the workload, e.g. `max_context = {room}`"]


#: The variable a multi-host launcher reads host 0's address from (the user sets it on every host).
HOST0_ADDR = "KVPLAN_HOST0_ADDR"
HOST0_NEED = (HOST0_ADDR, f"set {HOST0_ADDR} to host 0's address, reachable from every host "
                          f"(e.g. export {HOST0_ADDR}=10.0.0.1)")


@record
class Host:
    """One host of a layout larger than a host holds: its index, its GPUs, and the replicas it runs (0 where one
    replica spans several hosts: then `rank` is its node rank within the replica, else its first replica)."""

    index: int
    gpus: int
    replicas: int
    rank: int


@record
class Hosts:
    """How a plan too large for one host is written: `hosts` of one set; `sets` copies of that set (a replica
    that spans hosts: one set per replica, each its own deployment); `size` the GPUs a host holds, and `size_from`
    where that figure comes from (HostSize)."""

    hosts: tuple[Host, ...]
    sets: int
    size: int
    spans: bool                 # one replica spans its hosts (tensor × pipeline ranks over nodes)
    replicas: int               # every replica of the plan
    size_from: str

    def where(self, h: Host, runs: str, reads: bool = True) -> str:
        """The comment line that says which host runs the file; `reads`: it finds host 0 at HOST0_ADDR."""
        of = f"host {h.index} of {len(self.hosts)}"
        sets = (f"; run the set once per replica: {self.sets} sets on {self.sets * len(self.hosts)} hosts, "
                "each set its own server, a load balancer in front" if self.sets > 1 else "")
        return (f"# runs on {of} ({h.gpus} GPUs; a host holds {self.size}, {self.size_from}): {runs}"
                f"{f'; reads host 0 at ${HOST0_ADDR}' if reads and h.index else ''}{sets}")

    def span(self, h: Host) -> str:
        """The replicas a host runs, as words: `replica 2`, `replicas 0-1`."""
        last = h.rank + h.replicas - 1
        return f"replica {h.rank}" if last == h.rank else f"replicas {h.rank}-{last}"


@record
class HostSize:
    """The GPUs one host holds and where the figure comes from: the catalog's `host` (a server, a GB200 compute
    tray of 4), else the scale-up domain `node`, assumed to be one host (true of an HGX board, not of an NVL72
    rack); None: neither is known, and one host is taken to hold any layout."""

    gpus: int
    source: str


def host_size(device: Device) -> Optional[HostSize]:
    """The host size the launchers split a layout by (Device.host, else Device.node, else None)."""
    if device.host is not None:
        return HostSize(device.host, f"catalog: {device.id} host")
    if device.node is not None:
        return HostSize(device.node, f"assumed: {device.id} node, its scale-up domain, as one host")
    return None


def host_layout(plan: Plan) -> Optional[Hosts]:
    """The hosts a plan's GPUs take when they are more than one host holds (host_size), else None: a replica
    larger than a host spans the fewest hosts that split its ranks evenly (the engines run as many on every
    node); replicas that fit a host go as many to a host as it holds."""
    sc = plan.scenario
    size = host_size(sc.device)
    n, k = plan.n_devices, sc.replicas
    if size is None or n * k <= size.gpus:
        return None
    per_host = size.gpus
    if n > per_host:
        # the fewest hosts that split the replica evenly, at most a host's GPUs each (36 GPUs on hosts of 8: 6 of
        # 6; n hosts of one GPU always do)
        h = next(h for h in range(math.ceil(n / per_host), n + 1) if n % h == 0 and n // h <= per_host)
        return Hosts(tuple(Host(i, n // h, 0, i) for i in range(h)), k, per_host, True, k, size.source)
    per = per_host // n
    counts = [min(per, k - i) for i in range(0, k, per)]
    starts = [sum(counts[:i]) for i in range(len(counts))]
    return Hosts(tuple(Host(i, c * n, c, r) for i, (c, r) in enumerate(zip(counts, starts))), 1, per_host, False, k,
                 size.source)


def host_name(name: str, h: Host) -> str:
    """`vllm.sh` -> `vllm-host0.sh`."""
    stem, dot, ext = name.rpartition(".")
    return f"{stem}-host{h.index}{dot}{ext}"


def scripts(plan: Plan, name: str, head: Sequence[str], launch: Launch,
            on_host: Callable[[tuple[Flag, ...], Hosts, Host], list[Flag]], where: Callable[[Hosts, Host], str],
            reads: Callable[[Hosts], bool] = lambda hosts: True) -> list[EmittedFile]:
    """The launcher `name` for the plan: one script, or where its GPUs are more than a host holds one a host, each
    with the engine's host flags (`on_host`), the line that says which host runs it (`where`) after the header, and
    the check of host 0's address where the host reads it (`reads`)."""
    hosts = host_layout(plan)
    if hosts is None:
        return [EmittedFile(name, shell_script(head, launch.program, launch.flags, launch.env))]
    return [EmittedFile(host_name(name, h),
                        shell_script([head[0], where(hosts, h), *head[1:]], launch.program,
                                     on_host(launch.flags, hosts, h), launch.env,
                                     (HOST0_NEED,) if reads(hosts) else ()))
            for h in hosts.hosts]
