"""The plan's monitoring as prometheus-operator objects, for clusters that run the operator.

For a plan with a `monitoring` section (docs/monitoring.md), in the namespace
`cluster-plan-monitoring`:

- the alert rules of `cluster_plan.monitoring.rules`, one PrometheusRule per rule group
  (monitoring.coreos.com/v1), evaluated at the plan's `evaluation_interval_s`;
- every host's node_exporter (port 9100; the project's GPU, Slurm and state collectors are
  its textfile files, so they are scraped with it) as selectorless Services with
  EndpointSlices at the hosts' management addresses, one Service per node group and rack,
  whose annotations hold the labels the file_sd targets carry (`node_group`, `rack`, `pool`,
  `teams`: `,a,b,` is no label value); one ServiceMonitor turns them into the `node` job with
  the same labels, so the rules read the same series as on the monitoring server;
- with Ceph, the managers' prometheus module (port 9283) as the `ceph` job.

node_exporter and the managers run on the hosts, not in pods (site.yml installs them), hence
Services without selectors. These files need the operator's CRDs, which this project does not
install: the role does not apply them (they are under `monitoring/`, not `objects/`).
"""

from __future__ import annotations

import hashlib
import ipaddress
import re
from collections import defaultdict
from typing import Any, cast

from cluster_plan.kubernetes import names
from cluster_plan.kubernetes.cluster import Expanded
from cluster_plan.monitoring.rules import alert_rules
from cluster_plan.monitoring.targets import CEPH_MGR_PORT, NODE_EXPORTER_PORT, node_labels
from cluster_plan.plan.contract import ExpandedPlan

NAMESPACE = "cluster-plan-monitoring"
OPERATOR_API = "monitoring.coreos.com/v1"
PORT_NAME = "metrics"
SLICE_SIZE = 1000  # the most endpoints an EndpointSlice may hold
# The target labels of the node job other than `node`, as Service annotations.
NODE_LABELS = ("node_group", "rack", "pool", "teams")
_APP_LABEL = "app.kubernetes.io/name"
_NODE_APP = "node-exporter"
_CEPH_APP = "ceph-mgr"
# Labels the operator adds to every target; the file_sd jobs have none of them, and the rules
# group by what is left.
_OPERATOR_LABELS = "namespace|service|endpoint|pod|container"

Document = dict[str, Any]


def annotation(label: str) -> str:
    return f"{names.DOMAIN}/{label.replace('_', '-')}"


def meta_label(key: str) -> str:
    """The discovery label Prometheus gives a Service annotation (non-alphanumerics as `_`)."""
    return "__meta_kubernetes_service_annotation_" + re.sub(r"[^a-zA-Z0-9_]", "_", key)


def _meta(name: str, app: str) -> Document:
    return {
        "name": name,
        "namespace": NAMESPACE,
        "labels": {_APP_LABEL: app, **names.MANAGED_BY},
    }


def _service_name(prefix: str, *parts: str) -> str:
    """`prefix-part-...` as a Service name (DNS-1035: a letter first, 63 at most), or the
    prefix and a digest of the parts when the plan's names do not fit."""
    name = "-".join([prefix, *(names.object_name(p) for p in parts if p)])
    if names.is_object_name(name):
        return name
    return f"{prefix}-{hashlib.sha256('/'.join(parts).encode()).hexdigest()[:12]}"


def _family(address: str) -> str:
    return "IPv6" if ipaddress.ip_address(address).version == 6 else "IPv4"


def _service(name: str, app: str, port: int, annotations: dict[str, str]) -> Document:
    meta = _meta(name, app)
    if annotations:
        meta["annotations"] = annotations
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta,
        # no selector: the endpoints are the hosts', listed below
        "spec": {
            "clusterIP": "None",
            "ports": [{"name": PORT_NAME, "port": port, "targetPort": port, "protocol": "TCP"}],
        },
    }


def _slices(service: str, app: str, port: int, hosts: list[tuple[str, str]]) -> list[Document]:
    """EndpointSlices of a selectorless Service: (hostname, address), one family."""
    family = _family(hosts[0][1])
    chunks = [hosts[i : i + SLICE_SIZE] for i in range(0, len(hosts), SLICE_SIZE)]
    return [
        {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {
                **_meta(f"{service}-{n}", app),
                "labels": {
                    _APP_LABEL: app,
                    **names.MANAGED_BY,
                    "kubernetes.io/service-name": service,
                    # not the EndpointSlice controller's: it leaves these slices alone (a
                    # label value: no '/', so a domain as upstream's controllers name theirs)
                    "endpointslice.kubernetes.io/managed-by": names.DOMAIN,
                },
            },
            "addressType": family,
            "ports": [{"name": PORT_NAME, "port": port, "protocol": "TCP"}],
            "endpoints": [
                {"addresses": [address], "hostname": hostname, "conditions": {"ready": True}}
                for hostname, address in chunk
            ],
        }
        for n, chunk in enumerate(chunks, 1)
    ]


