"""What a kubelet needs from a lab node, and what the lab's Kubernetes gives up for it.

Lab nodes are namespaces on one shared machine, not hosts (docs/lab.md, "Kubernetes in the
lab"). A kubelet expects a host of its own: it writes kernel-wide tunables, reads the kernel
log, shares mounts with its containers, runs on cgroup v2 and manages the machine's disk. So:

- each Kubernetes node boots with what the kubelet needs in its own mount namespace
  (`boot_lines`, `exec_line`): its root as the namespace's root (pivot_root, not chroot) and
  shared for mount propagation (systemd does that on a real host; in a container it leaves
  it to the container manager), a `/dev/kmsg` of its own (the
  kubelet's OOM watcher opens it; the machine's kernel log is not the node's): a device node
  of the null device, so reading it ends at once and writing it goes nowhere, and not a
  link to /dev/null, which services with ProtectKernelLogs= would make /dev/null
  inaccessible through; writable stand-ins for the kernel-wide sysctls the kubelet
  sets, so that it sets them in the node and never on the machine; and on GPU nodes a
  stand-in for NVIDIA's container runtime, the `nvidia` RuntimeClass's handler;
- a lab plan's Kubernetes (a plan with a `lab` section, which is only ever reached through
  the lab) gets the settings below, applied by cluster_plan.kubernetes.kubeadm and the
  containerd role. A plan without a `lab` section never does
  (tests/kubernetes/test_k8s_mirror.py renders the example plans to hold that).
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from cluster_plan.plan.roles import KUBERNETES_NODE_ROLES

# Kernel-wide sysctls the kubelet sets at start (its setupKernelTunables, unless
# protectKernelDefaults): each node gets a file of its own bound over the /proc/sys entry,
# with the machine's value at boot. The rest of /proc/sys stays read-only.
KUBELET_SYSCTLS = (
    "vm/overcommit_memory",
    "vm/panic_on_oom",
    "kernel/panic",
    "kernel/panic_on_oops",
    "kernel/keys/root_maxkeys",
    "kernel/keys/root_maxbytes",
)

# kubelet (the cluster-wide KubeletConfiguration):
KUBELET: dict[str, Any] = {
    # The lab's machine is cgroup v1 (hybrid) and namespaces cannot change that; kubelet 1.35
    # and later refuse v1 unless told (KEP-5573).
    "failCgroupV1": False,
    # Nodes see the machine's swap in /proc/meminfo, and swapping it off is not theirs to do.
    "failSwapOn": False,
    # Every node's disk is the machine's, shared with other labs: its fill says nothing of the
    # node, so nothing is evicted or collected for it (kind does the same).
    "evictionHard": {
        "nodefs.available": "0%",
        "nodefs.inodesFree": "0%",
        "imagefs.available": "0%",
    },
    "imageGCHighThresholdPercent": 100,
}
# kube-proxy: nf_conntrack_max is kernel-wide (read-only in a node): leave it as the machine
# has it instead of sizing it per core.
KUBE_PROXY = {"conntrack": {"maxPerCore": 0}}
# kubeadm's preflight: SystemVerification refuses cgroup v1 for 1.35 and later (it says to
# skip it together with failCgroupV1: false); Swap, as failSwapOn above.
PREFLIGHT_IGNORED = ("SystemVerification", "Swap")
# containerd: the machine withholds CAP_SYS_RESOURCE, so no process may lower its
# oom_score_adj below 0, and runc fails every pod whose containers the kubelet gives a
# negative one (the pause container, critical pods). containerd then clamps them to its own.
CONTAINERD = {"restrict_oom_score_adj": True}


# The `nvidia` RuntimeClass's handler: the containerd role names NVIDIA's container runtime
# on GPU nodes, which NVIDIA's container toolkit installs on a real host. The lab's GPUs are
# inert device nodes that no toolkit drives, so the lab's GPU nodes get a stand-in at that
# path that hands every call to runc unchanged (the real one adds NVIDIA's hook, which mounts
# the driver's libraries: the lab has none). The device plugin gives a container its device
# nodes through the kubelet either way.
NVIDIA_RUNTIME = "/usr/bin/nvidia-container-runtime"
NVIDIA_RUNTIME_STAND_IN = (
    "#!/bin/sh",
    "# The lab stand-in for the NVIDIA container runtime (cluster_plan/lab/kubernetes.py)",
    'exec runc "$@"',
)


def kubelet_settings(base: dict[str, Any]) -> dict[str, Any]:
    """The cluster-wide KubeletConfiguration with the lab's settings in (a new dict)."""
    settings = {**base, **{k: v for k, v in KUBELET.items() if k != "evictionHard"}}
    settings["evictionHard"] = {**base.get("evictionHard", {}), **KUBELET["evictionHard"]}
    return settings


def is_kubernetes_node(spec: dict[str, Any]) -> bool:
    return bool(KUBERNETES_NODE_ROLES & set(spec.get("roles") or ()))


def boot_lines(spec: dict[str, Any], node_dir: Path) -> list[str]:
    """Boot script lines (node.py, after /proc, /sys and /dev are mounted under "$R") that
    give a Kubernetes node what its kubelet needs; none for other nodes."""
    if not is_kubernetes_node(spec):
        return []
    sysctl = node_dir / "sysctl"
    lines = [
        'mknod -m 644 "$R/dev/kmsg" c 1 3',
        f"rm -rf {shlex.quote(str(sysctl))}",
        f"mkdir -p {shlex.quote(str(sysctl))}",
    ]
    for name in KUBELET_SYSCTLS:
        stand_in = shlex.quote(str(sysctl / name.replace("/", ".")))
        lines += [
            f"cat /proc/sys/{name} > {stand_in}",
            f'mount --bind {stand_in} "$R/proc/sys/{name}"',
        ]
    if (spec.get("accelerators") or {}).get("kind") == "gpu":
        runtime = f'"$R{NVIDIA_RUNTIME}"'
        lines += [
            f"printf '%s\\n' {shlex.join(NVIDIA_RUNTIME_STAND_IN)} > {runtime}",
            f"chmod 755 {runtime}",
        ]
    return lines


# Other nodes run systemd chrooted into "$R" (node.py). A container's runtime needs the node's
# root to be its mount namespace's root: runc puts a container's root in place with
# pivot_root, and `runc exec` (kubectl exec) enters a container through its mount namespace,
# whose root would otherwise be the machine's tree, where the container's files are not. So
# a Kubernetes node pivots into "$R" (its parent mount is private: unshare made it so), lets
# the machine's tree go, and only then shares its root for mount propagation (pivot_root
# refuses a shared mount).
OLD_ROOT = "run/lab-old-root"


def exec_line(spec: dict[str, Any]) -> str | None:
    """The boot script's last line for a Kubernetes node (None: node.py's own)."""
    if not is_kubernetes_node(spec):
        return None
    inside = (
        f"umount -l /{OLD_ROOT} && rmdir /{OLD_ROOT} && mount --make-rshared / && "
        "exec /lib/systemd/systemd --system"
    )
    return (
        f'cd "$R" && mkdir -p {OLD_ROOT} && pivot_root . {OLD_ROOT} && '
        f"exec chroot . /bin/sh -c {shlex.quote(inside)}"
    )
