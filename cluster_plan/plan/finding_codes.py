"""Every finding code the package emits: what it means in one line, and the section of the
documentation that explains its subject. `suppress:` in a plan names a warning by its code;
docs/FINDINGS.md is generated from this table (cluster_plan.reference_docs), and
tests/unit/test_finding_codes.py checks that every code the package can emit is here.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FindingCode:
    code: str
    line: str  # what it means, in one line
    doc: str  # the page and heading (repository path#anchor) that explains its subject


def _topic(doc: str, lines: dict[str, str]) -> dict[str, FindingCode]:
    return {code: FindingCode(code, line, doc) for code, line in lines.items()}


_PLAN = "README.md#writing-your-own-plan"
_ADDRESSES = "README.md#addresses-and-racks-never-move"

CODES: dict[str, FindingCode] = {
    # reading the file
    **_topic(
        _PLAN,
        {
            "unreadable": "the plan file (or one it names) cannot be read",
            "file-not-found": "the file does not exist",
            "not-a-file": "the path is a directory, a FIFO, a device or a symbolic link",
            "too-large": "the file is larger than the limit for its kind",
            "plan-too-large": "the plan file is larger than a plan can be",
            "not-text": "the file is not UTF-8 text",
            "empty-plan": "the file holds no plan",
            "multiple-documents": "the file holds more than one YAML document",
            "yaml-syntax": "the file is not valid YAML",
            "yaml-value": "a value YAML cannot read (a bad date, an unknown tag)",
            "complex-key": "a mapping key that is not a plain scalar",
            "duplicate-key": "a key appears twice in one mapping",
            "octal-number": "a number with a leading zero, which YAML reads as octal",
            "not-a-mapping": "the top level of the plan is not a mapping",
            "too-many-nodes": "the plan has more nodes than the limit",
        },
    ),
    "not-finite": FindingCode(
        "not-finite", "a number is NaN or infinite", "README.md#numbers-are-finite"
    ),
    # the schema
    **_topic(
        _PLAN,
        {
            "unknown-key": "a key the schema does not know (the hint offers the nearest one)",
            "missing-key": "a required key is missing",
            "type": "a value of the wrong type",
            "enum": "a value that is not one of the allowed words",
            "value": "a value other than the one the schema requires",
            "range": "a number outside its allowed range",
            "empty": "a list or mapping that must not be empty is",
            "duplicate-item": "a list repeats an item that must be unique",
            "schema": "any other schema error, in the validator's own words",
            "conflicting-keys": "two keys that exclude each other are both given",
            "unknown-reference": "a name that refers to nothing the plan defines",
            "suppress-error": "a suppression names an error: only warnings can be suppressed",
            "unused-suppression": "a suppression matches no warning",
        },
    ),
    **_topic(
        "README.md#strings-keep-to-their-grammar",
        {
            "name": "a name outside its grammar",
            "format": "a string outside its grammar (a host name, a path, a time)",
            "calendar": "a schedule that is not a systemd calendar expression",
            "hostname-invalid": "a host name no host can have (localhost, say)",
            "hostname-pattern": "a node group's hostname pattern that cannot name its nodes",
            "ssh-key": "an SSH public key that sshd would refuse",
            "time-format": "a team's max_time that is not a Slurm time limit",
        },
    ),
    # the Ansible inventory
    **_topic(
        _PLAN,
        {
            "duplicate-hostname": "two nodes get the same host name",
            "unknown-node": "a per-node override names a node its group does not have",
            "hostname-is-group": "a host name is also an Ansible group's (a role, a rack group)",
            "inventory-group-clash": "two plan names become one Ansible group name",
        },
    ),
    # addresses, racks and the lock
    **_topic(
        _ADDRESSES,
        {
            "network-overlap": "two networks overlap",
            "network-range": "a network in a range hosts cannot use (loopback, multicast)",
            "network-capacity": "a network has fewer free addresses than hosts",
            "network-nearly-full": "a network would be nearly full, with little room to grow",
            "network-full": "no address left on a network for some hosts",
            "address-outside": "a gateway, DNS or NTP address outside its network",
            "reserved-outside": "a reserved range not wholly inside its network",
            "multiple-gateways": "several networks have a gateway; a host gets one default route",
            "duplicate-vlan": "two networks share a VLAN",
            "duplicate-address": "one address pinned for two hosts",
            "pinned-address": "a pinned address that cannot be given",
            "pinned-address-outside": "a pinned address outside its network",
            "pinned-address-reserved": "a pinned address that is reserved (gateway, DNS, a range)",
            "pinned-address-taken": "a pinned address another host holds",
            "locked-address-lost": "hosts would lose the address their lock gives them",
            "rack-move": "a change of racks would move nodes that stand in the lock's rack",
            "lock-missing": "the plan has no lock file (run cluster-plan lock)",
            "lock-stale": "the lock file does not match the plan",
            "lock-unreadable": "the lock file cannot be read",
            "lock-foreign": "the lock file belongs to another cluster",
            "lock-too-new": "the lock file is of a newer version than this cluster-plan reads",
        },
    ),
    # hosts, NICs and the cluster
    **_topic(
        "docs/expanded-data.md#interface",
        {
            "duplicate-nic": "a NIC is listed twice in a hardware profile",
            "network-on-two-nics": "one network is on two NICs of a profile",
            "network-without-nic": "a group's network is on none of its profile's NICs",
            "nic-mtu-conflict": "networks sharing a NIC untagged have different MTUs",
            "not-on-management-network": "a group is not on the management network",
        },
    ),
    **_topic(
        "docs/expanded-data.md#cluster",
        {
            "domain-local": "a domain in .local, which resolvers send to multicast DNS",
            "unknown-timezone": "a time zone that is not an IANA name",
            "duplicate-user": "an admin user listed twice",
            "ansible-user": "ansible_user is a login the plan creates, which a fresh node lacks",
            "reserved-user": "a user named like a system account of the nodes",
            "duplicate-disk": "a disk name or device used twice in a profile",
        },
    ),
    "missing-role": FindingCode(
        "missing-role",
        "cluster.time_reference without an ntp_server host to serve the time",
        "docs/monitoring.md#time",
    ),
    # the network tree
    **_topic(
        "docs/scheduling.md#topology",
        {
            "topology-not-a-tree": "a switch names an uplink the topology does not define",
            "duplicate-switch": "one switch name at two levels",
            "rack-without-switch": "a rack no access switch serves",
            "rack-multihomed": "a rack served by more than one access switch",
            "switch-ports": "an access switch has fewer host ports than its racks' hosts",
            "oversubscribed": "an access switch's hosts can send more than its uplinks carry",
            "unused-switch": "an aggregation switch with no access switch below it",
        },
    ),
    # the scheduler and its work
    **_topic(
        "docs/scheduling.md#declaring-what-a-job-is",
        {
            "controller-count": "a Slurm plan needs one controller or an HA pair",
            "no-compute": "no node has the role slurm_compute",
            "role-scheduler-mismatch": "a role of the other scheduler",
            "scheduler-settings-mismatch": "settings of the other scheduler, which nothing reads",
            "multiple-defaults": "more than one workload class is the default",
            "no-default-class": "no workload class is the default",
            "empty-pool": "a class routes to a pool with no nodes",
            "pool-not-schedulable": "a pool's nodes lack the role its scheduler runs work on",
            "pool-lacks-accelerator": "a class needs GPUs or accelerators its pool's nodes lack",
        },
    ),
    "dataset-unreachable": FindingCode(
        "dataset-unreachable",
        "a dataset lives where no pool that takes work has nodes",
        "docs/scheduling.md#data-locality",
    ),
    **_topic(
        "docs/scheduling.md#reservations",
        {
            "reservation-overlap": "two reservations hold the same node at the same time",
            "reservation-past": "a reservation that ended before now",
            "reservation-not-compute": "a reservation names nodes that are not Slurm compute nodes",
            "environment": "CLUSTER_PLAN_NOW is not an ISO 8601 time: the clock is used",
        },
    ),
    **_topic(
        "docs/scheduling.md#teams-limits-and-fair-share",
        {
            "team-cycle": "a team is its own ancestor",
            "team-without-users": "a team with no users and no child teams",
            "teams-without-accounting": "teams in a Slurm plan without slurmdbd accounting",
            "duplicate-uid": "two users with one UID",
            "reserved-uid": "a UID the system keeps (nobody, the first installer user, ranges)",
            "reserved-team": "a team named like Slurm's root account or a Kubernetes namespace",
            "limit-exceeds-capacity": "a team's limit is more than the compute nodes have",
            "limit-exceeds-parent": "a team's limit is more than its parent's",
            "not-enforced": "a limit the scheduler does not enforce (gpu_hours in Kubernetes)",
        },
    ),
    **_topic(
        "docs/reliability.md#the-primarys-node-lost-fencing-through-the-shared-state",
        {
            "ha-state-not-shared": "an HA pair's state_save is on no shared file system",
            "ha-state-unfenced": "an HA pair's state on NFS, where a lost primary is not fenced",
            "ha-single-point": "the backup controller needs a service only the primary's node runs",
        },
    ),
    # hardware fitness and power
    **_topic(
        "docs/capacity.md#hardware-fitness-of-workload-classes",
        {
            "class-requirement": "a class's GPU requirements its pool's nodes do not all meet",
            "training-gpu-memory": "a training class on GPUs with little memory",
            "training-without-nvlink": "a training class on multi-GPU nodes without NVLink",
            "inference-power": "an inference class on boards that draw much power per node",
            "limit-exceeds-pools": "a team's GPU limit is more than its classes' pools hold",
        },
    ),
    **_topic(
        "docs/capacity.md#rack-budgets",
        {
            "rack-power": "a rack's peak draw is over its power budget",
            "rack-cooling": "a rack's peak draw is over its cooling budget",
            "rack-utilization": "a rack's peak draw is past the warning share of a budget",
            "rack-density": "a rack draws more than the densest racks built carry",
            "air-cooling-limit": "an air-cooled rack gives off more heat than air carries",
            "power-budget": "a rack states its power both as kW and as feeds",
            "power-unknown": "a node whose draw the catalog does not know",
        },
    ),
    **_topic(
        "docs/capacity.md#the-power-model-cluster_planplanpowerpy",
        {
            "power-unit": "a profile's power_w so low it looks like kW written as W",
            "power-below-boards": "a profile's power_w below its accelerators' own board power",
        },
    ),
    # GPUs and drivers
    **_topic(
        "docs/gpu.md#which-driver",
        {
            "driver-pin": "a driver branch pinned for an accelerator without an NVIDIA driver",
            "driver-not-managed": "accelerators whose driver this project does not install",
            "nvswitch": "nvswitch set for a GPU never built on an NVSwitch board",
        },
    ),
    # storage
    **_topic(
        "docs/storage.md#the-plan-mapped-to-ceph",
        {
            "ceph-monitors": "Ceph without a ceph_mon host",
            "ceph-no-mds": "a CephFS without a ceph_mds host",
            "ceph-no-osd-disk": "an OSD host's profile with no disk of use osd",
            "ceph-failure-domains": "a pool keeps more replicas than there are failure domains",
            "ceph-min-size": "a pool's min_size larger than its size",
            "ceph-pool-size": "a pool that keeps a single copy",
            "ceph-pg-num": "a pool's pg_num not a power of two with the autoscaler off",
            "ceph-pool-application": "a CephFS pool of another application",
            "ceph-dataset-pool": "a dataset on the CephFS metadata pool",
            "ceph-public-network": "Ceph daemon hosts not on the Ceph public network",
            "cephfs-client-role": "no host has a CephFS client role: nobody mounts it",
            "duplicate-mount": "two file systems mounted at one path",
        },
    ),
    "ceph-osd-memory": FindingCode(
        "ceph-osd-memory",
        "a host's OSDs want more memory than the host has",
        "docs/storage.md#memory",
    ),
    **_topic(
        "docs/storage.md#nfs",
        {
            "nfs-server-role": "the NFS server lacks the role nfs_server",
            "nfs-cephfs-backend": "an export backed by a CephFS the plan does not have",
            "server-not-on-network": "an export for a network its server is not on",
            "duplicate-export": "a path exported twice",
            "nothing-to-serve": "hosts with a server role that nothing uses",
        },
    ),
    # backups
    **_topic(
        "docs/operations.md#backups",
        {
            "backup-offsite": "the offsite copy is on the backup target itself",
            "backup-source-repository": "a backup source holds a backup repository",
            "no-backup-disk": "a backup target without a disk of use backup",
        },
    ),
    # software
    **_topic(
        "docs/software.md#what-validate-checks",
        {
            "software-conflict": "two builds of one environment go to the same hosts",
            "software-cuda-without-gpu": "a CUDA build for hosts without an NVIDIA GPU",
            "software-index": "a build whose index holds wheels of another flavour",
            "software-module-conflict": "two builds write the same Lmod module on a host",
            "software-prefix-conflict": "two builds install into one prefix",
            "software-prefix-not-mounted": "a prefix on no shared file system its hosts mount",
            "software-no-hosts": "a build that names no class and no pool",
            "software-package-name": "a package name Debian cannot have",
            "software-source": "Debian packages for nodes that do not run Debian",
            "software-version": "a build the source does not have (Debian has no CUDA builds)",
            "software-version-unchecked": "a Debian package the catalog does not know",
        },
    ),
    # acceptance
    "threshold-above-line-rate": FindingCode(
        "threshold-above-line-rate",
        "min_gbps above what the network's slowest links carry as TCP goodput",
        "docs/acceptance.md#verdicts",
    ),
    "history-database": FindingCode(
        "history-database",
        "the acceptance history given as a URL: it is a SQLite file",
        "docs/acceptance.md#history-and-comparison",
    ),
    **_topic(
        "docs/collectives.md#the-verdict-and-its-floors",
        {
            "collectives-not-run": "collectives acceptance in a plan it cannot run in (not Slurm)",
            "collectives-floor": "a floor above what the GPUs can exchange",
        },
    ),
    # monitoring
    **_topic(
        "docs/monitoring.md#the-plan",
        {
            "no-monitoring": "monitoring rendered for a plan without a monitoring_server host",
            "monitoring-servers": "more than one monitoring_server host",
            "alerts-unrouted": "no receivers: alerts reach no one",
            "smtp-missing": "an email receiver without a mail relay",
            "unknown-receiver": "a default receiver that is not a receiver",
            "unknown-team": "a route for a team the plan does not have",
            "evaluation-faster-than-scrape": "rules evaluated more often than samples are taken",
            "repeat-before-group-interval": "a repeat interval shorter than the group interval",
        },
    ),
    **_topic(
        "docs/monitoring.md#the-rules",
        {
            "alert-never-fires": "an alert whose threshold is never reached before harm",
            "alert-always-fires": "an alert that fires in normal operation",
            "alert-wait-unkept": "an alert's wait shorter than the evaluation interval",
            "route-shadows": "a route that takes alerts before later routes can",
        },
    ),
    # Kubernetes
    **_topic(
        "docs/kubernetes.md#the-cluster-kubeadm-kubelet-containerd-the-pod-network",
        {
            "not-kubernetes": "a Kubernetes rendering of a plan with another scheduler",
            "control-plane-count": "no control plane node, or an even number (etcd needs a quorum)",
            "unsupported-version": "a Kubernetes version this project does not support",
            "unsupported-runtime": "a container runtime other than containerd",
            "unknown-network": "a node network that is not a plan network",
            "node-off-network": "Kubernetes nodes without an address on the node network",
            "pod-cidr-size": "a pod CIDR too small for a range per node",
            "service-cidr-size": "a service CIDR outside what kube-apiserver takes",
            "network-address": "the API VIP in no plan network",
            "address-not-reserved": "the API VIP inside a network but not reserved",
            "address-in-use": "the API VIP is a host's address",
            "kubernetes-name": "a name that cannot be a Kubernetes label value",
            "gpu-sharing-no-gpus": "GPU sharing without an NVIDIA GPU to share",
            "mig-unsupported": "MIG sharing on GPUs that cannot be partitioned",
            "training-image-unused": "a training image set while no training job is rendered",
        },
    ),
    "pod-mtu": FindingCode(
        "pod-mtu",
        "the node network's MTU leaves no room for the pods'",
        "docs/kubernetes.md#the-pod-mtu",
    ),
    **_topic(
        "docs/kubernetes.md#installing-from-the-plans-mirror",
        {
            "mirror-cni": "a plan's mirror with a pod network the offline bundle does not carry",
            "mirror-port": "a mirror port shared, or one Kubernetes uses on the mirror host",
        },
    ),
    "bundle-version": FindingCode(
        "bundle-version",
        "no offline bundle for the plan's Kubernetes version",
        "docs/kubernetes.md#the-offline-bundle",
    ),
    # day 2
    "change-refused": FindingCode(
        "change-refused",
        "a plan change cluster-plan change refuses, with what to do instead",
        "docs/operations.md#changing-the-cluster-add-replace-upgrade-remove",
    ),
}
