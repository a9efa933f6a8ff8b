"""The recorded cordon (cluster_plan.kubernetes.cordon) against a real API server: etcd,
kube-apiserver and kube-controller-manager 1.36.3 from the bundle this machine built
(tests/support/kube_apiserver.py), started once for the module with the lab-k8s plan's
ClusterConfiguration. `cordon` and `uncordon` run the bundle's kubectl as the admin; what
they did is read back from the server (`kubectl get node -o json`), never from their own
report. Each test has a Node object of its own, created bare (no kubelet registers it, so it
has no annotations until ours, and no node lifecycle controller adds the unschedulable taint
after a cordon: the cordon reads neither, only spec.unschedulable and its own annotation).

- A schedulable node is annotated and cordoned for "change" in one write, then uncordoned
  with its record removed in one write.
- An operator's `kubectl cordon` and another owner's cordon are kept by "change"'s cordon and
  uncordon, and who holds them is reported; the node is not written to (resourceVersion).
- An operator's `kubectl cordon` made between the cordon's read of the node and its write
  is kept and reported, and the change's uncordon leaves it (the write carries the
  resourceVersion read; the server refuses it with a Conflict, and the cordon decides again);
  so is another owner's record put over ours between the uncordon's read and its write.
- Check mode decides and writes nothing.
- The hand-written fixture of the offline tests (fixtures/node-gpu01.json) parses as the
  server's own output does, cordoned or not.

Runs wherever the 1.36 bundle is built and the tests run as root; skipped with the reason
otherwise.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from k8s_plans import cluster_configuration
from support.kube_apiserver import (
    ApiServer,
    RecordingKubectl,
    from_bundle,
    running,
    server_bundle,
    unavailable,
)

from cluster_plan.kubernetes import cordon
from cluster_plan.kubernetes.cordon import ANNOTATION, parse_node

BUNDLE = server_bundle()
WHY_NOT = unavailable(BUNDLE)
pytestmark = [pytest.mark.apiserver, pytest.mark.skipif(WHY_NOT is not None, reason=str(WHY_NOT))]

FIXTURE = Path(__file__).parent / "fixtures" / "node-gpu01.json"
CHANGE = "cluster-plan:change: upgrade"
DRIVER = "cluster-plan:nvidia_driver: upgrade to branch 570"


@pytest.fixture(scope="module")
def server() -> Iterator[ApiServer]:
    assert BUNDLE is not None
    with running(from_bundle(BUNDLE, cluster_configuration("lab-k8s"))) as started:
        print(f"\nAPI server ready in {started.timings['ready_s']:.1f} s")
        yield started


def must(server: ApiServer, *args: str, stdin: str | None = None) -> str:
    result = server.kubectl(*args, stdin=stdin)
    assert result.returncode == 0, f"kubectl {' '.join(args)}: {result.stderr}"
    return result.stdout


def shown(server: ApiServer, name: str) -> dict[str, Any]:
    """The node as the server shows it."""
    node: dict[str, Any] = json.loads(must(server, "get", "node", name, "-o", "json"))
    return node


def node(server: ApiServer, name: str) -> RecordingKubectl:
    """A bare Node object of that name, schedulable and without annotations."""
    manifest = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
    }
    must(server, "create", "-f", "-", stdin=json.dumps(manifest))
    return RecordingKubectl(server)


def held(shown_node: dict[str, Any]) -> tuple[bool, str | None]:
    """(spec.unschedulable, our annotation) as the server has them."""
    annotations = shown_node["metadata"].get("annotations") or {}
    return shown_node["spec"].get("unschedulable", False), annotations.get(ANNOTATION)


def test_a_schedulable_node_is_cordoned_for_its_owner_and_uncordoned_with_its_record(
    server: ApiServer,
) -> None:
    kubectl = node(server, "gpu01")
    cordoned = cordon.cordon(kubectl, "gpu01", "change", "upgrade")
    assert (cordoned.action, cordoned.held_by) == ("cordon", None)
    assert held(shown(server, "gpu01")) == (True, CHANGE)
    again = cordon.cordon(kubectl, "gpu01", "change", "upgrade")
    assert again.action == "none" and "already" in again.message
    uncordoned = cordon.uncordon(kubectl, "gpu01", "change")
    assert (uncordoned.action, uncordoned.held_by) == ("uncordon", None)
    assert held(shown(server, "gpu01")) == (False, None)
    assert [c[1] for c in kubectl.changes] == ["patch", "patch"]  # one write each
    assert cordon.uncordon(kubectl, "gpu01", "change").action == "none"


def test_an_operator_s_cordon_is_kept_by_the_change_s_cordon_and_uncordon(
    server: ApiServer,
) -> None:
    kubectl = node(server, "gpu02")
    must(server, "cordon", "gpu02")
    before = shown(server, "gpu02")
    cordoned = cordon.cordon(kubectl, "gpu02", "change", "upgrade")
    assert (cordoned.action, cordoned.held_by) == ("none", "cordoned, no owner recorded")
    uncordoned = cordon.uncordon(kubectl, "gpu02", "change")
    assert (uncordoned.action, uncordoned.held_by) == ("none", "cordoned, no owner recorded")
    assert "stays cordoned" in uncordoned.message
    after = shown(server, "gpu02")
    assert held(after) == (True, None)
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    assert kubectl.changes == []


def test_another_owner_s_cordon_is_not_lifted_by_the_change(server: ApiServer) -> None:
    kubectl = node(server, "gpu03")
    driver = cordon.cordon(kubectl, "gpu03", "nvidia_driver", "upgrade to branch 570")
    assert driver.action == "cordon"
    before = shown(server, "gpu03")
    assert held(before) == (True, DRIVER)
    kubectl.calls.clear()
    cordoned = cordon.cordon(kubectl, "gpu03", "change", "upgrade")
    assert (cordoned.action, cordoned.held_by) == ("none", DRIVER)
    uncordoned = cordon.uncordon(kubectl, "gpu03", "change")
    assert (uncordoned.action, uncordoned.held_by) == ("none", DRIVER)
    after = shown(server, "gpu03")
    assert held(after) == (True, DRIVER)
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    assert kubectl.changes == []
    # its owner lifts it
    assert cordon.uncordon(kubectl, "gpu03", "nvidia_driver").action == "uncordon"
    assert held(shown(server, "gpu03")) == (False, None)


class OperatorAfterRead(RecordingKubectl):
    """A cordon's `Run` in whose first read an operator's command lands: it runs right
    after the node is read, before anything the cordon writes."""

    def __init__(self, server: ApiServer, *operator: str) -> None:
        super().__init__(server)
        self.operator: tuple[str, ...] | None = operator

    def __call__(self, argv: list[str]) -> tuple[int, str, str]:
        answer = super().__call__(argv)
        if argv[1] == "get" and self.operator is not None:
            must(self.server, *self.operator)
            self.operator = None
        return answer


def test_an_operator_s_cordon_made_between_the_read_and_the_write_is_kept(
    server: ApiServer,
) -> None:
    node(server, "gpu05")
    racing = OperatorAfterRead(server, "cordon", "gpu05")
    cordoned = cordon.cordon(racing, "gpu05", "change", "upgrade")
    assert racing.operator is None  # the operator's cordon ran
    assert [c[1] for c in racing.calls] == ["get", "patch", "get"]  # refused, read again
    assert (cordoned.action, cordoned.held_by) == ("none", "cordoned, no owner recorded")
    assert held(shown(server, "gpu05")) == (True, None)
    uncordoned = cordon.uncordon(RecordingKubectl(server), "gpu05", "change")
    assert (uncordoned.action, uncordoned.held_by) == ("none", "cordoned, no owner recorded")
    assert held(shown(server, "gpu05")) == (True, None)


def test_another_owner_s_record_made_between_the_read_and_the_write_is_not_lifted(
    server: ApiServer,
) -> None:
    """The change's cordon is taken over (its record replaced by the driver's) after the
    change's uncordon read the node: the uncordon leaves the driver's cordon."""
    kubectl = node(server, "gpu06")
    assert cordon.cordon(kubectl, "gpu06", "change", "upgrade").action == "cordon"
    takeover = ("annotate", "node", "gpu06", "--overwrite", f"{ANNOTATION}={DRIVER}")
    racing = OperatorAfterRead(server, *takeover)
    uncordoned = cordon.uncordon(racing, "gpu06", "change")
    assert racing.operator is None
    assert [c[1] for c in racing.calls] == ["get", "patch", "get"]
    assert (uncordoned.action, uncordoned.held_by) == ("none", DRIVER)
    assert held(shown(server, "gpu06")) == (True, DRIVER)


def test_check_mode_changes_nothing_on_the_server(server: ApiServer) -> None:
    kubectl = node(server, "gpu04")
    free = shown(server, "gpu04")
    assert cordon.cordon(kubectl, "gpu04", "change", "upgrade", check=True).action == "cordon"
    assert shown(server, "gpu04") == free
    cordon.cordon(kubectl, "gpu04", "change", "upgrade")
    kubectl.calls.clear()
    ours = shown(server, "gpu04")
    assert cordon.uncordon(kubectl, "gpu04", "change", check=True).action == "uncordon"
    assert shown(server, "gpu04") == ours
    assert held(ours) == (True, CHANGE)
    assert kubectl.changes == []


def test_the_offline_fixture_parses_as_the_server_s_own_output(server: ApiServer) -> None:
    """What parse_node reads (kind, metadata.name, metadata.annotations, spec.unschedulable)
    has the same place and type in the fixture as in the server's output, free and held."""
    kubectl = node(server, "gpu01-shape")
    fixture = json.loads(FIXTURE.read_text())
    fixture["metadata"]["name"] = "gpu01-shape"
    real_free = shown(server, "gpu01-shape")
    cordon.cordon(kubectl, "gpu01-shape", "change", "upgrade")
    real_held = shown(server, "gpu01-shape")
    fixture_held = json.loads(json.dumps(fixture))
    fixture_held["spec"]["unschedulable"] = True
    fixture_held["metadata"]["annotations"][ANNOTATION] = CHANGE
    for real, hand in ((real_free, fixture), (real_held, fixture_held)):
        assert (real["apiVersion"], real["kind"]) == (hand["apiVersion"], hand["kind"])
        assert type(real["spec"].get("unschedulable")) is type(hand["spec"].get("unschedulable"))
        assert parse_node(json.dumps(real), "gpu01-shape") == replace(
            parse_node(json.dumps(hand), "gpu01-shape"),
            resource_version=real["metadata"]["resourceVersion"],
        )
    assert isinstance(real_held["metadata"]["annotations"], dict)
    # kubectl uncordon leaves no `unschedulable: false` behind: the field goes, as in the fixture
    cordon.uncordon(kubectl, "gpu01-shape", "change")
    assert "unschedulable" not in shown(server, "gpu01-shape")["spec"]
