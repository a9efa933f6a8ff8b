"""The Kubernetes collector (on the first control plane): each node's Ready condition, cordon
and kubelet version, whether the API server is ready and how long it took to say so, and per
node the accelerators it offers and the ones its pods hold, as the API server sees them.

The API server is read with the node's kubectl and admin kubeconfig (`kubectl get --raw`,
JSON), as the role's own tasks and the cordon read it: kubectl knows every form a kubeconfig
takes, and the node needs no Python client. Each answer is parsed by a pure function;
`collect_kubernetes` runs kubectl through an injected runner.

An API server that is not ready (or not reachable) is a metric, not a collector failure, as
slurmdbd is for the Slurm collector: the collector then writes what it knows (apiserver_up 0)
and leaves the nodes out. A kubeconfig that is not there, kubectl missing, or an answer of
another shape fails the collector.
"""

from __future__ import annotations

import json
import os
import stat
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prometheus_client.metrics_core import Metric

from cluster_plan.exporters.slurm import Runner, run_command
from cluster_plan.exporters.textfile import CollectorError, family
from cluster_plan.monitoring import metrics

# kubeadm writes it on every control plane; the role passes the plan's path
ADMIN_KUBECONFIG = Path("/etc/kubernetes/admin.conf")
# The resources counted: NVIDIA's device plugin's (nvidia.com/gpu, MIG profiles) and the
# project's for the other accelerators (cluster_plan.kubernetes.names: NVIDIA_GPU, DOMAIN;
# not imported, so that the nodes' zip does not load the renderer and its dependencies).
ACCELERATOR_PREFIXES = ("nvidia.com/", "cluster-plan.io/")
REQUEST_TIMEOUT = "10s"  # kubectl's own limit on one request; the run's is the runner's
READYZ = "/readyz"
NODES = "/api/v1/nodes"
# Pods bound to a node and not finished hold their devices; a pending pod that is bound
# (its containers still starting) holds them already.
PODS = "/api/v1/pods?fieldSelector=status.phase%21%3DSucceeded%2Cstatus.phase%21%3DFailed"
READY_STATUSES = ("true", "false", "unknown")

Clock = Callable[[], float]


@dataclass(frozen=True)
class Node:
    name: str
    ready: str  # one of READY_STATUSES; unknown also when the node has no Ready condition
    unschedulable: bool
    kubelet_version: str
    allocatable: dict[str, int]  # accelerator resource -> count


def is_accelerator(resource: str) -> bool:
    return resource.startswith(ACCELERATOR_PREFIXES)


def quantity(value: Any, where: str) -> int:
    """A device count as the API writes it (`"4"`); extended resources are whole numbers."""
    text = str(value).strip()
    if not text.isdigit():
        raise CollectorError(f"{where}: not a whole number of devices: {value!r}")
    return int(text)


def _items(document: Any, what: str) -> list[dict[str, Any]]:
    if not isinstance(document, dict) or not isinstance(document.get("items"), list):
        raise CollectorError(f"{what}: expected a list object with items")
    items = document["items"]
    if not all(isinstance(item, dict) for item in items):
        raise CollectorError(f"{what}: an item is not an object")
    return items


def _ready(conditions: Any) -> str:
    for condition in conditions if isinstance(conditions, list) else []:
        if isinstance(condition, dict) and condition.get("type") == "Ready":
            status = str(condition.get("status", "")).lower()
            return status if status in READY_STATUSES else "unknown"
    return "unknown"  # registered, and not reported on yet


def parse_nodes(document: Any) -> list[Node]:
    """The NodeList of NODES."""
    nodes = []
    for number, item in enumerate(_items(document, NODES)):
        name = (item.get("metadata") or {}).get("name")
        if not isinstance(name, str) or not name:
            raise CollectorError(f"{NODES}: item {number}: no metadata.name")
        status = item.get("status") or {}
        allocatable = status.get("allocatable") or {}
        nodes.append(
            Node(
                name=name,
                ready=_ready(status.get("conditions")),
                unschedulable=bool((item.get("spec") or {}).get("unschedulable")),
                kubelet_version=str((status.get("nodeInfo") or {}).get("kubeletVersion", "")),
                allocatable={
                    resource: quantity(count, f"{NODES}: {name}: allocatable {resource}")
                    for resource, count in sorted(allocatable.items())
                    if is_accelerator(resource)
                },
            )
        )
    return nodes


def _container_requests(container: Any, where: str) -> dict[str, int]:
    resources = (container or {}).get("resources") or {}
    # the API server copies limits into requests for extended resources; older objects and
    # recorded answers may have limits only
    asked = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
    return {r: quantity(v, f"{where}: {r}") for r, v in asked.items() if is_accelerator(r)}


