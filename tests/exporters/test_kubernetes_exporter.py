"""The Kubernetes textfile collector: recorded API answers in, exposition text out.

fixtures/k8s-nodes.json and k8s-pods.json are a real kube-apiserver 1.36.3's answers to the
collector's two lists (`kubectl get --raw`), recorded by tests/kubernetes/
test_k8s_collector_apiserver.py (which checks they still parse as that server's answers):
cp01 Ready; cpu01 Ready Unknown (its kubelet stopped reporting); gpu01 Ready with 2
`nvidia.com/gpu` and a pod holding one; infer01 cordoned, Ready False, 2 `cluster-plan.io/tpu`
offered and a pod holding 3; an unbound pod asking a GPU. The pods' list is the server's
answer to the collector's field selector (no finished pod in it).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from support.kubernetes_samples import at, samples

from cluster_plan.exporters import kubernetes
from cluster_plan.exporters.kubernetes import (
    NODES,
    PODS,
    READYZ,
    collect_kubernetes,
    parse_allocated,
    parse_nodes,
    pod_requests,
)
from cluster_plan.exporters.textfile import CollectorError, run_collector
from cluster_plan.kubernetes import names

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).parent / "fixtures"
NODES_JSON = (FIXTURES / "k8s-nodes.json").read_text()
PODS_JSON = (FIXTURES / "k8s-pods.json").read_text()


class Api:
    """kubectl get --raw's answers, each call kept; `ready` is what /readyz says."""

    def __init__(self, ready: tuple[int, str, str] = (0, "ok", ""), **answers: str) -> None:
        self.answers = {READYZ: ready, NODES: (0, NODES_JSON, ""), PODS: (0, PODS_JSON, "")}
        self.answers.update({k: (0, v, "") for k, v in answers.items()})
        self.calls: list[list[str]] = []

    def __call__(self, argv: Sequence[str]) -> tuple[int, str, str]:
        self.calls.append(list(argv))
        return self.answers[argv[-1]]


class Clock:
    def __init__(self, *times: float) -> None:
        self.times = list(times)

    def __call__(self) -> float:
        return self.times.pop(0)


@pytest.fixture
def kubeconfig(tmp_path: Path) -> Path:
    path = tmp_path / "admin.conf"
    path.write_text("apiVersion: v1\nkind: Config\n")
    return path


def test_the_recorded_cluster_becomes_every_family(kubeconfig: Path) -> None:
    api = Api()
    got = samples(collect_kubernetes(kubeconfig, api, Clock(10.0, 10.042)))
    assert got[at("apiserver_up")] == 1
    assert got[at("apiserver_readyz_seconds")] == pytest.approx(0.042)
    for node, status in (("cp01", "true"), ("cpu01", "unknown"), ("gpu01", "true"),
                         ("infer01", "false")):  # fmt: skip
        for each in ("true", "false", "unknown"):
            assert got[at("node_ready", node=node, status=each)] == (each == status), node
        assert got[at("node_info", node=node, kubelet_version="v1.36.3")] == 1
    assert got[at("node_unschedulable", node="infer01")] == 1
    assert got[at("node_unschedulable", node="cp01")] == 0
    accelerators = {
        (name.rsplit("_", 1)[1], dict(labels)["node"], dict(labels)["resource"]): value
        for (name, labels), value in got.items()
        if name.endswith(("_allocatable", "_allocated"))
    }
    assert accelerators == {
        ("allocatable", "gpu01", "nvidia.com/gpu"): 2,
        ("allocated", "gpu01", "nvidia.com/gpu"): 1,  # the unbound pod holds nothing
        ("allocatable", "infer01", "cluster-plan.io/tpu"): 2,
        ("allocated", "infer01", "cluster-plan.io/tpu"): 3,
    }
    assert [c[-1] for c in api.calls] == [READYZ, NODES, PODS]
    assert api.calls[0][:4] == [
        "kubectl", f"--kubeconfig={kubeconfig}", "--request-timeout=10s", "get"
    ]  # fmt: skip


def test_the_resources_counted_are_the_device_plugins() -> None:
    """The collector does not import the renderer's names (the nodes' zip would load its
    dependencies): its prefixes are checked against them here."""
    assert kubernetes.is_accelerator(names.NVIDIA_GPU)
    assert kubernetes.is_accelerator(names.extended_resource("tpu"))
    assert kubernetes.is_accelerator("nvidia.com/mig-1g.10gb")
    assert not kubernetes.is_accelerator("cpu")
    assert not kubernetes.is_accelerator("hugepages-2Mi")


