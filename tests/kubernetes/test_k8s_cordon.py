"""The Kubernetes side of the project's one drain (cluster_plan.kubernetes.cordon): who
cordoned a node is in its annotation, only that owner uncordons it, and a node cordoned by
anyone else is left cordoned and said so. Decided from a node as `kubectl get node -o json`
prints it (fixtures/node-gpu01.json, trimmed to the fields that matter here), cordoned or not."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from cluster_plan.kubernetes import cordon
from cluster_plan.kubernetes.cordon import (
    ANNOTATION,
    DrainError,
    decide_cordon,
    decide_uncordon,
    parse_node,
)

NODE = json.loads((Path(__file__).parent / "fixtures" / "node-gpu01.json").read_text())


def node_json(unschedulable: bool = False, cordoned_by: str | None = None) -> dict[str, Any]:
    """gpu01 as kubectl shows it: cordoned (spec.unschedulable, and the taint the node
    lifecycle controller adds after it) or not, with our annotation or without."""
    node = copy.deepcopy(NODE)
    if unschedulable:
        node["spec"]["unschedulable"] = True
        node["spec"]["taints"] = [
            {"effect": "NoSchedule", "key": "node.kubernetes.io/unschedulable",
             "timeAdded": "2026-11-30T18:40:02Z"}
        ]  # fmt: skip
    if cordoned_by is not None:
        node["metadata"]["annotations"][ANNOTATION] = cordoned_by
    return node


class Kubectl:
    """kubectl against one node: `get node -o json`, `annotate`, `cordon`, `uncordon` change
    the node as the API server would; every command kept."""

    def __init__(self, node: dict[str, Any]) -> None:
        self.node = node
        self.calls: list[list[str]] = []

    def __call__(self, argv: list[str]) -> tuple[int, str, str]:
        self.calls.append(argv)
        verb, name = argv[1], argv[-1] if argv[1] in ("cordon", "uncordon") else argv[3]
        if name != self.node["metadata"]["name"]:
            return 1, "", f'Error from server (NotFound): nodes "{name}" not found'
        annotations = self.node["metadata"]["annotations"]
        if verb == "get":
            return 0, json.dumps(self.node, indent=4), ""
        if verb == "annotate":
            record = argv[-1]
            if record.endswith("-"):
                annotations.pop(record[:-1], None)
            else:
                key, value = record.split("=", 1)
                annotations[key] = value
        elif verb in ("cordon", "uncordon"):
            self.node["spec"]["unschedulable"] = verb == "cordon"
        return 0, f"node/{name} {verb}ed\n", ""

    @property
    def changes(self) -> list[list[str]]:
        return [c for c in self.calls if c[1] != "get"]


def test_a_node_as_kubectl_shows_it_parses():
    free = parse_node(json.dumps(NODE), "gpu01")
    assert (free.unschedulable, free.cordoned_by) == (False, "")
    held = parse_node(json.dumps(node_json(True, "cluster-plan:change: upgrade")), "gpu01")
    assert (held.unschedulable, held.cordoned_by) == (True, "cluster-plan:change: upgrade")


@pytest.mark.parametrize(
    ("text", "seen"),
    [
        ("", "not JSON.*no output"),
        ("error: the server doesn't have a resource type", "not JSON.*server doesn't have"),
        (json.dumps({"kind": "Status", "status": "Failure"}), "no node gpu01.*Status"),
        (json.dumps(NODE).replace('"gpu01"', '"gpu02"'), "no node gpu01"),
        (json.dumps(node_json()).replace('"spec": {', '"spec": {"unschedulable": "yes", '),
         "spec.unschedulable 'yes'"),
    ],
    ids=["empty", "not-json", "not-a-node", "another-node", "odd-field"],
)  # fmt: skip
def test_what_is_not_the_node_is_named(text: str, seen: str):
    with pytest.raises(DrainError, match=seen):
        parse_node(text, "gpu01")


def test_a_schedulable_node_is_annotated_then_cordoned():
    kubectl = Kubectl(node_json())
    decision = cordon.cordon(kubectl, "gpu01", "change", "upgrade")
    assert decision.action == "cordon" and decision.held_by is None
    assert kubectl.changes == [
        ["kubectl", "annotate", "node", "gpu01", "--overwrite",
         f"{ANNOTATION}=cluster-plan:change: upgrade"],
        ["kubectl", "cordon", "gpu01"],
    ]  # fmt: skip
    assert kubectl.node["spec"]["unschedulable"] is True


@pytest.mark.parametrize(
    ("cordoned_by", "held_by"),
    [
        (None, "cordoned, no owner recorded"),  # an operator's `kubectl cordon`
        ("cluster-plan:change: upgrade", "cluster-plan:change: upgrade"),  # the change's
    ],
    ids=["operator", "another-owner"],
)
def test_a_node_cordoned_by_anyone_else_is_neither_recordoned_nor_uncordoned(
    cordoned_by: str | None, held_by: str
):
    kubectl = Kubectl(node_json(True, cordoned_by))
    cordoned = cordon.cordon(kubectl, "gpu01", "nvidia_driver", "upgrade to branch 570")
    assert cordoned.action == "none" and cordoned.held_by == held_by
    assert "left so" in cordoned.message
    uncordoned = cordon.uncordon(kubectl, "gpu01", "nvidia_driver")
    assert uncordoned.action == "none" and uncordoned.held_by == held_by
    assert "stays cordoned" in uncordoned.message
    assert kubectl.changes == []  # the annotation is never overwritten, the node never freed


def test_the_owner_s_own_cordon_is_lifted_with_its_record_and_a_second_cordon_changes_nothing():
    kubectl = Kubectl(node_json(True, "cluster-plan:nvidia_driver: upgrade to branch 570"))
    assert cordon.cordon(kubectl, "gpu01", "nvidia_driver", "x").action == "none"
    assert kubectl.changes == []
    assert cordon.uncordon(kubectl, "gpu01", "nvidia_driver").action == "uncordon"
    assert kubectl.changes == [
        ["kubectl", "uncordon", "gpu01"],
        ["kubectl", "annotate", "node", "gpu01", f"{ANNOTATION}-"],
    ]
    assert ANNOTATION not in kubectl.node["metadata"]["annotations"]
    assert cordon.uncordon(kubectl, "gpu01", "nvidia_driver").action == "none"


def test_a_record_left_on_a_schedulable_node_is_removed_so_a_later_cordon_is_not_taken_for_ours():
    """An uncordon whose annotation removal failed leaves the record; the next uncordon
    removes it, and a cordon over it writes its own."""
    left = node_json(False, "cluster-plan:change: upgrade")
    assert decide_uncordon(parse_node(json.dumps(left), "gpu01"), "change").action == "uncordon"
    other = parse_node(json.dumps(left), "gpu01")
    assert decide_uncordon(other, "nvidia_driver").action == "none"
    assert decide_cordon(other, "nvidia_driver").action == "cordon"


def test_check_mode_decides_and_changes_nothing():
    free = Kubectl(node_json())
    assert cordon.cordon(free, "gpu01", "change", "x", check=True).action == "cordon"
    ours = Kubectl(node_json(True, "cluster-plan:change: x"))
    assert cordon.uncordon(ours, "gpu01", "change", check=True).action == "uncordon"
    assert free.changes == [] and ours.changes == []


def test_kubectl_that_fails_or_a_missing_node_stops_the_cordon():
    with pytest.raises(DrainError, match=r'nodes "gpu09" not found'):
        cordon.cordon(Kubectl(node_json()), "gpu09", "change", "x")

    def failing(argv: list[str]) -> tuple[int, str, str]:
        return 1, "", "The connection to the server 10.44.0.10:6443 was refused"

    with pytest.raises(DrainError, match=r"`kubectl get node gpu01 -o json` exited 1.*refused"):
        cordon.uncordon(failing, "gpu01", "change")
    with pytest.raises(ValueError, match="owner"):
        cordon.cordon(Kubectl(node_json()), "gpu01", "Not An Owner", "x")
