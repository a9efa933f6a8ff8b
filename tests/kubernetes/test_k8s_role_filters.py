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
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "roles"))
from role_render import render as render_template

from cluster_plan.kubernetes.mirror import KUBERNETES_BINARIES
from cluster_plan.kubernetes.role_view import kubernetes_calico_manifest, kubernetes_rendering


def as_ansible_sees_it(name: str) -> tuple[dict, dict, dict]:
    """The plan's cluster, its hosts and its groups as the role's filter gets them: the
    inventory's groups include `all` and `ungrouped`."""
    expanded = expanded_plan(name)
    hosts = expanded.pop("hosts")
    groups = {**expanded.pop("groups"), "all": sorted(hosts), "ungrouped": []}
    return expanded, hosts, groups


def test_the_role_renders_what_the_cli_renders():
    cluster, hosts, groups = as_ansible_sees_it("k8s-inference")
    data = kubernetes_rendering(cluster, hosts, groups)
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


def test_a_plan_whose_monitoring_reads_its_groups_renders_in_the_role():
    # the lab plan watches its own time reference (an ntp_server group) and the cluster
    cluster, hosts, groups = as_ansible_sees_it("lab-k8s")
    assert cluster["cluster"].get("time_reference") and cluster.get("monitoring")
    data = kubernetes_rendering(cluster, hosts, groups)
    assert data["problems"] == ""
    assert data["files"] == files(render(expanded_plan("lab-k8s")))


def test_a_plan_that_cannot_be_kubernetes_gives_its_findings_not_an_exception():
    cluster, hosts, groups = as_ansible_sees_it("lab-k8s")
    cluster["scheduler"]["kubernetes"]["version"] = "1.29"
    data = kubernetes_rendering(cluster, hosts, groups)
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


# systemd resolves an ExecStart= program given by name in a fixed search path (systemd.service,
# "Command lines"); Debian's and Red Hat's systemd (252) search these
SYSTEMD_EXEC_PATH = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")


def exec_program(program: str, installed: set[str]) -> str | None:
    """Where systemd finds `program` on a host with the files `installed`."""
    if program.startswith("/"):
        return program if program in installed else None
    found = [f"{d}/{program}" for d in SYSTEMD_EXEC_PATH if f"{d}/{program}" in installed]
    return found[0] if found else None


@pytest.mark.parametrize("mirror", [True, False], ids=["mirror", "packages"])
@pytest.mark.parametrize("action", ["start", "end"])
def test_the_reservation_units_run_the_kubectl_the_role_installed(mirror, action):
    expanded = expanded_plan("lab-k8s")
    (window,) = kubernetes_rendering(*as_ansible_sees_it("lab-k8s"))["reservations"]
    unit = render_template(
        "kubernetes",
        "reservation.service.j2",
        expanded,
        "cp01",
        {"kubernetes_reservation": window, "kubernetes_reservation_action": action},
    )
    (line,) = [x for x in unit.splitlines() if x.startswith("ExecStart=")]
    argv = line.removeprefix("ExecStart=").lstrip("-").split()
    # the mirror's binaries, or pkgs.k8s.io's package's
    installed = {KUBERNETES_BINARIES["kubectl"] if mirror else "/usr/bin/kubectl"}
    assert exec_program(argv[0], installed), (argv[0], installed)
    taint = f"{window['taint']['key']}:{window['taint']['effect']}"
    change = [taint, "--overwrite"] if action == "start" else [f"{taint}-"]
    assert argv[1:] == [
        "--kubeconfig", "/etc/kubernetes/admin.conf", "taint", "nodes", "gpu01", *change
    ]  # fmt: skip
