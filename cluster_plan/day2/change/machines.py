"""The change's steps on the machines themselves: provision new hosts (the lab boots its
nodes; on real hosts the change waits until they answer, or answer as new machines), and
retire the hosts that leave."""

from __future__ import annotations

import os

from cluster_plan.day2.change.context import StepContext, StepFailed
from cluster_plan.day2.change.journal import JournalError, read_small, write_whole
from cluster_plan.day2.change.operations import Step
from cluster_plan.lab.names import LabError


def provision(ctx: StepContext, step: Step, kind: str) -> None:
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

    ctx.wait("provision", ctx.provision_timeout_s, unreachable)


def _lab_provision(ctx: StepContext, step: Step, kind: str) -> None:
    from cluster_plan.lab import lifecycle

    if kind == "replace":
        for host in step.hosts:
            lifecycle.reimage_node(ctx.new, host)
        return
    # the hosts this change removes later still run: the lab keeps them until they retire
    leaving = {h: s for h, s in ctx.old["hosts"].items() if h not in ctx.new["hosts"]}
    lifecycle.up({**ctx.new, "hosts": {**leaving, **ctx.new["hosts"]}}, str(ctx.new_path), ctx.log)


def _wait_for_new_machines(ctx: StepContext, hosts: tuple[str, ...]) -> None:
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
        f"waiting up to {ctx.provision_timeout_s // 60} min for each to answer as a new machine"
    )

    def old_or_down() -> str | None:
        pending = []
        for host in hosts:
            seen = ctx.sh(host, "cat /etc/machine-id", timeout=20)
            if seen.rc != 0 or (before[host] and seen.stdout.strip() == before[host]):
                pending.append(host)
        return f"not re-provisioned yet: {', '.join(pending)}" if pending else None

    ctx.wait("re-provisioning (run the change again to keep waiting)", ctx.provision_timeout_s,
          old_or_down)  # fmt: skip


def retire(ctx: StepContext, step: Step) -> None:
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
