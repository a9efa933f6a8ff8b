"""Moving the pods off a cordoned node (cluster_plan.kubernetes.drain) against a real API
server: etcd, kube-apiserver and kube-controller-manager 1.36.3 from the bundle this machine
built (tests/support/kube_apiserver.py), started once for the module. The drain runs the
bundle's kubectl as the admin; what it did is read back from the server.

There is no kubelet and no workload controller, so the tests play their parts, as the API
sees them:
- each pod is created bound to its test's node (spec.nodeName) with the controller owner
  reference its controller would give it (the DaemonSet is a real object: kubectl drain
  reads it), and its status is written as its kubelet would report it (Running and Ready;
  an eviction ignores budgets for a pod not Running, and for a pod not Ready whose budget
  has its healthy pods);
- an evicted or deleted pod bound to a node only gets a deletionTimestamp (its 30 s grace):
  `Kubelet` confirms each one's end as a kubelet does once the containers stopped, with a
  delete of grace 0 and the pod's UID as precondition, and keeps what it confirmed;
- the disruption controller does not run: a budget's status is never counted (every
  eviction it covers is refused, 429, "retry after 10 s"), except where a test writes the
  status the controller would (0 disruptions allowed, 1 pod healthy, 1 needed: refused,
  429, no retry-after).

- A node with no budget in the way: its pods (a ReplicaSet's, a Job's with emptyDir, a
  finished bare one) are evicted and ended, its DaemonSet's pod and its mirror pod stay.
- Budgets that allow no disruption, counted and not: the drain fails within its bound, the
  message names each held pod and its budget, the pods are untouched (no deletionTimestamp),
  a pod no budget covers is evicted all the same, the node stays cordoned as the change's.
- A bare pod stops the drain before anything is evicted; with force the bare pod and the
  held pods are deleted (not evicted), and the drain says which a budget covered.
- An operator's cordon: kept by the change's cordon, the pods moved, kept by its uncordon.
- The nvidia_driver role's drain (cluster_plan.cluster.k8s_cordon, state drained) run as a
  play with the bundle's kubectl: a budget that allows no disruption fails the task within
  its bound naming the pod and the budget, the node cordoned with the role's record.

Runs wherever the 1.36 bundle is built and the tests run as root; skipped with the reason
otherwise.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
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
from support.playbooks import local_play

from cluster_plan.kubernetes import cordon, drain
from cluster_plan.kubernetes.cordon import ANNOTATION
from cluster_plan.kubernetes.drain import DrainError

BUNDLE = server_bundle()
WHY_NOT = unavailable(BUNDLE)
pytestmark = [pytest.mark.apiserver, pytest.mark.skipif(WHY_NOT is not None, reason=str(WHY_NOT))]

IMAGE = "registry.lab:5000/pause:3.10.2"
TIMEOUT_S = 3  # the drain's bound where a budget holds a pod
RETRY_S = 5  # kubectl drain asks again for a refused eviction after this, bound or not


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


def create(server: ApiServer, obj: dict[str, Any]) -> dict[str, Any]:
    made: dict[str, Any] = json.loads(
        must(server, "create", "-o", "json", "-f", "-", stdin=json.dumps(obj))
    )
    return made


def namespace(server: ApiServer, name: str) -> None:
    """A namespace, once its default ServiceAccount is there (admission wants it)."""
    create(server, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    deadline = time.monotonic() + 30
    while server.kubectl("get", "serviceaccount", "default", "-n", name).returncode != 0:
        assert time.monotonic() < deadline, f"no default ServiceAccount in {name}"
        time.sleep(0.2)


def node(server: ApiServer, name: str) -> None:
    create(server, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}})


def controller(server: ApiServer, kind: str, ns: str, name: str) -> dict[str, Any]:
    """A workload object (never reconciled here), for its pods' owner reference."""
    template = {"metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "main", "image": IMAGE}]}}  # fmt: skip
    spec: dict[str, Any] = {"selector": {"matchLabels": {"app": name}}, "template": template}
    if kind == "Job":
        spec = {"template": {**template, "spec": {**template["spec"], "restartPolicy": "Never"}}}
    group = "batch/v1" if kind == "Job" else "apps/v1"
    return create(server, {"apiVersion": group, "kind": kind,
                           "metadata": {"name": name, "namespace": ns}, "spec": spec})  # fmt: skip


def pod(
    server: ApiServer,
    on: str,
    ns: str,
    name: str,
    owner: dict[str, Any] | None = None,
    *,
    app: str = "",
    emptydir: bool = False,
    phase: str = "Running",
    annotations: dict[str, str] | None = None,
) -> None:
    """A pod bound to node `on`, its status as its kubelet reports it."""
    metadata: dict[str, Any] = {"name": name, "namespace": ns, "labels": {"app": app or name}}
    if owner is not None:
        metadata["ownerReferences"] = [
            {"apiVersion": owner["apiVersion"], "kind": owner["kind"], "controller": True,
             "name": owner["metadata"]["name"], "uid": owner["metadata"]["uid"]}
        ]  # fmt: skip
    if annotations:
        metadata["annotations"] = annotations
    spec: dict[str, Any] = {"nodeName": on, "containers": [{"name": "main", "image": IMAGE}]}
    if emptydir:
        spec["volumes"] = [{"name": "scratch", "emptyDir": {}}]
    create(server, {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec})
    ready = "True" if phase == "Running" else "False"
    status = {"status": {"phase": phase, "conditions": [{"type": "Ready", "status": ready}]}}
    must(server, "patch", "pod", "-n", ns, name, "--subresource=status", "--type=merge",
         "-p", json.dumps(status))  # fmt: skip


def budget(server: ApiServer, ns: str, app: str, counted: bool) -> None:
    """A budget for the `app` pods that allows no disruption: counted as the disruption
    controller would (1 healthy, 1 needed), or never counted."""
    create(server, {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                    "metadata": {"name": app, "namespace": ns},
                    "spec": {"minAvailable": 1,
                             "selector": {"matchLabels": {"app": app}}}})  # fmt: skip
    if counted:
        status = {"observedGeneration": 1, "disruptionsAllowed": 0, "currentHealthy": 1,
                  "desiredHealthy": 1, "expectedPods": 1}  # fmt: skip
        must(server, "patch", "pdb", "-n", ns, app, "--subresource=status", "--type=merge",
             "-p", json.dumps({"status": status}))  # fmt: skip


def on_node(server: ApiServer, name: str) -> dict[str, dict[str, Any]]:
    """The pods bound to the node, by namespace/name."""
    listed = json.loads(must(server, "get", "pods", "--all-namespaces", "--field-selector",
                             f"spec.nodeName={name}", "-o", "json"))  # fmt: skip
    return {f"{p['metadata']['namespace']}/{p['metadata']['name']}": p for p in listed["items"]}


def held(server: ApiServer, name: str) -> tuple[bool, str | None]:
    """(spec.unschedulable, our annotation) of the node as the server has them."""
    shown = json.loads(must(server, "get", "node", name, "-o", "json"))
    return shown["spec"].get("unschedulable", False), (
        shown["metadata"].get("annotations") or {}
    ).get(ANNOTATION)


class Kubelet:
    """The node's kubelet, for what the API server waits on: a pod given a deletionTimestamp
    (evicted, deleted) is confirmed gone, a delete of grace 0 with its UID as precondition."""

    def __init__(self, server: ApiServer, name: str) -> None:
        self.server, self.name = server, name
        self.ended: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self._stop.wait(0.2):
            listed = self.server.request(
                "GET", "/api/v1/pods", query={"fieldSelector": f"spec.nodeName={self.name}"}
            )
            for item in listed.body.get("items", []):
                metadata = item["metadata"]
                if not metadata.get("deletionTimestamp"):
                    continue
                path = f"/api/v1/namespaces/{metadata['namespace']}/pods/{metadata['name']}"
                options = {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0,
                           "preconditions": {"uid": metadata["uid"]}}  # fmt: skip
                if self.server.request("DELETE", path, options).status == 200:
                    self.ended.append(f"{metadata['namespace']}/{metadata['name']}")

    @contextmanager
    def running(self) -> Iterator[Kubelet]:
        self._thread.start()
        try:
            yield self
        finally:
            self._stop.set()
            self._thread.join(timeout=10)


def test_pods_no_budget_holds_are_evicted_and_a_daemonset_s_and_a_mirror_pod_stay(
    server: ApiServer,
) -> None:
    node(server, "k8s-free")
    namespace(server, "free-a")
    daemonset = controller(server, "DaemonSet", "kube-system", "calico-free")
    pod(server, "k8s-free", "kube-system", "calico-free-x7k2p", daemonset, app="calico-free")
    pod(server, "k8s-free", "kube-system", "kube-proxy-k8s-free",
        annotations={"kubernetes.io/config.mirror": "0f3c"})  # fmt: skip
    pod(
        server, "k8s-free", "free-a", "web-q4m2z", controller(server, "ReplicaSet", "free-a", "web")
    )
    pod(server, "k8s-free", "free-a", "train-5xk8d", controller(server, "Job", "free-a", "train"),
        emptydir=True)  # fmt: skip
    pod(server, "k8s-free", "free-a", "smoke-test", phase="Succeeded")
    kubectl = RecordingKubectl(server)
    assert cordon.cordon(kubectl, "k8s-free", "change", "upgrade").action == "cordon"
    with Kubelet(server, "k8s-free").running() as kubelet:
        started = time.monotonic()
        done = drain.drain(kubectl, "k8s-free", 60)
        took = time.monotonic() - started
    print(f"\ndrain of 3 pods, none held: {took:.1f} s")
    assert sorted(done.moved) == ["free-a/smoke-test", "free-a/train-5xk8d", "free-a/web-q4m2z"]
    assert sorted(done.kept) == ["kube-system/calico-free-x7k2p", "kube-system/kube-proxy-k8s-free"]
    assert done.emptied == ("free-a/train-5xk8d",) and done.overridden == ()
    assert sorted(on_node(server, "k8s-free")) == sorted(done.kept)
    # evicted gracefully (terminating until their kubelet ended them); the finished pod
    # went at once, as the API server deletes a finished pod
    assert sorted(kubelet.ended) == ["free-a/train-5xk8d", "free-a/web-q4m2z"]
    assert held(server, "k8s-free") == (True, "cluster-plan:change: upgrade")


def test_budgets_that_allow_no_disruption_stop_the_drain_in_time_and_delete_nothing(
    server: ApiServer,
) -> None:
    node(server, "k8s-held")
    namespace(server, "held-a")
    web = controller(server, "ReplicaSet", "held-a", "web")
    pod(server, "k8s-held", "held-a", "web-q4m2z", web, app="web")
    pod(server, "k8s-held", "held-a", "api-0", controller(server, "StatefulSet", "held-a", "api"),
        app="api")  # fmt: skip
    pod(server, "k8s-held", "held-a", "free-0", controller(server, "StatefulSet", "held-a", "free"))
    budget(server, "held-a", "web", counted=True)
    budget(server, "held-a", "api", counted=False)
    kubectl = RecordingKubectl(server)
    cordon.cordon(kubectl, "k8s-held", "change", "upgrade")
    with Kubelet(server, "k8s-held").running() as kubelet:
        started = time.monotonic()
        with pytest.raises(DrainError) as failed:
            drain.drain(kubectl, "k8s-held", TIMEOUT_S)
        took = time.monotonic() - started
    print(f"\ndrain held by two budgets, bound {TIMEOUT_S} s: failed after {took:.1f} s")
    # kubectl's bound, its 5 s between refused evictions, and the reads around it; the
    # budget not counted yet would hold kubectl's client 100 s without --request-timeout
    assert took < TIMEOUT_S + RETRY_S + 10
    message = str(failed.value)
    assert message.startswith(f"drain of k8s-held: after {TIMEOUT_S} s, pod(s) still on it: ")
    assert (
        "held-a/web-q4m2z held by PodDisruptionBudget held-a/web (0 disruption(s) allowed; "
        "1 pod(s) healthy, 1 needed)" in message
    )
    assert "held-a/api-0 held by PodDisruptionBudget held-a/api (not counted yet" in message
    assert "free-0" not in message and message.endswith("k8s-held stays cordoned")
    left = on_node(server, "k8s-held")
    assert sorted(left) == ["held-a/api-0", "held-a/web-q4m2z"]
    assert not any(p["metadata"].get("deletionTimestamp") for p in left.values())  # untouched
    assert kubelet.ended == ["held-a/free-0"]  # no budget covers it: evicted all the same
    assert held(server, "k8s-held") == (True, "cluster-plan:change: upgrade")


def test_a_bare_pod_stops_the_drain_and_force_deletes_it_and_the_held_pods(
    server: ApiServer,
) -> None:
    node(server, "k8s-force")
    namespace(server, "force-a")
    pod(server, "k8s-force", "force-a", "web-q4m2z",
        controller(server, "ReplicaSet", "force-a", "web"), app="web")  # fmt: skip
    pod(server, "k8s-force", "force-a", "notebook")
    budget(server, "force-a", "web", counted=True)
    kubectl = RecordingKubectl(server)
    cordon.cordon(kubectl, "k8s-force", "change", "removal")
    with pytest.raises(DrainError, match=r"pod\(s\) force-a/notebook declare no controller"):
        drain.drain(kubectl, "k8s-force", 60)
    assert not any(c[1] == "drain" for c in kubectl.calls)
    assert not any(p["metadata"].get("deletionTimestamp")
                   for p in on_node(server, "k8s-force").values())  # fmt: skip
    with Kubelet(server, "k8s-force").running() as kubelet:
        started = time.monotonic()
        done = drain.drain(kubectl, "k8s-force", 60, force=True)
        took = time.monotonic() - started
    print(f"\nforced drain of 2 pods: {took:.1f} s")
    assert sorted(done.moved) == ["force-a/notebook", "force-a/web-q4m2z"]
    assert done.overridden == (
        "force-a/web-q4m2z (PodDisruptionBudget force-a/web (0 disruption(s) allowed; "
        "1 pod(s) healthy, 1 needed))",
    )
    assert on_node(server, "k8s-force") == {}
    assert sorted(kubelet.ended) == ["force-a/notebook", "force-a/web-q4m2z"]  # graceful
    assert held(server, "k8s-force") == (True, "cluster-plan:change: removal")


def test_an_operator_s_cordon_is_kept_while_the_pods_are_moved(server: ApiServer) -> None:
    node(server, "k8s-op")
    namespace(server, "op-a")
    pod(server, "k8s-op", "op-a", "web-q4m2z", controller(server, "ReplicaSet", "op-a", "web"))
    must(server, "cordon", "k8s-op")
    kubectl = RecordingKubectl(server)
    cordoned = cordon.cordon(kubectl, "k8s-op", "change", "upgrade")
    assert (cordoned.action, cordoned.held_by) == ("none", "cordoned, no owner recorded")
    with Kubelet(server, "k8s-op").running():
        assert drain.drain(kubectl, "k8s-op", 60).moved == ("op-a/web-q4m2z",)
    assert held(server, "k8s-op") == (True, None)  # kubectl drain leaves the cordon as it is
    assert cordon.uncordon(kubectl, "k8s-op", "change").action == "none"
    assert held(server, "k8s-op") == (True, None)


def test_the_driver_rollout_s_drain_stops_in_time_naming_the_pod_and_its_budget(
    server: ApiServer, tmp_path: Path
) -> None:
    node(server, "k8s-role")
    namespace(server, "role-a")
    pod(server, "k8s-role", "role-a", "web-q4m2z",
        controller(server, "ReplicaSet", "role-a", "web"), app="web")  # fmt: skip
    pod(server, "k8s-role", "role-a", "free-0", controller(server, "StatefulSet", "role-a", "free"))
    budget(server, "role-a", "web", counted=True)
    (tmp_path / "bin").mkdir()
    server.kubectl_program(tmp_path / "bin" / "kubectl")
    play = [{"hosts": "localhost", "gather_facts": False,
             "vars": {"nvidia_driver_scheduler": "kubernetes",
                      "nvidia_driver_kubernetes_control_plane": "localhost",
                      "nvidia_driver_kubeconfig": str(server.admin_kubeconfig),
                      "nvidia_driver_node_name": "k8s-role",
                      "nvidia_driver_selected": {"branch": 570},
                      "nvidia_driver_drain_timeout": TIMEOUT_S},
             "tasks": [{"ansible.builtin.include_role": {"name": "nvidia_driver",
                                                         "tasks_from": "drain"}}]}]  # fmt: skip
    (tmp_path / "play.yml").write_text(json.dumps(play))
    with Kubelet(server, "k8s-role").running() as kubelet:
        started = time.monotonic()
        done = local_play(
            tmp_path / "play.yml", {"PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}"}
        )
        took = time.monotonic() - started
    out = done.stdout + done.stderr
    print(f"\nthe role's drain held by a budget, bound {TIMEOUT_S} s: failed after {took:.1f} s")
    assert done.returncode != 0, out
    # the drain's bound, kubectl's 5 s between refused evictions, the reads, and the play
    assert took < TIMEOUT_S + RETRY_S + 30, out
    assert (
        f"drain of k8s-role: after {TIMEOUT_S} s, pod(s) still on it: role-a/web-q4m2z held "
        "by PodDisruptionBudget role-a/web (0 disruption(s) allowed; 1 pod(s) healthy, "
        "1 needed); k8s-role stays cordoned" in out
    )
    assert sorted(on_node(server, "k8s-role")) == ["role-a/web-q4m2z"]
    assert kubelet.ended == ["role-a/free-0"]  # no budget covers it: evicted
    assert held(server, "k8s-role") == (True, "cluster-plan:nvidia_driver: upgrade to branch 570")