@pytest.mark.parametrize(
    ("readyz", "why"),
    [
        ((1, "", "The connection to the server 10.44.0.10:6443 was refused"), "refused"),
        ((1, "", 'Error from server (InternalError): "[-]etcd failed"'), "not ready"),
        ((124, "", "kubectl: no answer in 30s"), "hung"),
        ((0, "not ok", ""), "another answer"),
    ],
)
def test_an_api_server_not_ready_is_a_metric_and_the_nodes_are_left_out(
    kubeconfig: Path, readyz: tuple[int, str, str], why: str
) -> None:
    api = Api(ready=readyz)
    got = samples(collect_kubernetes(kubeconfig, api, Clock(1.0, 3.5)))
    assert got[at("apiserver_up")] == 0, why
    assert got[at("apiserver_readyz_seconds")] == 2.5
    assert not [k for k in got if "node_" in k[0]]
    assert [c[-1] for c in api.calls] == [READYZ]


def test_a_missing_kubeconfig_or_kubectl_fails_the_collector(
    tmp_path: Path, kubeconfig: Path
) -> None:
    with pytest.raises(CollectorError, match=r"admin.conf: No such file .*admin kubeconfig"):
        collect_kubernetes(tmp_path / "none" / "admin.conf", Api())
    with pytest.raises(CollectorError, match="not a regular file"):
        collect_kubernetes(tmp_path, Api())
    with pytest.raises(CollectorError, match="kubectl: command not found"):
        collect_kubernetes(kubeconfig, Api(ready=(127, "", "kubectl: command not found")))


@pytest.mark.parametrize(
    ("answers", "message"),
    [
        ({NODES: "<html>"}, "/api/v1/nodes: not JSON"),
        ({NODES: "[]"}, "/api/v1/nodes: expected a list object with items"),
        ({NODES: '{"items": [{"metadata": {}}]}'}, "item 0: no metadata.name"),
        (
            {NODES: '{"items": [{"metadata": {"name": "gpu01"}, '
                    '"status": {"allocatable": {"nvidia.com/gpu": "1.5"}}}]}'},
            "gpu01: allocatable nvidia.com/gpu: not a whole number of devices: '1.5'",
        ),
        ({PODS: '{"items": ["pod"]}'}, "/api/v1/pods: an item is not an object"),
    ],
)  # fmt: skip
def test_an_answer_of_another_shape_fails_the_collector(
    kubeconfig: Path, answers: dict[str, str], message: str
) -> None:
    api = Api()
    api.answers.update({k: (0, v, "") for k, v in answers.items()})
    with pytest.raises(CollectorError, match=message.replace(".", "[.]")):
        collect_kubernetes(kubeconfig, api)


def test_a_list_kubectl_cannot_read_fails_the_collector(kubeconfig: Path) -> None:
    api = Api()
    api.answers[PODS] = (1, "", 'Error from server (Forbidden): pods is forbidden: User "x"')
    with pytest.raises(CollectorError, match=r"get --raw /api/v1/pods.*: exit 1: .*Forbidden"):
        collect_kubernetes(kubeconfig, api)


def test_a_failing_run_removes_the_previous_metrics(tmp_path: Path, kubeconfig: Path) -> None:
    textfiles = tmp_path / "textfile"
    textfiles.mkdir()
    assert (
        run_collector(textfiles, "kubernetes", lambda: collect_kubernetes(kubeconfig, Api()))
        is None
    )
    metrics = textfiles / "cluster_plan_kubernetes.prom"
    assert (
        'cluster_plan_kubernetes_node_ready{node="cpu01",status="unknown"} 1.0'
        in metrics.read_text()
    )
    broken = Api()
    broken.answers[NODES] = (0, "{", "")
    failure = run_collector(textfiles, "kubernetes", lambda: collect_kubernetes(kubeconfig, broken))
    assert failure is not None and "not JSON" in failure
    assert not metrics.exists()
    status = (textfiles / "cluster_plan_collector_kubernetes.prom").read_text()
    assert 'cluster_plan_collector_success{collector="kubernetes"} 0' in status


