"""A plan change turned into the ordered operations that carry it out on a running cluster.

Pure: two expanded plans (as deployed, as wanted), the diff between them and the operator's
choices in, a list of operations out, each a list of named steps, or the reasons it is
refused (`triage` sorts the hosts and refuses). Nothing here reaches a host; `runner` does,
one step at a time, and `journal` remembers which steps are done so that a second run
continues where the first stopped.

Order: hosts are added first (capacity before anything leaves), then replaced, then removed
(no host about to leave is upgraded, and an upgrade finds the pool it keeps), then rolled
(upgrades, one batch at a time); what every other host knows of them (and a change of the
cluster's own settings) is applied to every host last.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from cluster_plan.day2.change.triage import Triage, triage
from cluster_plan.plan.contract import ExpandedPlan, Host
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
# Whose drains a change makes (cluster_plan.slurm.drain): it resumes those and no other.
DRAIN_OWNER = "change"


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


def _wait_text(host: str, spec: Host, options: Options) -> str:
    bound = options.drain_timeout_s
    if KUBERNETES_NODE_ROLES & set(spec["roles"]):
        if options.force:
            return f"delete the pods on {host} within {bound} s, bare ones too (--force: no budget)"
        return (
            f"evict the pods on {host}, PodDisruptionBudgets respected, within {bound} s "
            "(DaemonSets' pods stay)"
        )
    return f"wait up to {bound} s for the jobs on {host} to end" + (
        " (requeued: --force)" if options.force else ""
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
                _wait_text(host, spec, options),
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
    sorted_: Triage, rolled: list[str], old: ExpandedPlan, new: ExpandedPlan, options: Options
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
    sorted_ = triage(changes, old, new, options.replace)
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
