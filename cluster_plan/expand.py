"""Plan + lock -> the expanded cluster: every host with its addresses, place and facts.

Pure: no I/O. The shape is documented in docs/expanded-data.md.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Sequence
from functools import cache
from typing import Any

from cluster_plan.catalog import load_catalog, nvswitch_default
from cluster_plan.networks import network_space
from cluster_plan.nodes import Node
from cluster_plan.topology import normalize, rack_switches, switch_path

DEFAULT_MTU = 1500
_UNSAFE = re.compile(r"[^A-Za-z0-9_]")


@cache
def group_name(*parts: str) -> str:
    """An Ansible-safe group name."""
    return _UNSAFE.sub("_", "_".join(parts))


def management_network(plan: dict[str, Any]) -> str:
    return str(plan["cluster"].get("management_network") or next(iter(plan["networks"])))


def _networks(plan: dict[str, Any]) -> dict[str, dict[str, Any]]:
    out = {}
    for name, spec in plan["networks"].items():
        space = network_space(name, spec)
        out[name] = {
            "cidr": str(space.network),
            "prefixlen": space.network.prefixlen,
            "netmask": str(space.network.netmask),
            "gateway": spec.get("gateway"),
            "dns": list(spec.get("dns", [])),
            "ntp": list(spec.get("ntp", [])),
            "mtu": spec.get("mtu", DEFAULT_MTU),
            "vlan": spec.get("vlan"),
            "description": spec.get("description", ""),
        }
    return out


def _nic_devices(profile: dict[str, Any]) -> dict[str, str]:
    devices: dict[str, str] = {}
    for nic in profile.get("nics", []):
        for net in nic.get("networks", []):
            devices.setdefault(net, nic["name"])
    return devices


def _accelerators(profile: dict[str, Any]) -> dict[str, Any] | None:
    accel = profile.get("accelerators")
    if not accel:
        return None
    entry = load_catalog()[accel["model"]]
    return {
        "model": accel["model"],
        "count": accel["count"],
        "vendor": entry["vendor"],
        "kind": "gpu" if entry["vendor"] == "nvidia" else "accelerator",
        "gres_type": entry["gres_type"],
        "driver_branch": accel.get("driver_branch"),
        "nvswitch": bool(accel.get("nvswitch", nvswitch_default(accel["model"], accel["count"]))),
        "catalog": copy.deepcopy(entry),  # the catalog is cached; callers may change this
    }


def expand(plan: dict[str, Any], nodes: Sequence[Node], lock: dict[str, Any]) -> dict[str, Any]:
    """The expanded cluster. ``plan`` must have passed validation and ``lock`` be current."""
    topo = normalize(plan["topology"])
    served = rack_switches(topo)
    networks = _networks(plan)
    mgmt = management_network(plan)
    domain = plan["cluster"]["domain"]
    scheduler = copy.deepcopy(plan.get("scheduler", {}))
    datasets_by_rack: dict[str, list[str]] = {}
    for name, dataset in scheduler.get("datasets", {}).items():
        for rack in dataset["racks"]:
            datasets_by_rack.setdefault(rack, []).append(name)
    racks = {
        rack: {"access_switch": served.get(rack, [None])[0], **spec}
        for rack, spec in (plan.get("racks") or {r: {} for r in served}).items()
    }
    lock_hosts = {net: data["hosts"] for net, data in lock["networks"].items()}
    profiles = plan["hardware"]
    devices: dict[str, dict[str, str]] = {n: _nic_devices(p) for n, p in profiles.items()}
    accelerators = {name: _accelerators(p) for name, p in profiles.items()}
    paths = {sw: switch_path(topo, sw) for sw in topo["access"]}
    hosts: dict[str, dict[str, Any]] = {}
    groups: dict[str, list[str]] = {}

    def member(group: str, host: str) -> None:
        groups.setdefault(group, []).append(host)

    for node in nodes:
        profile = profiles[node.hardware]
        access = served[node.rack][0] if node.rack in served else None
        interfaces = {}
        for net in node.networks:
            spec = networks[net]
            interfaces[net] = {
                "device": devices[node.hardware].get(net, net),
                "address": lock_hosts[net][node.name],
                "prefixlen": spec["prefixlen"],
                "cidr": spec["cidr"],
                "netmask": spec["netmask"],
                "gateway": spec["gateway"],
                "mtu": spec["mtu"],
                "vlan": spec["vlan"],
            }
        accel = accelerators[node.hardware]
        host = {
            "hostname": node.name,
            "fqdn": f"{node.name}.{domain}",
            "node_group": node.group,
            "index": node.index,
            "rack": node.rack,
            **(
                paths[access]
                if access
                else {"access_switch": None, "aggregation_switch": None, "core_switches": []}
            ),
            "link_gbps": topo["access"][access]["link_gbps"] if access else None,
            "hardware_profile": node.hardware,
            "cpu_cores": profile["cpu_cores"],
            "memory_gb": profile["memory_gb"],
            "disks": [*profile.get("disks", []), *node.extra_disks],
            "accelerators": accel,
            "roles": list(node.roles),
            "pool": node.pool,
            "datasets": list(datasets_by_rack.get(node.rack or "", [])),
            "interfaces": interfaces,
            "address": interfaces[mgmt]["address"]
            if mgmt in interfaces
            else next(iter(interfaces.values()))["address"],
        }
        hosts[node.name] = host
        for role in node.roles:
            member(role, node.name)
        member(group_name("nodes", node.group), node.name)
        member(group_name("hw", node.hardware), node.name)
        if node.rack:
            member(group_name("rack", node.rack), node.name)
        if access:
            member(group_name("access", access), node.name)
            member(group_name("aggregation", host["aggregation_switch"]), node.name)
        if node.pool:
            member(group_name("pool", node.pool), node.name)
        if accel:
            prefix = "gpu" if accel["kind"] == "gpu" else "accel"
            member(group_name(prefix, accel["gres_type"]), node.name)
            member("gpu" if accel["kind"] == "gpu" else "accelerator", node.name)
    cluster_wide = {
        k: copy.deepcopy(v)
        for k, v in plan.items()
        if k
        not in (
            "plugin",
            "node_groups",
            "networks",
            "topology",
            "racks",
            "scheduler",
            "suppress",
            "compose",
            "groups",
            "keyed_groups",
            "strict",
            "leading_separator",
            "use_extra_vars",
        )
    }
    return {
        **cluster_wide,
        "cluster": {**plan["cluster"], "management_network": mgmt},
        "networks": networks,
        "topology": topo,
        "racks": racks,
        "scheduler": scheduler,
        "node_groups": {
            name: {k: v for k, v in g.items() if k != "nodes"}
            for name, g in plan["node_groups"].items()
        },
        "hosts": hosts,
        "groups": {name: sorted(members) for name, members in sorted(groups.items())},
    }