def node_targets(expanded: ExpandedPlan) -> list[Document]:
    """A Service and its EndpointSlices per set of target labels (node group, rack, pool,
    teams) and address family."""
    sets: dict[tuple[tuple[str, str], ...], list[tuple[str, str]]] = defaultdict(list)
    for host in expanded["hosts"].values():
        labels = node_labels(expanded, host)
        key = tuple((k, labels[k]) for k in NODE_LABELS if k in labels)
        key += (("family", _family(host["address"])),)
        sets[key].append((host["hostname"], host["address"]))
    objects: list[Document] = []
    for key, hosts in sorted(sets.items()):
        labels = dict(key)
        family = labels.pop("family")
        parts = [labels["node_group"], labels.get("rack", "")] + (
            ["v6"] if family == "IPv6" else []
        )
        name = _service_name("node", *parts)
        notes = {annotation(k): v for k, v in labels.items()}
        objects.append(_service(name, _NODE_APP, NODE_EXPORTER_PORT, notes))
        objects += _slices(name, _NODE_APP, NODE_EXPORTER_PORT, hosts)
    return objects


def ceph_targets(expanded: ExpandedPlan) -> list[Document]:
    """The Ceph managers, one Service per address family (the active one answers)."""
    if not expanded["storage"].get("ceph"):
        return []
    by_family: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for name in expanded["groups"].get("ceph_mgr", []):
        address = expanded["hosts"][name]["address"]
        by_family[_family(address)].append((name, address))
    objects: list[Document] = []
    for family, hosts in sorted(by_family.items()):
        name = _service_name(_CEPH_APP, "v6" if family == "IPv6" else "")
        objects.append(_service(name, _CEPH_APP, CEPH_MGR_PORT, {}))
        objects += _slices(name, _CEPH_APP, CEPH_MGR_PORT, hosts)
    return objects


def _relabel_from(source: str, target: str) -> Document:
    return {"action": "replace", "sourceLabels": [source], "targetLabel": target}


def _monitor(name: str, app: str, job: str, labels: list[Document], interval: str) -> Document:
    """A ServiceMonitor over the Services of `app`: job `job`, the exporters' own labels kept
    (honor_labels, as in prometheus.yml), then `labels`, less the operator's own labels."""
    relabelings = [
        *labels,
        {"action": "replace", "targetLabel": "job", "replacement": job},
        {"action": "labeldrop", "regex": _OPERATOR_LABELS},
    ]
    return {
        "apiVersion": OPERATOR_API,
        "kind": "ServiceMonitor",
        "metadata": _meta(name, app),
        "spec": {
            "selector": {"matchLabels": {_APP_LABEL: app}},
            "namespaceSelector": {"matchNames": [NAMESPACE]},
            "serviceDiscoveryRole": "EndpointSlice",
            "endpoints": [
                {
                    "port": PORT_NAME,
                    "interval": interval,
                    "honorLabels": True,
                    "relabelings": relabelings,
                }
            ],
        },
    }


def service_monitors(expanded: ExpandedPlan, interval: str) -> list[Document]:
    hostname = "__meta_kubernetes_endpointslice_endpoint_hostname"
    node = [_relabel_from(hostname, "node")]
    node += [_relabel_from(meta_label(annotation(k)), k) for k in NODE_LABELS]
    monitors = [_monitor("node", _NODE_APP, "node", node, interval)]
    if ceph_targets(expanded):
        mgr = [_relabel_from(hostname, "mgr")]
        monitors.append(_monitor("ceph", _CEPH_APP, "ceph", mgr, interval))
    return monitors


def rule_objects(expanded: ExpandedPlan, interval: str) -> list[Document]:
    """One PrometheusRule per group of the plan's rule file, evaluated at the plan's interval."""
    return [
        {
            "apiVersion": OPERATOR_API,
            "kind": "PrometheusRule",
            "metadata": _meta(group["name"], "prometheus"),
            "spec": {"groups": [{"name": group["name"], "interval": interval, **group}]},
        }
        for group in alert_rules(expanded)["groups"]
    ]


def monitoring_objects(expanded: Expanded) -> dict[str, list[Document]]:
    """File stem -> objects; nothing for a plan without a `monitoring` section."""
    plan = cast(ExpandedPlan, expanded)  # the renderer's input is the expanded plan
    monitoring = plan["monitoring"]
    if monitoring is None:
        return {}
    namespace = {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": NAMESPACE, "labels": dict(names.MANAGED_BY)},
    }
    scrape = f"{monitoring['scrape_interval_s']}s"
    return {
        "10-targets": [namespace, *node_targets(plan), *ceph_targets(plan)],
        "20-service-monitors": service_monitors(plan, scrape),
        "30-rules": rule_objects(plan, f"{monitoring['evaluation_interval_s']}s"),
    }
