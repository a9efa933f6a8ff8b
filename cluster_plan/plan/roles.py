"""The node roles, and the named sets of them that checks, views and day-2 commands ask about.

ALL_ROLES is the schema's role enum (`$defs.role`); every set below is a subset of it
(tests/unit/test_roles.py). A set says what its hosts have in common, so that "the Slurm
hosts" or "the nodes that run jobs" mean one thing wherever they are asked.
"""

from __future__ import annotations

from cluster_plan.plan.schema import plan_schema

ALL_ROLES: tuple[str, ...] = tuple(plan_schema()["$defs"]["role"]["enum"])

# The hosts site.yml's Slurm stage converges (playbooks/slurm.yml's `hosts`): slurm.conf,
# munge and their daemons. A login host runs none of Slurm's roles here, so it is not one.
SLURM_HOST_ROLES = frozenset({"slurm_controller", "slurm_compute", "slurmdbd"})

# The hosts that join the Kubernetes cluster (playbooks/kubernetes.yml's `hosts`): containerd,
# kubelet and the device plugins run on each, the control plane's too.
KUBERNETES_NODE_ROLES = frozenset({"k8s_control_plane", "k8s_worker"})

# Per scheduler, the roles of the nodes its jobs run on: a pool's work lands only there. A
# control plane node without k8s_worker takes none (it keeps its NoSchedule taint and gets no
# pool label: cluster_plan.kubernetes.nodes).
WORKER_ROLES: dict[str, frozenset[str]] = {
    "slurm": frozenset({"slurm_compute"}),
    "kubernetes": frozenset({"k8s_worker"}),
}

# The nodes that run jobs, whichever the scheduler: their accelerators are what pools and
# teams have, and they are drained before they go.
JOB_ROLES = frozenset().union(*WORKER_ROLES.values())

# The hosts that run a Ceph daemon (the storage stage's Ceph part).
CEPH_DAEMON_ROLES = frozenset({"ceph_mon", "ceph_mgr", "ceph_osd", "ceph_mds"})

# What a CephFS client needs running to reach its files: the monitors, the metadata server
# and the manager (in the order findings name them).
CEPHFS_SERVICE_ROLES = ("ceph_mon", "ceph_mds", "ceph_mgr")

# The hosts that mount the CephFS when the plan does not name them
# (`storage.ceph.cephfs.clients`): where users log in and jobs run.
CEPHFS_CLIENT_ROLES = ("slurm_compute", "login", "k8s_worker")

NAMED_SETS: dict[str, frozenset[str]] = {
    "SLURM_HOST_ROLES": SLURM_HOST_ROLES,
    "KUBERNETES_NODE_ROLES": KUBERNETES_NODE_ROLES,
    "JOB_ROLES": JOB_ROLES,
    "CEPH_DAEMON_ROLES": CEPH_DAEMON_ROLES,
    "CEPHFS_CLIENT_ROLES": frozenset(CEPHFS_CLIENT_ROLES),
    "CEPHFS_SERVICE_ROLES": frozenset(CEPHFS_SERVICE_ROLES),
    **{f"WORKER_ROLES[{kind}]": roles for kind, roles in WORKER_ROLES.items()},
}
