"""Collectives and training acceptance without a cluster: what runs for which plan, the
commands, and the verdicts on output recorded from the lab's gpu01 and gpu02 (gloo, Debian's
torch 1.13; tests/collectives/recorded) or made to fail. The real runs are
tests/roles/test_software_lab.py's."""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from cluster_plan.acceptance.collectives import (
    CollectivesPhase,
    run_collectives_phase,
    sweep_argv,
    training_argv,
    training_script,
)
from cluster_plan.acceptance.collectives_html import collectives_html
from cluster_plan.acceptance.collectives_spec import CollectivesSpec, collectives_spec_from_expanded
from cluster_plan.acceptance.command import _collectives_summary
from cluster_plan.acceptance.report import build_report, judge_report, validate_report
from cluster_plan.acceptance.spec import spec_from_expanded
from cluster_plan.api import load_expanded
from cluster_plan.slurm.commands import job_exit_status as exit_status
from cluster_plan.transport.execution import CommandResult

ROOT = Path(__file__).resolve().parents[2]
RECORDED = ROOT / "tests" / "collectives" / "recorded"
SWEEP = (RECORDED / "allreduce-gloo-lab.out").read_text()
TRAIN = (RECORDED / "train-gloo-lab.out").read_text()


@pytest.fixture(scope="module")
def lab() -> dict[str, Any]:
    expanded: dict[str, Any] = load_expanded(str(ROOT / "inventory" / "lab" / "cluster.yml"))
    return expanded


@pytest.fixture(scope="module")
def h100() -> dict[str, Any]:
    path = ROOT / "inventory" / "examples" / "slurm-h100.yml"
    expanded: dict[str, Any] = load_expanded(str(path))
    return expanded


def lab_spec(lab: dict[str, Any]) -> CollectivesSpec:
    spec = collectives_spec_from_expanded(lab)
    assert spec is not None
    return spec


def test_the_lab_tests_its_training_pool_with_gloo_against_08_of_its_links(
    lab: dict[str, Any],
) -> None:
    spec = lab_spec(lab)
    (pool,) = spec.pools
    assert (spec.submit_host, spec.network, spec.cidr) == ("head01", "compute", "10.41.0.0/24")
    assert (pool.pool, pool.partition, pool.nodes) == ("gpu", "training", ("gpu01", "gpu02"))
    assert (pool.backend, pool.procs_per_node, pool.python) == ("gloo", 1, "python3")
    assert pool.addresses == tuple(
        lab["hosts"][n]["interfaces"]["compute"]["address"] for n in pool.nodes
    )
    # 10 Gb/s node links (the two nodes' access uplinks carry 40): 10 / 8 x 0.7 (the lab's)
    assert (pool.link_gbps, pool.floor_GBps, pool.intra_floor_GBps) == (10.0, 0.875, None)
    assert spec.sizes[0] == 4096 and spec.sizes[-1] == 8 << 20  # the lab plan's 8 MiB
    assert (spec.rate_scale, spec.training_steps, spec.skipped) == (0.01, 40, ())


def test_a_cuda_build_gets_nccl_one_rank_per_gpu_and_the_catalog_floor(
    h100: dict[str, Any],
) -> None:
    spec = collectives_spec_from_expanded(h100)
    assert spec is not None
    (pool,) = spec.pools
    assert (pool.backend, pool.procs_per_node, pool.intra_floor_GBps) == ("nccl", 8, 460.0)
    argv = sweep_argv(spec, pool, pool.nodes, spec.sizes)
    assert "--gres=gpu:8" in argv and "--ntasks-per-node=8" in argv
    assert argv[argv.index("--kill-on-bad-exit=1") + 2] == pool.python
    assert pool.python == "/opt/software/pytorch/2.5.1-cu121/bin/python3"
    assert "--backend=nccl" in argv and f"--init=tcp://{pool.addresses[0]}:29511" in argv
    plan = copy.deepcopy(h100)
    plan["acceptance"]["collectives"]["intra_node_min_busbw_GBps"] = 400
    override = collectives_spec_from_expanded(plan)
    assert override is not None and override.pools[0].intra_floor_GBps == 400.0


def test_an_mpi_only_pool_runs_with_pmix_and_no_torch_rendezvous(lab: dict[str, Any]) -> None:
    plan = copy.deepcopy(lab)
    for host in ("gpu01", "gpu02"):
        plan["hosts"][host]["software"].pop("pytorch")
    spec = lab_spec(plan)
    (pool,) = spec.pools
    argv = sweep_argv(spec, pool, pool.nodes, spec.sizes)
    assert pool.backend == "mpi" and "--mpi=pmix" in argv
    assert not [a for a in argv if a.startswith("--init")]


