"""The one table of plan defaults: the schema shows the same defaults to editors, every
consumer reads filled values, and the derived defaults follow the plan."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cluster_plan.plan import defaults
from cluster_plan.plan.defaults import PLAN_DEFAULTS, with_defaults
from cluster_plan.plan.schema import plan_schema

ROOT = Path(__file__).resolve().parents[2]


def schema_node(path: str) -> dict[str, Any]:
    """The schema of a dotted plan path (`*` a mapping's values, `[]` a list's items)."""
    schema = plan_schema()
    node: dict[str, Any] = schema
    for part in path.split("."):
        while "$ref" in node:
            node = schema["$defs"][node["$ref"].rsplit("/", 1)[1]]
        if part == "*":
            node = node["additionalProperties"]
        elif part == "[]":
            node = node["items"]
        else:
            node = node["properties"][part]
    while "$ref" in node and "default" not in node:
        node = schema["$defs"][node["$ref"].rsplit("/", 1)[1]]
    return node


@pytest.mark.parametrize("path", sorted(PLAN_DEFAULTS))
def test_every_default_is_a_plan_setting_and_the_schema_says_it(path):
    node = schema_node(path)  # KeyError: a default for a key the plan cannot have
    value = PLAN_DEFAULTS[path]
    if value is None or value == {}:
        assert "default" not in node, path  # an optional section: absent unless written
    else:
        assert node.get("default") == value, f"{path}: schema says {node.get('default')!r}"


def test_the_schema_has_no_default_the_table_lacks():
    schema = plan_schema()
    found: list[str] = []

    def walk(node: Any, path: list[str]) -> None:
        if not isinstance(node, dict):
            return
        if "default" in node and path:
            found.append(".".join(path))
        for key, sub in node.get("properties", {}).items():
            walk(sub, [*path, key])
        if isinstance(node.get("additionalProperties"), dict):
            walk(node["additionalProperties"], [*path, "*"])
        if isinstance(node.get("items"), dict):
            walk(node["items"], [*path, "[]"])
        if "$ref" in node:
            walk(schema["$defs"][node["$ref"].rsplit("/", 1)[1]], path)

    walk(schema, [])
    assert found and set(found) <= set(PLAN_DEFAULTS)


def test_with_defaults_fills_sections_and_keeps_what_the_plan_says():
    plan = {
        "cluster": {"name": "c", "domain": "d"},
        "networks": {"mgmt": {"cidr": "10.0.0.0/24", "mtu": 9000}, "fast": {"cidr": "10.1.0.0/24"}},
        "node_groups": {"a": {"count": 1, "hostname": "a{n}", "hardware": "x", "rack": "r"}},
        "hardware": {"x": {"cpu_cores": 1, "memory_gb": 1}},
        "acceptance": {"network": {"min_gbps": 1}},
        "scheduler": {"type": "kubernetes"},
        "lab": {},
    }
    filled = with_defaults(plan)
    assert plan["networks"]["fast"] == {"cidr": "10.1.0.0/24"}  # the input is not changed
    assert filled["networks"]["mgmt"]["mtu"] == 9000
    assert filled["networks"]["fast"]["mtu"] == 1500
    assert filled["cluster"]["management_network"] == "mgmt"
    assert filled["acceptance"]["network"]["networks"] == ["fast"]
    assert filled["acceptance"]["network"]["duration_s"] == 10
    assert filled["acceptance"]["gpu"]["max_temp_c"] == 85
    assert filled["lab"] == {"rate_scale": 0.01, "image": "bare", "bare": []}
    assert filled["backups"] is None and filled["storage"]["ceph"] is None
    assert "slurm" not in filled["scheduler"]  # a Kubernetes plan has no Slurm settings
    assert filled["node_groups"]["a"]["networks"] == ["mgmt", "fast"]
    assert filled["hardware"]["x"]["accelerators"] is None


def test_tested_networks_leave_out_the_management_network_wherever_it_is():
    plan = {"cluster": {"management_network": "b"}, "networks": {"a": {}, "b": {}, "c": {}}}
    assert defaults.tested_networks(plan) == ["a", "c"]
    assert defaults.tested_networks({"cluster": {}, "networks": {"only": {}}}) == ["only"]


def test_the_examples_fill_without_touching_what_is_written():
    for plan_path in [ROOT / "inventory/lab/cluster.yml", *ROOT.glob("inventory/examples/*.yml")]:
        import yaml

        raw = yaml.safe_load(plan_path.read_text())
        filled = with_defaults(raw)
        assert json.dumps(raw, default=str) != json.dumps(filled, default=str)
        for section, value in raw.items():
            if isinstance(value, dict):
                for key, setting in value.items():
                    if not isinstance(setting, dict):
                        assert filled[section][key] == setting, (plan_path, section, key)
