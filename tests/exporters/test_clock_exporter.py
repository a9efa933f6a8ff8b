"""The clock collector: `chronyc -c -n tracking` recorded in the lab (chrony 4.3, Debian 12),
in the four states a host can be in, and what the collector writes for each.

- server-upstream: head01, the lab's NTP server, tracking its upstream (the lab's 10.40.0.2);
- server-local: head01 with that upstream dropped and chronyd restarted: it serves its own clock
  (`local stratum 10 orphan`, the plan's cluster.time_reference; reference ID 7F7F0101);
- client-synchronised: gpu01 tracking head01;
- client-unsynchronised: cpu01 with head01 dropped and chronyd restarted: no source at all.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from cluster_plan.exporters.clock import TRACKING, collect_clock, parse_tracking
from cluster_plan.exporters.slurm import Runner
from cluster_plan.exporters.textfile import CollectorError, exposition, run_collector

FIXTURES = Path(__file__).parent / "fixtures"


def recorded(state: str) -> str:
    return (FIXTURES / f"chronyc-tracking-{state}.txt").read_text()


def answering(code: int, out: str, err: str = "") -> Runner:
    def run(argv: Sequence[str]) -> tuple[int, str, str]:
        assert list(argv) == TRACKING
        return code, out, err

    return run


def values(text: str) -> dict[str, float]:
    return {
        sample.name: sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


@pytest.mark.parametrize(
    ("state", "synchronised", "local", "stratum", "distance"),
    [
        ("server-upstream", 1, 0, 2, 0.000261654 / 2 + 0.001855721),
        ("server-local", 0, 1, 10, 0.0),
        ("client-synchronised", 1, 0, 3, 0.000347649 / 2 + 0.008366209),
        ("client-unsynchronised", 0, 0, 0, 1.5),  # chronyd's 1 s delay and dispersion
    ],
)
def test_what_chronyd_tracks(
    state: str, synchronised: int, local: int, stratum: int, distance: float
) -> None:
    got = values(exposition(collect_clock(answering(0, recorded(state)))))
    assert got["cluster_plan_clock_synchronised"] == synchronised
    assert got["cluster_plan_clock_local_reference"] == local
    assert got["cluster_plan_clock_stratum"] == stratum
    assert got["cluster_plan_clock_root_distance_seconds"] == pytest.approx(distance)
    assert abs(got["cluster_plan_clock_offset_seconds"]) < 1e-3


def test_the_reference_serving_its_own_clock_is_not_a_source_it_tracks() -> None:
    """The kernel's flag (and chrony's own `synchronised`) are off on such a server; only the
    reference ID tells it from a host that lost everything."""
    local, lost = (
        parse_tracking(recorded("server-local")),
        parse_tracking(recorded("client-unsynchronised")),
    )
    assert (local.leap_status, lost.leap_status) == ("Normal", "Not synchronised")
    assert local.local_reference and not local.synchronised
    assert not lost.local_reference and not lost.synchronised


def test_chronyd_down_is_a_collector_failure_and_keeps_the_previous_file(tmp_path: Path) -> None:
    ok = run_collector(
        tmp_path, "clock", lambda: collect_clock(answering(0, recorded("server-local")))
    )
    assert ok is None
    failure = run_collector(
        tmp_path, "clock", lambda: collect_clock(answering(1, "", "506 Cannot talk to daemon\n"))
    )
    assert failure == "chronyc -c -n tracking: exit 1: 506 Cannot talk to daemon"
    status = (tmp_path / "cluster_plan_collector_clock.prom").read_text()
    assert 'cluster_plan_collector_success{collector="clock"} 0' in status


@pytest.mark.parametrize(
    "output",
    [
        "",
        "506 Cannot talk to daemon\n",
        recorded("server-local") * 2,
        recorded("server-local").replace(",10,", ",ten,"),
        recorded("server-local").replace("0.000001373", "nan"),
        "7F7F0101,,10\n",
    ],
)
def test_output_that_is_not_one_tracking_line_is_refused(output: str) -> None:
    with pytest.raises(CollectorError, match="chronyc tracking"):
        collect_clock(answering(0, output))


def test_the_exporter_command_runs_chronyc(tmp_path: Path) -> None:
    """`cluster-plan exporter clock` through the CLI, with a chronyc of the test's own."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    chronyc = bin_dir / "chronyc"
    chronyc.write_text(
        f"#!/bin/sh\ncat {FIXTURES / 'chronyc-tracking-client-unsynchronised.txt'}\n"
    )
    chronyc.chmod(0o755)
    textfiles = tmp_path / "textfiles"
    textfiles.mkdir()
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    argv = [sys.executable, "-m", "cluster_plan", "exporter", "clock"]
    done = subprocess.run(
        [*argv, "--textfile-dir", str(textfiles)],
        capture_output=True, text=True, env=env, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    got = values((textfiles / "cluster_plan_clock.prom").read_text())
    assert got["cluster_plan_clock_synchronised"] == 0
    assert got["cluster_plan_clock_local_reference"] == 0
