"""What a plan change does to each host, and the changes a running cluster cannot take.

Pure: diff's changes between the plan as deployed and as wanted are sorted by what happens to
each host (added, removed, replaced, rolled out in batches, or reconfigured with the cluster's
own settings), each through one table per kind of change, so that `change` and `diff` never
disagree; a change that would lose data or a service, or mix what cannot be mixed, is refused
with what to do instead. `operations` turns what is left into steps.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from cluster_plan.plan.contract import ExpandedPlan, Host
from cluster_plan.plan.findings import format_path
from cluster_plan.views.diff import Change

# The hosts the cluster cannot lose: a host with one of these roles is neither removed nor
# re-provisioned (replaced) by a plan change, and none is added by one: its service must first
# move to another host (a plan change of its own). Each role -> what goes with the host.
SERVICE_ROLES: dict[str, str] = {
    "slurm_controller": "the scheduler's state and the cluster's munge key (a new one is made "
    "that no other node has)",
    "slurmdbd": "the accounting database",
    "k8s_control_plane": "the Kubernetes control plane and its etcd",
    "ceph_mon": "a Ceph monitor's store",
    "ceph_mgr": "a Ceph manager",
    "ceph_mds": "a CephFS metadata server",
    "nfs_server": "the NFS exports",
    "ntp_server": "the cluster's time source",
    "backup_server": "the backup repositories",
    "monitoring_server": "Prometheus' data",
    "login": "the users' login host",
}
# Host fields whose change is a new version of something the host runs: rolled out.
VERSION_FIELDS = {"software": "software", "accelerators.driver_branch": "driver branch"}


@dataclass(frozen=True)
class Refusal:
    """Why a change is refused and what to do instead; `path` the plan setting or host it is
    about (JSONPath, as diff names it), when there is one."""

    message: str
    path: str | None = None
    host: str | None = None

    def as_finding(self) -> dict[str, Any]:
        """The shape of a finding in the command's JSON envelope (docs/cli-output.md)."""
        return {
            "severity": "error",
            "code": "change-refused",
            "path": self.path,
            "host": self.host,
            "message": self.message,
        }


class ChangeRefused(Exception):
    """The change cannot be carried out safely; each reason says what to do instead."""

    def __init__(self, refusals: list[Refusal]) -> None:
        super().__init__("; ".join(r.message for r in refusals))
        self.refusals = refusals

    @property
    def reasons(self) -> list[str]:
        return [r.message for r in self.refusals]


# What a change does with each of diff's impacts (cluster_plan.views.diff.IMPACTS), for a
# host's own field and for a cluster setting: one table each, so that `change` and `diff` never
# disagree. Every destructive change (from "reinstall" on, or one diff says loses data) is
# refused, or is an operation that takes the host's jobs and data off it first (replace;
# a host gone from the plan is removed). tests/day2 walks every destructive rule of diff's
# through this.
HOST_TREATMENT: dict[str, str | None] = {
    "none": None,
    "reconfigure": "reconfigure",
    "drain and restart": "upgrade",
    "reinstall": "replace",
    "relocate": "refuse",
    "renumber": "refuse",
}
SETTING_TREATMENT: dict[str, str | None] = {
    "none": None,
    "reconfigure": "reconfigure",
    # hosts that differ in it cannot talk to each other while a roll goes on
    "drain and restart": "refuse",
    "reinstall": "refuse",
    "relocate": "refuse",
    "renumber": "refuse",
}


@dataclass
class Triage:
    """Hosts by what happens to them, with the reason for each."""

    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    replaced: dict[str, str] = field(default_factory=dict)
    rolled: dict[str, list[str]] = field(default_factory=dict)
    changed: set[str] = field(default_factory=set)  # hosts whose own plan data changed
    cluster: list[Change] = field(default_factory=list)
    refused: list[Refusal] = field(default_factory=list)


def _host_field(change: Change) -> str:
    """The host's own path of a host change ("memory_gb", "interfaces.mgmt.mtu")."""
    prefix = format_path(("hosts", change.host or "")) + "."
    return change.path[len(prefix) :] if change.path.startswith(prefix) else ""


def setting_treatment(change: Change) -> str | None:
    """What a change of a cluster setting becomes: "reconfigure", "refuse" or None."""
    return "refuse" if change.data_loss else SETTING_TREATMENT[change.impact]


def host_treatment(change: Change) -> str | None:
    """What a change of a host's own field becomes: "upgrade" (drained, converged, resumed),
    "replace", "reconfigure", "refuse" or None. A new version of what the host runs rolls;
    a host does not change roles in a running cluster."""
    name = _host_field(change)
    if any(name.startswith(f) for f in VERSION_FIELDS):
        return "upgrade"
    if name.startswith("roles"):
        return "refuse"
    treatment = HOST_TREATMENT[change.impact]
    if change.data_loss and treatment not in ("replace", "refuse"):
        return "refuse"
    return treatment


def _sort(changes: Iterable[Change]) -> Triage:
    out = Triage()
    for change in changes:
        host = change.host
        if host is None:
            treatment = setting_treatment(change)
            if treatment == "refuse":
                out.refused.append(_setting_refusal(change))
            elif treatment is not None:
                out.cluster.append(change)
        elif change.path == format_path(("hosts", host)):
            (out.added if change.kind == "added" else out.removed).append(host)
        else:
            _sort_host_field(out, change, host)
    for host in out.replaced:
        out.rolled.pop(host, None)
    return out


