"""The expanded plan -> what acceptance needs: nodes per tested network, fabric, criteria."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cluster_plan.acceptance.fping import probes_for_loss
from cluster_plan.acceptance.storage import StorageSpec, storage_spec_from_expanded


class SpecError(ValueError):
    """The expanded plan lacks something acceptance needs; the message says what."""


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


def spec_from_expanded(
    expanded: Mapping[str, Any],
    nodes: list[str] | None = None,
    duration_s: float | None = None,
) -> AcceptanceSpec:
    """Read the expanded plan (docs/expanded-data.md); `nodes` limits the run to some hosts."""
    network_rules = (expanded.get("acceptance") or {}).get("network")
    if not isinstance(network_rules, dict):
        raise SpecError("the plan has no acceptance.network section")
    missing = [k for k in ("min_gbps", "max_latency_ms", "max_loss_pct") if k not in network_rules]
    if missing:
        raise SpecError(f"acceptance.network lacks {', '.join(missing)}")
    lab = expanded.get("lab") or {}
    criteria = Criteria(
        min_gbps=float(network_rules["min_gbps"]),
        max_latency_ms=float(network_rules["max_latency_ms"]),
        max_loss_pct=float(network_rules["max_loss_pct"]),
        duration_s=float(duration_s or network_rules.get("duration_s", 10)),
        rate_scale=float(lab.get("rate_scale", 1.0)) if isinstance(lab, dict) else 1.0,
    )
    hosts: Mapping[str, Any] = expanded.get("hosts") or {}
    unknown = sorted(set(nodes or ()) - set(hosts))
    if unknown:
        raise SpecError(f"no such host in the plan: {', '.join(unknown)}")
    chosen = [name for name in hosts if nodes is None or name in nodes]
    plan_networks: Mapping[str, Any] = expanded.get("networks") or {}
    names = network_rules.get("networks") or list(plan_networks)[:1]
    tested = []
    for net in names:
        if net not in plan_networks:
            raise SpecError(f"acceptance.network.networks names unknown network {net!r}")
        members = []
        for name in chosen:
            host = hosts[name]
            interface = (host.get("interfaces") or {}).get(net)
            if not interface:
                continue
            members.append(
                Node(
                    name=name,
                    address=str(interface["address"]),
                    access_switch=str(host.get("access_switch") or "?"),
                    aggregation_switch=host.get("aggregation_switch"),
                    link_gbps=float(host.get("link_gbps") or network_rules["min_gbps"]),
                )
            )
        tested.append(
            TestedNetwork(net, int(plan_networks[net].get("mtu") or 1500), tuple(members))
        )
    return AcceptanceSpec(
        cluster=str((expanded.get("cluster") or {}).get("name", "cluster")),
        networks=tuple(tested),
        fabric=fabric_from_topology(expanded.get("topology") or {}),
        criteria=criteria,
        storage=storage_spec_from_expanded(expanded),
    )


def fabric_from_topology(topology: Mapping[str, Any]) -> Fabric:
    """Access uplinks carry `uplink_gbps`; an aggregation switch has one per listed uplink."""
    capacity: dict[str, float] = {}
    for name, switch in (topology.get("access") or {}).items():
        if switch.get("uplink_gbps"):
            capacity[name] = float(switch["uplink_gbps"])
    for name, switch in (topology.get("aggregation") or {}).items():
        if switch.get("uplink_gbps"):
            capacity[name] = float(switch["uplink_gbps"]) * max(1, len(switch.get("uplinks") or []))
    return Fabric(capacity)
