"""The scheduling policy decided in plugins/filter/slurm_policy.py."""

from __future__ import annotations

from typing import Any

import slurm_policy as policy


def compute_hosts(expanded: dict[str, Any]) -> list[dict[str, Any]]:
    return [expanded["hosts"][n] for n in expanded["groups"]["slurm_compute"]]


def test_node_records_carry_pool_device_rack_and_dataset_features(lab_expanded):
    nodes = {n["name"]: n for n in policy.slurm_node_records(compute_hosts(lab_expanded))}
    assert set(nodes) == {"gpu01", "gpu02", "infer01", "cpu01"}
    assert nodes["gpu01"]["gres"] == "gpu:h100:2"
    assert nodes["gpu01"]["features"] == ["pool_gpu", "h100", "rack_r1", "dataset_imagenet"]
    assert nodes["gpu02"]["features"] == ["pool_gpu", "h100", "rack_r2"]
    assert nodes["infer01"]["gres"] == "tpu:4"
    assert nodes["cpu01"]["gres"] is None
    assert nodes["cpu01"]["weight"] < nodes["gpu01"]["weight"]
    assert nodes["gpu01"]["cpus"] == 2
    assert nodes["gpu01"]["real_memory"] == int(8 * 1024 * 0.95)
    assert nodes["gpu01"]["addr"] == lab_expanded["hosts"]["gpu01"]["address"]


def test_one_partition_per_workload_class_over_its_pool(lab_expanded):
    parts = {
        p["name"]: p
        for p in policy.slurm_partition_records(lab_expanded, compute_hosts(lab_expanded))
    }
    assert set(parts) == set(lab_expanded["scheduler"]["workload_classes"])
    assert parts["training"]["nodes"] == ["gpu01", "gpu02"]
    assert parts["inference"]["nodes"] == ["infer01"]
    assert parts["general"]["nodes"] == ["cpu01"]
    assert [p for p in parts.values() if p["default"]] == [parts["general"]]


def test_class_without_nodes_gets_no_partition_and_is_reported(lab_expanded):
    lab_expanded["scheduler"]["workload_classes"]["render"] = {"pool": "nowhere", "needs": "gpu"}
    hosts = compute_hosts(lab_expanded)
    names = [p["name"] for p in policy.slurm_partition_records(lab_expanded, hosts)]
    assert "render" not in names
    assert policy.slurm_empty_classes(lab_expanded, hosts) == ["render"]


def test_default_class_falls_back_to_cpu_class_when_none_is_marked(lab_expanded):
    for spec in lab_expanded["scheduler"]["workload_classes"].values():
        spec.pop("default", None)
    parts = policy.slurm_partition_records(lab_expanded, compute_hosts(lab_expanded))
    assert [p["name"] for p in parts if p["default"]] == ["general"]


def test_topology_follows_access_aggregation_core(lab_expanded):
    switches = {
        s["name"]: s for s in policy.slurm_switch_records(lab_expanded, compute_hosts(lab_expanded))
    }
    assert switches["tor1"]["nodes"] == ["gpu01"]
    assert switches["tor2"]["nodes"] == ["cpu01", "gpu02", "infer01"]
    assert switches["agg1"]["switches"] == ["tor1", "tor2"]
    assert switches["core1"]["switches"] == ["agg1"]


def test_topology_leaves_out_switches_without_compute_nodes(lab_expanded):
    hosts = [h for h in compute_hosts(lab_expanded) if h["access_switch"] == "tor2"]
    names = [s["name"] for s in policy.slurm_switch_records(lab_expanded, hosts)]
    assert names == ["tor2", "agg1", "core1"]


def test_topology_puts_a_multi_homed_aggregation_under_its_first_core():
    plan = {
        "topology": {
            "core": {"c1": {}, "c2": {}},
            "aggregation": {"a1": {"uplinks": ["c2", "c1"]}},
            "access": {"t-1": {"uplink": "a1"}},
        }
    }
    hosts = [{"hostname": "n1", "access_switch": "t-1"}]
    assert policy.slurm_switch_records(plan, hosts) == [
        {"name": "t_1", "nodes": ["n1"], "switches": []},
        {"name": "a1", "nodes": [], "switches": ["t_1"]},
        {"name": "c2", "nodes": [], "switches": ["a1"]},
    ]


def test_gres_records_give_gpus_device_files_and_count_other_accelerators(lab_expanded):
    records = {r["node"]: r for r in policy.slurm_gres_records(compute_hosts(lab_expanded))}
    assert records["gpu01"]["file"] == "/dev/nvidia[0-1]"
    assert records["gpu01"]["type"] == "h100"
    assert records["infer01"] == {
        "node": "infer01",
        "name": "tpu",
        "type": None,
        "count": 4,
        "file": None,
    }
    assert "cpu01" not in records
    assert policy.slurm_gres_types(compute_hosts(lab_expanded)) == ["gpu", "tpu"]


def test_submit_policy_routes_devices_to_classes_and_datasets_to_partitions(lab_expanded):
    submit = policy.slurm_submit_policy(lab_expanded, compute_hosts(lab_expanded))
    assert submit["default_class"] == "general"
    assert submit["gres_classes"] == {"gpu": "training", "tpu": "inference"}
    assert submit["datasets"] == {
        "imagenet": {"feature": "dataset_imagenet", "partitions": ["training"]}
    }
    assert submit["classes"]["inference"] == {"partition": "inference", "needs": "accelerator"}


def test_lua_string_escapes_quotes_and_backslashes():
    assert policy.lua_string('a"b\\c') == '"a\\"b\\\\c"'
