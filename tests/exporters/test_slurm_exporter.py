"""The Slurm textfile collector: recorded command outputs in, exposition text out.

fixtures/scontrol-details.txt is the lab's `scontrol show node --oneliner` recorded on head01
(Slurm 22.05.8, tests/day2/fixtures/scontrol-head01.json) with the fields `--details` adds
(GresDrain, GresUsed) and the states of a day with faults: cpu01 not responding, gpu02 drained,
infer01 draining with a job left, gpu01 running a one-GPU job. sinfo.txt and squeue-pending.txt
are the same moment through the collector's `--format` strings.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from cluster_plan.exporters.slurm import (
    SACCTMGR,
    SCONTROL,
    SINFO,
    SQUEUE,
    Runner,
    collect_slurm,
    gres_gpus,
    node_state,
    parse_sinfo,
)
from cluster_plan.exporters.textfile import CollectorError, exposition, run_collector

FIXTURES = Path(__file__).parent / "fixtures"
OUTPUTS = {
    tuple(SINFO): (FIXTURES / "sinfo.txt").read_text(),
    tuple(SQUEUE): (FIXTURES / "squeue-pending.txt").read_text(),
    tuple(SCONTROL): (FIXTURES / "scontrol-details.txt").read_text(),
    tuple(SACCTMGR): "lab|10.40.0.10|6817|9984|1||||||||normal|\n",
}
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def runner(failing: Sequence[str] = ()) -> Runner:
    def run(argv: Sequence[str]) -> tuple[int, str, str]:
        if argv[0] in failing:
            return 1, "", f"{argv[0]}: error: Unable to contact slurm controller (connect failure)"
        return 0, OUTPUTS[tuple(argv)], ""

    return run


def parse(text: str) -> Samples:
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def labels(**values: str) -> frozenset[tuple[str, str]]:
    return frozenset(values.items())


def export(failing: Sequence[str] = ()) -> Samples:
    return parse(exposition(collect_slurm(runner(failing))))


def test_node_states_per_partition() -> None:
    samples = export()
    current = {
        (dict(ids)["node"], dict(ids)["partition"]): dict(ids)["state"]
        for (name, ids), value in samples.items()
        if name == "cluster_plan_slurm_node_state" and value == 1
    }
    assert current == {
        ("cpu01", "general"): "down",
        ("cpu01", "all"): "down",
        ("gpu01", "training"): "mixed",
        ("gpu01", "all"): "mixed",
        ("gpu02", "training"): "drained",
        ("gpu02", "all"): "drained",
        ("infer01", "inference"): "draining",
        ("infer01", "all"): "draining",
    }
    # every state is written, 0 where it is not the node's: a rule can watch one series
    zero = labels(node="gpu02", partition="training", state="idle")
    assert samples[("cluster_plan_slurm_node_state", zero)] == 0
    states = {dict(i)["state"] for n, i in samples if n == "cluster_plan_slurm_node_state"}
    assert states == {"idle", "allocated", "mixed", "drained", "draining", "down", "other"}


def test_gpus_configured_and_allocated_per_node() -> None:
    samples = export()
    gpus = {
        dict(ids)["node"]: value
        for (name, ids), value in samples.items()
        if name == "cluster_plan_slurm_node_gpus"
    }
    allocated = {
        dict(ids)["node"]: value
        for (name, ids), value in samples.items()
        if name == "cluster_plan_slurm_node_gpus_allocated"
    }
    assert gpus == {"cpu01": 0, "gpu01": 2, "gpu02": 2, "infer01": 0}
    assert allocated == {"cpu01": 0, "gpu01": 1, "gpu02": 0, "infer01": 0}


def test_pending_jobs_per_partition_and_account() -> None:
    pending = {
        (dict(ids)["partition"], dict(ids)["account"]): value
        for (name, ids), value in export().items()
        if name == "cluster_plan_slurm_jobs_pending"
    }
    # the job queued to training and all counts in both
    assert pending == {
        ("training", "vision"): 2,
        ("training", "nlp"): 2,
        ("all", "nlp"): 1,
        ("inference", "serving"): 1,
    }


def test_slurmdbd_up_from_sacctmgr() -> None:
    assert export()[("cluster_plan_slurm_slurmdbd_up", frozenset())] == 1
    # slurmdbd down is a metric, not a failed collector
    assert export(failing=["sacctmgr"])[("cluster_plan_slurm_slurmdbd_up", frozenset())] == 0


@pytest.mark.parametrize(
    ("long_state", "state"),
    [
        ("idle", "idle"),
        ("idle~", "idle"),
        ("allocated+", "allocated"),
        ("mixed-", "mixed"),
        ("drained*", "drained"),
        ("draining@", "draining"),
        ("down*", "down"),
        ("reserved", "other"),
        ("completing", "other"),
        ("unknown*", "other"),
    ],
)
def test_long_states_and_their_flags(long_state: str, state: str) -> None:
    assert node_state(long_state) == state


@pytest.mark.parametrize(
    ("gres", "count"),
    [
        ("gpu:h100:2(S:0-1)", 2),
        ("gpu:h100:3(IDX:0,2,5)", 3),
        ("gpu:a100:2,gpu:l40s:1,tpu:4", 3),
        ("gpu:1", 1),
        ("gpu:h100:0(IDX:N/A)", 0),
        ("tpu:4", 0),
        ("(null)", 0),
    ],
)
def test_gres_gpu_counts(gres: str, count: int) -> None:
    assert gres_gpus(gres) == count


def test_garbled_output_is_a_collector_error_naming_the_line() -> None:
    with pytest.raises(CollectorError, match="sinfo: line 2"):
        parse_sinfo("gpu01|training|idle\ngpu02 training idle\n")


def test_controller_down_fails_and_removes_the_previous_file(tmp_path: Path) -> None:
    assert run_collector(tmp_path, "slurm", lambda: collect_slurm(runner())) is None
    assert (tmp_path / "cluster_plan_slurm.prom").is_file()
    failure = run_collector(tmp_path, "slurm", lambda: collect_slurm(runner(["sinfo"])))
    assert failure is not None and "Unable to contact slurm controller" in failure
    assert not (tmp_path / "cluster_plan_slurm.prom").exists()
    status = parse((tmp_path / "cluster_plan_collector_slurm.prom").read_text())
    assert status == {("cluster_plan_collector_success", labels(collector="slurm")): 0}
