"""Where a test run's time goes, kept as evidence: `--phases=NAME` writes every test's setup,
call and teardown seconds to reports/NAME.durations.txt and the phase totals to
reports/NAME.phases.json, and prints the totals at the end of the run. `make test` merges the
runs' files (tests/support/phase_report.py) and compares the totals with tests/budget.json.

A test's phase comes from its markers and path; the session lab's bring-up and the converge
(the three site.yml runs of `converged_lab`) are carved out of the setup of the test that
first asked for them, so each is a phase of its own (the lab's take-down falls in the
teardown of the session's last test). Under pytest-xdist the phases split the wall time as
they split the summed test time.

Each phase also gets the machine's busy CPU-seconds over its spans (all cores, whatever ran
them: the lab's nodes, the background converge): CPU left idle in a long phase is room for
work to overlap, a phase at every core's limit is not.
"""

from __future__ import annotations

import json
import os
import time
from collections import defaultdict
from collections.abc import Generator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

# CLUSTER_PLAN_REPORTS moves them (the tests of this code write elsewhere)
REPORTS = Path(
    os.environ.get("CLUSTER_PLAN_REPORTS", Path(__file__).resolve().parents[2] / "reports")
)
NON_LAB = "non-lab tests"
BRING_UP = "session lab bring-up"
CONVERGE = "converge"
SESSION_LAB = "session lab tests"
LAB_CHANGES = "lab changes"
KUBERNETES = "Kubernetes lab"
LIFECYCLE = "lifecycle labs"
# the session fixtures whose setup is a phase of its own
CARVED = {"lab": BRING_UP, "converged_lab": CONVERGE}
# tests that bring up labs of their own, by file
OWN_LABS = {
    "tests/kubernetes/test_kubernetes_lab.py": KUBERNETES,
    "tests/lab/test_lab_lifecycle.py": LIFECYCLE,
}


