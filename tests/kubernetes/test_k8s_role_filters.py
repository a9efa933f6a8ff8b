"""roles/kubernetes's filters: the rendering rebuilt from what the inventory plugin gives the
hosts (`cluster_plan` without hosts, each host's `plan_host`), and the Calico manifest edit."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from k8s_plans import expanded_plan

from cluster_plan.kubernetes import files, render

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "plugins/filter"))
from cluster_plan.kubernetes.role_view import kubernetes_calico_manifest, kubernetes_rendering


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
    assert data["version"] == "1.36.3"
    cp2 = data["nodes"]["cp2"]
    assert cp2["kubeadm"] == data["files"]["kubeadm/cp2.yaml"]
    assert list(cp2["static_pods"]) == ["kube-vip.yaml"]
    labels = yaml.safe_load(data["nodes"]["tpu-01"]["labels_document"])
    assert set(labels) == {"apiVersion", "kind", "metadata"}
    assert labels["metadata"]["labels"]["cluster-plan.io/pool"] == "accel"
    # the device plugin reports a node's accelerators from its devices: no capacity to patch
    assert data["nodes"]["tpu-01"]["capacity"] == {}
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


def play_hosts(plan: str) -> dict[str, int]:
    """Hosts per play of the two scheduler stages, as ansible-playbook --list-hosts sees them."""
    root = Path(__file__).resolve().parents[2]
    result = subprocess.run(
        [
            str(Path(sys.executable).parent / "ansible-playbook"),
            "--list-hosts",
            "-i",
            plan,
            "playbooks/slurm.yml",
            "playbooks/kubernetes.yml",
        ],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    plays = re.findall(r"play #\d+ \(([^)]*)\): (.*?)\tTAGS.*?hosts \((\d+)\)", result.stdout, re.S)
    return {name: int(count) for _pattern, name, count in plays}


def test_each_plan_gets_its_own_scheduler_stage_only():
    slurm = play_hosts("inventory/lab/cluster.yml")
    kubernetes = play_hosts("inventory/lab/k8s.yml")
    assert slurm["Slurm with the plan's scheduling policy"] > 0
    assert slurm["Container runtime for the Kubernetes nodes"] == 0
    assert slurm["Kubernetes with the plan's scheduling policy"] == 0
    assert kubernetes["Slurm with the plan's scheduling policy"] == 0
    assert kubernetes["Kubernetes with the plan's scheduling policy"] == 4
