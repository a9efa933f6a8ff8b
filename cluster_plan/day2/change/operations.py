"""A plan change turned into the ordered operations that carry it out on a running cluster.

Pure: two expanded plans (as deployed, as wanted), the diff between them and the operator's
choices in, a list of operations out, each a list of named steps, or the reasons it is
refused. Nothing here reaches a host; `runner` does, one step at a time, and `journal`
remembers which steps are done so that a second run continues where the first stopped.

Order: hosts are added first (capacity before anything leaves), then replaced, then removed
(no host about to leave is upgraded, and an upgrade finds the pool it keeps), then rolled
(upgrades, one batch at a time); what every other host knows of them (and a change of the
cluster's own settings) is applied to every host last.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from cluster_plan.plan.contract import ExpandedPlan, Host
from cluster_plan.plan.findings import format_path
from cluster_plan.plan.roles import (
    CEPH_DAEMON_ROLES,
    JOB_ROLES,
    KUBERNETES_NODE_ROLES,
    SLURM_HOST_ROLES,
)
from cluster_plan.slurm.drain import reason_for
from cluster_plan.views.diff import Change

# A host is brought to its converged state with every stage of site.yml, in its order (the
# caller reads them from site.yml: Options.stages), its acceptance stage only installing the
# tools (CONVERGE_VARS): a measurement is of the whole cluster, and `cluster-plan acceptance`
# makes it after. Without the tools a new or re-provisioned host cannot serve iperf3 to the
# others' acceptance ("Connection refused", lab d1).
CONVERGE_VARS = ("-e", "net_acceptance_run=false")
# What every other host knows of a host that comes or goes: /etc/hosts and the firewall's
# peers (common), the scheduler's node list, Ceph's CRUSH map and clients, scrape targets.
# They run in site.yml's order.
INFORM_STAGES = frozenset({"common", "storage", "slurm", "kubernetes", "monitoring"})
# Where a stage runs only to tell the other hosts of hosts that came, went or changed, these
# run only their tasks tagged `peers` (what a host knows of the others: /etc/hosts and the
# firewall; slurm.conf and the daemons that read it). Their records then leave the stage gate
# open: the next site.yml runs them in full.
PEER_TAGGED = frozenset({"common", "slurm"})
PEERS_TAG = "peers"
# The Ceph daemons other hosts' files name (ceph.conf's monitors; the MDS and manager keys).
# An OSD host is named in no other host's files: its own converge puts it into CRUSH (tasks
# run once, delegated to the first monitor) and a removal's purge takes it out.
CEPH_NAMED_ROLES = CEPH_DAEMON_ROLES - {"ceph_osd"}
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


# Whose drains a change makes (cluster_plan.slurm.drain): it resumes those and no other.
DRAIN_OWNER = "change"


class ChangeRefused(Exception):
    """The change cannot be carried out safely; each reason says what to do instead."""

    def __init__(self, refusals: list[Refusal]) -> None:
        super().__init__("; ".join(r.message for r in refusals))
        self.refusals = refusals

    @property
    def reasons(self) -> list[str]:
        return [r.message for r in self.refusals]


@dataclass(frozen=True)
class Step:
    """One idempotent action on some hosts; `key` names it in the journal."""

    action: str
    hosts: tuple[str, ...]
    detail: str
    params: tuple[tuple[str, Any], ...] = ()

    @property
    def key(self) -> str:
        return f"{self.action}:{','.join(self.hosts)}"

    def param(self, name: str, default: Any = None) -> Any:
        return dict(self.params).get(name, default)

    def as_dict(self) -> dict[str, Any]:
        return {"action": self.action, "hosts": list(self.hosts), "detail": self.detail}


@dataclass(frozen=True)
class Operation:
    kind: str  # add | replace | upgrade | remove | reconfigure
    hosts: tuple[str, ...]
    reason: str
    steps: tuple[Step, ...]

    def as_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "hosts": list(self.hosts),
            "reason": self.reason,
            "steps": [s.as_dict() for s in self.steps],
        }


@dataclass(frozen=True)
class Options:
    stages: tuple[str, ...] = ()  # site.yml's stages, in its order (playbooks.stages_of)
    replace: tuple[str, ...] = ()
    batch: int = 1
    force: bool = False
    drain_timeout_s: int = 600


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
class _Sorted:
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


def _sort(changes: Iterable[Change]) -> _Sorted:
    out = _Sorted()
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


def _sort_host_field(out: _Sorted, change: Change, host: str) -> None:
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


def _mixing_refusals(sorted_: _Sorted) -> list[Refusal]:
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


def _osds(spec: Host) -> bool:
    return "ceph_osd" in spec["roles"]


def _scheduled(spec: Host) -> bool:
    return bool(JOB_ROLES & set(spec["roles"]))


def _cephfs(plan: ExpandedPlan) -> bool:
    return any("ceph_mds" in s["roles"] for s in plan["hosts"].values())


def _evict(host: str) -> Step:
    return Step(
        "cephfs-evict",
        (host,),
        f"evict {host}'s CephFS client sessions (a vanished client's capabilities block "
        "every other client)",
    )


def _take_out(host: str, spec: Host, options: Options, why: str) -> list[Step]:
    """Drain a host of jobs and, when it has OSDs, of data: the steps before it goes away."""
    steps = []
    if _scheduled(spec):
        steps += [
            Step(
                "drain",
                (host,),
                f"drain {host} in the scheduler (reason: {reason_for(DRAIN_OWNER, why)})",
                (("why", why),),
            ),
            Step(
                "wait-jobs",
                (host,),
                f"wait up to {options.drain_timeout_s} s for the jobs on {host} to end"
                + (" (requeued: --force)" if options.force else ""),
                (("timeout_s", options.drain_timeout_s), ("force", options.force)),
            ),
        ]
    if _osds(spec):
        steps += [
            Step("osd-out", (host,), f"mark the OSDs of {host} out"),
            Step(
                "osd-empty",
                (host,),
                f"wait until Ceph has moved every placement group off {host}'s OSDs, they are "
                "safe to destroy and health is HEALTH_OK",
            ),
            Step("osd-purge", (host,), f"stop and purge {host}'s OSDs, remove it from CRUSH"),
        ]
    return steps


def _converge(hosts: tuple[str, ...], stages: tuple[str, ...], detail: str) -> Step:
    if not stages:
        raise ValueError("no stages to converge with: Options.stages is empty")
    return Step("converge", hosts, detail, (("stages", stages),))


def _bring_in(hosts: tuple[str, ...], verb: str, stages: tuple[str, ...]) -> list[Step]:
    names = ", ".join(f"{s}.yml" for s in stages) + " [tools only]"
    return [
        Step("provision", hosts, f"{verb} {', '.join(hosts)} and wait until reachable"),
        _converge(hosts, stages, f"converge {', '.join(hosts)} ({names})"),
    ]


def _health(hosts: tuple[str, ...], new: ExpandedPlan) -> list[Step]:
    checked = [h for h in hosts if _scheduled(new["hosts"][h]) or _osds(new["hosts"][h])]
    steps = []
    if any(_scheduled(new["hosts"][h]) for h in hosts):
        steps.append(Step("resume", hosts, f"resume {', '.join(hosts)} in the scheduler"))
    if checked:
        steps.append(
            Step(
                "check",
                tuple(checked),
                f"health of {', '.join(checked)}: a job runs on each scheduled host, GPU health "
                "where it has NVIDIA GPUs, Ceph HEALTH_OK where it has OSDs",
            )
        )
    return steps


def _inform_stages(
    hosts: Iterable[Host], new: ExpandedPlan, order: tuple[str, ...]
) -> tuple[str, ...]:
    """What the other hosts must learn when these hosts come or go: always /etc/hosts and
    the firewall (common); the scheduler's, Ceph's and monitoring's views where they hold
    the hosts. Ceph's only for the daemons others name (CEPH_NAMED_ROLES): an OSD host's
    CRUSH entry is its own converge's and its purge's."""
    roles = {r for spec in hosts for r in spec["roles"]}
    wanted = {"common"}
    if roles & CEPH_NAMED_ROLES:
        wanted.add("storage")
    if roles & SLURM_HOST_ROLES:
        wanted.add("slurm")
    if roles & KUBERNETES_NODE_ROLES:
        wanted.add("kubernetes")
    if any("monitoring_server" in s["roles"] for s in new["hosts"].values()):
        wanted.add("monitoring")
    return tuple(s for s in order if s in wanted)


def _inform(
    new: ExpandedPlan, stages: tuple[str, ...], what: str, everywhere: bool = False
) -> Step:
    """Run `stages` on every host of the new plan; unless `everywhere`, common and slurm
    only for what hosts know of each other (PEER_TAGGED, together in one run, first), the
    storage stage only on the Ceph daemons' hosts and the monitoring stage only where the
    scrape targets live."""
    hosts = tuple(new["hosts"])
    if not everywhere:
        # one ansible-playbook run for the peers' tasks: none of them waits on another stage
        stages = tuple(sorted(stages, key=lambda s: s not in PEER_TAGGED))
    plays = tuple(
        (
            stage,
            hosts if everywhere else _inform_hosts(stage, new),
            PEERS_TAG if stage in PEER_TAGGED and not everywhere else "",
        )
        for stage in stages
    )
    names = ", ".join(f"{p}.yml" + (f" [{tag}]" if tag else "") for p, _, tag in plays)
    return Step("inform", hosts, f"{what} ({names})", (("plays", plays),))


def _inform_hosts(stage: str, new: ExpandedPlan) -> tuple[str, ...]:
    """Where `stage` runs to tell of hosts that came, went or changed. A Ceph client knows
    the monitors (ceph.conf) and its own key, never an OSD host, and a monitor cannot come
    or go by a change (SERVICE_ROLES): the storage stage runs where the daemons are. Each
    host's own exporter does not change: monitoring runs where the targets are listed."""
    wanted = {
        "storage": CEPH_DAEMON_ROLES,
        "monitoring": {"monitoring_server"},
    }.get(stage)
    return tuple(h for h, s in new["hosts"].items() if wanted is None or wanted & set(s["roles"]))


