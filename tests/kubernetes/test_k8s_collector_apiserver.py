"""The Kubernetes collector (cluster_plan.exporters.kubernetes) against a real API server:
etcd, kube-apiserver and kube-controller-manager 1.36.3 from the bundle this machine built
(tests/support/kube_apiserver.py), started once for the module with the lab-k8s plan's
ClusterConfiguration. The collector runs the bundle's kubectl as the admin, as it runs the
node's on a control plane.

No kubelet runs: the Nodes are created bare and given their status (Ready condition, kubelet
version, allocatable accelerators) through the status subresource, as a kubelet writes it; no
scheduler runs either, so the Pods are created bound (spec.nodeName) and stay Pending, which is
what a bound pod whose containers are starting looks like. `objects()` is the cluster:

- cp01 Ready, no accelerators; cpu01 Ready Unknown (its kubelet stopped reporting), one pod
  without accelerators; gpu01 Ready, 2 `nvidia.com/gpu`, one pod holding one GPU (limits
  only: the server copies them into requests), one finished pod that held one (Succeeded),
  one unbound pod asking one; infer01 cordoned, Ready False, 2 `cluster-plan.io/tpu`
  offered and a pod holding 3 (two containers, 2 + 1): a device lost under it.

The offline tests' fixtures (tests/exporters/fixtures/k8s-*.json) are these objects as this
server listed them (`record()`), and this module checks they still parse as the server's own
answers do.

Runs wherever the 1.36 bundle is built and the tests run as root; skipped with the reason
otherwise.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Sequence
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
from support.kubernetes_samples import at, samples

from cluster_plan.exporters import kubernetes
from cluster_plan.exporters.textfile import run_collector

BUNDLE = server_bundle()
WHY_NOT = unavailable(BUNDLE)
pytestmark = [pytest.mark.apiserver, pytest.mark.skipif(WHY_NOT is not None, reason=str(WHY_NOT))]

FIXTURES = Path(__file__).resolve().parents[1] / "exporters" / "fixtures"
NAMESPACE = "research"
GPU = "nvidia.com/gpu"
TPU = "cluster-plan.io/tpu"


def must(server: ApiServer, *args: str, stdin: str | None = None) -> str:
    result = server.kubectl(*args, stdin=stdin)
    assert result.returncode == 0, f"kubectl {' '.join(args)}: {result.stderr}"
    return result.stdout


def node_status(ready: str, allocatable: dict[str, str]) -> dict[str, Any]:
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return {
        "conditions": [
            {
                "type": "Ready",
                "status": ready,
                "reason": "KubeletReady" if ready == "True" else "NodeStatusUnknown",
                "message": "as a kubelet reports it",
                "lastHeartbeatTime": now,
                "lastTransitionTime": now,
            }
        ],
        "capacity": {"cpu": "8", "memory": "32Gi", "pods": "110", **allocatable},
        "allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110", **allocatable},
        "nodeInfo": {
            "kubeletVersion": "v1.36.3",
            "kubeProxyVersion": "",
            "machineID": "",
            "systemUUID": "",
            "bootID": "",
            "kernelVersion": "6.1.0",
            "osImage": "Debian GNU/Linux 12 (bookworm)",
            "containerRuntimeVersion": "containerd://2.4.2",
            "operatingSystem": "linux",
            "architecture": "amd64",
        },
    }


def make_node(server: ApiServer, name: str, ready: str, allocatable: dict[str, str]) -> None:
    manifest = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}
    must(server, "create", "-f", "-", stdin=json.dumps(manifest))
    patch = json.dumps({"status": node_status(ready, allocatable)})
    must(server, "patch", "node", name, "--subresource=status", "--type=merge", "-p", patch)


def container(name: str, limits: dict[str, str] | None = None) -> dict[str, Any]:
    return {"name": name, "image": "pause:3.10.2", "resources": {"limits": limits or {}}}


def make_pod(
    server: ApiServer, name: str, node: str | None, containers: Sequence[dict[str, Any]]
) -> None:
    spec: dict[str, Any] = {"containers": list(containers), "automountServiceAccountToken": False}
    if node:
        spec["nodeName"] = node
    manifest = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": spec,
    }
    must(server, "create", "-f", "-", stdin=json.dumps(manifest))


def wait_for_default_account(server: ApiServer, timeout_s: float = 60) -> None:
    """The ServiceAccount admission plugin refuses pods until the namespace's default
    account exists (kube-controller-manager makes it)."""
    path = f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts/default"
    deadline = time.monotonic() + timeout_s
    while server.request("GET", path).status != 200:
        assert time.monotonic() < deadline, f"no default ServiceAccount in {NAMESPACE}"
        time.sleep(0.2)


def objects(server: ApiServer) -> None:
    """The cluster of the module's docstring."""
    make_node(server, "cp01", "True", {})
    make_node(server, "cpu01", "Unknown", {})
    make_node(server, "gpu01", "True", {GPU: "2"})
    make_node(server, "infer01", "False", {TPU: "2"})
    must(server, "cordon", "infer01")
    must(server, "create", "namespace", NAMESPACE)
    wait_for_default_account(server)
    make_pod(server, "web", "cpu01", [container("web")])
    make_pod(server, "train", "gpu01", [container("train", {GPU: "1"})])
    make_pod(server, "finished", "gpu01", [container("train", {GPU: "1"})])
    done = json.dumps({"status": {"phase": "Succeeded"}})
    must(
        server, "patch", "pod", "finished", "-n", NAMESPACE, "--subresource=status",
        "--type=merge", "-p", done,
    )  # fmt: skip
    make_pod(server, "queued", None, [container("train", {GPU: "1"})])
    serving = [container("model", {TPU: "2"}), container("cache", {TPU: "1"})]
    make_pod(server, "serve", "infer01", serving)


