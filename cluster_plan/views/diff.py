"""What changes between two plans, and what each change does to a running cluster."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cluster_plan.plan.allocate import build_lock
from cluster_plan.plan.contract import ExpandedPlan
from cluster_plan.plan.expand import expand
from cluster_plan.plan.findings import PlanError, errors, format_path
from cluster_plan.plan.nodes import iter_nodes
from cluster_plan.plan.placement import place_racks
from cluster_plan.plan.validate import Validation, validate_file

# Ordered from harmless to disruptive; from "reinstall" on a change is destructive.
IMPACTS = ("none", "reconfigure", "drain and restart", "reinstall", "relocate", "renumber")

# Cluster-level paths (first keys) -> impact; the longest matching prefix wins.
_CLUSTER_RULES: dict[tuple[str, ...], str] = {
    ("cluster",): "reconfigure",
    ("cluster", "name"): "reinstall",
    ("cluster", "os"): "reinstall",
    ("networks",): "reconfigure",
    ("networks", "*", "cidr"): "reconfigure",  # renumbered hosts show on their own
    ("networks", "*", "mtu"): "drain and restart",
    ("networks", "*", "vlan"): "drain and restart",
    ("networks", "*", "description"): "none",
    ("topology",): "reconfigure",
    ("racks",): "none",
    ("power",): "none",  # settings of validate's checks; nothing on a host changes
    ("hardware",): "none",  # effects show on the hosts that use a profile
    ("node_groups",): "none",  # likewise
    ("scheduler",): "reconfigure",
    ("scheduler", "type"): "reinstall",
    ("storage",): "reconfigure",
    ("backups",): "reconfigure",
    ("packages",): "reconfigure",
    ("access",): "reconfigure",
    ("acceptance",): "none",
    ("lab",): "none",
}
_HOST_RULES: dict[str, str] = {
    "interfaces": "reconfigure",
    "interfaces.*.address": "renumber",
    "interfaces.*.mtu": "drain and restart",
    "interfaces.*.vlan": "drain and restart",
    "interfaces.*.device": "drain and restart",
    "address": "renumber",
    # a renamed profile with the same content changes nothing; what the content changes
    # (accelerators, disks, cores, NICs) shows on its own fields
    "hardware_profile": "none",
    "accelerators": "reinstall",
    "disks": "reinstall",
    "cpu_cores": "drain and restart",
    "memory_gb": "drain and restart",
    "roles": "drain and restart",
    "rack": "relocate",  # a server carried to another rack
    "access_switch": "drain and restart",
    "aggregation_switch": "reconfigure",
    "core_switches": "reconfigure",
    "link_gbps": "reconfigure",
    "pool": "reconfigure",
    "datasets": "reconfigure",
    "fqdn": "reconfigure",
    "node_group": "none",
    "index": "none",
}
# Settings whose change loses data or needs a migration that no converge carries out,
# whatever their impact: (path, the kinds of change) -> what is lost or must be done by hand.
# A pattern matches a path of its own length ("*" any one key).
_LOSSES: dict[tuple[str, ...], tuple[frozenset[str], str]] = {
    ("storage", "ceph", "pools", "*"): (
        frozenset({"removed"}),
        "the pool and its data are deleted, or left behind unmanaged",
    ),
    ("storage", "ceph", "release"): (
        frozenset({"changed", "added"}),
        "a new Ceph release is an upgrade of every daemon in order (monitors first), which no "
        "converge carries out (it installs packages that are missing, never newer ones)",
    ),
    ("storage", "ceph", "cephfs", "name"): (
        frozenset({"changed"}),
        "a new file system is made: the files stay in the old one, which nothing mounts",
    ),
    ("storage", "ceph", "cephfs", "data_pool"): (
        frozenset({"changed"}),
        "the file system's data pool cannot be swapped: the files stay in the old pool",
    ),
    ("storage", "ceph", "cephfs", "metadata_pool"): (
        frozenset({"changed"}),
        "the file system's metadata pool cannot be swapped: the files stay in the old pool",
    ),
    ("scheduler", "slurm", "state_save"): (
        frozenset({"changed", "added", "removed"}),
        "slurmctld starts on an empty state directory: the queue and the running jobs' "
        "records are lost unless the state is moved there first, with slurmctld stopped",
    ),
    ("scheduler", "kubernetes", "version"): (
        frozenset({"changed"}),
        "a Kubernetes upgrade (kubeadm upgrade, control plane first, one minor version at a "
        "time), which no converge carries out",
    ),
    ("scheduler", "kubernetes", "pod_cidr"): (
        frozenset({"changed"}),
        "every pod is renumbered: a rebuild of the cluster's network",
    ),
    ("scheduler", "kubernetes", "service_cidr"): (
        frozenset({"changed"}),
        "every service is renumbered: a rebuild of the cluster's network",
    ),
    ("backups", "target", "host"): (
        frozenset({"changed"}),
        "the repositories stay on the old target: restores and retention start from nothing "
        "unless they are moved first",
    ),
    ("backups", "target", "path"): (
        frozenset({"changed"}),
        "the repositories stay in the old folder: restores and retention start from nothing "
        "unless they are moved first",
    ),
}
HOST_REMOVED_LOSS = "the host and what it holds leave the cluster"


@dataclass(frozen=True)
class Change:
    path: str
    kind: str  # added | removed | changed
    impact: str
    old: Any = None
    new: Any = None
    host: str | None = None
    loss: str = ""  # what the change loses or must have migrated by hand ("" when nothing)

    @property
    def data_loss(self) -> bool:
        return bool(self.loss)

    @property
    def destructive(self) -> bool:
        return self.data_loss or IMPACTS.index(self.impact) >= IMPACTS.index("reinstall")

    def as_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "kind": self.kind,
            "impact": self.impact,
            "host": self.host,
            "destructive": self.destructive,
            "loss": self.loss or None,
            "old": self.old,
            "new": self.new,
        }


def _keyed(value: Any) -> Any:
    """Lists of named mappings become mappings, lists of scalars sorted: order is no change."""
    if isinstance(value, list):
        if value and all(isinstance(v, dict) and "name" in v for v in value):
            return {v["name"]: _keyed(v) for v in value}
        if all(not isinstance(v, dict | list) for v in value):
            return sorted(value, key=repr)
        return [_keyed(v) for v in value]
    if isinstance(value, dict):
        return {k: _keyed(v) for k, v in value.items()}
    return value


def _leaves(
    old: Any, new: Any, path: tuple[Any, ...]
) -> Iterator[tuple[tuple[Any, ...], str, Any, Any]]:
    if isinstance(old, dict) and isinstance(new, dict):
        for key in old.keys() | new.keys():
            if key not in new:
                yield (*path, key), "removed", old[key], None
            elif key not in old:
                yield (*path, key), "added", None, new[key]
            else:
                yield from _leaves(old[key], new[key], (*path, key))
    elif old != new:
        yield path, "changed", old, new


def _rule(path: tuple[Any, ...]) -> str:
    best, length = "reconfigure", -1
    for pattern, impact in _CLUSTER_RULES.items():
        if len(pattern) > len(path) or len(pattern) <= length:
            continue
        if all(p in ("*", q) for p, q in zip(pattern, path, strict=False)):
            best, length = impact, len(pattern)
    return best


def _host_rule(path: tuple[Any, ...]) -> str:
    if path[0] == "interfaces" and len(path) >= 3:
        return _HOST_RULES.get(f"interfaces.*.{path[2]}", "reconfigure")
    return _HOST_RULES.get(str(path[0]), "reconfigure")


def _loss(path: tuple[Any, ...], kind: str) -> str:
    """What a cluster setting's change loses (_LOSSES), or ""."""
    for pattern, (kinds, loss) in _LOSSES.items():
        if kind in kinds and _matches(pattern, path):
            return loss
    return ""


