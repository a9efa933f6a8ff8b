"""Collectives and training acceptance: an all-reduce sweep across each pool the plan gives torch
or MPI, and a DistributedDataParallel job, both submitted through Slurm from its first
controller (docs/collectives.md).

The sweep is judged by the bus bandwidth of its largest message (nccl-tests' busbw) against a
floor the plan derives from the links the traffic crosses: the slowest node link of the pool,
and the access uplinks when the pool spans switches, times `min_link_fraction`. A pool below
the floor names its slow node(s): with three nodes or more by an all-reduce of each pair (the
nodes in every slow pair), else from the network phase's bandwidth findings in the same run.
The training job passes when the loss went down and every rank ended with the same weights.

Commands run through the runner's executor; building them and judging what they print are pure
functions, tested on recorded output.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from cluster_plan.collectives.sweep import message_sizes
from cluster_plan.slurm.commands import JOB_ENDED, job_exit_status, oneliner_fields, show_job_argv
from cluster_plan.slurm.policy import slurm_name
from cluster_plan.transport.execution import CommandResult, last_json_object

RunOn = Callable[[str, Sequence[str], float], CommandResult]
PROGRAM = "/usr/local/lib/cluster-plan/cluster-plan-collectives.pyz"
PORT = 29511  # the sweep's rendezvous on the pool's first node
SMALLEST = 4096
TORCH_PACKAGES = {"python3-torch", "torch"}
MPI_PACKAGES = {"python3-mpi4py", "mpi4py"}


@dataclass(frozen=True)
class PoolRun:
    pool: str
    partition: str
    nodes: tuple[str, ...]
    backend: str  # gloo (CPU torch), nccl (CUDA torch), mpi (mpi4py)
    procs_per_node: int  # ranks per node: one per GPU with NCCL, else one
    addresses: tuple[str, ...]  # each node's address on the job network
    link_gbps: float  # the slowest link the traffic crosses, plan Gb/s
    floor_GBps: float  # inter-node bus bandwidth floor, plan GB/s
    intra_floor_GBps: float | None  # within one node (NCCL on 8-GPU boards), GB/s
    python: str  # the build's interpreter
    module: str | None  # the torch build's Lmod module (the training job loads it)


@dataclass(frozen=True)
class CollectivesSpec:
    submit_host: str
    network: str
    cidr: str
    pools: tuple[PoolRun, ...]
    skipped: tuple[tuple[str, str], ...]  # (pool, why) of pools with software not tested
    sizes: tuple[int, ...]
    rate_scale: float
    min_link_fraction: float
    training_steps: int
    timeout_s: int
    program: str = PROGRAM


# ---- the plan -> what runs -----------------------------------------------------------------


def _pool_hosts(hosts: Mapping[str, Any], chosen: Sequence[str] | None) -> dict[str, list[str]]:
    pools: dict[str, list[str]] = {}
    for name, host in hosts.items():
        compute = host.get("pool") and "slurm_compute" in (host.get("roles") or [])
        if compute and (chosen is None or name in chosen):
            pools.setdefault(str(host["pool"]), []).append(name)
    return pools


def _backend(builds: list[Mapping[str, Any]]) -> tuple[str, Mapping[str, Any]] | None:
    """The backend a host's builds give: torch (nccl for a CUDA build, else gloo), else MPI."""
    for build in builds:
        if TORCH_PACKAGES & set(build.get("packages") or []):
            return ("nccl" if build.get("build") == "cuda" else "gloo"), build
    for build in builds:
        if MPI_PACKAGES & set(build.get("packages") or []):
            return "mpi", build
    return None


def _partition(expanded: Mapping[str, Any], pool: str) -> str | None:
    classes = (expanded.get("scheduler") or {}).get("workload_classes") or {}
    return next((slurm_name(n) for n, c in classes.items() if c.get("pool") == pool), None)