def test_plans_it_does_not_apply_to(lab: dict[str, Any]) -> None:
    no_software = copy.deepcopy(lab)
    for host in no_software["hosts"].values():
        host["software"] = {}
    assert collectives_spec_from_expanded(no_software) is None
    kubernetes = copy.deepcopy(lab)
    kubernetes["scheduler"]["type"] = "kubernetes"
    assert collectives_spec_from_expanded(kubernetes) is None
    one_node = collectives_spec_from_expanded(lab, nodes=["head01", "gpu01"])
    assert one_node is not None and one_node.pools == ()
    assert one_node.skipped == (("gpu", "one node: nothing crosses the network"),)


def test_the_training_job_is_the_example_with_the_plans_settings(lab: dict[str, Any]) -> None:
    spec = lab_spec(lab)
    argv = training_argv(spec, spec.pools[0])
    # the phase waits for the job itself (`sbatch --wait` returned 42.5 s after a 10 s job)
    assert "--wait" not in argv and argv[argv.index("sbatch") + 1] == "--parsable"
    assert argv[-1] == f"--wrap={training_script()}"
    (export,) = [a for a in argv if a.startswith("--export=")]
    assert "TRAIN_ARGS=--steps 40 --backend gloo --network 10.41.0.0/24" in export
    assert "TRAIN_MODULE=pytorch/1.13" in export and "TRAIN_PROCS_PER_NODE=1" in export
    script = training_script()
    assert "torch.distributed.run" in script and "--rdzv_endpoint" in script


class FakeCluster:
    """Answers the phase's commands: the recorded sweep (slowed by `slow` when a node of
    `slow_nodes` takes part), the recorded training job, the batch host."""

    def __init__(
        self,
        sweep: str = SWEEP,
        train: str = TRAIN,
        slow_nodes: Sequence[str] = (),
        slow_sweeps: int = 10**6,
    ) -> None:
        self.sweep, self.train, self.slow_nodes = sweep, train, set(slow_nodes)
        self.slow_sweeps = slow_sweeps  # how many sweeps the slow nodes slow down
        self.states = ["COMPLETED"]  # what `scontrol show job` says of the job, one per call
        self.calls: list[tuple[str, list[str]]] = []

    def __call__(self, host: str, argv: Sequence[str], timeout: float) -> CommandResult:
        argv = list(argv)
        self.calls.append((host, argv))
        if "srun" in argv:
            nodes = next(a for a in argv if a.startswith("--nodelist=")).split("=")[1].split(",")
            out = self.sweep
            if self.slow_nodes & set(nodes) and self.slow_sweeps > 0:  # half the speed
                self.slow_sweeps -= 1
                doc = json.loads(out.strip().splitlines()[-1])
                for row in doc["results"]:
                    row["busbw_GBps"] /= 2
                    row["algbw_GBps"] /= 2
                out = json.dumps(doc)
            return CommandResult(tuple(argv), 0, out, "")
        if "sbatch" in argv:
            return CommandResult(tuple(argv), 0, "14\n", "")
        if argv[:3] == ["scontrol", "show", "job"]:
            state = self.states.pop(0) if len(self.states) > 1 else self.states[0]
            shown = f"JobId=14 JobName=cluster-plan-train JobState={state} Reason=None "
            return CommandResult(tuple(argv), 0, shown + "ExitCode=0:0 BatchHost=gpu01", "")
        if argv[0] == "cat":
            return CommandResult(tuple(argv), 0, self.train, "")
        return CommandResult(tuple(argv), 0, "", "")


def no_network(nodes: Sequence[str]) -> list[str]:
    return []


def test_the_recorded_lab_run_passes_in_plan_units(lab: dict[str, Any]) -> None:
    cluster = FakeCluster()
    section = run_collectives_phase(lab_spec(lab), cluster, lambda m: None, no_network)
    assert section["passed"], section["problems"]
    (pool,) = section["pools"]
    recorded = json.loads(SWEEP.strip().splitlines()[-1])["results"]
    assert pool["busbw_GBps"] == pytest.approx(recorded[-1]["busbw_GBps"] / 0.01)
    assert pool["ranks"] == 2 and pool["correct"] and pool["suspects"] == []
    (job,) = section["training"]
    assert job["passed"] and job["job"] == "14" and job["identical_weights"]
    # the output was read on the batch host and removed there
    assert ("gpu01", ["cat", "/tmp/cluster-plan-train-14.out"]) in cluster.calls
    assert ("gpu01", ["rm", "-f", "/tmp/cluster-plan-train-14.out"]) in cluster.calls