def pod(phase: str, node: str | None, **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"namespace": "research", "name": "p"},
        "spec": {**({"nodeName": node} if node else {}), **spec},
        "status": {"phase": phase},
    }


def asks(count: int, how: str = "limits", resource: str = "nvidia.com/gpu") -> dict[str, Any]:
    return {"name": "c", "resources": {how: {resource: str(count), "cpu": "500m"}}}


def test_a_pod_holds_what_the_scheduler_counts() -> None:
    # containers add up; requests win over limits (the server makes them equal)
    assert pod_requests({"containers": [asks(2), asks(1, "requests")]}, "p") == {
        "nvidia.com/gpu": 3
    }
    # an init container runs alone: the larger of it and the containers
    assert pod_requests({"containers": [asks(1)], "initContainers": [asks(4)]}, "p") == {
        "nvidia.com/gpu": 4
    }
    assert pod_requests({"containers": [asks(3)], "initContainers": [asks(2)]}, "p") == {
        "nvidia.com/gpu": 3
    }
    # a sidecar (an init container that keeps running) adds to both
    sidecar = {**asks(1), "restartPolicy": "Always"}
    assert pod_requests({"containers": [asks(2)], "initContainers": [sidecar, asks(2)]}, "p") == {
        "nvidia.com/gpu": 3
    }
    assert pod_requests({"containers": [{"name": "c"}]}, "p") == {}


def test_only_bound_unfinished_pods_hold_devices() -> None:
    document = {
        "items": [
            pod("Running", "gpu01", containers=[asks(2)]),
            pod("Pending", "gpu01", containers=[asks(1)]),  # bound, starting
            pod("Pending", None, containers=[asks(4)]),  # not scheduled
            pod("Succeeded", "gpu01", containers=[asks(8)]),
            pod("Failed", "gpu01", containers=[asks(8)]),
            pod("Running", "infer01", containers=[asks(1, resource="cluster-plan.io/tpu")]),
        ]
    }
    assert parse_allocated(document) == {
        "gpu01": {"nvidia.com/gpu": 3},
        "infer01": {"cluster-plan.io/tpu": 1},
    }


def test_a_node_without_a_ready_condition_is_unknown() -> None:
    (node,) = parse_nodes({"items": [{"metadata": {"name": "new01"}, "status": {}}]})
    assert (node.ready, node.unschedulable, node.allocatable) == ("unknown", False, {})
    recorded = {n.name: n for n in parse_nodes(json.loads(NODES_JSON))}
    assert recorded["gpu01"].allocatable == {"nvidia.com/gpu": 2}


def test_the_command_writes_the_files_with_a_stand_in_kubectl(tmp_path: Path) -> None:
    """`cluster-plan exporter kubernetes` with a kubectl on PATH that answers from the fixtures;
    exit 0, then exit 1 once the kubeconfig is gone (success 0, the reason on stderr)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    kubectl = bin_dir / "kubectl"
    kubectl.write_text(
        "#!/bin/sh\n"
        "for last; do :; done\n"
        f'case "$last" in /readyz) echo ok ;; /api/v1/nodes) cat {FIXTURES / "k8s-nodes.json"} ;;'
        f" *) cat {FIXTURES / 'k8s-pods.json'} ;; esac\n"
    )
    kubectl.chmod(0o755)
    config = tmp_path / "admin.conf"
    config.write_text("kind: Config\n")
    textfiles = tmp_path / "textfile"
    textfiles.mkdir()
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    argv = [sys.executable, "-m", "cluster_plan", "exporter", "kubernetes",
            "--textfile-dir", str(textfiles), "--kubeconfig", str(config)]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=ROOT, check=False)
    assert done.returncode == 0, done.stderr
    text = (textfiles / "cluster_plan_kubernetes.prom").read_text()
    assert (
        'cluster_plan_kubernetes_node_allocated{node="infer01",resource="cluster-plan.io/tpu"} 3.0'
        in text
    )
    config.unlink()
    failed = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=ROOT, check=False)
    assert failed.returncode == 1
    assert "admin.conf" in failed.stderr and "Traceback" not in failed.stderr
    status = (textfiles / "cluster_plan_collector_kubernetes.prom").read_text()
    assert status.endswith('cluster_plan_collector_success{collector="kubernetes"} 0\n')