def _link_gbps(expanded: Mapping[str, Any], nodes: Sequence[str]) -> float:
    hosts = expanded["hosts"]
    links = [float(hosts[n].get("link_gbps") or 0) for n in nodes]
    switches = {hosts[n].get("access_switch") for n in nodes}
    if len(switches) > 1:  # the ring crosses the access uplinks
        access = (expanded.get("topology") or {}).get("access") or {}
        links += [float(access[s]["uplink_gbps"]) for s in switches
                  if s in access and access[s].get("uplink_gbps")]  # fmt: skip
    return min(link for link in links if link > 0) if any(links) else 0.0


def _intra_floor(host: Mapping[str, Any], override: float | None) -> float | None:
    accelerators = host.get("accelerators") or {}
    if override is not None:
        return float(override)
    floor = (accelerators.get("catalog") or {}).get("allreduce_busbw_GBps") or {}
    if floor and accelerators.get("count") == floor.get("gpus"):
        return float(floor["floor"])
    return None


def _untestable(
    expanded: Mapping[str, Any], nodes: list[str], network: str, chosen: list[Any]
) -> str | None:
    """Why a pool with software is not tested, or None."""
    hosts = expanded["hosts"]
    if not all(chosen) or len({c[0] for c in chosen if c}) > 1:
        return "its nodes do not all get the same torch or MPI build"
    if len(nodes) < 2:
        return "one node: nothing crosses the network"
    off = [n for n in nodes if network not in (hosts[n].get("interfaces") or {})]
    if off:
        return f"{', '.join(off)} not on the job network {network}"
    return None


def _pool_run(
    expanded: Mapping[str, Any], pool: str, nodes: list[str], network: str, rules: Mapping[str, Any]
) -> PoolRun | str:
    """The pool's run, or why it is not tested ("" for a pool without torch or MPI)."""
    hosts = expanded["hosts"]
    chosen = [_backend(list((hosts[n].get("software") or {}).values())) for n in nodes]
    if not any(chosen):
        return ""
    partition = _partition(expanded, pool)
    why = _untestable(expanded, nodes, network, chosen)
    if why or partition is None or chosen[0] is None:
        return why or "no workload class runs on it"
    backend, build = chosen[0]
    first = hosts[nodes[0]]
    gpus = int((first.get("accelerators") or {}).get("count") or 0)
    link = _link_gbps(expanded, nodes)
    nccl = backend == "nccl"
    prefix = build.get("prefix")
    return PoolRun(
        pool=pool,
        partition=partition,
        nodes=tuple(nodes),
        backend=backend,
        procs_per_node=gpus if nccl and gpus else 1,
        addresses=tuple(str(hosts[n]["interfaces"][network]["address"]) for n in nodes),
        link_gbps=link,
        floor_GBps=round(link / 8 * float(rules.get("min_link_fraction", 0.8)), 6),
        intra_floor_GBps=_intra_floor(first, rules.get("intra_node_min_busbw_GBps"))
        if nccl
        else None,
        python=f"{prefix}/bin/python3" if prefix else "python3",
        module=build.get("module"),
    )


def _applies(expanded: Mapping[str, Any]) -> tuple[str, str] | None:
    """(first Slurm controller, job network) for a Slurm plan with a tested network."""
    scheduler = expanded.get("scheduler") or {}
    controllers = list((expanded.get("groups") or {}).get("slurm_controller") or [])
    network_rules = (expanded.get("acceptance") or {}).get("network") or {}
    if scheduler.get("type") != "slurm" or not controllers or not network_rules.get("networks"):
        return None
    return str(controllers[0]), str(network_rules["networks"][0])


