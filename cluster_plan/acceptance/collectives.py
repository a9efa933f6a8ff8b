"""Collectives and training acceptance: an all-reduce sweep across each pool the plan gives torch
or MPI, and a DistributedDataParallel job, both submitted through Slurm from its first
controller (docs/collectives.md).

The sweep is judged by the bus bandwidth of its largest message (nccl-tests' busbw) against a
floor the plan derives from the links the traffic crosses: the slowest node link of the pool,
and the access uplinks when the pool spans switches, times `min_link_fraction`. A pool below
the floor names its slow node(s): with three nodes or more by an all-reduce of each pair (the
nodes in every slow pair), else from the network phase's bandwidth findings in the same run.
The training job passes when the loss went down and every rank ended with the same weights.

What runs for a plan is `collectives_spec`'s, the verdicts `collectives_verdict`'s; here are the
commands and the phase that runs them through the runner's executor and waits for the job.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any

from cluster_plan.acceptance.collectives_spec import CollectivesSpec, PoolRun
from cluster_plan.acceptance.collectives_verdict import (
    PoolVerdict,
    judge_intra,
    judge_sweep,
    judge_training,
    slow_in_every_pair,
)
from cluster_plan.slurm.commands import JOB_ENDED, job_exit_status, oneliner_fields, show_job_argv
from cluster_plan.transport.execution import CommandResult

RunOn = Callable[[str, Sequence[str], float], CommandResult]
PORT = 29511  # the sweep's rendezvous on the pool's first node


def _minutes(seconds: float) -> str:
    return str(max(1, math.ceil(seconds / 60)))


def sweep_argv(
    spec: CollectivesSpec, pool: PoolRun, nodes: Sequence[str], sizes: Sequence[int]
) -> list[str]:
    """srun of the program on `nodes` of the pool (one rank per node, or per GPU), bounded."""
    ranks = pool.procs_per_node
    argv = [
        "timeout", "--kill-after=10", str(spec.timeout_s),
        "srun", "--job-name=cluster-plan-allreduce", f"--partition={pool.partition}",
        f"--nodes={len(nodes)}", f"--nodelist={','.join(nodes)}",
        f"--ntasks-per-node={ranks}", f"--time={_minutes(spec.timeout_s)}", "--kill-on-bad-exit=1",
    ]  # fmt: skip
    if pool.backend == "nccl":
        argv.append(f"--gres=gpu:{ranks}")
    if pool.backend == "mpi":
        argv.append("--mpi=pmix")
    # torch's rendezvous on the first node's job-network address (its name is mgmt's)
    rendezvous = pool.addresses[pool.nodes.index(nodes[0])]
    argv += [
        pool.python, spec.program, "allreduce", f"--backend={pool.backend}",
        f"--sizes={','.join(str(s) for s in sizes)}", f"--network={spec.cidr}",
        f"--timeout-s={spec.timeout_s}",
    ]  # fmt: skip
    if pool.backend != "mpi":
        argv.append(f"--init=tcp://{rendezvous}:{PORT}")
    return argv


def training_script() -> str:
    """The example job users copy (cluster_plan/data/train-ddp.sbatch): acceptance runs it."""
    return resources.files("cluster_plan").joinpath("data/train-ddp.sbatch").read_text()


def training_argv(spec: CollectivesSpec, pool: PoolRun) -> list[str]:
    """sbatch of the example job on the pool's nodes; its output stays on the batch host. The
    phase waits for the job itself (`CollectivesPhase.wait`), not through `sbatch --wait`."""
    args = f"--steps {spec.training_steps} --backend {'nccl' if pool.backend == 'nccl' else 'gloo'}"
    env = [f"TRAIN_ARGS={args} --network {spec.cidr}",
           f"TRAIN_PROCS_PER_NODE={pool.procs_per_node}", f"TRAIN_MODULE={pool.module or ''}",
           f"TRAIN_PROGRAM={spec.program}"]  # fmt: skip
    return [
        "timeout", "--kill-after=10", str(SUBMIT_TIMEOUT_S),
        "sbatch", "--parsable", "--job-name=cluster-plan-train", "--chdir=/tmp",
        f"--partition={pool.partition}", f"--nodes={len(pool.nodes)}",
        f"--nodelist={','.join(pool.nodes)}", "--ntasks-per-node=1",
        f"--time={_minutes(spec.timeout_s)}", f"--output={TRAIN_OUTPUT}",
        "--export=ALL," + ",".join(env), f"--wrap={training_script()}",
    ]  # fmt: skip


TRAIN_OUTPUT = "/tmp/cluster-plan-train-%j.out"
SUBMIT_TIMEOUT_S = 60
# `sbatch --wait` asks after the job less and less often: on the lab it returned 42.5 s after
# submitting a job that ran 10 s (docs/collectives.md). The phase asks every second.
POLL_S = 1.0


# ---- the phase -----------------------------------------------------------------------------


@dataclass
class CollectivesPhase:
    spec: CollectivesSpec
    run: RunOn
    progress: Callable[[str], None]
    network_suspects: Callable[[Sequence[str]], list[str]]
    sleep: Callable[[float], None] = time.sleep

    def sweep(self, pool: PoolRun) -> PoolVerdict:
        self.progress(f"collectives: {pool.backend} all-reduce across {', '.join(pool.nodes)}")
        verdict = self._sweep(pool, pool.nodes, self.spec.sizes)
        if verdict.below_floor:  # one slow reading is a suspect; the retest decides
            self.progress(f"collectives: retest {pool.pool}'s largest message alone")
            retest = self._sweep(pool, pool.nodes, self.spec.sizes[-1:])
            verdict.retest_busbw = retest.busbw if retest.busbw is not None else verdict.busbw
        if verdict.below_floor:
            self.localise(verdict)
        if pool.backend == "nccl" and pool.procs_per_node > 1:
            verdict.intra = self.intra_node(pool)
        return verdict

    def intra_node(self, pool: PoolRun) -> dict[str, Any]:
        """NCCL across the GPUs of each node alone (NVLink, PCIe): the sizes of the sweep, one
        node at a time, judged on the largest message (not scaled: no lab link is crossed)."""
        results = {}
        for node in pool.nodes:
            self.progress(f"collectives: NCCL all-reduce within {node}")
            argv = sweep_argv(self.spec, pool, [node], self.spec.sizes)
            result = self.run(self.spec.submit_host, argv, self.spec.timeout_s + 30)
            results[node] = judge_sweep(pool, result, 1.0)
        return judge_intra(pool, results)

    def _sweep(self, pool: PoolRun, nodes: Sequence[str], sizes: Sequence[int]) -> PoolVerdict:
        argv = sweep_argv(self.spec, pool, nodes, sizes)
        result = self.run(self.spec.submit_host, argv, self.spec.timeout_s + 30)
        return judge_sweep(pool, result, self.spec.rate_scale)

    def localise(self, verdict: PoolVerdict) -> None:
        pool = verdict.pool
        if len(pool.nodes) >= 3:
            largest = [self.spec.sizes[-1]]
            found = []
            for i, a in enumerate(pool.nodes):
                for b in pool.nodes[i + 1 :]:
                    self.progress(f"collectives: localise: all-reduce {a} <-> {b}")
                    one = self._sweep(pool, (a, b), largest)
                    slow = one.busbw is None or one.busbw < pool.floor_GBps
                    found.append((a, b, slow))
                    verdict.pairs.append({"nodes": [a, b], "busbw_GBps": one.busbw, "slow": slow})
            verdict.suspects, verdict.localised_by = slow_in_every_pair(found), "pairs"
            return
        named = self.network_suspects(pool.nodes)
        verdict.suspects, verdict.localised_by = (named, "network") if named else ([], None)

    def training(self, pool: PoolRun) -> dict[str, Any]:
        self.progress(f"training: DistributedDataParallel job on {', '.join(pool.nodes)}")
        submitted = self.run(
            self.spec.submit_host, training_argv(self.spec, pool), SUBMIT_TIMEOUT_S + 30
        )
        lines = submitted.stdout.strip().splitlines()
        job = lines[-1].split(";")[0] if lines else ""
        if submitted.rc != 0 or not job.isdigit():
            return judge_training(pool, "", submitted.stderr or submitted.stdout, submitted.rc or 1)
        ended = self.wait(job)
        path = TRAIN_OUTPUT.replace("%j", job)
        host = ended.batch_host or pool.nodes[0]
        read = self.run(host, ["cat", path], 60)
        self.run(host, ["rm", "-f", path], 60)
        output = read.stdout or read.stderr
        if ended.state not in JOB_ENDED:
            output = f"{output}\njob {job}: {ended.state} after {self.job_limit_s} s, cancelled"
        return judge_training(pool, job, output, ended.status)

    @property
    def job_limit_s(self) -> int:
        """How long the training job may take from its submission: the phase's timeout (the
        job's own `--time` and torch's process group) and a minute to start and end."""
        return self.spec.timeout_s + 60

    def wait(self, job: str) -> JobEnd:
        """Until the job has ended, asking Slurm every POLL_S (`scontrol show job`: Slurm keeps
        a finished job's record for MinJobAge, 300 s by default); past the phase's timeout the
        job is cancelled."""
        deadline = time.monotonic() + self.job_limit_s
        fields: dict[str, str] = {}
        while True:
            shown = self.run(self.spec.submit_host, show_job_argv(job), 60)
            if shown.rc == 0:  # else the controller did not answer: ask again
                fields = oneliner_fields(shown.stdout.strip())
            state = fields.get("JobState", "UNKNOWN")
            if state in JOB_ENDED:
                status = job_exit_status(state, fields.get("ExitCode", ""))
                return JobEnd(state, status, fields.get("BatchHost"))
            if time.monotonic() > deadline:
                self.run(self.spec.submit_host, ["scancel", job], 60)
                return JobEnd(state, 124, fields.get("BatchHost"))
            self.sleep(POLL_S)


@dataclass(frozen=True)
class JobEnd:
    state: str  # a state of JOB_ENDED, or the last one seen when the wait ran out
    status: int  # as `sbatch --wait` exits: see job_exit_status
    batch_host: str | None  # where the script ran, and so its output file is


def run_collectives_phase(
    spec: CollectivesSpec,
    run: RunOn,
    progress: Callable[[str], None],
    network_suspects: Callable[[Sequence[str]], list[str]],
    phases: Sequence[str] = ("collectives", "training"),
) -> dict[str, Any]:
    phase = CollectivesPhase(spec, run, progress, network_suspects)
    pools = [phase.sweep(p).as_dict(spec) for p in spec.pools] if "collectives" in phases else []
    training = [phase.training(p) for p in spec.pools] if "training" in phases else []
    problems = [p for section in (*pools, *training) for p in section["problems"]]
    return {
        "network": spec.network,
        "rate_scale": spec.rate_scale,
        "min_link_fraction": spec.min_link_fraction,
        "sizes": list(spec.sizes),
        "pools": pools,
        "training": training,
        "skipped": [{"pool": p, "reason": why} for p, why in spec.skipped],
        "problems": problems,
        "passed": not problems,
    }
