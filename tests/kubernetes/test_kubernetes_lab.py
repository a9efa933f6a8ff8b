"""Kubernetes on the lab, as far as it goes without the Kubernetes packages.

The module brings up the Kubernetes lab plan (inventory/lab/k8s.yml) under its own lab id
(`$CLUSTER_PLAN_LAB_ID-k8s`, beside the session's Slurm lab, on its own subnets), converges
playbooks/common.yml and playbooks/kubernetes.yml, converges playbooks/kubernetes.yml again
and once more with --check, and takes the lab down. What must hold:

- containerd from Debian runs on every node and runs a container from an image built on the
  node (no registry), with runc under the systemd cgroup driver;
- containerd's configuration (the `nvidia` runtime on GPU nodes only), the kubeadm and kubelet
  configuration and the reservation timers are in place, as rendered;
- everything before the Kubernetes packages converges, a second run changes nothing;
- the step that needs the packages stops the run with one message naming the source.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.lab_session import session_claim, skip_unless_lab_machine
from support.node_shell import lab_run

from cluster_plan.api import load_expanded
from cluster_plan.kubernetes import files, render
from cluster_plan.lab import lifecycle

pytestmark = pytest.mark.lab

ROOT = Path(__file__).resolve().parents[2]
PLAN = ROOT / "inventory" / "lab" / "k8s.yml"
BIN = Path(sys.executable).parent
IMAGE_BUILDER = Path(__file__).with_name("oci_image.py")
SOURCE = "https://pkgs.k8s.io/core:/stable:/v1.36"
RECAP = re.compile(
    r"^(\S+)\s+:\s+ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.M
)


def recap(output: str) -> dict[str, dict[str, int]]:
    hosts: dict[str, dict[str, int]] = {}
    for host, ok, changed, unreachable, failed in RECAP.findall(output):
        row = hosts.setdefault(host, {"ok": 0, "changed": 0, "unreachable": 0, "failed": 0})
        for key, value in zip(row, (ok, changed, unreachable, failed), strict=True):
            row[key] += int(value)
    return hosts


@dataclass
class K8sLab:
    lab_id: str
    expanded: dict[str, Any]
    runs: list[subprocess.CompletedProcess[str]]
    seconds: list[float]

    def env(self) -> dict[str, str]:
        return {
            **os.environ,
            "CLUSTER_PLAN_LAB_ID": self.lab_id,
            "PATH": f"{BIN}:{os.environ.get('PATH', '')}",
            "ANSIBLE_NOCOLOR": "1",
            "ANSIBLE_FORCE_COLOR": "0",
        }

    def converge(self, *arguments: str) -> None:
        started = time.monotonic()
        self.runs.append(
            subprocess.run(
                [str(BIN / "ansible-playbook"), "-i", str(PLAN), *arguments],
                cwd=ROOT,
                env=self.env(),
                capture_output=True,
                text=True,
                timeout=1800,
                check=False,
            )
        )
        self.seconds.append(time.monotonic() - started)

    def sh(
        self, host: str, script: str, stdin: str | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        result = lab_run(PLAN, host, ["sh", "-c", script], self.env(), 300, stdin)
        if check:
            assert result.returncode == 0, f"{host}: {script}\n{result.stdout}\n{result.stderr}"
        return result

    @property
    def nodes(self) -> list[str]:
        return list(self.expanded["hosts"])


@pytest.fixture(scope="module")
def k8s_lab() -> Iterator[K8sLab]:
    skip_unless_lab_machine()
    lab_id = f"{os.environ.get('CLUSTER_PLAN_LAB_ID', 'test')}-k8s"
    patch = pytest.MonkeyPatch()
    patch.setenv("CLUSTER_PLAN_LAB_ID", lab_id)  # the lab's names come from it
    try:
        expanded = load_expanded(PLAN)
        with session_claim(lab_id):
            try:
                lifecycle.down(expanded)  # whatever an interrupted run left behind
                lifecycle.up(expanded, str(PLAN))
                lab = K8sLab(lab_id, expanded, [], [])
                lab.converge("playbooks/common.yml", "playbooks/kubernetes.yml")
                lab.converge("playbooks/kubernetes.yml")
                lab.converge("--check", "playbooks/kubernetes.yml")
                first_s, second_s, check_s = lab.seconds
                print(
                    f"\nKubernetes lab converge: {first_s:.0f} s, again {second_s:.0f} s, "
                    f"--check {check_s:.0f} s"
                )
                yield lab
            finally:
                lifecycle.down(expanded)
    finally:
        patch.undo()


def failures(run: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in run.stdout.splitlines() if line.startswith("fatal: ")]


@pytest.mark.parametrize("run", [0, 1, 2], ids=["first", "second", "check"])
def test_the_package_step_stops_the_run_with_one_message_naming_the_source(k8s_lab, run):
    result = k8s_lab.runs[run]
    assert result.returncode != 0
    (fatal,) = failures(result)
    assert "Stop where the Kubernetes package source cannot be reached" in result.stdout
    assert f"The Kubernetes package source {SOURCE} cannot be reached" in fatal
    assert ", ".join(sorted(k8s_lab.nodes)) in fatal  # every node tried it
    rows = recap(result.stdout)
    assert set(rows) == set(k8s_lab.nodes)
    assert sum(r["failed"] for r in rows.values()) == 1
    assert all(r["unreachable"] == 0 for r in rows.values())


@pytest.mark.parametrize("run", [1, 2], ids=["second", "check"])
def test_a_second_run_and_check_mode_change_nothing(k8s_lab, run):
    rows = recap(k8s_lab.runs[run].stdout)
    assert {h: r["changed"] for h, r in rows.items()} == dict.fromkeys(k8s_lab.nodes, 0)


def test_containerd_runs_with_systemd_cgroups_and_nvidia_only_on_gpu_nodes(k8s_lab):
    for host in k8s_lab.nodes:
        dump = k8s_lab.sh(host, "systemctl is-active containerd && containerd config dump").stdout
        assert dump.startswith("active")
        assert re.search(r"runtimes\.runc\.options\]\s+(?:\S.*\n\s+)*?SystemdCgroup = true", dump)
        gpu = (k8s_lab.expanded["hosts"][host]["accelerators"] or {}).get("kind") == "gpu"
        assert ('BinaryName = "/usr/bin/nvidia-container-runtime"' in dump) == gpu, host
        assert ("runtimes.nvidia]" in dump) == gpu, host


def test_a_locally_built_image_runs_on_every_node(k8s_lab):
    builder = IMAGE_BUILDER.read_text()
    for host in k8s_lab.nodes:
        k8s_lab.sh(host, "apt-get install -y -q busybox-static >/dev/null")
        k8s_lab.sh(host, "python3 - /tmp/image.tar", stdin=builder)
        snapshotter = k8s_lab.sh(
            host,
            "containerd config dump | sed -n 's/^ *snapshotter = \"\\(.*\\)\"/\\1/p' | head -n 1",
        ).stdout.strip()
        assert snapshotter in ("overlayfs", "native"), snapshotter
        k8s_lab.sh(
            host,
            f"ctr -n k8s.io image import --snapshotter {snapshotter} "
            "--base-name lab.local/busybox /tmp/image.tar",
        )
        out = k8s_lab.sh(
            host,
            f"ctr -n k8s.io run --rm --snapshotter {snapshotter} --runc-systemd-cgroup "
            f"--cgroup system.slice:cluster-plan:smoke lab.local/busybox:1 smoke-{host} "
            "sh -c 'echo hello from $(hostname); cat /proc/self/cgroup'",
        ).stdout
        assert f"hello from {host}" in out
        assert "/system.slice/cluster-plan-smoke.scope" in out  # placed by systemd


def test_overlayfs_cannot_stack_on_the_lab_nodes_overlay_root(k8s_lab):
    """Why the role picked `native` in the lab (docs/kubernetes.md records the error)."""
    host = k8s_lab.nodes[0]
    root_fs = k8s_lab.sh(host, "findmnt -n -o FSTYPE --target /var/lib").stdout.strip()
    assert root_fs == "overlay"
    k8s_lab.sh(host, "apt-get install -y -q busybox-static >/dev/null")
    k8s_lab.sh(host, "python3 - /tmp/image.tar", stdin=IMAGE_BUILDER.read_text())
    k8s_lab.sh(host, "ctr -n default image import --base-name lab.local/busybox /tmp/image.tar")
    tried = k8s_lab.sh(
        host,
        "ctr -n default run --rm --snapshotter overlayfs lab.local/busybox:1 try-overlay true",
        check=False,
    )
    assert tried.returncode != 0
    assert "failed to mount" in tried.stderr and "invalid argument" in tried.stderr


def test_kubeadm_and_kubelet_configuration_are_the_rendered_ones(k8s_lab):
    rendered = files(render(k8s_lab.expanded))
    first = sorted(
        h for h, s in k8s_lab.expanded["hosts"].items() if "k8s_control_plane" in s["roles"]
    )[0]
    for host in k8s_lab.nodes:
        kubeadm = k8s_lab.sh(host, "cat /etc/kubernetes/cluster-plan/kubeadm.yaml").stdout
        assert kubeadm == rendered[f"kubeadm/{host}.yaml"]
        patch = k8s_lab.sh(
            host, "cat '/etc/kubernetes/cluster-plan/patches/kubeletconfiguration+merge.yaml'"
        ).stdout
        assert yaml.safe_load(patch)["kubeReserved"]
        assert patch == rendered[f"kubelet/{host}.yaml"]
    kinds = {d["kind"]: d for d in yaml.safe_load_all(rendered[f"kubeadm/{first}.yaml"])}
    assert kinds["KubeletConfiguration"]["cgroupDriver"] == "systemd"
    on_cp = k8s_lab.sh(first, "cd /etc/kubernetes/cluster-plan/rendered && find . -type f | sort")
    assert sorted(p[2:] for p in on_cp.stdout.split()) == sorted(rendered)


def test_reservation_timers_are_set_for_the_window(k8s_lab):
    first = "cp01"
    timers = k8s_lab.sh(
        first, "systemctl list-timers --all --no-pager 'cluster-plan-reservation-*'"
    ).stdout
    assert (
        "2027-01-05 02:00:00 UTC" in timers
        and "cluster-plan-reservation-maintenance-start" in timers
    )
    assert (
        "2027-01-05 04:00:00 UTC" in timers and "cluster-plan-reservation-maintenance-end" in timers
    )
    unit = k8s_lab.sh(
        first, "systemctl cat cluster-plan-reservation-maintenance-start.service"
    ).stdout
    assert (
        "taint nodes gpu01 reservation.cluster-plan.io/maintenance:NoSchedule --overwrite" in unit
    )
