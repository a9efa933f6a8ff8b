"""The change's steps in the scheduler: drain a host through the project's one drain (Slurm,
cluster_plan.slurm.drain; Kubernetes, its cordon, cluster_plan.kubernetes.cordon), wait for
its jobs (Slurm) or move its pods off it (cluster_plan.kubernetes.drain), resume it, and see
it take a job again."""

from __future__ import annotations

import shlex

from cluster_plan.day2.change.context import KUBECONFIG, StepContext, StepFailed
from cluster_plan.day2.change.operations import DRAIN_OWNER, Step
from cluster_plan.kubernetes import cordon
from cluster_plan.kubernetes import drain as pod_drain
from cluster_plan.plan.roles import JOB_ROLES
from cluster_plan.slurm import commands as slurm_commands
from cluster_plan.slurm import drain as slurm_drain


def _slurm(ctx: StepContext) -> slurm_drain.Run:
    """Slurm's client commands, run on the first controller."""
    controller = ctx.controller()

    def run(argv: list[str]) -> tuple[int, str, str]:
        result = ctx.sh(controller, shlex.join(argv))
        return result.rc, result.stdout, result.stderr

    return run


def _kubectl(ctx: StepContext, timeout: float = 120) -> cordon.Run:
    """kubectl, run on the first control plane with the cluster's admin kubeconfig."""
    control_plane = ctx.controller()

    def run(argv: list[str]) -> tuple[int, str, str]:
        result = ctx.sh(control_plane, f"KUBECONFIG={KUBECONFIG} {shlex.join(argv)}", timeout)
        return result.rc, result.stdout, result.stderr

    return run


def _not_a_node(ctx: StepContext, host: str) -> bool:
    """Whether the cluster has no node of that name: a host whose join never happened (its
    converge failed) or whose node was deleted. Asked only once a kubectl on it has failed."""
    if ctx.scheduler != "kubernetes":
        return False
    argv = ["get", "node", host, "--ignore-not-found", "--output", "name"]
    rc, out, _ = _kubectl(ctx)(["kubectl", *argv])
    if rc == 0 and not out.strip():
        ctx.say(f"  {host} is not a node of the cluster (it never joined, or was deleted): "
                "nothing runs on it")  # fmt: skip
        return True
    return False


def drain(ctx: StepContext, step: Step) -> None:
    """The project's one drain, owned by the change (a Slurm drain, a Kubernetes cordon): a
    node held already by anyone else keeps their hold, and stays held after."""
    why = str(step.param("why", "drained"))
    for host in step.hosts:
        try:
            if ctx.scheduler == "slurm":
                decision = slurm_drain.drain(_slurm(ctx), host, DRAIN_OWNER, why)
            else:
                decision = cordon.cordon(_kubectl(ctx), host, DRAIN_OWNER, why)
        except slurm_drain.DrainError as exc:
            if _not_a_node(ctx, host):
                continue
            raise StepFailed(str(exc)) from None
        if decision.held_by is not None:
            ctx.say(f"  {decision.message}")


def _move_pods(ctx: StepContext, host: str, timeout: float, force: bool) -> None:
    """Cordoned already: its pods evicted (PodDisruptionBudgets respected) within the bound,
    or with --force deleted; DaemonSets' and mirror pods stay."""
    # kubectl drain's own bound is `timeout` (each request too); the shell's is past both
    run = _kubectl(ctx, timeout=2 * max(1.0, timeout) + 60)
    try:
        drained = pod_drain.drain(run, host, timeout, force)
    except slurm_drain.DrainError as exc:
        if _not_a_node(ctx, host):
            return
        raise StepFailed(
            f"{exc}. Wait (or make room for them: more replicas elsewhere, a budget that "
            "allows a disruption) and run the change again (it continues here), or pass "
            "--force to delete them"
        ) from None
    for line in drained.lines:
        ctx.say(f"  {line}")


def wait_jobs(ctx: StepContext, step: Step) -> None:
    timeout = float(step.param("timeout_s", 600))
    force = bool(step.param("force", False))
    for host in step.hosts:
        if ctx.scheduler == "kubernetes":
            _move_pods(ctx, host, timeout, force)
            continue
        try:
            slurm_drain.wait_for_jobs(
                _slurm(ctx), host, timeout, requeue=force, poll_s=ctx.poll_s, sleep=ctx.sleep,
                say=lambda text: ctx.say(f"  {text}"),
            )  # fmt: skip
        except slurm_drain.DrainError as exc:
            raise StepFailed(
                f"{exc}: they keep {host}; wait and run the change again (it continues here), "
                "or pass --force to requeue them"
            ) from None


def resume(ctx: StepContext, step: Step) -> None:
    """Resume the hosts the change drained or cordoned; an operator's own drain or cordon is
    theirs to lift."""
    for host in step.hosts:
        if not JOB_ROLES & set(ctx.host(host)["roles"]):
            continue
        try:
            if ctx.scheduler == "kubernetes":
                decision = cordon.uncordon(_kubectl(ctx), host, DRAIN_OWNER)
            else:
                decision = slurm_drain.resume(_slurm(ctx), host, DRAIN_OWNER)
        except slurm_drain.DrainError as exc:
            raise StepFailed(str(exc)) from None
        if decision.held_by is not None:
            ctx.say(f"  {decision.message}")


def _node_state(ctx: StepContext, host: str) -> str:
    """sinfo's long state of the host (`idle`, `mixed-`, `down*`), "" without an answer."""
    out = ctx.sh(ctx.controller(), shlex.join(slurm_commands.node_state_argv(host))).stdout
    return out.strip().splitlines()[0] if out.strip() else ""


def slurm_check(ctx: StepContext, host: str) -> None:
    controller = ctx.controller()

    def not_ready() -> str | None:
        state = _node_state(ctx, host)
        return None if slurm_commands.node_state(state).takes_jobs else f"in state {state!r}"

    ctx.wait(f"{host} back in Slurm", ctx.check_timeout_s, not_ready)
    listed = ctx.must(controller, shlex.join(slurm_commands.node_partition_argv(host)))
    partition = slurm_commands.first_partition(listed)
    if partition is None:
        raise StepFailed(f"{host}: Slurm puts it in no partition (sinfo answered {listed!r})")
    probe = shlex.join(slurm_commands.health_job_argv(partition, host, ctx.check_timeout_s))
    result = ctx.sh(controller, f"cd /tmp && {probe}", timeout=ctx.check_timeout_s + 30)
    if result.rc != 0 or result.stdout.split() != [ctx.host(host)["hostname"]]:
        raise StepFailed(
            f"{host}: a job did not run on it (srun exit {result.rc}: "
            f"{(result.stderr or result.stdout).strip()[-300:]})"
        )
