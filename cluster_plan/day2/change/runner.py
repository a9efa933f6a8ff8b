"""Carrying out the operations, one step at a time, on the hosts (the thin shell around
`operations`): each step's action (the scheduler's in `scheduler_steps`, Ceph's in
`ceph_steps`, the machines' in `machines`, the health check in `health`) through the executor
of cluster_plan.transport (SSH on a real cluster, the lab's nodes), the stages through
ansible-playbook. Every step is idempotent; the journal skips those already done.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from cluster_plan.day2.change.ceph_steps import (
    cephfs_evict,
    osd_empty,
    osd_ok_to_stop,
    osd_out,
    osd_purge,
)
from cluster_plan.day2.change.context import StepContext, StepFailed, kubectl
from cluster_plan.day2.change.health import check
from cluster_plan.day2.change.journal import Journal
from cluster_plan.day2.change.machines import provision, retire
from cluster_plan.day2.change.operations import (
    CONVERGE_VARS,
    PEERS_TAG,
    Operation,
    Step,
    hosts_text,
)
from cluster_plan.day2.change.scheduler_steps import _move_pods as _move_pods  # tests drive it
from cluster_plan.day2.change.scheduler_steps import drain, resume, wait_jobs
from cluster_plan.lab.names import LabError
from cluster_plan.plan.roles import SLURM_HOST_ROLES

# How long the waits last, the runner's to choose (tests shorten them). Between two looks at
# what a step waits for (a drain, a node back in Slurm, Ceph's health): each look is one
# command on one host, and a wait ends on average half a poll after its cause.
POLL_S = 2.0
PROVISION_TIMEOUT_S = 1800
OSD_EMPTY_TIMEOUT_S = 3600


class Context(StepContext):
    """What the steps are given, with the runner's bounds on their waits (read when a wait
    starts)."""

    @property
    def poll_s(self) -> float:
        return POLL_S

    @property
    def provision_timeout_s(self) -> int:
        return PROVISION_TIMEOUT_S

    @property
    def osd_empty_timeout_s(self) -> float:
        return OSD_EMPTY_TIMEOUT_S


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


def forget(ctx: Context, step: Step) -> None:
    if ctx.scheduler == "kubernetes":
        for host in step.hosts:
            ctx.must(ctx.controller(), kubectl(f"delete node {host} --ignore-not-found"))
        return
    # slurm.conf from the new plan, which no longer lists the host, on every Slurm host
    slurm_hosts = tuple(
        h for h, s in ctx.new["hosts"].items() if SLURM_HOST_ROLES & set(s["roles"])
    )
    playbook(ctx, ("slurm",), slurm_hosts, PEERS_TAG)


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
