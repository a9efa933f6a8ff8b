"""Expansion of the lab plan, checked against facts worked out here from the plan text and the
rules in docs/expanded-data.md (not against a copy of the output)."""

from __future__ import annotations

import copy
import ipaddress
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from cluster_plan.api import load_expanded
from cluster_plan.plan.allocate import allocate_addresses
from cluster_plan.plan.defaults import with_defaults
from cluster_plan.plan.expand import expand, group_name
from cluster_plan.plan.nodes import iter_nodes
from cluster_plan.plan.validate import validate_text

ROOT = Path(__file__).resolve().parents[2]
LAB = ROOT / "inventory" / "lab" / "cluster.yml"
BASE = ROOT / "tests" / "plans" / "base.yml"


@pytest.fixture(scope="module")
def plan() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(LAB.read_text())
    return data


@pytest.fixture(scope="module")
def lock() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(LAB.with_name("cluster.lock.json").read_text())
    return data


@pytest.fixture(scope="module")
def expanded() -> dict[str, Any]:
    return load_expanded(LAB)


def expected_hosts(plan: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(host, node group, rack): groups in plan order, n from 1, racks dealt in turn."""
    out = []
    for group, spec in plan["node_groups"].items():
        for i in range(spec["count"]):
            rack = spec["racks"][i % len(spec["racks"])]
            out.append((spec["hostname"].format(n=i + 1), group, rack))
    return out


def test_hosts_in_plan_order_with_their_racks(plan, expanded):
    hosts = expected_hosts(plan)
    assert list(expanded["hosts"]) == [h for h, _, _ in hosts]
    assert [h for h, _, _ in hosts] == [
        "head01",
        "gpu01",
        "gpu02",
        "infer01",
        "cpu01",
        "stor01",
        "stor02",
        "stor03",
        "osd01",
    ]
    for name, group, rack in hosts:
        host = expanded["hosts"][name]
        assert (host["hostname"], host["node_group"], host["rack"]) == (name, group, rack)
        assert host["fqdn"] == f"{name}.lab.internal"
    # the two GPU nodes and the Ceph nodes are spread over both racks
    assert {expanded["hosts"][h]["rack"] for h in ("gpu01", "gpu02")} == {"r1", "r2"}
    assert {expanded["hosts"][h]["rack"] for h in ("stor01", "stor02", "stor03")} == {"r1", "r2"}


def test_switch_path_of_each_host(plan, expanded):
    access_of_rack = {
        rack: name for name, sw in plan["topology"]["access"].items() for rack in sw["racks"]
    }
    for name, host in expanded["hosts"].items():
        access = access_of_rack[host["rack"]]
        switch = plan["topology"]["access"][access]
        assert host["access_switch"] == access, name
        assert host["aggregation_switch"] == switch["uplink"] == "agg1"
        assert host["core_switches"] == plan["topology"]["aggregation"]["agg1"]["uplinks"]
        assert host["link_gbps"] == switch["link_gbps"] == 10


def test_addresses_come_from_the_lock_and_fit_their_networks(plan, lock, expanded):
    for name, host in expanded["hosts"].items():
        group = plan["node_groups"][host["node_group"]]
        # a group's `networks` limits them (the OSD-only group is off the compute network)
        assert set(host["interfaces"]) == set(group.get("networks") or plan["networks"])
        for net, iface in host["interfaces"].items():
            spec = plan["networks"][net]
            network = ipaddress.ip_network(spec["cidr"])
            address = ipaddress.ip_address(iface["address"])
            assert iface["address"] == lock["networks"][net]["hosts"][name]
            assert address in network and address not in (
                network.network_address,
                network.broadcast_address,
            )
            assert (iface["cidr"], iface["prefixlen"], iface["netmask"]) == (
                spec["cidr"],
                network.prefixlen,
                str(network.netmask),
            )
            assert iface["mtu"] == spec.get("mtu", 1500)
            assert iface["gateway"] == spec.get("gateway")
            assert iface["device"] == net  # no NICs in the lab profiles: device named as net
        # the first network is the management network, whose address is ansible_host
        assert host["address"] == host["interfaces"]["mgmt"]["address"]
    for net in plan["networks"]:
        addresses = [
            h["interfaces"][net]["address"]
            for h in expanded["hosts"].values()
            if net in h["interfaces"]
        ]
        assert len(set(addresses)) == len(addresses), net
    # nothing in mgmt's reserved range 10.40.0.1-10.40.0.9 (gateway and DNS live there)
    for host in expanded["hosts"].values():
        assert int(host["address"].rsplit(".", 1)[1]) >= 10


def test_hardware_accelerators_roles_pools(plan, expanded):
    for host in expanded["hosts"].values():
        group = plan["node_groups"][host["node_group"]]
        profile = plan["hardware"][group["hardware"]]
        assert host["hardware_profile"] == group["hardware"]
        assert (host["cpu_cores"], host["memory_gb"]) == (
            profile["cpu_cores"],
            profile["memory_gb"],
        )
        assert host["disks"] == profile["disks"]
        assert host["roles"] == group["roles"]
        assert host["pool"] == group.get("pool")
    gpu = expanded["hosts"]["gpu01"]["accelerators"]
    assert (gpu["model"], gpu["count"], gpu["vendor"], gpu["kind"], gpu["gres_type"]) == (
        "H100-PCIE-80GB",
        2,
        "nvidia",
        "gpu",
        "h100",
    )
    assert gpu["catalog"]["memory_gb"] == 80
    assert gpu["catalog"]["architecture"] == "hopper"
    tpu = expanded["hosts"]["infer01"]["accelerators"]
    assert (tpu["model"], tpu["count"], tpu["vendor"], tpu["kind"]) == (
        "tpu",
        4,
        "generic",
        "accelerator",
    )
    for name in ("head01", "cpu01", "stor01"):
        assert expanded["hosts"][name]["accelerators"] is None
    assert [d["name"] for d in expanded["hosts"]["gpu02"]["disks"]] == ["os", "scratch"]


def test_datasets_follow_racks(expanded):
    for host in expanded["hosts"].values():
        assert host["datasets"] == (["imagenet"] if host["rack"] == "r1" else [])


def test_groups(plan, expanded):
    hosts = expanded["hosts"]
    groups = expanded["groups"]

    def members(pred):
        return sorted(name for name, h in hosts.items() if pred(h))

    roles = {r for spec in plan["node_groups"].values() for r in spec["roles"]}
    for role in roles:
        assert groups[role] == members(lambda h, role=role: role in h["roles"])
    assert groups["slurm_controller"] == ["head01", "osd01"]  # the lab's HA pair
    assert groups["slurm_compute"] == ["cpu01", "gpu01", "gpu02", "infer01"]
    assert groups["ceph_mon"] == ["stor01", "stor02", "stor03"]
    assert groups["ceph_osd"] == ["osd01", "stor01", "stor02", "stor03"]
    for rack in ("r1", "r2"):
        assert groups[f"rack_{rack}"] == members(lambda h, rack=rack: h["rack"] == rack)
    assert groups["access_tor1"] == groups["rack_r1"]
    assert groups["access_tor2"] == groups["rack_r2"]
    assert groups["aggregation_agg1"] == sorted(hosts)
    assert groups["hw_gpu_h100"] == ["gpu01", "gpu02"]  # '-' made Ansible-safe
    assert groups["hw_tpu_infer"] == ["infer01"]
    for group in plan["node_groups"]:
        assert groups[f"nodes_{group}"] == members(lambda h, g=group: h["node_group"] == g)
    assert groups["pool_gpu"] == ["gpu01", "gpu02"]
    assert groups["pool_accel"] == ["infer01"]
    assert groups["pool_cpu"] == ["cpu01"]
    assert groups["gpu_h100"] == ["gpu01", "gpu02"]
    assert groups["accel_tpu"] == ["infer01"]
    for name, group_members in groups.items():
        assert group_members == sorted(group_members), name
        assert set(group_members) <= set(hosts), name
        assert name == group_name(name), name  # only letters, digits and '_'


def test_cluster_wide_data(plan, expanded):
    assert expanded["cluster"]["name"] == "lab"
    assert expanded["cluster"]["management_network"] == "mgmt"
    assert set(expanded["networks"]) == set(plan["networks"])
    assert expanded["networks"]["compute"]["mtu"] == 9000
    assert expanded["networks"]["mgmt"]["netmask"] == "255.255.255.0"
    assert expanded["racks"]["r1"]["access_switch"] == "tor1"
    assert expanded["racks"]["r2"] == {
        "access_switch": "tor2",
        "row": "A",
        "description": "",
        "power": {"kw": 8},  # budgets pass through as the plan states them
        "cooling": {"kw": 8, "kind": "air"},
    }
    assert expanded["topology"]["core"] == {"core1": {}}
    assert expanded["scheduler"]["workload_classes"]["training"]["pool"] == "gpu"
    assert "suppress" not in expanded
    assert "plugin" not in expanded
    assert "nodes" not in json.dumps(expanded["node_groups"])


def test_expand_is_pure(plan, lock):
    plan = with_defaults(plan)
    plan_before, lock_before = copy.deepcopy(plan), copy.deepcopy(lock)
    nodes = list(iter_nodes(plan))
    first = expand(plan, nodes, lock)
    second = expand(plan, nodes, lock)
    assert first == second
    assert (plan, lock) == (plan_before, lock_before)
    first["hosts"]["gpu01"]["roles"].append("mutated")
    first["scheduler"]["workload_classes"].clear()
    assert expand(plan, nodes, lock) == second  # the result shares nothing mutable with input
    assert plan == plan_before


def test_nics_group_networks_overrides_and_management_network():
    text = BASE.read_text()
    text = text.replace(
        "  gpu-h100: {cpu_cores: 2, memory_gb: 8, accelerators: {model: H100-PCIE-80GB, count: 2}}",
        "  gpu-h100:\n    cpu_cores: 2\n    memory_gb: 8\n"
        "    accelerators: {model: H100-PCIE-80GB, count: 2}\n"
        "    nics: [{name: eno1, networks: [mgmt]}, {name: ens1f0, networks: [compute]}]",
    )
    text = text.replace(
        "pool: gpu}",
        "pool: gpu,\n        nodes: {gpu02: {rack: r1, disks: "
        "[{name: nvme9, size_gb: 800, type: nvme, use: scratch}]}}}",
    )
    text = text.replace(
        "racks: [r2], roles: [slurm_compute], pool: cpu}",
        "racks: [r2], roles: [slurm_compute], pool: cpu, networks: [compute]}",
    )
    text = text.replace("os: debian-12}", "os: debian-12, management_network: compute}")
    result = validate_text(text, "plan.yml")
    assert result.ok, [f.render() for f in result.findings]
    lock, findings = allocate_addresses(result.plan, result.nodes)
    assert findings == []
    hosts = expand(result.plan, result.nodes, lock)["hosts"]
    assert hosts["gpu01"]["interfaces"]["mgmt"]["device"] == "eno1"
    assert hosts["gpu01"]["interfaces"]["compute"]["device"] == "ens1f0"
    assert hosts["head01"]["interfaces"]["compute"]["device"] == "compute"
    assert set(hosts["cpu01"]["interfaces"]) == {"compute"}
    for host in hosts.values():  # the management network decides ansible_host
        assert host["address"] == host["interfaces"]["compute"]["address"]
        assert ipaddress.ip_address(host["address"]) in ipaddress.ip_network("10.41.0.0/24")
    assert hosts["gpu02"]["rack"] == "r1"  # the override beats the rotation
    assert hosts["gpu02"]["access_switch"] == "tor1"
    assert [d["name"] for d in hosts["gpu02"]["disks"]] == ["nvme9"]
    assert hosts["gpu01"]["disks"] == []


def test_an_expansion_shares_nothing_with_the_catalog():
    first = load_expanded(LAB)
    first["hosts"]["gpu01"]["accelerators"]["catalog"]["nvml_names"].append("changed")
    first["hosts"]["gpu01"]["accelerators"]["catalog"]["memory_gb"] = 1
    again = load_expanded(LAB)["hosts"]["gpu01"]["accelerators"]["catalog"]
    assert "changed" not in again["nvml_names"]
    assert again["memory_gb"] == 80


def test_expand_yaml_output_is_plain_yaml_without_anchors(capsys):
    from cluster_plan import cli

    assert cli.main(["expand", str(LAB)]) == 0
    out = capsys.readouterr().out
    assert "&id" not in out
    assert "*id" not in out
    assert yaml.safe_load(out) == load_expanded(LAB)
