"""Storage acceptance offline: rados bench output recorded on the lab (Ceph 16.2), the
verdict on healthy and degraded clusters, and the report's schema and HTML."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cluster_plan.acceptance.html import render_html
from cluster_plan.acceptance.report import validate_report
from cluster_plan.acceptance.storage import (
    StorageSpec,
    parse_bench,
    run_storage_phase,
    storage_section,
    storage_spec_from_expanded,
)
from cluster_plan.transport.execution import CommandResult

FIXTURES = Path(__file__).parent / "fixtures" / "storage"
SPEC = StorageSpec(admin="stor01", planned_osds=4, pool="volumes", seconds=5, health_wait_s=0)
HEALTHY = {"status": "HEALTH_OK", "checks": {}, "mutes": []}
OSDS = {"osds": [{"osd": i, "up": 1, "in": 1} for i in range(4)]}
CLEAN = {
    "pg_ready": True,
    "pg_summary": {"num_pg_by_state": [{"name": "active+clean", "num": 81}], "num_pgs": 81},
}


def result(stdout: str, rc: int = 0, stderr: str = "") -> CommandResult:
    return CommandResult(("rados",), rc, stdout, stderr)


def bench(name: str) -> dict[str, Any]:
    return parse_bench(result((FIXTURES / name).read_text()))


def test_rados_bench_figures_are_read_from_its_json():
    assert bench("rados-bench-write.txt") == {
        "mb_s": 7.228,
        "iops": 1.0,
        "latency_s": 6.6033,
        "seconds": 11.621,
        "error": None,
    }
    assert bench("rados-bench-seq.txt")["mb_s"] == 12.327
    failed = parse_bench(result("", 2, "error opening pool volumes: (2) No such file or directory"))
    assert failed["mb_s"] is None and "No such file" in failed["error"]


def test_a_healthy_cluster_passes_with_its_figures():
    section = storage_section(
        SPEC, HEALTHY, OSDS, CLEAN, bench("rados-bench-write.txt"), bench("rados-bench-seq.txt")
    )
    assert section["passed"] and section["problems"] == []
    assert section["osds"] == {"planned": 4, "total": 4, "up": 4, "in": 4}
    assert section["pgs"] == {"total": 81, "active_clean": 81, "states": {"active+clean": 81}}


def test_a_degraded_cluster_fails_naming_each_problem():
    health = {"status": "HEALTH_WARN", "checks": {"OSD_DOWN": {}, "PG_DEGRADED": {}}}
    osds = {"osds": [*OSDS["osds"][:3], {"osd": 3, "up": 0, "in": 1}]}
    pgs = {
        "pg_summary": {
            "num_pg_by_state": [
                {"name": "active+clean", "num": 60},
                {"name": "active+undersized+degraded", "num": 21},
            ],
            "num_pgs": 81,
        }
    }
    failed_read = parse_bench(result("", 1, "failed"))
    section = storage_section(SPEC, health, osds, pgs, bench("rados-bench-write.txt"), failed_read)
    assert not section["passed"]
    assert section["problems"] == [
        "ceph health is HEALTH_WARN (OSD_DOWN, PG_DEGRADED)",
        "3 OSDs up and 4 in of 4, the plan has 4",
        "60 of 81 placement groups active+clean",
        "rados bench read on pool volumes failed: failed",
    ]
    # An OSD the plan has but the cluster lacks fails too.
    short = storage_section(
        SPEC, HEALTHY, {"osds": OSDS["osds"][:3]}, CLEAN, bench("rados-bench-write.txt"),
        bench("rados-bench-seq.txt"),
    )  # fmt: skip
    assert short["problems"] == ["3 OSDs up and 3 in of 3, the plan has 4"]


class Scripted:
    """Answers the phase's commands from recorded outputs; records what was run."""

    def __init__(self) -> None:
        self.calls: list[Sequence[str]] = []

    def __call__(self, argv: Sequence[str], timeout: float) -> CommandResult:
        self.calls.append(argv)
        joined = " ".join(argv)
        if "health" in argv:
            return result(json.dumps(HEALTHY))
        if "osd dump" in joined:
            return result(json.dumps(OSDS))
        if "pg stat" in joined:
            return result(json.dumps(CLEAN))
        if " write " in joined:
            return result((FIXTURES / "rados-bench-write.txt").read_text())
        if " seq " in joined:
            return result((FIXTURES / "rados-bench-seq.txt").read_text())
        return result("")


