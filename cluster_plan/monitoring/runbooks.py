"""What to do first when an alert fires: one line per alert the rules make.

The rules carry it as the `description` annotation and link its section of docs/METRICS.md
(generated from this table) as `runbook_url`, the annotation the community mixins use.
"""

from __future__ import annotations

import re

# Where the runbooks are published: the project's repository (galaxy.yml's `repository`).
RUNBOOK_PAGE = "https://github.com/cluster-plan/cluster-plan/blob/main/docs/METRICS.md"

RUNBOOKS: dict[str, str] = {
    "NodeDown": (
        "Reach the host (console, BMC); if it is up, check prometheus-node-exporter and the "
        "firewall; its other alerts are silenced while it is down."
    ),
    "ClockUnsynchronised": (
        "chronyc tracking and chronyc sources on the host; check the plan's NTP servers are "
        "reachable from it (a site reference server, cluster.time_reference, may serve its own "
        "clock instead)."
    ),
    "ClockServiceStopped": ("systemctl status chrony on the host; re-run site.yml's common stage."),
    "NicBelowPlanSpeed": (
        "ethtool on the device: a port negotiated down, a bad cable or optic, or a link that is "
        "down (-1); compare with the switch port."
    ),
    "NicWrongMtu": (
        "ip link show on the host; re-run site.yml's common stage (the plan sets the MTU); "
        "jumbo frames must match on every host and switch port of the network."
    ),
    "GpuMissing": (
        "nvidia-smi -L and dmesg on the host (XID 79: fallen off the bus); drain it in the "
        "scheduler, reseat or replace the GPU."
    ),
    "GpuNvmlDown": (
        "nvidia-smi on the host; a driver that did not load (dkms, a kernel update) or a GPU "
        "that hangs the driver; re-run the nvidia_driver stage."
    ),
    "GpuThrottled": (
        "nvidia-smi -q -d PERFORMANCE,TEMPERATURE,POWER; thermal: airflow, fans, inlet "
        "temperature of the rack; power brake: the PSUs or the rack's feed."
    ),
    "GpuTooHot": (
        "Check the rack's cooling and the node's fans; acceptance.gpu.max_temp_c is the plan's "
        "limit."
    ),
    "GpuCriticalXid": (
        "dmesg | grep -i xid on the host; drain the node; the XID catalog says whether a reset, "
        "a reboot or an RMA follows (acceptance.gpu.fail_on_xids lists these)."
    ),
    "GpuEccUncorrectable": (
        "Drain the node and reset the GPU (nvidia-smi -r); if errors return, RMA it."
    ),
    "GpuRowRemapFailure": ("The GPU has run out of spare rows: drain the node and RMA the GPU."),
    "GpuRowRemapPending": ("Drain the node and reset the GPU so the remap takes effect."),
    "CephHealthWarning": ("ceph health detail on a monitor host."),
    "CephHealthError": ("ceph health detail on a monitor host; data may be unavailable."),
    "CephOsdDown": ("systemctl status ceph-osd@ID on the host; its disk (smartctl, dmesg)."),
    "CephPoolNearlyFull": (
        "ceph df detail; add OSDs or free space before Ceph stops writes at its full ratio."
    ),
    "SlurmNodeDown": (
        "sinfo -R for the reason; scontrol update nodename=NODE state=resume once fixed."
    ),
    "SlurmNodeDrained": (
        "sinfo -R names who drained it and why; resume it when the reason is gone."
    ),
    "KubernetesNodeNotReady": (
        "kubectl describe node NODE (its conditions and events); on the node systemctl status "
        "kubelet containerd and journalctl -u kubelet; Unknown means the kubelet stopped "
        "reporting."
    ),
    "KubernetesAPIServerDown": (
        "kubectl get --raw '/readyz?verbose' on a control plane names the failing check; "
        "crictl ps for kube-apiserver and etcd, their logs under /var/log/pods."
    ),
    "KubernetesAcceleratorsOverAllocated": (
        "kubectl describe node NODE (Allocatable against Allocated resources); the device "
        "plugin's pod on the node and its log; nvidia-smi on the node; drain it if a device "
        "is lost."
    ),
    "BackupTooOld": (
        "cluster-plan backup status PLAN --hosts NODE; journalctl -u cluster-plan-backup on the "
        "node."
    ),
    "BackupDrillFailed": (
        "cluster-plan backup status PLAN --hosts NODE shows the drill's error; a backup that "
        "cannot be restored is no backup."
    ),
    "AcceptanceStale": (
        "ansible-playbook playbooks/acceptance.yml (or cluster-plan acceptance PLAN)."
    ),
    "AcceptanceFailed": (
        "cluster-plan report on the last acceptance.json names the failing links and nodes."
    ),
    "CollectorFailing": ("journalctl for the collector's unit on the host names the reason."),
}


def anchor(alert: str) -> str:
    """The alert's heading anchor in docs/METRICS.md (the heading is the alert's name)."""
    return re.sub(r"[^a-z0-9-]", "", alert.lower())


def runbook_url(alert: str) -> str:
    return f"{RUNBOOK_PAGE}#{anchor(alert)}"