def collectives_spec_from_expanded(
    expanded: Mapping[str, Any], nodes: Sequence[str] | None = None
) -> CollectivesSpec | None:
    """What the phase runs, or None for a plan it does not apply to (no Slurm, no software)."""
    applies = _applies(expanded)
    if applies is None:
        return None
    submit_host, network = applies
    rules = (expanded.get("acceptance") or {}).get("collectives") or {}
    runs, skipped = [], []
    for pool, members in sorted(_pool_hosts(expanded["hosts"], nodes).items()):
        run = _pool_run(expanded, pool, members, network, rules)
        if isinstance(run, PoolRun):
            runs.append(run)
        elif run:
            skipped.append((pool, run))
    if not runs and not skipped:
        return None
    lab = expanded.get("lab")
    return CollectivesSpec(
        submit_host=submit_host,
        network=network,
        cidr=str(expanded["networks"][network]["cidr"]),
        pools=tuple(runs),
        skipped=tuple(skipped),
        sizes=tuple(message_sizes(SMALLEST, int(rules.get("max_message_mib", 64)) << 20)),
        rate_scale=float(lab["rate_scale"]) if lab else 1.0,
        min_link_fraction=float(rules.get("min_link_fraction", 0.8)),
        training_steps=int(rules.get("training_steps", 60)),
        timeout_s=int(rules.get("timeout_s", 600)),
    )


# ---- commands ------------------------------------------------------------------------------


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


# ---- judging -------------------------------------------------------------------------------


def _tail(result: CommandResult) -> str:
    text = (result.stderr or result.stdout).strip().splitlines()
    return " | ".join(text[-3:])[:400] or f"exit {result.rc}"


def plan_rows(doc: Mapping[str, Any], rate_scale: float) -> list[dict[str, Any]]:
    """Each size's figures, bandwidths in plan units (lab links run at rate_scale)."""
    return [
        {
            "bytes": int(r["bytes"]),
            "time_us": float(r["time_us"]),
            "algbw_GBps": round(float(r["algbw_GBps"]) / rate_scale, 6),
            "busbw_GBps": round(float(r["busbw_GBps"]) / rate_scale, 6),
        }
        for r in doc.get("results") or []
    ]


@dataclass
class PoolVerdict:
    pool: PoolRun
    rows: list[dict[str, Any]] = field(default_factory=list)
    ranks: int = 0
    correct: bool = False
    error: str | None = None
    suspects: list[str] = field(default_factory=list)
    localised_by: str | None = None
    pairs: list[dict[str, Any]] = field(default_factory=list)
    retest_busbw: float | None = None  # the largest message again, alone: it decides
    intra: dict[str, Any] | None = None  # NCCL within each node (pools with GPUs)

    @property
    def busbw(self) -> float | None:
        if self.retest_busbw is not None:
            return self.retest_busbw
        return self.rows[-1]["busbw_GBps"] if self.rows else None

    @property
    def below_floor(self) -> bool:
        return self.error is None and self.busbw is not None and self.busbw < self.pool.floor_GBps

    def problems(self) -> list[str]:
        pool = self.pool
        if self.error:
            return [f"pool {pool.pool}: the all-reduce did not run: {self.error}"]
        out = []
        if not self.correct:
            out.append(f"pool {pool.pool}: an all-reduce returned a wrong sum")
        if self.busbw is not None and self.busbw < pool.floor_GBps:
            named = (f"; slow: {', '.join(self.suspects)} (by {self.localised_by})"
                     if self.suspects else "")  # fmt: skip
            out.append(
                f"pool {pool.pool}: all-reduce bus bandwidth {self.busbw:g} GB/s at "
                f"{self.rows[-1]['bytes']} bytes, below the floor {pool.floor_GBps:g} GB/s "
                f"({pool.link_gbps:g} Gb/s links){named}"
            )
        intra = self.intra or {}
        out += [
            f"pool {pool.pool}: node {n['node']}: "
            + (f"intra-node all-reduce did not run: {n['error']}" if n["error"] else
               f"intra-node all-reduce bus bandwidth {n['busbw_GBps']:g} GB/s, below the "
               f"floor {intra['floor_GBps']:g} GB/s")
            for n in intra.get("nodes") or [] if not n["passed"]
        ]  # fmt: skip
        return out

    def as_dict(self, spec: CollectivesSpec) -> dict[str, Any]:
        problems = self.problems()
        return {
            "pool": self.pool.pool,
            "partition": self.pool.partition,
            "nodes": list(self.pool.nodes),
            "backend": self.pool.backend,
            "ranks": self.ranks,
            "link_gbps": self.pool.link_gbps,
            "floor_GBps": self.pool.floor_GBps,
            "busbw_GBps": self.busbw,
            "first_busbw_GBps": self.rows[-1]["busbw_GBps"] if self.rows else None,
            "retested": self.retest_busbw is not None,
            "correct": self.correct,
            "sizes": self.rows,
            "intra_node": self.intra or _intra_node(self.pool),
            "suspects": self.suspects,
            "localised_by": self.localised_by,
            "pairs": self.pairs,
            "error": self.error,
            "problems": problems,
            "passed": not problems,
        }


