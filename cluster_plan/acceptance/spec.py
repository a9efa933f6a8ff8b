"""The expanded plan -> what acceptance needs: nodes per tested network, fabric, criteria."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cluster_plan.acceptance.collectives_spec import CollectivesSpec, collectives_spec_from_expanded
from cluster_plan.acceptance.fping import probes_for_loss
from cluster_plan.acceptance.k8s_training import KubernetesTraining, k8s_training_spec
from cluster_plan.acceptance.storage import StorageSpec, storage_spec_from_expanded
from cluster_plan.cli.policy import CommandError, Exit
from cluster_plan.plan.contract import ExpandedPlan, Host, NetworkAcceptance, Topology


class SpecError(CommandError):
    """The expanded plan lacks something acceptance needs (a failed check, exit 1), or the
    command asked for something the plan does not have (a usage error); the message says
    what."""


@dataclass(frozen=True)
class Node:
    name: str
    address: str
    access_switch: str
    aggregation_switch: str | None
    link_gbps: float


@dataclass(frozen=True)
class Fabric:
    """Uplink capacity per switch, in plan Gb/s; a switch missing here is not a bottleneck."""

    uplink_gbps: Mapping[str, float]


@dataclass(frozen=True)
class Criteria:
    min_gbps: float
    max_latency_ms: float
    max_loss_pct: float
    duration_s: float
    rate_scale: float = 1.0  # the lab runs links at plan speed x rate_scale
    outlier_fraction: float = 0.75  # a pair below this share of the median is an outlier

    @property
    def probes(self) -> int:
        return probes_for_loss(self.max_loss_pct)

    def plan_gbps(self, measured_bps: float) -> float:
        """A measurement in plan units: lab links are scaled down, so scale the reading up."""
        return measured_bps / 1e9 / self.rate_scale


@dataclass(frozen=True)
class TestedNetwork:
    name: str
    mtu: int
    nodes: tuple[Node, ...]


@dataclass(frozen=True)
class AcceptanceSpec:
    cluster: str
    networks: tuple[TestedNetwork, ...]
    fabric: Fabric
    criteria: Criteria
    storage: StorageSpec | None = None  # None: the plan has no Ceph
    collectives: CollectivesSpec | None = None  # None: no Slurm pool with torch or MPI
    # a Kubernetes plan's training Job; a reason where it cannot cross the network
    kubernetes_training: KubernetesTraining | str | None = None


def spec_from_expanded(
    expanded: ExpandedPlan,
    nodes: list[str] | None = None,
    duration_s: float | None = None,
) -> AcceptanceSpec:
    """Read the expanded plan (docs/expanded-data.md); `nodes` limits the run to some hosts."""
    network_rules = expanded["acceptance"]["network"]
    if network_rules is None:
        raise SpecError("the plan has no acceptance.network section")
    criteria = _criteria(network_rules, expanded["lab"], duration_s)
    hosts = expanded["hosts"]
    unknown = sorted(set(nodes or ()) - set(hosts))
    if unknown:
        raise SpecError(f"no such host in the plan: {', '.join(unknown)}", exit=Exit.USAGE)
    chosen = [name for name in hosts if nodes is None or name in nodes]
    plan_networks = expanded["networks"]
    tested = []
    for net in network_rules["networks"]:  # the plan's, or every network but management
        if net not in plan_networks:
            raise SpecError(f"acceptance.network.networks names unknown network {net!r}")
        members = [_node(name, hosts[name], net, criteria.min_gbps) for name in chosen]
        present = tuple(member for member in members if member is not None)
        tested.append(TestedNetwork(net, int(plan_networks[net]["mtu"]), present))
    return AcceptanceSpec(
        cluster=str(expanded["cluster"]["name"]),
        networks=tuple(tested),
        fabric=fabric_from_topology(expanded["topology"]),
        criteria=criteria,
        storage=storage_spec_from_expanded(expanded),
        collectives=collectives_spec_from_expanded(expanded, nodes),
        kubernetes_training=k8s_training_spec(expanded, nodes),
    )


def _criteria(network_rules: NetworkAcceptance, lab: Any, duration_s: float | None) -> Criteria:
    """The plan's network thresholds; refuses a plan without them."""
    missing = [k for k in ("min_gbps", "max_latency_ms", "max_loss_pct") if k not in network_rules]
    if missing:
        raise SpecError(f"acceptance.network lacks {', '.join(missing)}")
    return Criteria(
        min_gbps=float(network_rules["min_gbps"]),
        max_latency_ms=float(network_rules["max_latency_ms"]),
        max_loss_pct=float(network_rules["max_loss_pct"]),
        duration_s=float(duration_s or network_rules["duration_s"]),
        # a lab plan's links run scaled down; a real cluster's run at plan speed
        rate_scale=float(lab["rate_scale"]) if lab is not None else 1.0,
        outlier_fraction=1 - float(network_rules["outlier_pct"]) / 100,
    )


def _node(name: str, host: Host, net: str, min_gbps: float) -> Node | None:
    """The host as a member of the tested network; None when it has no interface there."""
    interface = host["interfaces"].get(net)
    if not interface:
        return None
    return Node(
        name=name,
        address=str(interface["address"]),
        access_switch=str(host["access_switch"] or "?"),
        aggregation_switch=host["aggregation_switch"],
        link_gbps=float(host["link_gbps"] or min_gbps),
    )


def fabric_from_topology(topology: Topology) -> Fabric:
    """Access uplinks carry `uplink_gbps`; an aggregation switch has one per listed uplink."""
    capacity: dict[str, float] = {}
    for name, switch in topology["access"].items():
        if switch["uplink_gbps"]:
            capacity[name] = float(switch["uplink_gbps"])
    for name, agg in topology["aggregation"].items():
        if agg["uplink_gbps"]:
            capacity[name] = float(agg["uplink_gbps"]) * max(1, len(agg["uplinks"]))
    return Fabric(capacity)
