"""Everything the plan becomes in Kubernetes, as data and as files to review and diff.

Files (`cluster-plan k8s render PLAN -o DIR`, and /etc/kubernetes/cluster-plan on the first
control plane):

    objects/NN-*.yaml            API objects, one per document, applied in file order
    kubeadm/<node>.yaml          kubeadm init or join configuration
    kubelet/<node>.yaml          the node's kubelet patch (kubeReserved)
    static-pods/<node>/*.yaml    kube-vip, when the plan has an API VIP
    network.yaml                 Calico settings (MTU, pod CIDR, encapsulation)
    reservations.yaml            reservation windows, their nodes and taints
    monitoring/NN-*.yaml         with a `monitoring` section: prometheus-operator objects
                                 (PrometheusRules, ServiceMonitors and the Services they
                                 select), not applied by the role (they need the operator)
    examples/*.yaml              objects for users to apply with kubectl, never applied by
                                 the role: the training class's distributed training job

The objects' numbers leave room between stages: the teams' namespaces, quotas and time-limit
policies (15-teams) come after the PriorityClasses their quotas name and before the policies
that route pods into them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from cluster_plan.kubernetes.admission import admission_objects
from cluster_plan.kubernetes.cluster import Expanded, KubernetesPlan, kubernetes_plan
from cluster_plan.kubernetes.cni import network_settings
from cluster_plan.kubernetes.devices import device_objects
from cluster_plan.kubernetes.kubeadm import kubelet_patch, node_configuration
from cluster_plan.kubernetes.monitoring import monitoring_objects
from cluster_plan.kubernetes.nodes import node_objects
from cluster_plan.kubernetes.reservations import reservation_windows
from cluster_plan.kubernetes.routing import priority_classes, routing_table
from cluster_plan.kubernetes.teams import team_objects
from cluster_plan.kubernetes.training import training_objects
from cluster_plan.kubernetes.vip import static_pods
from cluster_plan.views.rendered import write_tree

Document = dict[str, Any]


@dataclass(frozen=True)
class Rendering:
    plan: KubernetesPlan
    objects: dict[str, list[Document]]  # file stem -> objects
    kubeadm: dict[str, list[Document]]  # node -> documents
    kubelet: dict[str, Document]  # node -> kubelet patch
    static_pods: dict[str, list[Document]]  # node -> pods
    network: Document
    reservations: list[Document]
    monitoring: dict[str, list[Document]] = field(default_factory=dict)  # file stem -> objects
    examples: dict[str, list[Document]] = field(default_factory=dict)  # file stem -> objects

    def all_objects(self) -> list[Document]:
        return [obj for stem in sorted(self.objects) for obj in self.objects[stem]]

    def monitoring_objects(self) -> list[Document]:
        return [obj for stem in sorted(self.monitoring) for obj in self.monitoring[stem]]

    def example_objects(self) -> list[Document]:
        return [obj for stem in sorted(self.examples) for obj in self.examples[stem]]


def render(expanded: Expanded) -> Rendering:
    """The plan in Kubernetes; PlanError when the plan cannot be a Kubernetes cluster."""
    plan = kubernetes_plan(expanded)
    table = routing_table(plan)
    objects = {
        "10-priority-classes": priority_classes(plan),
        "15-teams": team_objects(plan),
        "20-devices": device_objects(plan),
        "30-admission": admission_objects(plan, table),
        "40-nodes": node_objects(plan),
    }
    examples = {"training-job": training_objects(plan)}
    return Rendering(
        plan=plan,
        objects={stem: objs for stem, objs in objects.items() if objs},
        kubeadm={name: node_configuration(plan, name) for name in plan.nodes},
        kubelet={name: kubelet_patch(plan, name) for name in plan.nodes},
        static_pods=static_pods(plan),
        network=network_settings(plan),
        reservations=reservation_windows(plan),
        monitoring=monitoring_objects(expanded),
        examples={stem: objs for stem, objs in examples.items() if objs},
    )


class _Dumper(getattr(yaml, "CSafeDumper", yaml.SafeDumper)):  # type: ignore[misc]
    """Plain YAML for people, as kubectl prints it: CEL and other long text as literal
    blocks, no anchors. libyaml's emitter where there is one: a large plan has thousands of
    files."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _text(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    style = "|" if "\n" in value or len(value) > 80 else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _text)


def dump_documents(documents: list[Any]) -> str:
    return yaml.dump_all(
        documents, Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=100
    )


def files(rendering: Rendering) -> dict[str, str]:
    """Relative path -> file text."""
    out = {f"objects/{stem}.yaml": dump_documents(objs) for stem, objs in rendering.objects.items()}
    for stem, objs in rendering.monitoring.items():
        out[f"monitoring/{stem}.yaml"] = dump_documents(objs)
    for stem, objs in rendering.examples.items():
        out[f"examples/{stem}.yaml"] = dump_documents(objs)
    for name, docs in rendering.kubeadm.items():
        out[f"kubeadm/{name}.yaml"] = dump_documents(docs)
    for name, patch in rendering.kubelet.items():
        out[f"kubelet/{name}.yaml"] = dump_documents([patch])
    for name, pods in rendering.static_pods.items():
        for pod in pods:
            out[f"static-pods/{name}/{pod['metadata']['name']}.yaml"] = dump_documents([pod])
    out["network.yaml"] = dump_documents([rendering.network])
    out["reservations.yaml"] = dump_documents([{"reservations": rendering.reservations}])
    return dict(sorted(out.items()))


def write(rendering: Rendering, directory: Path, plan: str = "") -> list[Path]:
    """Write the files under `directory`; files of an earlier rendering that this one no
    longer has (a removed node) are deleted, so the directory is exactly this rendering. A
    folder holding anything else is refused (cluster_plan.views.rendered)."""
    return write_tree(files(rendering), directory, "k8s render", plan)
