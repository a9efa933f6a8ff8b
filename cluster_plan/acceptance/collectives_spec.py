"""What collectives and training acceptance runs for a plan: each pool that the plan gives torch
or MPI, its backend (gloo, NCCL, MPI), its nodes, their addresses on the job network and the
bus-bandwidth floor the links they cross allow (docs/collectives.md). Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cluster_plan.collectives.sweep import message_sizes
from cluster_plan.slurm.policy import slurm_name

PROGRAM = "/usr/local/lib/cluster-plan/cluster-plan-collectives.pyz"
SMALLEST = 4096
TORCH_PACKAGES = {"python3-torch", "torch"}
MPI_PACKAGES = {"python3-mpi4py", "mpi4py"}


@dataclass(frozen=True)
class PoolRun:
    pool: str
    partition: str
    nodes: tuple[str, ...]
    backend: str  # gloo (CPU torch), nccl (CUDA torch), mpi (mpi4py)
    procs_per_node: int  # ranks per node: one per GPU with NCCL, else one
    addresses: tuple[str, ...]  # each node's address on the job network
    link_gbps: float  # the slowest link the traffic crosses, plan Gb/s
    floor_GBps: float  # inter-node bus bandwidth floor, plan GB/s
    intra_floor_GBps: float | None  # within one node (NCCL on 8-GPU boards), GB/s
    python: str  # the build's interpreter
    module: str | None  # the torch build's Lmod module (the training job loads it)


@dataclass(frozen=True)
class CollectivesSpec:
    submit_host: str
    network: str
    cidr: str
    pools: tuple[PoolRun, ...]
    skipped: tuple[tuple[str, str], ...]  # (pool, why) of pools with software not tested
    sizes: tuple[int, ...]
    rate_scale: float
    min_link_fraction: float
    training_steps: int
    timeout_s: int
    program: str = PROGRAM


def _pool_hosts(hosts: Mapping[str, Any], chosen: Sequence[str] | None) -> dict[str, list[str]]:
    pools: dict[str, list[str]] = {}
    for name, host in hosts.items():
        compute = host.get("pool") and "slurm_compute" in (host.get("roles") or [])
        if compute and (chosen is None or name in chosen):
            pools.setdefault(str(host["pool"]), []).append(name)
    return pools


def _backend(builds: list[Mapping[str, Any]]) -> tuple[str, Mapping[str, Any]] | None:
    """The backend a host's builds give: torch (nccl for a CUDA build, else gloo), else MPI."""
    for build in builds:
        if TORCH_PACKAGES & set(build.get("packages") or []):
            return ("nccl" if build.get("build") == "cuda" else "gloo"), build
    for build in builds:
        if MPI_PACKAGES & set(build.get("packages") or []):
            return "mpi", build
    return None


def _partition(expanded: Mapping[str, Any], pool: str) -> str | None:
    classes = (expanded.get("scheduler") or {}).get("workload_classes") or {}
    return next((slurm_name(n) for n, c in classes.items() if c.get("pool") == pool), None)


def _link_gbps(expanded: Mapping[str, Any], nodes: Sequence[str]) -> float:
    hosts = expanded["hosts"]
    links = [float(hosts[n].get("link_gbps") or 0) for n in nodes]
    switches = {hosts[n].get("access_switch") for n in nodes}
    if len(switches) > 1:  # the ring crosses the access uplinks
        access = (expanded.get("topology") or {}).get("access") or {}
        links += [float(access[s]["uplink_gbps"]) for s in switches
                  if s in access and access[s].get("uplink_gbps")]  # fmt: skip
    return min(link for link in links if link > 0) if any(links) else 0.0


def _intra_floor(host: Mapping[str, Any], override: float | None) -> float | None:
    accelerators = host.get("accelerators") or {}
    if override is not None:
        return float(override)
    floor = (accelerators.get("catalog") or {}).get("allreduce_busbw_GBps") or {}
    if floor and accelerators.get("count") == floor.get("gpus"):
        return float(floor["floor"])
    return None