def _batches(hosts: list[str], size: int) -> list[tuple[str, ...]]:
    return [tuple(hosts[i : i + size]) for i in range(0, len(hosts), size)]


def _refusals(
    sorted_: _Sorted, old: ExpandedPlan, new: ExpandedPlan, options: Options
) -> list[Refusal]:
    """Why the change cannot be made; the hosts the operator replaces join `sorted_` first (a
    replaced host is re-provisioned, not upgraded, so it never mixes with a removal)."""
    refused = []
    for host in options.replace:
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


def _add(added: tuple[str, ...], new: ExpandedPlan, options: Options) -> Operation:
    inform = _inform_stages((new["hosts"][h] for h in added), new, options.stages)
    steps = (
        *_bring_in(added, "provision", options.stages),
        _inform(new, inform, "tell every host of the new ones"),
        *_health(added, new),
    )
    return Operation("add", added, "new in the plan", steps)


def _replace(
    host: str, why: str, old: ExpandedPlan, new: ExpandedPlan, options: Options
) -> Operation:
    steps = (
        *_take_out(host, old["hosts"][host], options, "replace"),
        *([_evict(host)] if _cephfs(old) else []),
        *_bring_in((host,), "re-provision", options.stages),
        *_health((host,), new),
    )
    return Operation("replace", (host,), why, steps)