def _matches(pattern: tuple[str, ...], path: tuple[Any, ...]) -> bool:
    if len(pattern) != len(path):
        return False
    return all(p in ("*", q) for p, q in zip(pattern, path, strict=True))


def destructive_rules() -> list[str]:
    """Every rule that makes a change destructive, as a path pattern ("$.cluster.os",
    "$.hosts.*.disks", "$.storage.ceph.pools.* removed"): what `change` refuses, or carries
    out only with the data moved off first."""
    rules = [".".join(("$", *p)) for p, i in _CLUSTER_RULES.items() if _at_least(i, "reinstall")]
    rules += [f"$.hosts.*.{field}" for field, i in _HOST_RULES.items() if _at_least(i, "reinstall")]
    rules += [".".join(("$", *p)) + " " + "/".join(sorted(k)) for p, (k, _) in _LOSSES.items()]
    return [*rules, "$.hosts.* removed"]


def _at_least(impact: str, floor: str) -> bool:
    return IMPACTS.index(impact) >= IMPACTS.index(floor)


def diff_expanded(old: ExpandedPlan, new: ExpandedPlan) -> list[Change]:
    changes = []
    skip = {"hosts", "groups"}
    old_c = _keyed({k: v for k, v in old.items() if k not in skip})
    new_c = _keyed({k: v for k, v in new.items() if k not in skip})
    for path, kind, before, after in _leaves(old_c, new_c, ()):
        loss = _loss(path, kind)
        changes.append(Change(format_path(path), kind, _rule(path), before, after, loss=loss))
    old_hosts, new_hosts = old["hosts"], new["hosts"]
    for name in new_hosts.keys() - old_hosts.keys():
        changes.append(Change(format_path(("hosts", name)), "added", "reconfigure", host=name))
    for name in old_hosts.keys() - new_hosts.keys():
        changes.append(
            Change(
                format_path(("hosts", name)),
                "removed",
                "drain and restart",
                host=name,
                loss=HOST_REMOVED_LOSS,
            )
        )
    for name in old_hosts.keys() & new_hosts.keys():
        before, after = old_hosts[name], new_hosts[name]
        if before == after:
            continue
        for path, kind, was, now in _leaves(_keyed(before), _keyed(after), ()):
            if path[0] == "interfaces":
                path = path[:3]  # one change per interface setting
            changes.append(
                Change(
                    format_path(("hosts", name, *path)), kind, _host_rule(path), was, now, host=name
                )
            )
    changes.sort(key=lambda c: (-IMPACTS.index(c.impact), c.path))
    return changes