def _untestable(
    expanded: Mapping[str, Any], nodes: list[str], network: str, chosen: list[Any]
) -> str | None:
    """Why a pool with software is not tested, or None."""
    hosts = expanded["hosts"]
    if not all(chosen) or len({c[0] for c in chosen if c}) > 1:
        return "its nodes do not all get the same torch or MPI build"
    if len(nodes) < 2:
        return "one node: nothing crosses the network"
    off = [n for n in nodes if network not in (hosts[n].get("interfaces") or {})]
    if off:
        return f"{', '.join(off)} not on the job network {network}"
    return None


def _pool_run(
    expanded: Mapping[str, Any], pool: str, nodes: list[str], network: str, rules: Mapping[str, Any]
) -> PoolRun | str:
    """The pool's run, or why it is not tested ("" for a pool without torch or MPI)."""
    hosts = expanded["hosts"]
    chosen = [_backend(list((hosts[n].get("software") or {}).values())) for n in nodes]
    if not any(chosen):
        return ""
    partition = _partition(expanded, pool)
    why = _untestable(expanded, nodes, network, chosen)
    if why or partition is None or chosen[0] is None:
        return why or "no workload class runs on it"
    backend, build = chosen[0]
    first = hosts[nodes[0]]
    gpus = int((first.get("accelerators") or {}).get("count") or 0)
    link = _link_gbps(expanded, nodes)
    nccl = backend == "nccl"
    prefix = build.get("prefix")
    return PoolRun(
        pool=pool,
        partition=partition,
        nodes=tuple(nodes),
        backend=backend,
        procs_per_node=gpus if nccl and gpus else 1,
        addresses=tuple(str(hosts[n]["interfaces"][network]["address"]) for n in nodes),
        link_gbps=link,
        floor_GBps=round(link / 8 * float(rules.get("min_link_fraction", 0.8)), 6),
        intra_floor_GBps=_intra_floor(first, rules.get("intra_node_min_busbw_GBps"))
        if nccl
        else None,
        python=f"{prefix}/bin/python3" if prefix else "python3",
        module=build.get("module"),
    )


def _applies(expanded: Mapping[str, Any]) -> tuple[str, str] | None:
    """(first Slurm controller, job network) for a Slurm plan with a tested network."""
    scheduler = expanded.get("scheduler") or {}
    controllers = list((expanded.get("groups") or {}).get("slurm_controller") or [])
    network_rules = (expanded.get("acceptance") or {}).get("network") or {}
    if scheduler.get("type") != "slurm" or not controllers or not network_rules.get("networks"):
        return None
    return str(controllers[0]), str(network_rules["networks"][0])


def collectives_spec_from_expanded(
    expanded: Mapping[str, Any], nodes: Sequence[str] | None = None
) -> CollectivesSpec | None:
    """What the phase runs, or None for a plan it does not apply to (no Slurm, no software)."""
    applies = _applies(expanded)
    if applies is None:
        return None
    submit_host, network = applies
    rules = (expanded.get("acceptance") or {}).get("collectives") or {}
    runs, skipped = [], []
    for pool, members in sorted(_pool_hosts(expanded["hosts"], nodes).items()):
        run = _pool_run(expanded, pool, members, network, rules)
        if isinstance(run, PoolRun):
            runs.append(run)
        elif run:
            skipped.append((pool, run))
    if not runs and not skipped:
        return None
    lab = expanded.get("lab")
    return CollectivesSpec(
        submit_host=submit_host,
        network=network,
        cidr=str(expanded["networks"][network]["cidr"]),
        pools=tuple(runs),
        skipped=tuple(skipped),
        sizes=tuple(message_sizes(SMALLEST, int(rules.get("max_message_mib", 64)) << 20)),
        rate_scale=float(lab["rate_scale"]) if lab else 1.0,
        min_link_fraction=float(rules.get("min_link_fraction", 0.8)),
        training_steps=int(rules.get("training_steps", 60)),
        timeout_s=int(rules.get("timeout_s", 600)),
    )
