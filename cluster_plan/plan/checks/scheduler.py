"""The scheduler: controller roles, and settings that belong to it."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from cluster_plan.plan.checks.base import Plan
from cluster_plan.plan.findings import Finding
from cluster_plan.plan.nodes import Node
from cluster_plan.plan.roles import CEPHFS_CLIENT_ROLES, CEPHFS_SERVICE_ROLES
from cluster_plan.plan.software import on_mount

# settings blocks that only one scheduler reads
_OWN_BLOCK = {"slurm": "slurm", "kubernetes": "kubernetes"}


def check_scheduler(plan: Plan, nodes: list[Node]) -> Iterator[Finding]:
    scheduler = plan.get("scheduler")
    if not scheduler or scheduler["type"] not in ("slurm", "kubernetes"):
        return  # the schema says what is wrong; guessing at its rules would only add noise
    yield from _scheduler_roles(plan, scheduler, nodes)
    yield from _foreign_settings(scheduler)


def _groups_with(nodes: list[Node], role: str) -> Counter[str]:
    return Counter(node.group for node in nodes if role in node.roles)


def _count_hint(role: str, nodes: list[Node], allowed: str) -> str:
    groups = _groups_with(nodes, role)
    if not groups:
        return f"give one node group of {allowed} node(s) the role {role}"
    if len(groups) == 1:
        group, count = next(iter(groups.items()))
        return (
            f"group {group} has the role on its {count} node(s): make its count {allowed}, or "
            f"move {role} to a group of {allowed} node(s)"
        )
    listed = ", ".join(f"{g} ({c})" for g, c in groups.items())
    return f"groups {listed} all have the role {role}: keep it on {allowed} node(s) in all"


def _scheduler_roles(plan: Plan, scheduler: dict[str, Any], nodes: list[Node]) -> Iterator[Finding]:
    kind = scheduler["type"]
    roles = Counter(role for node in nodes for role in node.roles)
    if kind == "slurm":
        yield from _slurm_roles(plan, scheduler, nodes, roles)
        wrong = [r for r in roles if r.startswith("k8s_")]
    else:
        yield from _kubernetes_roles(plan, nodes, roles)
        wrong = [r for r in roles if r.startswith("slurm")]
    for role in wrong:
        group = next(n.group for n in nodes if role in n.roles)
        yield Finding(
            "role-scheduler-mismatch",
            f"role {role} does not fit scheduler {kind}",
            ("node_groups", group, "roles"),
        )


def _slurm_roles(
    plan: Plan, scheduler: dict[str, Any], nodes: list[Node], roles: Counter[str]
) -> Iterator[Finding]:
    """One controller or an HA pair, some compute nodes, and slurmdbd for accounting."""
    count = roles["slurm_controller"]
    if count not in (1, 2) and not _counts_in_doubt(plan, nodes, "slurm_controller"):
        yield Finding(
            "controller-count",
            f"Slurm needs one controller (or an HA pair); the plan has {count}",
            ("scheduler", "type"),
            hint=_count_hint("slurm_controller", nodes, "1 or 2"),
        )
    if count == 2:
        yield from _ha_state(plan, scheduler, nodes)
    if not roles["slurm_compute"]:
        yield Finding(
            "no-compute",
            "no node has the role slurm_compute",
            ("scheduler", "type"),
            severity="warning",
        )
    if (scheduler.get("slurm") or {}).get("accounting") and not roles["slurmdbd"]:
        yield Finding(
            "missing-role",
            "accounting needs a node with the role slurmdbd",
            ("scheduler", "slurm", "accounting"),
            hint="give one node group (e.g. the controller's) the role slurmdbd",
        )


def _kubernetes_roles(plan: Plan, nodes: list[Node], roles: Counter[str]) -> Iterator[Finding]:
    """An odd number of control-plane nodes (etcd's quorum)."""
    count = roles["k8s_control_plane"]
    if count % 2 == 1 or _counts_in_doubt(plan, nodes, "k8s_control_plane"):
        return
    yield Finding(
        "control-plane-count",
        "Kubernetes needs an odd number of control-plane nodes for etcd quorum; the plan "
        f"has {count}",
        ("scheduler", "type"),
        hint=_count_hint("k8s_control_plane", nodes, "1, 3 or 5"),
    )


@dataclass(frozen=True)
class _SharedMount:
    """A file system the plan mounts on some hosts: the CephFS, or an NFS export."""

    what: str
    mount: str
    mounted_by: Callable[[Node], bool]
    where: tuple[str | int, ...]
    hint: str
    server: str | None = None  # an NFS export's server, which does not mount it

    def holds(self, path: str) -> bool:
        return on_mount(path, [self.mount])


def _shared_mounts(plan: Plan) -> Iterator[_SharedMount]:
    storage = plan.get("storage") or {}
    cephfs = (storage.get("ceph") or {}).get("cephfs")
    if isinstance(cephfs, dict):
        clients = set(cephfs.get("clients") or CEPHFS_CLIENT_ROLES)
        yield _SharedMount(
            "the CephFS",
            str(cephfs.get("mount") or "/mnt/cephfs"),
            lambda node: bool(clients & set(node.roles)),
            ("storage", "ceph", "cephfs", "clients"),
            "add slurm_controller to storage.ceph.cephfs.clients",
        )
    nfs = storage.get("nfs") or {}
    for i, export in enumerate(nfs.get("exports") or []):
        if not isinstance(export, dict) or not export.get("mount"):
            continue
        yield _SharedMount(
            f"the NFS export {export.get('path')}",
            str(export["mount"]),
            _nfs_client(export.get("network"), nfs.get("server")),
            ("storage", "nfs", "exports", i, "network"),
            "serve the export on a network the controllers are on, from a host that is not one",
            server=nfs.get("server"),
        )


def _nfs_client(network: str | None, server: str | None) -> Callable[[Node], bool]:
    """Every host on the export's network mounts it, the server excepted (docs/storage.md)."""

    def mounts(node: Node) -> bool:
        return network in node.networks and node.name != server

    return mounts


def _ha_state(plan: Plan, scheduler: dict[str, Any], nodes: list[Node]) -> Iterator[Finding]:
    """An HA pair shares slurmctld's state: the backup takes over from what the primary saved.
    In the plan that is a path under a file system both controllers mount."""
    state = (scheduler.get("slurm") or {}).get("state_save") or "/var/lib/slurm/slurmctld"
    shares = list(_shared_mounts(plan))
    holding = max((m for m in shares if m.holds(state)), key=lambda m: len(m.mount), default=None)
    controllers = [n for n in nodes if "slurm_controller" in n.roles]
    if holding is None:
        yield Finding(
            "ha-state-not-shared",
            "two slurm_controller hosts (an HA pair) need StateSaveLocation on shared storage; "
            f"state_save {state} is on no file system the plan shares",
            ("scheduler", "slurm", "state_save"),
            hint=_unshared_hint(shares, controllers),
        )
        return
    apart = [n.name for n in controllers if not holding.mounted_by(n)]
    if apart:
        yield Finding(
            "ha-state-not-shared",
            f"controller(s) {', '.join(apart)} do not mount {holding.what} ({holding.mount}) "
            f"holding state_save {state}" + _server_note(holding, apart),
            holding.where,
            hint=holding.hint,
        )
    if holding.what != "the CephFS":
        yield _unfenced(state, holding)
    yield from _ha_single_points(plan, holding, nodes)


def _unfenced(state: str, holding: _SharedMount) -> Finding:
    """The pair fences a lost primary from the CephFS by evicting its client session
    (roles/slurm, slurmctld-fence); for an NFS export nothing does. A primary that was only
    cut off keeps its mount and may write the state again when it returns, while the
    backup is in control (docs/reliability.md, NFS-backed state)."""
    return Finding(
        "ha-state-unfenced",
        f"state_save {state} is on {holding.what} ({holding.mount}): the HA pair survives a "
        "dead slurmctld there, but nothing fences a lost primary's node from NFS, so after a "
        "partition both controllers could write the state",
        ("scheduler", "slurm", "state_save"),
        severity="warning",
        hint="put state_save on the CephFS (storage.ceph.cephfs), which the pair fences, or "
        "suppress this warning with the reason your site accepts it (a fenced power supply)",
    )


# What a backup needs to read the shared state once the primary's node is gone: the CephFS's
# services (CEPHFS_SERVICE_ROLES). slurmdbd is not among them: a backup taking over with
# accounting away runs on the associations cached in the state (docs/reliability.md).


def _ha_single_points(plan: Plan, holding: _SharedMount, nodes: list[Node]) -> Iterator[Finding]:
    """An HA pair survives losing the primary's node only if the backup still has the state's
    file system: a service it needs that only that node runs is a single point of failure."""
    controllers = [n for n in nodes if "slurm_controller" in n.roles]
    primary, backup = controllers[0], controllers[-1]
    if holding.what == "the CephFS":
        lost = [
            role
            for role in CEPHFS_SERVICE_ROLES
            if role in primary.roles
            and all(n.name == primary.name for n in nodes if role in n.roles)
        ]
    else:
        server = (plan.get("storage") or {}).get("nfs", {}).get("server")
        lost = ["nfs_server"] if server == primary.name else []
    if lost:
        yield Finding(
            "ha-single-point",
            f"the HA pair's backup {backup.name} needs {', '.join(lost)} to read the state on "
            f"{holding.what}, and only the primary's node {primary.name} runs "
            f"{'them' if len(lost) > 1 else 'it'}: losing that "
            "node leaves the backup unable to take over",
            ("node_groups", primary.group, "roles"),
            severity="warning",
            hint=f"give {', '.join(lost)} to another node group too (e.g. {backup.group}'s), "
            "so that a standby runs away from the primary",
        )


def _server_note(share: _SharedMount, apart: list[str]) -> str:
    if share.server in apart:
        return f"; {share.server} is its NFS server, which does not mount its own export"
    return ""


def _unshared_hint(shares: list[_SharedMount], controllers: list[Node]) -> str:
    """Point only at mounts that every controller has: a mount one of them lacks (an NFS
    export served by a controller itself) would only move the finding."""
    usable = [m.mount for m in shares if all(m.mounted_by(n) for n in controllers)]
    if usable:
        return f"put state_save under a mount both controllers have ({', '.join(usable)})"
    if not shares:
        return (
            "add storage.ceph.cephfs (or an NFS export) and put state_save under its mount, "
            "or keep one controller"
        )
    reasons = []
    for share in shares:
        apart = [n.name for n in controllers if not share.mounted_by(n)]
        reasons.append(f"{share.mount}: not on {', '.join(apart)}" + _server_note(share, apart))
    return (
        f"no shared mount is on both controllers ({'; '.join(reasons)}): add slurm_controller "
        "to storage.ceph.cephfs.clients, or serve an NFS export from a host that is not a "
        "controller, and put state_save under its mount"
    )


def _counts_in_doubt(plan: Plan, nodes: list[Node], role: str) -> bool:
    """A group with the role whose nodes could not be counted (a wrong count or hostname
    pattern, already reported) leaves the number of such nodes unknown."""
    produced = Counter(node.group for node in nodes)
    for name, group in plan["node_groups"].items():
        if role in (group.get("roles") or []) and produced[name] != group.get("count"):
            return True
    return False


def _foreign_settings(scheduler: dict[str, Any]) -> Iterator[Finding]:
    kind = scheduler["type"]
    for block, owner in _OWN_BLOCK.items():
        if owner != kind and scheduler.get(block) is not None:
            yield Finding(
                "scheduler-settings-mismatch",
                f"scheduler.{block} holds {owner} settings, but the scheduler is {kind}: "
                "nothing reads them",
                ("scheduler", block),
                hint=f"remove scheduler.{block}, or set type: {owner}",
            )
    if kind == "kubernetes":
        # Kubernetes keeps work off reserved nodes with a taint for the window (roles/kubernetes);
        # Slurm's flags (a daily or weekly repeat, ignore_jobs, ...) have no counterpart there
        for name, reservation in (scheduler.get("reservations") or {}).items():
            if isinstance(reservation, dict) and reservation.get("flags"):
                yield Finding(
                    "scheduler-settings-mismatch",
                    f"reservation {name}: flags are Slurm reservation flags; Kubernetes "
                    "taints the nodes once, for the window, and ignores them",
                    ("scheduler", "reservations", name, "flags"),
                    severity="warning",
                    hint="remove the flags, or give each window its own reservation",
                )