def machine_busy_s() -> float:
    """CPU-seconds the machine's cores have spent busy since boot (/proc/stat: all but idle
    and iowait); 0 where there is no /proc."""
    try:
        with open("/proc/stat") as stat:
            fields = [int(v) for v in stat.readline().split()[1:9]]
    except (OSError, ValueError):
        return 0.0
    return (sum(fields) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


def phase_of(item: pytest.Item) -> str:
    path = item.nodeid.split("::", 1)[0]
    if path in OWN_LABS:
        return OWN_LABS[path]
    if item.get_closest_marker("lab") is None:
        return NON_LAB
    return LAB_CHANGES if item.get_closest_marker("lab_changes") is not None else SESSION_LAB


def pytest_itemcollected(item: pytest.Item) -> None:
    """The phase travels with the test's reports (user properties reach xdist's controller,
    which has no items, and the JUnit XML)."""
    if item.config.getoption("phases"):
        item.user_properties.append(("phase", phase_of(item)))


@dataclass
class Carve:
    """A carved fixture's setup in progress: its phase, and the seconds carved inside it."""

    phase: str
    inner_s: float = 0.0


@dataclass(eq=False)  # registered as a plugin: hashed by identity
class Recorder:
    name: str
    started: float = field(default_factory=time.monotonic)
    tests: dict[str, dict[str, float]] = field(default_factory=lambda: defaultdict(dict))
    phase: dict[str, str] = field(default_factory=dict)
    carved: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    nested: list[Carve] = field(default_factory=list)  # the carves open, innermost last
    current: str = ""
    carved_from_current: float = 0.0
    busy: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    busy_mark: float = field(default_factory=machine_busy_s)
    current_phase: str = NON_LAB

    def pytest_sessionstart(self) -> None:
        self.started = time.monotonic()
        self.busy_mark = machine_busy_s()

    def charge(self, phase: str) -> None:
        """The machine's busy CPU since the last span ended goes to `phase`."""
        now = machine_busy_s()
        self.busy[phase] += max(0.0, now - self.busy_mark)
        self.busy_mark = now

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> Generator[None, None, None]:
        self.current, self.carved_from_current = item.nodeid, 0.0
        self.current_phase = phase_of(item)
        return (yield)

    @pytest.hookimpl(wrapper=True)
    def pytest_fixture_setup(self, fixturedef: Any) -> Generator[None, object, object]:
        phase = CARVED.get(fixturedef.argname)
        if phase is None:
            return (yield)
        start = time.monotonic()
        self.charge(self.nested[-1].phase if self.nested else self.current_phase)
        self.nested.append(Carve(phase))
        try:
            return (yield)
        finally:
            self.charge(phase)  # a nested carve charged its own span already
            spent = time.monotonic() - start
            self.carved[phase] += spent - self.nested.pop().inner_s  # converge asks for the lab
            if self.nested:
                self.nested[-1].inner_s += spent
            else:
                self.carved_from_current += spent

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        duration = report.duration
        if report.when == "setup" and report.nodeid == self.current:
            duration = max(0.0, duration - self.carved_from_current)
        self.tests[report.nodeid][report.when] = duration
        self.phase[report.nodeid] = str(dict(report.user_properties).get("phase", NON_LAB))
        self.charge(self.phase[report.nodeid])

    def totals(self, wall: float, workers: int) -> dict[str, float]:
        summed: dict[str, float] = defaultdict(float)
        for nodeid, times in self.tests.items():
            summed[self.phase[nodeid]] += sum(times.values())
        if workers > 1:  # the phases shared the wall clock: split it as they shared the work
            total = sum(summed.values()) or 1.0
            summed = defaultdict(float, {k: wall * v / total for k, v in summed.items()})
        for phase, seconds in self.carved.items():
            summed[phase] += seconds
        return dict(summed)

    def write(self, wall: float, workers: int) -> dict[str, Any]:
        REPORTS.mkdir(exist_ok=True)
        rows = sorted(self.tests.items(), key=lambda kv: -sum(kv[1].values()))
        lines = [f"{'total':>9} {'setup':>9} {'call':>9} {'teardown':>9}  phase / test"]
        for nodeid, t in rows:
            parts = [t.get(when, 0.0) for when in ("setup", "call", "teardown")]
            lines.append(
                f"{sum(parts):9.2f} {parts[0]:9.2f} {parts[1]:9.2f} {parts[2]:9.2f}  "
                f"{self.phase[nodeid]} / {nodeid}"
            )
        (REPORTS / f"{self.name}.durations.txt").write_text("\n".join(lines) + "\n")
        summary = {
            "run": self.name,
            "wall_s": round(wall, 1),
            "workers": workers,
            "phases": {k: round(v, 1) for k, v in self.totals(wall, workers).items()},
            # the machine's busy CPU-seconds in each phase's spans, of `cores` cores
            "busy_cpu_s": {k: round(v, 1) for k, v in self.busy.items() if v},
            "cores": os.cpu_count(),
            # the converge's own runs: they overlap the tests that need no lab, so the
            # "converge" phase above is only what the converged lab's tests waited for them
            "converge_runs_s": converge_runs_s(),
        }
        (REPORTS / f"{self.name}.phases.json").write_text(json.dumps(summary, indent=2) + "\n")
        return summary


def converge_runs_s() -> float | None:
    """Wall seconds of the session converge's site.yml runs (the check-mode run beside the
    idempotence run counted once); None when none ran."""
    from support import lab_session as pytest_plugin

    seconds = [c.runs_s for c in pytest_plugin._CONVERGED if c.runs_s is not None]
    return round(sum(seconds), 1) if seconds else None


_RECORDER = pytest.StashKey[Recorder]()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--phases",
        metavar="NAME",
        help="write reports/NAME.durations.txt and NAME.phases.json; print the phase totals",
    )


def pytest_configure(config: pytest.Config) -> None:
    name = config.getoption("phases")
    if name and not hasattr(config, "workerinput"):  # xdist: the controller records
        recorder = Recorder(name)
        config.stash[_RECORDER] = recorder
        config.pluginmanager.register(recorder, "phases-recorder")


def workers(config: pytest.Config) -> int:
    count = getattr(config.option, "numprocesses", None)
    return int(count) if isinstance(count, int) and count > 1 else 1


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    recorder = terminalreporter.config.stash.get(_RECORDER, None)
    if recorder is None:
        return
    wall = time.monotonic() - recorder.started
    summary = recorder.write(wall, workers(terminalreporter.config))
    terminalreporter.write_sep("-", f"phases of this run ({recorder.name})")
    for phase, seconds in sorted(summary["phases"].items(), key=lambda kv: -kv[1]):
        terminalreporter.write_line(f"{phase:<24} {seconds:9.1f} s")
    terminalreporter.write_line(f"{'wall':<24} {wall:9.1f} s")
    if summary["converge_runs_s"] is not None:
        terminalreporter.write_line(
            f"{'(converge site.yml runs':<24} {summary['converge_runs_s']:9.1f} s, "
            "alongside the tests that need no lab)"
        )
    terminalreporter.write_line(f"full list: reports/{recorder.name}.durations.txt")
