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


CONFLICT = (
    'Error from server (Conflict): Operation cannot be fulfilled on nodes "gpu01": the object '
    "has been modified; please apply your changes to the latest version and try again"
)


def merged(target: dict[str, Any], patch: dict[str, Any]) -> None:
    """A JSON merge patch (RFC 7386) applied in place: null removes, objects merge."""
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict) and isinstance(target.get(key), dict):
            merged(target[key], value)
        else:
            target[key] = copy.deepcopy(value)


class Kubectl:
    """kubectl against one node: `get node -o json`, and `patch node --type merge` as the API
    server answers it (refused with a Conflict unless its resourceVersion is the node's; each
    write gives the node a new one); every command kept."""

    def __init__(self, node: dict[str, Any]) -> None:
        self.node = node
        self.calls: list[list[str]] = []

    def __call__(self, argv: list[str]) -> tuple[int, str, str]:
        self.calls.append(argv)
        verb, name = argv[1], argv[3]
        if name != self.node["metadata"]["name"]:
            return 1, "", f'Error from server (NotFound): nodes "{name}" not found'
        if verb == "get":
            return 0, json.dumps(self.node, indent=4), ""
        assert argv[2:] == ["node", name, "--type", "merge", "-p", argv[-1]], argv
        patch = json.loads(argv[-1])
        if patch["metadata"]["resourceVersion"] != self.node["metadata"]["resourceVersion"]:
            return 1, "", CONFLICT
        merged(self.node, patch)
        self.written()
        return 0, f"node/{name} patched\n", ""

    def written(self) -> None:
        """The node changed: a resourceVersion of its own, as the server gives each write."""
        metadata = self.node["metadata"]
        metadata["resourceVersion"] = str(int(metadata["resourceVersion"]) + 1)

    @property
    def changes(self) -> list[list[str]]:
        return [c for c in self.calls if c[1] != "get"]


def patch(version: str, record: str | None, unschedulable: bool | None) -> list[str]:
    """The one write of a cordon (record, True) or an uncordon (None, None)."""
    body = {"metadata": {"resourceVersion": version, "annotations": {ANNOTATION: record}},
            "spec": {"unschedulable": unschedulable}}  # fmt: skip
    return ["kubectl", "patch", "node", "gpu01", "--type", "merge", "-p", json.dumps(body)]


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
        (json.dumps(node_json()).replace('"resourceVersion"', '"version"'),
         "no metadata.resourceVersion"),
    ],
    ids=["empty", "not-json", "not-a-node", "another-node", "odd-field", "no-version"],
)  # fmt: skip
def test_what_is_not_the_node_is_named(text: str, seen: str):
    with pytest.raises(DrainError, match=seen):
        parse_node(text, "gpu01")


def test_a_schedulable_node_is_annotated_and_cordoned_in_one_write_of_the_version_read():
    kubectl = Kubectl(node_json())
    decision = cordon.cordon(kubectl, "gpu01", "change", "upgrade")
    assert decision.action == "cordon" and decision.held_by is None
    assert kubectl.changes == [patch("48213", "cluster-plan:change: upgrade", True)]
    assert kubectl.node["spec"]["unschedulable"] is True
    assert kubectl.node["metadata"]["annotations"][ANNOTATION] == "cluster-plan:change: upgrade"


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
    assert kubectl.changes == [patch("48213", None, None)]
    assert ANNOTATION not in kubectl.node["metadata"]["annotations"]
    assert "unschedulable" not in kubectl.node["spec"]  # as `kubectl uncordon` leaves it
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


class Racing(Kubectl):
    """kubectl where someone else changes the node right after each of its first `races`
    reads, before the write that follows: `change` does it to the node."""

    def __init__(self, node: dict[str, Any], races: int, change: Any) -> None:
        super().__init__(node)
        self.races, self.change = races, change

    def __call__(self, argv: list[str]) -> tuple[int, str, str]:
        answer = super().__call__(argv)
        if argv[1] == "get" and self.races > 0:
            self.races -= 1
            self.change(self.node)
            self.written()
        return answer


def operator_cordons(node: dict[str, Any]) -> None:
    node["spec"]["unschedulable"] = True


def relabelled(node: dict[str, Any]) -> None:
    """A change that leaves the decision as it was (a label): only the version is new."""
    node["metadata"]["labels"]["team"] = str(len(node["metadata"]["labels"]))


def test_a_cordon_refused_for_a_changed_node_is_decided_again_from_a_new_read():
    kubectl = Racing(node_json(), 1, operator_cordons)
    decision = cordon.cordon(kubectl, "gpu01", "change", "upgrade")
    assert (decision.action, decision.held_by) == ("none", "cordoned, no owner recorded")
    assert [c[1] for c in kubectl.calls] == ["get", "patch", "get"]
    assert ANNOTATION not in kubectl.node["metadata"]["annotations"]
    # a node changed in a way that leaves the decision is written at the second try
    kubectl = Racing(node_json(), 1, relabelled)
    assert cordon.cordon(kubectl, "gpu01", "change", "upgrade").action == "cordon"
    assert kubectl.changes == [patch("48213", "cluster-plan:change: upgrade", True),
                               patch("48214", "cluster-plan:change: upgrade", True)]  # fmt: skip
    assert kubectl.node["metadata"]["annotations"][ANNOTATION] == "cluster-plan:change: upgrade"


@pytest.mark.parametrize("side", ["cordon", "uncordon"])
def test_a_node_that_changes_after_every_read_stops_after_the_attempts_with_nothing_written(
    side: str,
):
    start = node_json() if side == "cordon" else node_json(True, "cluster-plan:change: x")
    kubectl = Racing(start, cordon.ATTEMPTS + 1, relabelled)
    with pytest.raises(DrainError, match=rf"gpu01 changed .* {cordon.ATTEMPTS} reads.*Conflict"):
        if side == "cordon":
            cordon.cordon(kubectl, "gpu01", "change", "x")
        else:
            cordon.uncordon(kubectl, "gpu01", "change")
    assert [c[1] for c in kubectl.calls] == ["get", "patch"] * cordon.ATTEMPTS
    assert kubectl.node["spec"].get("unschedulable", False) is (side == "uncordon")
    assert kubectl.node["metadata"]["annotations"].get(ANNOTATION) == (
        None if side == "cordon" else "cluster-plan:change: x"
    )


def test_a_write_refused_for_anything_but_a_conflict_is_not_tried_again():
    calls: list[list[str]] = []

    def forbidden(argv: list[str]) -> tuple[int, str, str]:
        calls.append(argv)
        if argv[1] == "get":
            return 0, json.dumps(node_json()), ""
        return 1, "", 'Error from server (Forbidden): nodes "gpu01" is forbidden'

    with pytest.raises(DrainError, match=r"`kubectl patch node gpu01 .*` exited 1.*Forbidden"):
        cordon.cordon(forbidden, "gpu01", "change", "x")
    assert [c[1] for c in calls] == ["get", "patch"]
