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
from cluster_plan.views.diff import IMPACTS, Change

# The stages a host is brought to its converged state with: site.yml, its acceptance stage
# only installing the tools (CONVERGE_VARS): a measurement is of the whole cluster, and
# `cluster-plan acceptance` makes it after. Without the tools a new or re-provisioned host
# cannot serve iperf3 to the others' acceptance ("Connection refused", lab d1).
CONVERGE_VARS = ("-e", "net_acceptance_run=false")
STAGES = (
    "playbooks/common.yml",
    "playbooks/gpu.yml",
    "playbooks/storage.yml",
    "playbooks/software.yml",
    "playbooks/slurm.yml",
    "playbooks/kubernetes.yml",
    "playbooks/backup.yml",
    "playbooks/monitoring.yml",
    "playbooks/acceptance.yml",
)
# What every other host knows of a host that comes or goes: /etc/hosts and the firewall's
# peers (common), the scheduler's node list, Ceph's CRUSH map and clients, scrape targets.
INFORM_STAGES = (
    "playbooks/common.yml",
    "playbooks/storage.yml",
    "playbooks/slurm.yml",
    "playbooks/kubernetes.yml",
    "playbooks/monitoring.yml",
)
# Where a stage runs only to tell the other hosts of hosts that came, went or changed, these
# run only their tasks tagged `peers` (what a host knows of the others: /etc/hosts and the
# firewall; slurm.conf and the daemons that read it). Their records then leave the stage gate
# open: the next site.yml runs them in full.
PEER_TAGGED = frozenset({"playbooks/common.yml", "playbooks/slurm.yml"})
PEERS_TAG = "peers"
CEPH_DAEMON_ROLES = frozenset({"ceph_mon", "ceph_mgr", "ceph_osd", "ceph_mds"})
# The Ceph daemons other hosts' files name (ceph.conf's monitors; the MDS and manager keys).
# An OSD host is named in no other host's files: its own converge puts it into CRUSH (tasks
# run once, delegated to the first monitor) and a removal's purge takes it out.
CEPH_NAMED_ROLES = CEPH_DAEMON_ROLES - {"ceph_osd"}
# A host with one of these roles is not removed by a plan change: its service must first move
# to another host (a plan change of its own), or the cluster loses it.
SERVICE_ROLES = frozenset(
    {
        "slurm_controller",
        "slurmdbd",
        "k8s_control_plane",
        "ceph_mon",
        "ceph_mgr",
        "ceph_mds",
        "nfs_server",
        "ntp_server",
        "backup_server",
        "monitoring_server",
        "login",
    }
)
# Host fields whose change is a new version of something the host runs: rolled out.
VERSION_FIELDS = {"software": "software", "accelerators.driver_branch": "driver branch"}


class ChangeRefused(Exception):
    """The change cannot be carried out safely; each reason says what to do instead."""

    def __init__(self, reasons: list[str]) -> None:
        super().__init__("; ".join(reasons))
        self.reasons = reasons


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
    replace: tuple[str, ...] = ()
    batch: int = 1
    force: bool = False
    drain_timeout_s: int = 600


@dataclass
class _Sorted:
    """Hosts by what happens to them, with the reason for each."""

    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    replaced: dict[str, str] = field(default_factory=dict)
    rolled: dict[str, list[str]] = field(default_factory=dict)
    changed: set[str] = field(default_factory=set)  # hosts whose own plan data changed
    cluster: list[Change] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)


def _host_field(change: Change) -> str:
    """The host's own path of a host change ("memory_gb", "interfaces.mgmt.mtu")."""
    prefix = format_path(("hosts", change.host or "")) + "."
    return change.path[len(prefix) :] if change.path.startswith(prefix) else ""