def _remove(host: str, old: ExpandedPlan, options: Options) -> Operation:
    spec = old["hosts"][host]
    steps = _take_out(host, spec, options, "removal")
    if _scheduled(spec):
        steps.append(Step("forget", (host,), f"remove {host} from the scheduler's nodes"))
    if _cephfs(old):
        steps.append(_evict(host))
    steps.append(Step("retire", (host,), f"power {host} off"))
    return Operation("remove", (host,), "gone from the plan", tuple(steps))


def _upgrade(batch: tuple[str, ...], why: str, new: ExpandedPlan, options: Options) -> Operation:
    steps: list[Step] = []
    for host in batch:
        steps += _take_out(host, new["hosts"][host], options, "upgrade")
    steps = [s for s in steps if not s.action.startswith("osd-")]  # data stays on an upgrade
    if any(_osds(new["hosts"][h]) for h in batch):
        steps.append(
            Step(
                "osd-ok-to-stop",
                batch,
                f"Ceph stays available with the OSDs of {', '.join(batch)} stopped "
                "(`ceph osd ok-to-stop`)",
            )
        )
    steps += [
        _converge(batch, options.stages, f"apply the new plan to {', '.join(batch)}"),
        *_health(batch, new),
    ]
    return Operation("upgrade", batch, why, tuple(steps))