def _validated(path: str | Path) -> Validation:
    result = validate_file(path, check_lock=False, allow_moves=True)
    if not result.ok:
        raise PlanError(errors(result.findings), result.doc.source_lines)
    return result


def _deployed(result: Validation, base: dict[str, Any] | None) -> ExpandedPlan:
    """The plan as `cluster-plan lock` would leave it, starting from ``base``: racks placed and
    addresses allocated from that lock, with every move the plan forces made."""
    nodes, _, _ = place_racks(result.plan, list(iter_nodes(result.plan)), base, allow_moves=True)
    lock, findings, _ = build_lock(result.plan, nodes, base, allow_moves=True)
    if findings:
        raise PlanError([result.doc.place(f) for f in findings], result.doc.source_lines)
    return expand(result.plan, nodes, lock)


def deployed_pair(old_path: str | Path, new_path: str | Path) -> tuple[ExpandedPlan, ExpandedPlan]:
    """Both plans as they would be deployed: each with its own lock (refreshed as
    `cluster-plan lock --allow-moves` would), and NEW from OLD's lock when it has none of its
    own, so that every address and rack that would change shows."""
    old, new = _validated(old_path), _validated(new_path)
    for result in (old, new):
        if result.lock_problem and result.lock_problem.code != "lock-missing":
            raise PlanError([result.lock_problem])
    old_lock = build_lock(old.plan, old.nodes, old.previous, allow_moves=True)[0]
    before = expand(old.plan, old.nodes, old_lock)
    after = _deployed(new, new.previous if new.previous is not None else old_lock)
    return before, after


def diff_files(old_path: str | Path, new_path: str | Path) -> list[Change]:
    """Compare two plans as they would be deployed (`deployed_pair`)."""
    return diff_expanded(*deployed_pair(old_path, new_path))


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def render_changes(changes: list[Change]) -> str:
    if not changes:
        return "no changes"
    lines = []
    by_impact: dict[str, list[Change]] = defaultdict(list)
    for change in changes:
        by_impact[change.impact].append(change)
    for impact in reversed(IMPACTS):
        group = by_impact.get(impact)
        if group:
            lines.append(f"{impact} ({len(group)}):")
            lines += _impact_lines(group)
    return "\n".join(lines)


def _impact_lines(group: list[Change]) -> list[str]:
    """One impact's changes; many hosts changing the same way read better as one line."""
    summary: dict[tuple[str, str], list[Change]] = defaultdict(list)
    for change in group:
        prefix = format_path(("hosts", change.host)) if change.host else ""
        field = change.path[len(prefix) + 1 :] if change.host else change.path
        summary[(change.kind, field)].append(change)
    lines = []
    for (kind, field), items in summary.items():
        flag = _flag(items)
        if items[0].host is not None and len(items) > 3:
            hosts = sorted(c.host or "" for c in items)
            what = f"{field} on {len(items)} hosts" if field else f"{len(items)} hosts"
            lines.append(f"  {kind} {what} ({hosts[0]} .. {hosts[-1]}){flag}")
        else:
            lines += [f"  {c.kind} {c.path}{_detail(c)}{flag}" for c in items]
    return lines


def _flag(items: list[Change]) -> str:
    """ " [destructive]" where a change is, with what a setting's change loses."""
    losses = sorted({c.loss for c in items if c.loss and c.host is None})
    if losses:
        return f" [destructive: {'; '.join(losses)}]"
    return " [destructive]" if any(c.destructive for c in items) else ""


def _detail(change: Change) -> str:
    if change.kind == "changed":
        return f": {_short(change.old)} -> {_short(change.new)}"
    if change.kind == "added" and change.host is None:
        return f": {_short(change.new)}"
    return ""