def _sort(changes: Iterable[Change]) -> _Sorted:
    out = _Sorted()
    for change in changes:
        host = change.host
        if host is None:
            if change.impact != "none":
                out.cluster.append(change)
            continue
        if change.path == format_path(("hosts", host)):
            (out.added if change.kind == "added" else out.removed).append(host)
            continue
        name = _host_field(change)
        if change.impact != "none":
            out.changed.add(host)
        version = next((v for f, v in VERSION_FIELDS.items() if name.startswith(f)), None)
        if version:
            out.rolled.setdefault(host, []).append(f"{version} changed")
        elif name.startswith("roles"):
            out.refused.append(
                f"{host}: its roles change: a host does not change roles in a running cluster "
                "(data, jobs or a service would move with no step to move them); remove it "
                "and add it back with its new roles, as two plan changes"
            )
        elif change.impact in ("relocate", "renumber"):
            out.refused.append(
                f"{host}: {name} changes ({change.impact}): a host is moved or renumbered by "
                "removing it and adding it under a new name, in two plan changes"
            )
        elif change.impact == "reinstall":
            out.replaced.setdefault(host, f"new hardware ({name} changed)")
        elif change.impact == "drain and restart":
            out.rolled.setdefault(host, []).append(f"{name} changed")
    for host in out.replaced:
        out.rolled.pop(host, None)
    return out


def _cluster_refusals(changes: list[Change]) -> list[str]:
    reasons = [
        f"{c.path} changes ({c.impact}): a rebuild, not a change a running cluster takes"
        for c in changes
        if IMPACTS.index(c.impact) >= IMPACTS.index("reinstall")
    ]
    reasons += [
        f"{c.path} changes: every host must drain and restart at once (hosts that differ in "
        "it cannot talk to each other while a roll goes on): apply it with site.yml in a "
        "maintenance window"
        for c in changes
        if c.impact == "drain and restart"
    ]
    return reasons


def _mixing_refusals(sorted_: _Sorted) -> list[str]:
    """Adding or removing hosts tells every host of the new plan, upgraded data included: it
    would reach the hosts to upgrade before they are drained."""
    if sorted_.rolled and (sorted_.added or sorted_.removed):
        return [
            "hosts are added or removed and others upgraded in the same change: make the "
            "additions and removals one plan change and the upgrade the next"
        ]
    return []


def _service_refusals(hosts: list[str], plan: ExpandedPlan, refusal: str) -> list[str]:
    """`refusal` (with {host} and {roles}) for each host that runs a service of SERVICE_ROLES
    in `plan`."""
    reasons = []
    for host in hosts:
        roles = set(plan["hosts"][host]["roles"]) & SERVICE_ROLES
        if roles:
            reasons.append(refusal.format(host=host, roles=", ".join(sorted(roles))))
    return reasons


# A new service host changes what every host is set up to use (a controller, a monitor, a
# time server, a munge key made on a new primary), which telling the others of a host does
# not redo; a host leaving with its service leaves the cluster without it.
ADDITION_REFUSAL = (
    "{host} would run {roles}: every host uses that service, so add it with site.yml on the "
    "whole cluster in a maintenance window"
)
REMOVAL_REFUSAL = (
    "{host} runs {roles}: move those roles to another host first (a plan change of its own), "
    "then remove it"
)


def _osds(spec: Host) -> bool:
    return "ceph_osd" in spec["roles"]


def _scheduled(spec: Host) -> bool:
    return bool({"slurm_compute", "k8s_worker"} & set(spec["roles"]))


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
                f"drain {host} in the scheduler (reason: cluster-plan change: {why})",
                (("reason", f"cluster-plan change: {why}"),),
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