def test_a_slow_two_node_pool_is_named_from_the_network_phase(lab: dict[str, Any]) -> None:
    cluster = FakeCluster(slow_nodes=["gpu02"])
    section = run_collectives_phase(
        lab_spec(lab), cluster, lambda m: None, lambda nodes: ["gpu02"], ["collectives"]
    )
    (pool,) = section["pools"]
    assert not section["passed"] and section["training"] == []
    assert pool["retested"] and pool["busbw_GBps"] < pool["floor_GBps"]
    assert (pool["suspects"], pool["localised_by"]) == (["gpu02"], "network")
    assert "below the floor 0.875 GB/s" in section["problems"][0]
    assert "slow: gpu02 (by network)" in section["problems"][0]


def test_one_slow_reading_is_retested_alone_and_the_retest_decides(lab: dict[str, Any]) -> None:
    cluster = FakeCluster(slow_nodes=["gpu02"], slow_sweeps=1)
    section = run_collectives_phase(
        lab_spec(lab), cluster, lambda m: None, lambda nodes: ["gpu02"], ["collectives"]
    )
    (pool,) = section["pools"]
    assert section["passed"] and pool["retested"] and pool["suspects"] == []
    assert pool["first_busbw_GBps"] < pool["floor_GBps"] <= pool["busbw_GBps"]
    retest = [argv for _, argv in cluster.calls if "srun" in argv][-1]
    assert f"--sizes={8 << 20}" in retest


def test_a_slow_node_of_three_is_named_by_pairs(lab: dict[str, Any]) -> None:
    plan = copy.deepcopy(lab)
    third = plan["hosts"]["gpu01"]
    plan["hosts"]["cpu01"]["software"] = copy.deepcopy(third["software"])
    plan["hosts"]["cpu01"]["pool"] = "gpu"
    spec = lab_spec(plan)
    cluster = FakeCluster(slow_nodes=["gpu02"])
    section = run_collectives_phase(spec, cluster, lambda m: None, no_network, ["collectives"])
    (pool,) = section["pools"]
    assert (pool["suspects"], pool["localised_by"]) == (["gpu02"], "pairs")
    assert [(p["nodes"], p["slow"]) for p in pool["pairs"]] == [
        (["gpu01", "gpu02"], True), (["gpu01", "cpu01"], False), (["gpu02", "cpu01"], True),
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("sweep", "train", "expected"),
    [
        ("srun: error: Unable to create step\n", TRAIN, "the all-reduce did not run: srun"),
        (SWEEP.replace('"correct": true', '"correct": false'), TRAIN, "returned a wrong sum"),
        (SWEEP, TRAIN.replace('"identical_weights": true', '"identical_weights": false'),
         "different weights"),
        (SWEEP, TRAIN.replace('"loss_went_down": true', '"loss_went_down": false'),
         "did not go down"),
        (SWEEP, "Traceback ...\nRuntimeError: connection refused\n", "printed no result"),
    ],
)  # fmt: skip
def test_each_failure_is_a_problem_with_its_cause(
    lab: dict[str, Any], sweep: str, train: str, expected: str
) -> None:
    section = run_collectives_phase(
        lab_spec(lab), FakeCluster(sweep, train), lambda m: None, no_network
    )
    assert not section["passed"]
    assert any(expected in p for p in section["problems"]), section["problems"]


def test_the_job_is_asked_after_every_second_until_it_ends(lab: dict[str, Any]) -> None:
    cluster = FakeCluster()
    cluster.states = ["PENDING", "RUNNING", "RUNNING", "COMPLETING", "COMPLETED"]
    slept: list[float] = []
    phase = CollectivesPhase(lab_spec(lab), cluster, lambda m: None, no_network, slept.append)
    job = phase.training(phase.spec.pools[0])
    assert job["passed"] and job["job"] == "14", job["problems"]
    asked = [argv for _, argv in cluster.calls if argv[:3] == ["scontrol", "show", "job"]]
    assert len(asked) == 5 and slept == [1.0] * 4