def _sort_host_field(out: Triage, change: Change, host: str) -> None:
    name = _host_field(change)
    if change.impact != "none":
        out.changed.add(host)
    treatment = host_treatment(change)
    version = next((v for f, v in VERSION_FIELDS.items() if name.startswith(f)), None)
    if treatment == "upgrade":
        out.rolled.setdefault(host, []).append(f"{version or name} changed")
    elif treatment == "replace":
        out.replaced.setdefault(host, f"new hardware ({name} changed)")
    elif treatment == "refuse" and name.startswith("roles"):
        out.refused.append(
            Refusal(
                f"{host}: its roles change: a host does not change roles in a running cluster "
                "(data, jobs or a service would move with no step to move them); remove it "
                "and add it back with its new roles, as two plan changes",
                change.path,
                host,
            )
        )
    elif treatment == "refuse":
        out.refused.append(
            Refusal(
                f"{host}: {name} changes ({change.impact}): a host is moved or renumbered by "
                "removing it and adding it under a new name, in two plan changes",
                change.path,
                host,
            )
        )


def _setting_refusal(change: Change) -> Refusal:
    if change.data_loss:
        text = (
            f"{change.path} {change.kind}: {change.loss}; carry it out by hand "
            "(docs/operations.md) and then make OLD say so, or keep the setting"
        )
    elif change.impact == "drain and restart":
        text = (
            f"{change.path} changes: every host must drain and restart at once (hosts that "
            "differ in it cannot talk to each other while a roll goes on): apply it with "
            "site.yml in a maintenance window"
        )
    else:
        text = f"{change.path} changes ({change.impact}): a rebuild, not a change a running "
        text += "cluster takes"
    return Refusal(text, change.path)


def _mixing_refusals(sorted_: Triage) -> list[Refusal]:
    """Adding or removing hosts tells every host of the new plan, upgraded data included: it
    would reach the hosts to upgrade before they are drained."""
    if sorted_.rolled and (sorted_.added or sorted_.removed):
        return [
            Refusal(
                "hosts are added or removed and others upgraded in the same change: make the "
                "additions and removals one plan change and the upgrade the next"
            )
        ]
    return []


def service_roles(spec: Host) -> list[str]:
    """The roles of SERVICE_ROLES the host runs: those that make it a host the cluster
    cannot lose."""
    return sorted(set(spec["roles"]) & SERVICE_ROLES.keys())


def _service_refusals(
    hosts: Iterable[str], plan: ExpandedPlan, refusal: str, why: dict[str, str] | None = None
) -> list[Refusal]:
    """`refusal` (with {host}, {roles}, {losses} and {why}) for each host that runs a service
    of SERVICE_ROLES in `plan`."""
    reasons = []
    for host in hosts:
        roles = service_roles(plan["hosts"][host])
        if roles:
            text = refusal.format(
                host=host,
                roles=", ".join(roles),
                losses="; ".join(SERVICE_ROLES[r] for r in roles),
                why=(why or {}).get(host, ""),
            )
            reasons.append(Refusal(text, format_path(("hosts", host)), host))
    return reasons


# A new service host changes what every host is set up to use (a controller, a monitor, a
# time server, a munge key made on a new primary), which telling the others of a host does
# not redo; a host leaving with its service, or re-provisioned under it, leaves the cluster
# without it.
ADDITION_REFUSAL = (
    "{host} would run {roles}: every host uses that service, so add it with site.yml on the "
    "whole cluster in a maintenance window"
)
REMOVAL_REFUSAL = (
    "{host} runs {roles}: move those roles to another host first (a plan change of its own), "
    "then remove it"
)
REPLACEMENT_REFUSAL = (
    "{host} runs {roles} and would be re-provisioned ({why}), losing {losses}: move those "
    "roles to another host first (a plan change of its own), then replace it"
)


def _refusals(
    sorted_: Triage, old: ExpandedPlan, new: ExpandedPlan, replace: tuple[str, ...]
) -> list[Refusal]:
    """Why the change cannot be made; the hosts the operator replaces join `sorted_` first (a
    replaced host is re-provisioned, not upgraded, so it never mixes with a removal)."""
    refused = []
    for host in replace:
        if host not in new["hosts"] or host not in old["hosts"]:
            refused.append(Refusal(f"--replace {host}: no such host in both plans", host=host))
        else:
            sorted_.replaced.setdefault(host, "replaced by the operator (--replace)")
            sorted_.rolled.pop(host, None)
    refused += sorted_.refused
    refused += _service_refusals(sorted_.removed, old, REMOVAL_REFUSAL)
    refused += _service_refusals(sorted_.replaced, old, REPLACEMENT_REFUSAL, sorted_.replaced)
    refused += _mixing_refusals(sorted_)
    refused += _service_refusals(sorted_.added, new, ADDITION_REFUSAL)
    return refused


def triage(
    changes: Iterable[Change], old: ExpandedPlan, new: ExpandedPlan, replace: tuple[str, ...]
) -> Triage:
    """The hosts by what happens to them (with the hosts the operator replaces); ChangeRefused
    with every reason when the change cannot be made."""
    sorted_ = _sort(changes)
    refused = _refusals(sorted_, old, new, replace)
    if refused:
        raise ChangeRefused(refused)
    return sorted_