def _bring_in(hosts: tuple[str, ...], verb: str) -> list[Step]:
    stages = ", ".join(s.split("/")[-1] for s in STAGES) + " [tools only]"
    return [
        Step("provision", hosts, f"{verb} {', '.join(hosts)} and wait until reachable"),
        Step("converge", hosts, f"converge {', '.join(hosts)} ({stages})"),
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


def _inform_stages(hosts: Iterable[Host], new: ExpandedPlan) -> tuple[str, ...]:
    """What the other hosts must learn when these hosts come or go: always /etc/hosts and
    the firewall (common); the scheduler's, Ceph's and monitoring's views where they hold
    the hosts. Ceph's only for the daemons others name (CEPH_NAMED_ROLES): an OSD host's
    CRUSH entry is its own converge's and its purge's."""
    roles = {r for spec in hosts for r in spec["roles"]}
    wanted = {"playbooks/common.yml"}
    if roles & CEPH_NAMED_ROLES:
        wanted.add("playbooks/storage.yml")
    if roles & {"slurm_controller", "slurm_compute", "slurmdbd", "login"}:
        wanted.add("playbooks/slurm.yml")
    if roles & {"k8s_control_plane", "k8s_worker"}:
        wanted.add("playbooks/kubernetes.yml")
    if any("monitoring_server" in s["roles"] for s in new["hosts"].values()):
        wanted.add("playbooks/monitoring.yml")
    return tuple(s for s in INFORM_STAGES if s in wanted)


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
    names = ", ".join(p.split("/")[-1] + (f" [{tag}]" if tag else "") for p, _, tag in plays)
    return Step("inform", hosts, f"{what} ({names})", (("plays", plays),))


def _inform_hosts(stage: str, new: ExpandedPlan) -> tuple[str, ...]:
    """Where `stage` runs to tell of hosts that came, went or changed. A Ceph client knows
    the monitors (ceph.conf) and its own key, never an OSD host, and a monitor cannot come
    or go by a change (SERVICE_ROLES): the storage stage runs where the daemons are. Each
    host's own exporter does not change: monitoring runs where the targets are listed."""
    wanted = {
        "playbooks/storage.yml": CEPH_DAEMON_ROLES,
        "playbooks/monitoring.yml": {"monitoring_server"},
    }.get(stage)
    return tuple(h for h, s in new["hosts"].items() if wanted is None or wanted & set(s["roles"]))


def _batches(hosts: list[str], size: int) -> list[tuple[str, ...]]:
    return [tuple(hosts[i : i + size]) for i in range(0, len(hosts), size)]


def _refusals(
    sorted_: _Sorted, old: ExpandedPlan, new: ExpandedPlan, options: Options
) -> list[str]:
    """Why the change cannot be made; the hosts the operator replaces join `sorted_` first (a
    replaced host is re-provisioned, not upgraded, so it never mixes with a removal)."""
    refused = []
    for host in options.replace:
        if host not in new["hosts"] or host not in old["hosts"]:
            refused.append(f"--replace {host}: no such host in both plans")
        else:
            sorted_.replaced.setdefault(host, "replaced by the operator (--replace)")
            sorted_.rolled.pop(host, None)
    refused += list(sorted_.refused) + _cluster_refusals(sorted_.cluster)
    refused += _service_refusals(sorted_.removed, old, REMOVAL_REFUSAL) + _mixing_refusals(sorted_)
    refused += _service_refusals(sorted_.added, new, ADDITION_REFUSAL)
    return refused


def _add(added: tuple[str, ...], new: ExpandedPlan) -> Operation:
    inform = _inform_stages((new["hosts"][h] for h in added), new)
    steps = (
        *_bring_in(added, "provision"),
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
        *_bring_in((host,), "re-provision"),
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
        Step("converge", batch, f"apply the new plan to {', '.join(batch)}"),
        *_health(batch, new),
    ]
    return Operation("upgrade", batch, why, tuple(steps))


def _reconfigure(
    sorted_: _Sorted, rolled: list[str], old: ExpandedPlan, new: ExpandedPlan
) -> Operation:
    # A cluster setting, or a host's setting that is neither a version nor new hardware (its
    # pool, datasets, links), may show in any host's files: every stage that writes them, on
    # every host. A removed, upgraded or replaced host's data shows on the others in the same
    # files as its name.
    others = sorted_.changed - set(rolled) - set(sorted_.replaced)
    touched = [old["hosts"][h] for h in sorted_.removed]
    touched += [new["hosts"][h] for h in sorted_.changed if h in new["hosts"]]
    full = bool(sorted_.cluster or others)
    stages = INFORM_STAGES if full else _inform_stages(touched, new)
    if not full and not sorted_.changed:
        # only removals: each one's `forget` step already ran the slurm stage everywhere
        stages = tuple(s for s in stages if s != "playbooks/slurm.yml")
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
        ops.append(_add(tuple(sorted(sorted_.added)), new))
    # Removals before replacements: a removal's wait for its running jobs starts at once, not
    # after another host's re-provisioning, and a replaced host rejoins the final cluster.
    ops += [_remove(h, old, options) for h in sorted(sorted_.removed)]
    ops += [_replace(h, why, old, new, options) for h, why in sorted(sorted_.replaced.items())]
    rolled = [h for h in new["hosts"] if h in sorted_.rolled]
    for batch in _batches(rolled, max(1, options.batch)):
        why = "; ".join(f"{h}: {', '.join(sorted_.rolled[h])}" for h in batch)
        ops.append(_upgrade(batch, why, new, options))
    if sorted_.removed or sorted_.cluster or sorted_.changed:
        ops.append(_reconfigure(sorted_, rolled, old, new))
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