def pod_requests(spec: Mapping[str, Any], where: str) -> dict[str, int]:
    """What a pod holds of each accelerator, as the scheduler counts it: its containers and
    sidecars (init containers that keep running) together, or its largest other init
    container with the sidecars, whichever is more."""
    held: dict[str, int] = defaultdict(int)
    largest_init: dict[str, int] = defaultdict(int)
    for container in spec.get("containers") or []:
        for resource, count in _container_requests(container, where).items():
            held[resource] += count
    sidecars: dict[str, int] = defaultdict(int)
    for container in spec.get("initContainers") or []:
        asked = _container_requests(container, where)
        if (container or {}).get("restartPolicy") == "Always":
            for resource, count in asked.items():
                sidecars[resource] += count
        for resource, count in asked.items():
            largest_init[resource] = max(largest_init[resource], count)
    return {
        r: max(held[r] + sidecars[r], largest_init[r] + sidecars[r])
        for r in sorted({*held, *largest_init})
    }


def parse_allocated(document: Any) -> dict[str, dict[str, int]]:
    """{node: {resource: count}} of the PodList of PODS: the bound pods' accelerators."""
    allocated: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for item in _items(document, "/api/v1/pods"):
        spec = item.get("spec") or {}
        node = spec.get("nodeName")
        if not node or (item.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        meta = item.get("metadata") or {}
        where = f"/api/v1/pods: {meta.get('namespace')}/{meta.get('name')}"
        for resource, count in pod_requests(spec, where).items():
            allocated[node][resource] += count
    return {node: dict(held) for node, held in allocated.items()}


def kubernetes_families(
    apiserver_up: bool,
    readyz_s: float,
    nodes: list[Node],
    allocated: dict[str, dict[str, int]],
) -> Iterator[Metric]:
    """The cluster_plan_kubernetes_* families (pure). Every accelerator a node offers has an
    allocated series (0 when no pod holds one), and one its pods hold that it no longer
    offers has both (allocatable 0: a device lost under running pods)."""
    up = family(metrics.K8S_APISERVER_UP)
    up.add_metric([], 1 if apiserver_up else 0)
    latency = family(metrics.K8S_APISERVER_READYZ)
    latency.add_metric([], readyz_s)
    ready = family(metrics.K8S_NODE_READY)
    cordoned = family(metrics.K8S_NODE_UNSCHEDULABLE)
    info = family(metrics.K8S_NODE_INFO)
    offered = family(metrics.K8S_NODE_ALLOCATABLE)
    held = family(metrics.K8S_NODE_ALLOCATED)
    for node in sorted(nodes, key=lambda n: n.name):
        for status in READY_STATUSES:
            ready.add_metric([node.name, status], 1 if status == node.ready else 0)
        cordoned.add_metric([node.name], 1 if node.unschedulable else 0)
        info.add_metric([node.name, node.kubelet_version], 1)
        used = allocated.get(node.name, {})
        for resource in sorted({*node.allocatable, *used}):
            offered.add_metric([node.name, resource], node.allocatable.get(resource, 0))
            held.add_metric([node.name, resource], used.get(resource, 0))
    yield from (up, latency, ready, cordoned, info, offered, held)


def kubectl(kubeconfig: Path, path: str) -> list[str]:
    return [
        "kubectl",
        f"--kubeconfig={kubeconfig}",
        f"--request-timeout={REQUEST_TIMEOUT}",
        "get",
        "--raw",
        path,
    ]


def _check_kubeconfig(kubeconfig: Path) -> None:
    """A missing kubeconfig is the collector's fault, not the API server's: kubectl's exit
    status alone would not tell them apart."""
    try:
        mode = os.stat(kubeconfig).st_mode
    except OSError as exc:
        raise CollectorError(f"{kubeconfig}: {exc.strerror} (the admin kubeconfig)") from None
    if not stat.S_ISREG(mode):
        raise CollectorError(f"{kubeconfig}: not a regular file (the admin kubeconfig)")


def _json(run: Runner, kubeconfig: Path, path: str) -> Any:
    argv = kubectl(kubeconfig, path)
    code, out, err = run(argv)
    if code != 0:
        raise CollectorError(f"kubectl get --raw {path}: exit {code}: {err.strip() or out.strip()}")
    try:
        return json.loads(out)
    except json.JSONDecodeError as exc:
        raise CollectorError(f"kubectl get --raw {path}: not JSON: {exc}") from None


def collect_kubernetes(
    kubeconfig: Path = ADMIN_KUBECONFIG,
    run: Runner = run_command,
    clock: Clock = time.monotonic,
) -> list[Any]:
    """Ask the API server; CollectorError when kubectl or the kubeconfig fails us, or an
    answer is not what the API writes."""
    _check_kubeconfig(kubeconfig)
    started = clock()
    code, out, err = run(kubectl(kubeconfig, READYZ))
    readyz_s = clock() - started
    if code == 127:
        raise CollectorError(err.strip() or "kubectl: command not found")
    if code != 0 or out.strip() != "ok":
        return list(kubernetes_families(False, readyz_s, [], {}))
    nodes = parse_nodes(_json(run, kubeconfig, NODES))
    allocated = parse_allocated(_json(run, kubeconfig, PODS))
    return list(kubernetes_families(True, readyz_s, nodes, allocated))
