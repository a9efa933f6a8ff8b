"""Slurm's answers read in one place (cluster_plan.slurm.commands): a node's state with its
flags whichever command printed it, and `--oneliner` records, read alike by the drain, the
drift facts and the collector."""

from __future__ import annotations

import pytest
from slurm_nodes import RECORDED, node_line

from cluster_plan.day2.remote.parsers import parse_scontrol_nodes
from cluster_plan.exporters.slurm import parse_scontrol_gpus
from cluster_plan.slurm.commands import (
    UnexpectedLine,
    node_records,
    node_state,
    oneliner_fields,
)
from cluster_plan.slurm.drain import parse_node


@pytest.mark.parametrize(
    ("printed", "base", "flags", "takes_jobs"),
    [
        ("idle", "IDLE", set(), True),
        ("mixed-", "MIXED", {"PLANNED"}, True),  # planned by the backfill scheduler
        ("allocated+", "ALLOCATED", set(), True),
        ("idle*", "IDLE", {"NOT_RESPONDING"}, False),
        ("idle~", "IDLE", {"POWERED_DOWN"}, False),
        ("mixed@", "MIXED", {"REBOOT_REQUESTED"}, False),
        ("drained*", "DRAINED", {"NOT_RESPONDING"}, False),
        ("IDLE*+DRAIN", "IDLE", {"NOT_RESPONDING", "DRAIN"}, False),  # scontrol's State
        ("DOWN", "DOWN", set(), False),
        ("", "", set(), False),
    ],
)
def test_a_state_is_its_base_and_its_flags(
    printed: str, base: str, flags: set[str], takes_jobs: bool
) -> None:
    state = node_state(printed)
    assert (state.base, state.flags, state.takes_jobs) == (base, flags, takes_jobs)


def test_one_parser_reads_every_oneliner_answer() -> None:
    text = RECORDED["stdout"]
    records = node_records(text)
    assert set(records) == {"gpu01", "gpu02", "infer01", "cpu01"}
    # the drain, the drift facts and the collector read the same nodes from it
    assert set(parse_scontrol_nodes(text)) == set(records) == set(parse_scontrol_gpus(text))
    assert parse_node(text, "cpu01").state == records["cpu01"]["State"] == "IDLE"
    reason = oneliner_fields(node_line("cpu01", "IDLE+DRAIN", "bad DIMM in slot 3"))["Reason"]
    assert reason == "bad DIMM in slot 3 [root@2026-11-30T18:40:02]"  # a value with spaces
    job = oneliner_fields("JobId=14 JobName=train x JobState=COMPLETED ExitCode=0:0 BatchHost=g1")
    assert (job["JobName"], job["JobState"], job["BatchHost"]) == ("train x", "COMPLETED", "g1")
    with pytest.raises(UnexpectedLine, match="line 2"):
        node_records(f"{node_line()}slurm_load_node error: Unable to contact slurm controller\n")
    assert node_records("No nodes in the system\n") == {}


def test_in_service_is_wider_than_taking_a_job_now() -> None:
    """drift asks whether Slurm may schedule on a node; the change's check whether a job sent
    now starts there: a completing node is in service but takes no job yet."""
    assert node_state("COMPLETING").out_of_service == []
    assert not node_state("COMPLETING").takes_jobs
    assert node_state("IDLE*+DRAIN").out_of_service == ["IDLE", "DRAIN", "NOT_RESPONDING"]
    assert node_state("DOWN").out_of_service == ["DOWN"]
    assert node_state("mixed-").out_of_service == [] and node_state("mixed-").takes_jobs
