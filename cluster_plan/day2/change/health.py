"""The change's health check of a host that is back: a job runs on it (Slurm) or its kubelet
is Ready, NVML sees the plan's GPUs, Ceph is healthy; a host that fails it is drained again."""

from __future__ import annotations

import shlex

from cluster_plan.day2.change.ceph_steps import wait_ceph_healthy
from cluster_plan.day2.change.context import StepContext, StepFailed, kubectl
from cluster_plan.day2.change.operations import Step
from cluster_plan.day2.change.scheduler_steps import drain, resume, slurm_check
from cluster_plan.plan.roles import JOB_ROLES

READY_PATH = shlex.quote('{.status.conditions[?(@.type=="Ready")].status}')


def _gpu_check(ctx: StepContext, host: str) -> None:
    accelerators = ctx.host(host)["accelerators"]
    if accelerators is None or accelerators["vendor"] != "nvidia" or ctx.lab:
        return  # lab nodes have no GPU; real NVIDIA hosts are checked
    out = ctx.must(host, "nvidia-smi --query-gpu=name --format=csv,noheader")
    count = len(out.strip().splitlines())
    if count != accelerators["count"]:
        raise StepFailed(f"{host}: NVML sees {count} GPU(s), the plan {accelerators['count']}")


def check(ctx: StepContext, step: Step) -> None:
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


def _check_host(ctx: StepContext, host: str) -> None:
    spec = ctx.host(host)
    _gpu_check(ctx, host)
    if "slurm_compute" in spec["roles"] and ctx.scheduler == "slurm":
        slurm_check(ctx, host)
    elif "k8s_worker" in spec["roles"]:
        # a kubelet that joined a moment ago turns Ready once its network is: wait, as for
        # a Slurm node coming back
        def not_ready() -> str | None:
            ready = ctx.must(ctx.controller(), kubectl(f"get node {host} -o jsonpath={READY_PATH}"))
            return None if ready.strip() == "True" else f"not Ready ({ready.strip()!r})"

        ctx.wait(f"{host}: its kubelet", ctx.check_timeout_s, not_ready)
    if "ceph_osd" in spec["roles"]:
        wait_ceph_healthy(ctx)