def test_the_phase_benchmarks_then_removes_its_objects():
    run = Scripted()
    section = run_storage_phase(SPEC, run, lambda _: None)
    assert section["passed"]
    commands = [" ".join(c) for c in run.calls]
    assert any(
        c.startswith("rados bench -p volumes 5 write -b 4194304 --no-cleanup") for c in commands
    )
    assert commands[-1] == "rados -p volumes cleanup"


class Degraded(Scripted):
    """Ceph reports HEALTH_WARN the first `warnings` times it is asked, then as Scripted."""

    def __init__(self, warnings: int) -> None:
        super().__init__()
        self.warnings = warnings

    def __call__(self, argv: Sequence[str], timeout: float) -> CommandResult:
        if "health" in argv and self.warnings > 0:
            self.warnings -= 1
            self.calls.append(argv)
            return result(json.dumps({"status": "HEALTH_WARN", "checks": {"OSD_DOWN": {}}}))
        return super().__call__(argv, timeout)


def test_health_is_polled_until_ok_and_never_past_the_wait():
    now = [0.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    patient = StorageSpec(admin="stor01", planned_osds=4, pool="volumes", seconds=5,
                          health_wait_s=60)  # fmt: skip
    run = Degraded(warnings=2)
    section = run_storage_phase(patient, run, lambda _: None, sleep=sleep, clock=lambda: now[0])
    assert section["passed"] and slept == [2.0, 2.0]
    asked = [c for c in run.calls if "health" in c]
    assert len(asked) == 3
    # Ceph that stays degraded: the wait ends at its bound, and the verdict says why
    now[0], slept[:] = 0.0, []
    short = StorageSpec(admin="stor01", planned_osds=4, pool="volumes", seconds=5,
                        health_wait_s=3)  # fmt: skip
    section = run_storage_phase(short, Degraded(10**6), lambda _: None, sleep=sleep,
                                clock=lambda: now[0])  # fmt: skip
    assert slept == [2.0, 1.0] and now[0] == 3.0
    assert "ceph health is HEALTH_WARN (OSD_DOWN)" in section["problems"]


def test_spec_from_the_lab_plan():
    from cluster_plan.api import load_expanded

    lab_expanded = load_expanded(str(Path(__file__).parents[2] / "inventory/lab/cluster.yml"))
    spec = storage_spec_from_expanded(lab_expanded)
    assert spec is not None
    assert spec.admin == lab_expanded["groups"]["ceph_mon"][0]
    assert spec.planned_osds == len(lab_expanded["groups"]["ceph_osd"])
    assert (spec.pool, spec.seconds) == ("volumes", 3)
    del lab_expanded["storage"]["ceph"]
    assert storage_spec_from_expanded(lab_expanded) is None


def test_report_with_storage_validates_and_renders(expanded_lab: dict[str, Any]):
    from test_acceptance_report import make_report

    section = storage_section(
        SPEC, HEALTHY, OSDS, CLEAN, bench("rados-bench-write.txt"), bench("rados-bench-seq.txt")
    )
    report = {**make_report(expanded_lab), "storage": section}
    assert validate_report(report) == []
    html = render_html(report)
    assert "Storage (Ceph, from stor01)" in html
    assert "7.228 MB/s" in html and "12.327 MB/s" in html
    assert "81 of 81" in html
    assert validate_report({**report, "storage": {**section, "osds": {}}}) != []
