"""Carrying out the operations, one step at a time, on the hosts (the thin shell around
`operations`): scheduler and Ceph commands through the acceptance executor (SSH on a real
cluster, nsenter in the lab), the stages through ansible-playbook, the lab's nodes through
its lifecycle. Every step is idempotent; the journal skips those already done.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from cluster_plan.acceptance.execution import CommandResult, Executor
from cluster_plan.day2.change.journal import Journal, JournalError, read_small, write_whole
from cluster_plan.day2.change.operations import (
    CONVERGE_VARS,
    DRAIN_OWNER,
    PEERS_TAG,
    Operation,
    Step,
    hosts_text,
)
from cluster_plan.day2.change.playbooks import Playbooks, locate
from cluster_plan.lab.names import LabError
from cluster_plan.plan.contract import ExpandedPlan, Host
from cluster_plan.plan.roles import JOB_ROLES, SLURM_HOST_ROLES
from cluster_plan.slurm import drain as slurm_drain

# Between two looks at what a step waits for (a drain, a node back in Slurm, Ceph's health):
# each look is one command on one host, and a wait ends on average half a poll after its cause.
POLL_S = 2.0
CHECK_TIMEOUT_S = 180
PROVISION_TIMEOUT_S = 1800
OSD_EMPTY_TIMEOUT_S = 3600
KUBECONFIG = "/etc/kubernetes/admin.conf"
READY_PATH = shlex.quote('{.status.conditions[?(@.type=="Ready")].status}')


class StepFailed(Exception):
    """A step could not be carried out; the message says what was seen and what to do."""


@dataclass
class Context:
    old: ExpandedPlan
    new: ExpandedPlan
    new_path: Path
    executor: Executor
    lab: bool
    log: TextIO = sys.stdout
    ansible_args: list[str] = field(default_factory=list)
    check_timeout_s: float = CHECK_TIMEOUT_S
    state_dir: Path = Path("reports")
    sleep: Callable[[float], None] = time.sleep
    # the stage playbooks (`--playbooks`, the checkout's or the installed collection's)
    playbooks: Playbooks = field(default_factory=lambda: locate(None))

    def host(self, name: str) -> Host:
        hosts = self.new["hosts"] if name in self.new["hosts"] else self.old["hosts"]
        return hosts[name]

    def first(self, role: str) -> str | None:
        """The first host of a role in the plan that has it (the new one first)."""
        for plan in (self.new, self.old):
            members = [h for h, s in plan["hosts"].items() if role in s["roles"]]
            if members:
                return members[0]
        return None

    def sh(self, node: str, script: str, timeout: float = 120) -> CommandResult:
        return self.executor.run(node, ["sh", "-c", script], timeout)

    def must(self, node: str, script: str, timeout: float = 120) -> str:
        result = self.sh(node, script, timeout)
        if result.rc != 0:
            raise StepFailed(
                f"on {node}: `{script}` exited {result.rc}: "
                f"{(result.stderr or result.stdout).strip()[-600:]}"
            )
        return result.stdout

    def say(self, text: str) -> None:
        print(text, file=self.log, flush=True)


def _scheduler(ctx: Context) -> str:
    scheduler = ctx.new["scheduler"]
    return str(scheduler["type"]) if scheduler else "none"


def _controller(ctx: Context) -> str:
    role = "slurm_controller" if _scheduler(ctx) == "slurm" else "k8s_control_plane"
    node = ctx.first(role)
    if node is None:
        raise StepFailed(f"the plan has no {role} to run scheduler commands on")
    return node


def _kubectl(args: str) -> str:
    return f"KUBECONFIG={KUBECONFIG} kubectl {args}"


def _node_state(ctx: Context, host: str) -> str:
    out = ctx.sh(_controller(ctx), f"sinfo --noheader --nodes={host} --format=%T").stdout
    return out.strip().splitlines()[0] if out.strip() else ""


def _wait(ctx: Context, what: str, timeout: float, probe: Callable[[], str | None]) -> None:
    """Poll `probe` (None when done, else what is still pending) until done or timeout."""
    deadline = time.monotonic() + timeout
    pending = probe()
    while pending is not None:
        if time.monotonic() >= deadline:
            raise StepFailed(f"{what}: still {pending} after {timeout:g} s")
        ctx.sleep(POLL_S)
        pending = probe()


def playbook(
    ctx: Context,
    stages: tuple[str, ...],
    limit: tuple[str, ...],
    tags: str = "",
    extra: tuple[str, ...] = (),
) -> None:
    """Run `stages` (names of site.yml's stages) in one ansible-playbook run."""
    argv = [
        str(Path(sys.executable).parent / "ansible-playbook"),
        "-i",
        str(ctx.new_path),
        "--limit",
        ",".join(limit),
        *(("--tags", tags) if tags else ()),
        *extra,
        *ctx.ansible_args,
        *(ctx.playbooks.argument(stage) for stage in stages),
    ]
    ctx.say(f"  $ {shlex.join(argv)}")
    env = {**os.environ, "ANSIBLE_NOCOLOR": "1", "ANSIBLE_FORCE_COLOR": "0"}
    proc = subprocess.run(
        argv, cwd=ctx.playbooks.cwd, env=env, capture_output=True, text=True, check=False
    )
    recap = proc.stdout[proc.stdout.rfind("PLAY RECAP") :] if "PLAY RECAP" in proc.stdout else ""
    if recap:
        ctx.say("  " + recap.strip().replace("\n", "\n  "))
    if proc.returncode != 0:
        failed = [
            line for line in proc.stdout.splitlines() if line.startswith(("fatal:", "failed:"))
        ]
        raise StepFailed(
            f"ansible-playbook exited {proc.returncode}: "
            + ("\n".join(failed[-5:]) or (proc.stderr or proc.stdout)[-1500:])
        )


# --- the actions -----------------------------------------------------------------------


def provision(ctx: Context, step: Step, kind: str) -> None:
    try:
        if ctx.lab:
            _lab_provision(ctx, step, kind)
            return
    except LabError as exc:
        raise StepFailed(str(exc)) from None
    if kind == "replace":
        _wait_for_new_machines(ctx, step.hosts)
        return
    ctx.say(
        "  waiting for "
        + ", ".join(f"{h} ({ctx.host(h)['address']})" for h in step.hosts)
        + " to answer over SSH: install the OS and the cluster's SSH key on each"
    )

    def unreachable() -> str | None:
        down = [h for h in step.hosts if ctx.sh(h, "true", timeout=20).rc != 0]
        return f"unreachable: {', '.join(down)}" if down else None

    _wait(ctx, "provision", PROVISION_TIMEOUT_S, unreachable)


def _lab_provision(ctx: Context, step: Step, kind: str) -> None:
    from cluster_plan.lab import lifecycle

    if kind == "replace":
        for host in step.hosts:
            lifecycle.reimage_node(ctx.new, host)
        return
    # the hosts this change removes later still run: the lab keeps them until they retire
    leaving = {h: s for h, s in ctx.old["hosts"].items() if h not in ctx.new["hosts"]}
    lifecycle.up({**ctx.new, "hosts": {**leaving, **ctx.new["hosts"]}}, str(ctx.new_path), ctx.log)


def _wait_for_new_machines(ctx: Context, hosts: tuple[str, ...]) -> None:
    """A replaced host is the same name on new hardware (or a reinstalled OS): wait until it
    answers with another /etc/machine-id than the one it had when this step first ran."""
    before: dict[str, str] = {}
    for host in hosts:
        record = ctx.state_dir / f"replace-{host}.machine-id"
        if not os.path.lexists(record):
            seen = ctx.sh(host, "cat /etc/machine-id", timeout=20)
            write_whole(record, seen.stdout.strip() if seen.rc == 0 else "")
        try:
            before[host] = read_small(record).strip()
        except JournalError as exc:
            raise StepFailed(str(exc)) from None
    ctx.say(
        f"  re-provision {', '.join(hosts)} now (install the OS and the cluster's SSH key); "
        f"waiting up to {PROVISION_TIMEOUT_S // 60} min for each to answer as a new machine"
    )

    def old_or_down() -> str | None:
        pending = []
        for host in hosts:
            seen = ctx.sh(host, "cat /etc/machine-id", timeout=20)
            if seen.rc != 0 or (before[host] and seen.stdout.strip() == before[host]):
                pending.append(host)
        return f"not re-provisioned yet: {', '.join(pending)}" if pending else None

    _wait(ctx, "re-provisioning (run the change again to keep waiting)", PROVISION_TIMEOUT_S,
          old_or_down)  # fmt: skip


def _slurm(ctx: Context) -> slurm_drain.Run:
    """Slurm's client commands, run on the first controller."""
    controller = _controller(ctx)

    def run(argv: list[str]) -> tuple[int, str, str]:
        result = ctx.sh(controller, shlex.join(argv))
        return result.rc, result.stdout, result.stderr

    return run


def drain(ctx: Context, step: Step) -> None:
    """The project's one drain (cluster_plan.slurm.drain), owned by the change: a node drained
    already for anyone else's reason keeps it, and stays drained after."""
    for host in step.hosts:
        if _scheduler(ctx) != "slurm":
            ctx.must(_controller(ctx), _kubectl(f"cordon {host}"))
            continue
        why = str(step.param("why", "drained"))
        try:
            decision = slurm_drain.drain(_slurm(ctx), host, DRAIN_OWNER, why)
        except slurm_drain.DrainError as exc:
            raise StepFailed(str(exc)) from None
        if decision.held_by is not None:
            ctx.say(f"  {decision.message}")


def _pods_on(ctx: Context, host: str) -> str | None:
    """The pods on a node other than its DaemonSets' (which a drain leaves), or None."""
    template = shlex.quote(
        "{range .items[*]}{.metadata.ownerReferences[0].kind} "
        '{.metadata.namespace}/{.metadata.name}{"\\n"}{end}'
    )
    out = ctx.must(
        _controller(ctx),
        _kubectl(
            f"get pods --all-namespaces --field-selector spec.nodeName={host},"
            f"status.phase=Running -o jsonpath={template}"
        ),
    )
    pods = [
        line.split()[-1] for line in out.splitlines() if line and not line.startswith("DaemonSet")
    ]
    return f"running pod(s) {', '.join(pods)}" if pods else None


def _wait_pods(ctx: Context, host: str, timeout: float, force: bool) -> None:
    """Cordoned already: without --force wait for its pods to end, then drain what is left
    (DaemonSets stay); with --force evict them now."""
    if not force:
        try:
            _wait(ctx, f"drain of {host}", timeout, lambda: _pods_on(ctx, host))
        except StepFailed as exc:
            raise StepFailed(
                f"{exc}: they keep {host}; wait and run the change again (it continues "
                "here), or pass --force to evict them"
            ) from None
    ctx.must(
        _controller(ctx),
        _kubectl(
            f"drain {host} --ignore-daemonsets --delete-emptydir-data "
            f"--timeout={max(1, int(timeout))}s"
        ),
        timeout=timeout + 60,
    )


def wait_jobs(ctx: Context, step: Step) -> None:
    timeout = float(step.param("timeout_s", 600))
    force = bool(step.param("force", False))
    for host in step.hosts:
        if _scheduler(ctx) == "kubernetes":
            _wait_pods(ctx, host, timeout, force)
            continue
        try:
            slurm_drain.wait_for_jobs(
                _slurm(ctx), host, timeout, requeue=force, poll_s=POLL_S, sleep=ctx.sleep,
                say=lambda text: ctx.say(f"  {text}"),
            )  # fmt: skip
        except slurm_drain.DrainError as exc:
            raise StepFailed(
                f"{exc}: they keep {host}; wait and run the change again (it continues here), "
                "or pass --force to requeue them"
            ) from None


def _osd_ids(ctx: Context, host: str) -> list[str]:
    """The OSDs Ceph places under the host; [] once the host has left CRUSH. Any other
    failure stops the step: an unanswered question is not "no OSDs"."""
    mon = ctx.first("ceph_mon") or host
    result = ctx.sh(mon, f"ceph osd ls-tree {host}")
    if result.rc == 0:
        return result.stdout.split()
    if "does not exist" in result.stderr or result.rc == 2:  # ENOENT: no such bucket
        return []
    raise StepFailed(f"on {mon}: `ceph osd ls-tree {host}` exited {result.rc}: "
                     f"{(result.stderr or result.stdout).strip()[-400:]}")  # fmt: skip


def osd_out(ctx: Context, step: Step) -> None:
    mon = ctx.first("ceph_mon")
    for host in step.hosts:
        ids = _osd_ids(ctx, host)
        planned = sum(1 for d in ctx.old["hosts"].get(host, ctx.host(host))["disks"]
                      if d.get("use") == "osd")  # fmt: skip
        if len(ids) < planned:
            raise StepFailed(
                f"Ceph places {len(ids)} OSD(s) under {host}, the plan gives it {planned}: "
                "look at `ceph osd tree` before anything of it is removed"
            )
        if ids and mon:
            ctx.must(mon, f"ceph osd out {' '.join(ids)}")
            ctx.say(f"  OSD(s) {', '.join(ids)} of {host} out")


def osd_empty(ctx: Context, step: Step) -> None:
    mon = ctx.first("ceph_mon")
    if mon is None:
        return
    for host in step.hosts:
        ids = _osd_ids(ctx, host)

        def pending(ids: list[str] = ids) -> str | None:
            if ids and ctx.sh(mon, f"ceph osd safe-to-destroy {' '.join(ids)}").rc != 0:
                return f"holding data (`ceph osd safe-to-destroy {' '.join(ids)}` says no)"
            problem = _ceph_unhealthy(ctx, mon)
            return None if problem is None else f"not healthy: {problem}"

        _wait(ctx, f"emptying the OSDs of {host}", OSD_EMPTY_TIMEOUT_S, pending)


def osd_purge(ctx: Context, step: Step) -> None:
    mon = ctx.first("ceph_mon")
    if mon is None:
        return
    for host in step.hosts:
        for osd in _osd_ids(ctx, host):
            # asked again right before: nothing is destroyed that holds the only copy
            safe = ctx.sh(mon, f"ceph osd safe-to-destroy {osd}")
            if safe.rc != 0:
                raise StepFailed(f"osd.{osd} of {host} is not safe to destroy: "
                                 f"{(safe.stderr or safe.stdout).strip()[-300:]}")  # fmt: skip
            ctx.sh(host, f"systemctl disable --now ceph-osd@{osd}", timeout=120)
            ctx.must(mon, f"ceph osd purge {osd} --yes-i-really-mean-it")
        ctx.must(mon, f"ceph osd crush remove {host} 2>/dev/null || true")
    # the purge changes the OSD map: the step ends when Ceph is healthy again, which no other
    # host's storage stage waits for (an OSD host's going runs none)
    _ceph_check(ctx)


def cephfs_evict(ctx: Context, step: Step) -> None:
    """End the host's CephFS client sessions before it goes away or is re-provisioned. A
    client that vanishes without unmounting keeps its capabilities, and Ceph 16 defers its
    eviction while any OSD is laggy: every other client then waits on those files."""
    mon = ctx.first("ceph_mon")
    if mon is None or ctx.first("ceph_mds") is None:
        return
    listed = ctx.must(mon, "ceph tell mds.0 session ls --format=json")
    try:
        sessions = json.loads(listed[listed.find("[") :]) if "[" in listed else []
    except ValueError:
        raise StepFailed(f"on {mon}: `ceph tell mds.0 session ls` did not answer JSON") from None
    for host in step.hosts:
        for session in sessions:
            if (session.get("client_metadata") or {}).get("hostname") == host:
                ctx.must(mon, f"ceph tell mds.0 client evict id={int(session['id'])}")
                ctx.say(f"  CephFS session {session['id']} of {host} evicted")


def osd_ok_to_stop(ctx: Context, step: Step) -> None:
    """An upgrade restarts a host's OSDs: only when Ceph stays available without them."""
    mon = ctx.first("ceph_mon")
    if mon is None:
        return
    ids = [i for host in step.hosts for i in _osd_ids(ctx, host)]
    if ids:
        ctx.must(mon, f"ceph osd ok-to-stop {' '.join(ids)}")


def forget(ctx: Context, step: Step) -> None:
    if _scheduler(ctx) == "kubernetes":
        for host in step.hosts:
            ctx.must(_controller(ctx), _kubectl(f"delete node {host} --ignore-not-found"))
        return
    # slurm.conf from the new plan, which no longer lists the host, on every Slurm host
    slurm_hosts = tuple(
        h for h, s in ctx.new["hosts"].items() if SLURM_HOST_ROLES & set(s["roles"])
    )
    playbook(ctx, ("slurm",), slurm_hosts, PEERS_TAG)


def retire(ctx: Context, step: Step) -> None:
    for host in step.hosts:
        if ctx.lab:
            from cluster_plan.lab import lifecycle

            lifecycle.retire_node(ctx.old, host)
            ctx.say(f"  lab node {host} powered off and removed")
        else:
            ctx.say(
                f"  {host} is out of the cluster: power it off and unrack it; its addresses "
                "stay held back in the lock (`cluster-plan lock --reclaim` frees them)"
            )


def resume(ctx: Context, step: Step) -> None:
    """Resume the hosts the change drained; an operator's own drain is theirs to lift."""
    for host in step.hosts:
        if not JOB_ROLES & set(ctx.host(host)["roles"]):
            continue
        if _scheduler(ctx) == "kubernetes":
            ctx.must(_controller(ctx), _kubectl(f"uncordon {host}"))
            continue
        try:
            decision = slurm_drain.resume(_slurm(ctx), host, DRAIN_OWNER)
        except slurm_drain.DrainError as exc:
            raise StepFailed(str(exc)) from None
        if decision.held_by is not None:
            ctx.say(f"  {decision.message}")


def _slurm_check(ctx: Context, host: str) -> None:
    controller = _controller(ctx)

    def not_idle() -> str | None:
        state = _node_state(ctx, host)
        return None if state in ("idle", "mixed", "allocated") else f"in state {state!r}"

    _wait(ctx, f"{host} back in Slurm", ctx.check_timeout_s, not_idle)
    partition = ctx.must(controller, f"sinfo -h -N -n {host} -o %P").split()[0].rstrip("*")
    probe = (
        f"cd /tmp && timeout {ctx.check_timeout_s:g} srun --partition={partition} "
        f"--nodelist={host} --nodes=1 --time=1 --job-name=cluster-plan-health hostname"
    )
    result = ctx.sh(controller, probe, timeout=ctx.check_timeout_s + 30)
    if result.rc != 0 or result.stdout.split() != [ctx.host(host)["hostname"]]:
        raise StepFailed(
            f"{host}: a job did not run on it (srun exit {result.rc}: "
            f"{(result.stderr or result.stdout).strip()[-300:]})"
        )


def _gpu_check(ctx: Context, host: str) -> None:
    accelerators = ctx.host(host)["accelerators"]
    if accelerators is None or accelerators["vendor"] != "nvidia" or ctx.lab:
        return  # lab nodes have no GPU; real NVIDIA hosts are checked
    out = ctx.must(host, "nvidia-smi --query-gpu=name --format=csv,noheader")
    count = len(out.strip().splitlines())
    if count != accelerators["count"]:
        raise StepFailed(f"{host}: NVML sees {count} GPU(s), the plan {accelerators['count']}")


def _ceph_unhealthy(ctx: Context, mon: str) -> str | None:
    """None when Ceph says HEALTH_OK, else what it says instead."""
    health = ctx.sh(mon, "ceph health").stdout.strip()
    return None if health.startswith("HEALTH_OK") else health[:200] or "no answer"


def _ceph_check(ctx: Context) -> None:
    mon = ctx.first("ceph_mon")
    if mon is None:
        return
    _wait(ctx, "Ceph health", OSD_EMPTY_TIMEOUT_S, lambda: _ceph_unhealthy(ctx, mon))


def check(ctx: Context, step: Step) -> None:
    # a host drained by an earlier failed check is resumed first: this is its new try
    resume(ctx, step)
    for host in step.hosts:
        try:
            _check_host(ctx, host)
        except StepFailed as exc:
            if JOB_ROLES & set(ctx.host(host)["roles"]):
                # no job lands on a host that failed its check
                drain(ctx, Step("drain", (host,), "", (("why", "failed its health check"),)))
                raise StepFailed(f"{exc}; {host} is drained") from None
            raise
        ctx.say(f"  {host}: healthy")


def _check_host(ctx: Context, host: str) -> None:
    spec = ctx.host(host)
    _gpu_check(ctx, host)
    if "slurm_compute" in spec["roles"] and _scheduler(ctx) == "slurm":
        _slurm_check(ctx, host)
    elif "k8s_worker" in spec["roles"]:
        ready = ctx.must(
            _controller(ctx),
            _kubectl(f"get node {host} -o jsonpath={READY_PATH}"),
        )
        if ready.strip() != "True":
            raise StepFailed(f"{host}: kubelet not Ready ({ready.strip()!r})")
    if "ceph_osd" in spec["roles"]:
        _ceph_check(ctx)


def inform(ctx: Context, step: Step) -> None:
    """The stages in order, one ansible-playbook run per run of stages on the same hosts
    with the same tags."""
    plays = step.param("plays", ())
    group: list[str] = []
    limit: tuple[tuple[str, ...], str] = ((), "")
    for stage, hosts, tags in (*plays, ("", (), "")):
        if group and ((tuple(hosts), tags) != limit or not stage):
            playbook(ctx, tuple(group), *limit)
            group = []
        if stage and tuple(hosts):
            group.append(stage)
            limit = (tuple(hosts), tags)


def run_step(ctx: Context, op: Operation, step: Step) -> None:
    if step.action == "provision":
        provision(ctx, step, op.kind)
    elif step.action == "converge":
        playbook(ctx, tuple(step.param("stages", ())), step.hosts, extra=CONVERGE_VARS)
    elif step.action == "inform":
        inform(ctx, step)
    else:
        ACTIONS[step.action](ctx, step)


ACTIONS: dict[str, Callable[[Context, Step], None]] = {
    "drain": drain,
    "wait-jobs": wait_jobs,
    "osd-out": osd_out,
    "osd-empty": osd_empty,
    "osd-purge": osd_purge,
    "osd-ok-to-stop": osd_ok_to_stop,
    "cephfs-evict": cephfs_evict,
    "forget": forget,
    "retire": retire,
    "resume": resume,
    "check": check,
}


def carry_out(ctx: Context, ops: list[Operation], journal: Journal) -> bool:
    """Run every step not yet done, in order; stop at the first that fails (False)."""
    for number, op in enumerate(ops, 1):
        ctx.say(f"{number}. {op.kind} {hosts_text(op.hosts)}")
        for step in op.steps:
            step_id = Journal.step_id(number, step.key)
            if journal.done(step_id):
                ctx.say(f"   done before: {step.detail}")
                continue
            ctx.say(f"   {step.detail}")
            started = time.monotonic()
            try:
                run_step(ctx, op, step)
            except (StepFailed, LabError, OSError) as exc:  # a lab or file problem: said, kept
                journal.mark_failed(step_id, str(exc))
                ctx.say(f"   FAILED: {exc}")
                return False
            seconds = time.monotonic() - started
            journal.mark_done(step_id, seconds)
            ctx.say(f"   ok ({seconds:.0f} s)")
    return True