@pytest.fixture(scope="module")
def server() -> Iterator[ApiServer]:
    assert BUNDLE is not None
    with running(from_bundle(BUNDLE, cluster_configuration("lab-k8s"))) as started:
        objects(started)
        yield started


def test_the_collector_reads_nodes_and_the_pods_bound_to_them(server: ApiServer) -> None:
    run = RecordingKubectl(server, timeout_s=30)
    got = samples(kubernetes.collect_kubernetes(server.admin_kubeconfig, run))
    assert got[at("apiserver_up")] == 1
    assert 0 < got[at("apiserver_readyz_seconds")] < 30
    ready = {
        node: status
        for (name, labels), value in got.items()
        if name.endswith("node_ready") and value == 1
        for node, status in [(dict(labels)["node"], dict(labels)["status"])]
    }
    assert ready == {"cp01": "true", "cpu01": "unknown", "gpu01": "true", "infer01": "false"}
    assert got[at("node_unschedulable", node="infer01")] == 1
    assert got[at("node_unschedulable", node="gpu01")] == 0
    assert got[at("node_info", node="gpu01", kubelet_version="v1.36.3")] == 1
    # one GPU held: the finished pod and the unbound one hold none
    assert got[at("node_allocatable", node="gpu01", resource=GPU)] == 2
    assert got[at("node_allocated", node="gpu01", resource=GPU)] == 1
    # a device lost under the running pod: it holds 3 of the 2 offered
    assert got[at("node_allocatable", node="infer01", resource=TPU)] == 2
    assert got[at("node_allocated", node="infer01", resource=TPU)] == 3
    # no accelerator series for nodes without accelerators (cpu, memory are not counted)
    assert not [k for k in got if k[0].endswith("allocatable") and dict(k[1])["node"] == "cpu01"]
    assert [c[-1] for c in run.calls] == ["/readyz", "/api/v1/nodes", kubernetes.PODS]
    # the collector's own --kubeconfig comes after the harness's and wins: kubectl keeps
    # the last of a repeated flag
    assert {f"--kubeconfig={server.admin_kubeconfig}"} == {c[1] for c in run.calls}


def test_the_server_filters_finished_pods_and_the_fixtures_parse_as_its_answers(
    server: ApiServer,
) -> None:
    run = RecordingKubectl(server, timeout_s=30)
    _, out, _ = run(kubernetes.kubectl(server.admin_kubeconfig, kubernetes.PODS))
    names = sorted(item["metadata"]["name"] for item in json.loads(out)["items"])
    assert names == ["queued", "serve", "train", "web"]  # "finished" left out by the server
    nodes = kubernetes.parse_nodes(json.loads((FIXTURES / "k8s-nodes.json").read_text()))
    _, live, _ = run(kubernetes.kubectl(server.admin_kubeconfig, kubernetes.NODES))
    assert nodes == kubernetes.parse_nodes(json.loads(live))
    pods = json.loads((FIXTURES / "k8s-pods.json").read_text())
    assert kubernetes.parse_allocated(pods) == kubernetes.parse_allocated(json.loads(out))


def test_an_api_server_that_does_not_answer_is_a_metric_not_a_failure(
    server: ApiServer, tmp_path: Path
) -> None:
    """The admin kubeconfig with the server's port changed to one nothing listens on: kubectl
    fails /readyz, the collector writes apiserver_up 0 and no node series, and succeeds."""
    text = server.admin_kubeconfig.read_text().replace(":6443", ":6553")
    assert ":6553" in text
    elsewhere = tmp_path / "admin.conf"
    elsewhere.write_text(text)
    run = RecordingKubectl(server, timeout_s=30)
    textfiles = tmp_path / "textfile"
    textfiles.mkdir()
    failure = run_collector(
        textfiles, "kubernetes", lambda: kubernetes.collect_kubernetes(elsewhere, run)
    )
    assert failure is None
    written = (textfiles / "cluster_plan_kubernetes.prom").read_text()
    assert "cluster_plan_kubernetes_apiserver_up 0.0" in written
    assert "cluster_plan_kubernetes_node_ready{" not in written
    assert [c[-1] for c in run.calls] == ["/readyz"]


def record(server: ApiServer) -> None:
    """Write the offline tests' fixtures from this server's answers (run by hand:
    `python -c 'from test_k8s_collector_apiserver import main; main()'` in tests/kubernetes)."""
    run = RecordingKubectl(server, timeout_s=30)
    for name, path in (("k8s-nodes.json", kubernetes.NODES), ("k8s-pods.json", kubernetes.PODS)):
        _, out, _ = run(kubernetes.kubectl(server.admin_kubeconfig, path))
        (FIXTURES / name).write_text(json.dumps(json.loads(out), indent=1, sort_keys=True) + "\n")


def main() -> None:
    assert BUNDLE is not None, WHY_NOT
    with running(from_bundle(BUNDLE, cluster_configuration("lab-k8s"))) as started:
        objects(started)
        record(started)
