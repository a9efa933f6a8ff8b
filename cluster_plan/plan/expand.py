"""Plan + lock -> the expanded cluster: every host with its addresses, place and facts.

Pure: no I/O. The shape is the contract in cluster_plan/plan/contract.py (docs/expanded-data.md).
The plan must have been validated and its defaults filled (cluster_plan.plan.defaults), which is
what validate gives to its callers; expand decides no default of its own.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any, cast

from cluster_plan.plan.catalog import load_catalog
from cluster_plan.plan.contract import (
    Accelerators,
    Disk,
    ExpandedPlan,
    Host,
    Interface,
    Network,
    Power,
    Rack,
    Software,
    Topology,
)
from cluster_plan.plan.inventory_groups import group_name, memberships
from cluster_plan.plan.networks import network_space
from cluster_plan.plan.nodes import Node
from cluster_plan.plan.software import host_software
from cluster_plan.plan.topology import normalize, rack_switches, switch_path

__all__ = ["ExpandedPlan", "expand", "group_name"]

# Keys of the plan that are not the cluster's: Ansible's constructed-inventory options, the
# plugin marker, suppressions of findings, and `x-` blocks that only hold YAML anchors.
_NOT_CLUSTER = {"plugin", "version", "suppress", "compose", "groups", "keyed_groups", "strict",
                "leading_separator", "use_extra_vars"}  # fmt: skip


def _networks(plan: dict[str, Any]) -> dict[str, Network]:
    out: dict[str, Network] = {}
    for name, spec in plan["networks"].items():
        space = network_space(name, spec)
        out[name] = {
            "cidr": str(space.network),
            "prefixlen": space.network.prefixlen,
            "netmask": str(space.network.netmask),
            "gateway": spec["gateway"],
            "dns": list(spec["dns"]),
            "ntp": list(spec["ntp"]),
            "mtu": spec["mtu"],
            "vlan": spec["vlan"],
            "reserved": copy.deepcopy(spec["reserved"]),
            "description": spec["description"],
        }
    return out


def _nic_devices(profile: dict[str, Any]) -> dict[str, str]:
    devices: dict[str, str] = {}
    for nic in profile["nics"]:
        for net in nic.get("networks", []):
            devices.setdefault(net, nic["name"])
    return devices


def _accelerators(profile: dict[str, Any]) -> Accelerators | None:
    accel = profile["accelerators"]
    if not accel:
        return None
    entry = load_catalog()[accel["model"]]
    return {
        "model": accel["model"],
        "count": accel["count"],
        "vendor": entry["vendor"],
        "kind": "gpu" if entry["vendor"] == "nvidia" else "accelerator",
        "gres_type": entry["gres_type"],
        "driver_branch": accel["driver_branch"],
        "nvswitch": accel["nvswitch"],
        "catalog": copy.deepcopy(entry),  # the catalog is cached; callers may change this
    }


def _racks(plan: dict[str, Any], served: dict[str, list[str]]) -> dict[str, Rack]:
    declared = plan.get("racks") or {r: {"row": None, "description": ""} for r in served}
    return {
        rack: cast(Rack, {"access_switch": served.get(rack, [None])[0], **spec})
        for rack, spec in declared.items()
    }


class _Expansion:
    """The per-plan tables the hosts are built from."""

    def __init__(self, plan: dict[str, Any], lock: dict[str, Any], nodes: list[Node]) -> None:
        self.plan = plan
        self.topo = cast(Topology, normalize(plan["topology"]))
        self.served = rack_switches(normalize(plan["topology"]))
        self.networks = _networks(plan)
        self.mgmt: str = plan["cluster"]["management_network"]
        self.lock_hosts = {net: data["hosts"] for net, data in lock["networks"].items()}
        profiles = plan["hardware"]
        self.devices = {name: _nic_devices(p) for name, p in profiles.items()}
        self.accelerators = {name: _accelerators(p) for name, p in profiles.items()}
        tree = normalize(plan["topology"])
        self.paths = {sw: switch_path(tree, sw) for sw in self.topo["access"]}
        self.software = host_software(plan, nodes)
        self.datasets_by_rack: dict[str, list[str]] = {}
        for name, dataset in ((plan["scheduler"] or {}).get("datasets") or {}).items():
            for rack in dataset["racks"]:
                self.datasets_by_rack.setdefault(rack, []).append(name)

    def interfaces(self, node: Node) -> dict[str, Interface]:
        out: dict[str, Interface] = {}
        for net in node.networks:
            spec = self.networks[net]
            out[net] = {
                "device": self.devices[node.hardware].get(net, net),
                "address": self.lock_hosts[net][node.name],
                "prefixlen": spec["prefixlen"],
                "cidr": spec["cidr"],
                "netmask": spec["netmask"],
                "gateway": spec["gateway"],
                "mtu": spec["mtu"],
                "vlan": spec["vlan"],
            }
        return out

    def host(self, node: Node) -> Host:
        profile = self.plan["hardware"][node.hardware]
        access = self.served[node.rack][0] if node.rack in self.served else None
        interfaces = self.interfaces(node)
        path = self.paths[access] if access else None
        mgmt = interfaces.get(self.mgmt) or next(iter(interfaces.values()))
        return {
            "hostname": node.name,
            "fqdn": f"{node.name}.{self.plan['cluster']['domain']}",
            "node_group": node.group,
            "index": node.index,
            "rack": node.rack,
            "access_switch": access,
            "aggregation_switch": path["aggregation_switch"] if path else None,
            "core_switches": list(path["core_switches"]) if path else [],
            "link_gbps": self.topo["access"][access]["link_gbps"] if access else None,
            "hardware_profile": node.hardware,
            "cpu_cores": profile["cpu_cores"],
            "memory_gb": profile["memory_gb"],
            "disks": cast(list[Disk], copy.deepcopy([*profile["disks"], *node.extra_disks])),
            "accelerators": copy.deepcopy(self.accelerators[node.hardware]),
            "roles": list(node.roles),
            "pool": node.pool,
            "datasets": list(self.datasets_by_rack.get(node.rack or "", [])),
            "interfaces": interfaces,
            "address": mgmt["address"],
            "software": self.software.get(node.name, {}),
        }


def expand(plan: dict[str, Any], nodes: Sequence[Node], lock: dict[str, Any]) -> ExpandedPlan:
    """The expanded cluster. ``plan`` must have passed validation with its defaults filled
    (Validation.filled) and ``lock`` be current."""
    tables = _Expansion(plan, lock, list(nodes))
    hosts: dict[str, Host] = {}
    groups: dict[str, list[str]] = {}
    for node in nodes:
        host = tables.host(node)
        hosts[node.name] = host
        for group, _ in memberships(node, plan, host["access_switch"], host["aggregation_switch"]):
            groups.setdefault(group, []).append(node.name)
    known = ExpandedPlan.__annotations__
    extra = [k for k in plan if k not in _NOT_CLUSTER and not k.startswith("x-") and k not in known]
    if extra:  # the schema admits no other key; a new section must join the contract first
        raise ValueError(f"plan sections outside the contract: {', '.join(sorted(extra))}")
    return {
        "cluster": copy.deepcopy(plan["cluster"]),
        "networks": tables.networks,
        "topology": tables.topo,
        "racks": _racks(plan, tables.served),
        "power": cast(Power, copy.deepcopy(plan["power"])),
        "hardware": copy.deepcopy(plan["hardware"]),
        "scheduler": copy.deepcopy(plan["scheduler"]),
        "teams": copy.deepcopy(plan["teams"]),
        "node_groups": {
            name: {k: copy.deepcopy(v) for k, v in g.items() if k != "nodes"}
            for name, g in plan["node_groups"].items()
        },
        "storage": copy.deepcopy(plan["storage"]),
        "backups": copy.deepcopy(plan["backups"]),
        "packages": copy.deepcopy(plan["packages"]),
        "access": copy.deepcopy(plan["access"]),
        "acceptance": copy.deepcopy(plan["acceptance"]),
        "lab": copy.deepcopy(plan["lab"]),
        "monitoring": copy.deepcopy(plan.get("monitoring")),
        "software": cast(Software | None, copy.deepcopy(plan.get("software"))),
        "hosts": hosts,
        "groups": {name: sorted(members) for name, members in sorted(groups.items())},
    }