def _intra_node(pool: PoolRun) -> dict[str, Any]:
    if pool.backend != "nccl":
        return {
            "measured": False,
            "floor_GBps": None,
            "reason": f"{pool.backend} on CPUs: the intra-node floor is NCCL's, on GPU nodes",
        }
    return {
        "measured": False,
        "floor_GBps": pool.intra_floor_GBps,
        "reason": "one GPU per node: nothing to all-reduce within a node",
    }


def judge_intra(pool: PoolRun, results: dict[str, PoolVerdict]) -> dict[str, Any]:
    """Each node's single-node NCCL sweep against the intra-node floor (none: reported only)."""
    floor = pool.intra_floor_GBps
    nodes = []
    for node, verdict in results.items():
        busbw = verdict.busbw
        error = verdict.error or (None if verdict.correct else "an all-reduce returned a wrong sum")
        nodes.append({
            "node": node,
            "busbw_GBps": busbw,
            "error": error,
            "passed": error is None and (floor is None or (busbw or 0.0) >= floor),
        })  # fmt: skip
    reason = None if floor is not None else "no catalog floor for this GPU model and count"
    return {"measured": True, "floor_GBps": floor, "reason": reason, "nodes": nodes}


def judge_sweep(pool: PoolRun, result: CommandResult, rate_scale: float) -> PoolVerdict:
    verdict = PoolVerdict(pool)
    doc = last_json_object(result.stdout)
    if doc is None or not doc.get("results"):
        verdict.error = _tail(result)
        return verdict
    verdict.rows = plan_rows(doc, rate_scale)
    verdict.ranks = int(doc.get("ranks") or 0)
    verdict.correct = bool(doc.get("correct")) and result.rc == 0
    return verdict


def slow_in_every_pair(pairs: Sequence[tuple[str, str, bool]]) -> list[str]:
    """The nodes every one of whose pairs was slow (and that were in at least one)."""
    nodes = sorted({n for a, b, _ in pairs for n in (a, b)})
    return [n for n in nodes if all(slow for a, b, slow in pairs if n in (a, b))]


def judge_training(pool: PoolRun, job: str, output: str, returncode: int) -> dict[str, Any]:
    doc = last_json_object(output) or {}
    problems = []
    if not doc:
        problems.append(f"pool {pool.pool}: training job {job or '?'} printed no result "
                        f"(exit {returncode}): {output.strip()[-300:]}")  # fmt: skip
    else:
        if returncode != 0:
            problems.append(f"pool {pool.pool}: training job {job or '?'} exited {returncode}: "
                            f"{output.strip()[-300:]}")  # fmt: skip
        if not doc.get("loss_went_down"):
            problems.append(f"pool {pool.pool}: the training loss did not go down "
                            f"({doc.get('first_loss')} -> {doc.get('last_loss')})")  # fmt: skip
        if not doc.get("identical_weights"):
            problems.append(f"pool {pool.pool}: the ranks ended with different weights: the "
                            "gradients were not synchronised")  # fmt: skip
    return {
        "pool": pool.pool,
        "job": job or None,
        "nodes": list(pool.nodes),
        "ranks": int(doc.get("ranks") or 0),
        "hosts": list(doc.get("hosts") or []),
        "steps": int(doc.get("steps") or 0),
        "first_loss": doc.get("first_loss"),
        "last_loss": doc.get("last_loss"),
        "losses": list(doc.get("losses") or []),
        "identical_weights": bool(doc.get("identical_weights")),
        "weights_sha256": list(doc.get("weights_sha256") or []),
        "problems": problems,
        "passed": not problems,
    }


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
