"""roles/kubernetes's filters: the rendering rebuilt from what the inventory plugin gives the
hosts (`cluster_plan` without hosts, each host's `plan_host`), and the Calico manifest edit."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml
from k8s_plans import expanded_plan

from cluster_plan.kubernetes import files, render

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "roles/kubernetes/filter_plugins"))
from kubernetes_plan import kubernetes_calico_manifest, kubernetes_rendering


def as_ansible_sees_it(name: str) -> tuple[dict, dict]:
    expanded = expanded_plan(name)
    hosts = expanded.pop("hosts")
    expanded.pop("groups")
    return expanded, hosts


def test_the_role_renders_what_the_cli_renders():
    cluster, hosts = as_ansible_sees_it("k8s-inference")
    data = kubernetes_rendering(cluster, hosts)
    assert data["problems"] == ""
    assert data["files"] == files(render(expanded_plan("k8s-inference")))
    assert data["first_control_plane"] == "cp1"
    assert data["control_planes"] == ["cp1", "cp2", "cp3"]
    assert data["version"] == "1.36.0"
    cp2 = data["nodes"]["cp2"]
    assert cp2["kubeadm"] == data["files"]["kubeadm/cp2.yaml"]
    assert list(cp2["static_pods"]) == ["kube-vip.yaml"]
    labels = yaml.safe_load(data["nodes"]["tpu-01"]["labels_document"])
    assert set(labels) == {"apiVersion", "kind", "metadata"}
    assert labels["metadata"]["labels"]["cluster-plan.io/pool"] == "accel"
    assert data["nodes"]["tpu-01"]["capacity"] == {"cluster-plan.io/tpu": "4"}
    assert data["nodes"]["tpu-01"]["taints"] == [
        {"key": "cluster-plan.io/pool", "value": "accel", "effect": "NoSchedule"}
    ]


def test_a_plan_that_cannot_be_kubernetes_gives_its_findings_not_an_exception():
    cluster, hosts = as_ansible_sees_it("lab-k8s")
    cluster["scheduler"]["kubernetes"]["version"] = "1.29"
    data = kubernetes_rendering(cluster, hosts)
    assert "error[unsupported-version] $.scheduler.kubernetes.version" in data["problems"]
    assert data["nodes"] == {}


def test_the_calico_filter_says_what_is_wrong():
    with pytest.raises(ValueError, match="no ConfigMap calico-config"):
        kubernetes_calico_manifest("kind: Namespace\n", {"encapsulation": "ipip"})
    with pytest.raises(ValueError, match="cannot put the plan's settings"):
        kubernetes_calico_manifest("a: [", {"encapsulation": "ipip"})