def test_a_job_that_never_ends_is_cancelled_at_the_phase_timeout(
    lab: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster = FakeCluster()
    cluster.states = ["RUNNING"]
    clock = iter(range(0, 10**6, 300))  # five minutes pass between two questions
    monkeypatch.setattr("cluster_plan.acceptance.collectives.time.monotonic", lambda: next(clock))
    phase = CollectivesPhase(lab_spec(lab), cluster, lambda m: None, no_network, lambda s: None)
    job = phase.training(phase.spec.pools[0])
    assert not job["passed"]
    assert ("head01", ["scancel", "14"]) in cluster.calls
    assert "job 14: RUNNING after 660 s, cancelled" in job["problems"][0]


@pytest.mark.parametrize(
    ("state", "exit_code", "status"),
    [
        ("COMPLETED", "0:0", 0),
        ("FAILED", "2:0", 2),
        ("CANCELLED", "0:15", 1),  # a signal ended it
        ("TIMEOUT", "0:0", 1),  # did not complete, whatever the code says
        ("NODE_FAIL", "0:0", 1),
        ("COMPLETED", "", 1),  # no exit code read: not a pass
    ],
)
def test_the_exit_status_is_sbatch_waits(state: str, exit_code: str, status: int) -> None:
    assert exit_status(state, exit_code) == status


def test_the_report_carries_the_section_and_fails_with_it(lab: dict[str, Any]) -> None:
    spec = spec_from_expanded(lab)
    good = run_collectives_phase(lab_spec(lab), FakeCluster(), lambda m: None, no_network)
    report = build_report(spec, [], [], [], [], {}, 1, None, good)
    assert validate_report(report) == [] and judge_report(report)
    bad = run_collectives_phase(
        lab_spec(lab), FakeCluster(slow_nodes=["gpu02"]), lambda m: None, lambda n: ["gpu02"]
    )
    failed = build_report(spec, [], [], [], [], {}, 1, None, bad)
    assert validate_report(failed) == [] and not judge_report(failed)
    html = "".join(collectives_html(failed["collectives"]))
    assert "bus bandwidth of pool gpu" in html and "floor 0.875 GB/s" in html
    assert "<b>gpu02</b>" in html and "training loss of pool gpu" in html
    text = "\n".join(_collectives_summary(failed["collectives"]))
    assert "collectives FAILED: pool gpu" in text and "training passed" in text


def nccl_output(busbw_GBps: float, ranks: int) -> str:
    """A sweep's document as the program prints it for NCCL (one size, made up: no GPU here)."""
    seconds = (1 << 30) / (busbw_GBps * 1e9 / (2 * (ranks - 1) / ranks))
    return json.dumps({
        "backend": "nccl", "correct": True, "hosts": ["x"] * ranks, "ranks": ranks,
        "results": [{"bytes": 1 << 30, "time_us": seconds * 1e6, "iterations": 5,
                     "algbw_GBps": busbw_GBps / (2 * (ranks - 1) / ranks),
                     "busbw_GBps": busbw_GBps}],
    })  # fmt: skip


def test_nccl_pools_are_also_swept_within_each_node_against_the_catalog_floor(
    h100: dict[str, Any],
) -> None:
    """Four nodes of 8 H100 SXM: the pool across nodes at 40 GB/s (100 Gb/s links, floor 10)
    passes; within gpu03 NCCL reaches 380 GB/s, under the catalog's 460: that node fails."""
    spec = collectives_spec_from_expanded(h100)
    assert spec is not None
    calls: list[list[str]] = []

    def cluster(host: str, argv: Sequence[str], timeout: float) -> CommandResult:
        calls.append(list(argv))
        nodes = next(a for a in argv if a.startswith("--nodelist=")).split("=")[1].split(",")
        if len(nodes) > 1:
            return CommandResult(tuple(argv), 0, nccl_output(11.5, 8 * len(nodes)), "")
        return CommandResult(tuple(argv), 0, nccl_output(380 if nodes == ["gpu03"] else 470, 8), "")

    section = run_collectives_phase(spec, cluster, lambda m: None, no_network, ["collectives"])
    (pool,) = section["pools"]
    intra = pool["intra_node"]
    assert intra["measured"] and intra["floor_GBps"] == 460.0
    assert [(n["node"], n["passed"]) for n in intra["nodes"]] == [
        ("gpu01", True), ("gpu02", True), ("gpu03", False), ("gpu04", True),
    ]  # fmt: skip
    assert section["problems"] == [
        "pool gpu: node gpu03: intra-node all-reduce bus bandwidth 380 GB/s, below the floor "
        "460 GB/s"
    ]
    single = [a for a in calls if "--nodes=1" in a]
    assert len(single) == 4 and all(
        "--gres=gpu:8" in a and "--ntasks-per-node=8" in a for a in single
    )
    report = build_report(spec_from_expanded(h100), [], [], [], [], {}, 1, None, section)
    assert validate_report(report) == [] and not judge_report(report)
    html = "".join(collectives_html(section))
    assert "NCCL within each node (floor 460 GB/s)" in html and "<b>gpu03 380 GB/s</b>" in html