def _reconfigure(
    sorted_: _Sorted, rolled: list[str], old: ExpandedPlan, new: ExpandedPlan, options: Options
) -> Operation:
    # A cluster setting, or a host's setting that is neither a version nor new hardware (its
    # pool, datasets, links), may show in any host's files: every stage that writes them, on
    # every host. A removed, upgraded or replaced host's data shows on the others in the same
    # files as its name.
    others = sorted_.changed - set(rolled) - set(sorted_.replaced)
    touched = [old["hosts"][h] for h in sorted_.removed]
    touched += [new["hosts"][h] for h in sorted_.changed if h in new["hosts"]]
    full = bool(sorted_.cluster or others)
    if full:
        stages = tuple(s for s in options.stages if s in INFORM_STAGES)
    else:
        stages = _inform_stages(touched, new, options.stages)
    if not full and not sorted_.changed:
        # only removals: each one's `forget` step already ran the slurm stage everywhere
        stages = tuple(s for s in stages if s != "slurm")
    why = "the plan as a whole changed" if full else "what every host knows follows the plan"
    everyone = tuple(new["hosts"])
    return Operation(
        "reconfigure",
        everyone,
        why,
        (_inform(new, stages, "apply the plan to every host", full),),
    )


def plan_operations(
    old: ExpandedPlan, new: ExpandedPlan, changes: list[Change], options: Options
) -> list[Operation]:
    """The operations that take the cluster from OLD to NEW, in the order they run."""
    sorted_ = _sort(changes)
    refused = _refusals(sorted_, old, new, options)
    if refused:
        raise ChangeRefused(refused)
    ops: list[Operation] = []
    if sorted_.added:
        ops.append(_add(tuple(sorted(sorted_.added)), new, options))
    # Removals before replacements: a removal's wait for its running jobs starts at once, not
    # after another host's re-provisioning, and a replaced host rejoins the final cluster.
    ops += [_remove(h, old, options) for h in sorted(sorted_.removed)]
    ops += [_replace(h, why, old, new, options) for h, why in sorted(sorted_.replaced.items())]
    rolled = [h for h in new["hosts"] if h in sorted_.rolled]
    for batch in _batches(rolled, max(1, options.batch)):
        why = "; ".join(f"{h}: {', '.join(sorted_.rolled[h])}" for h in batch)
        ops.append(_upgrade(batch, why, new, options))
    if sorted_.removed or sorted_.cluster or sorted_.changed:
        ops.append(_reconfigure(sorted_, rolled, old, new, options))
    return ops


def hosts_text(hosts: tuple[str, ...]) -> str:
    return ", ".join(hosts) if len(hosts) <= 4 else f"all {len(hosts)} hosts"


def render(ops: list[Operation]) -> str:
    """The operations as `terraform plan` prints its own: what, why, then each step."""
    if not ops:
        return "no operations: the running cluster already matches the plan"
    lines = []
    for number, op in enumerate(ops, 1):
        lines.append(f"{number}. {op.kind} {hosts_text(op.hosts)}: {op.reason}")
        lines += [f"   - {step.detail}" for step in op.steps]
    return "\n".join(lines)
