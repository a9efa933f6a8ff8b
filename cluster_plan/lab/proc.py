"""Running tools and tracking the lab's processes by id (never by name)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cluster_plan.lab.names import LabError


def run(
    argv: Sequence[str], *, check: bool = True, input_text: str | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """Run a tool; on failure raise LabError naming the command and its stderr."""
    try:
        result = subprocess.run(
            list(argv),
            capture_output=True,
            text=True,
            input=input_text,
            timeout=timeout,
            check=False,
        )
    except FileNotFoundError as err:
        raise LabError(f"{argv[0]} is not installed (needed by the lab)") from err
    except subprocess.TimeoutExpired as err:
        raise LabError(f"timed out after {timeout:.0f}s: {' '.join(argv)}") from err
    if check and result.returncode != 0:
        detail = (result.stderr or result.stdout).strip()
        raise LabError(f"command failed ({result.returncode}): {' '.join(argv)}\n  {detail}")
    return result


def netns_exec(ns: str, argv: Sequence[str]) -> list[str]:
    return ["ip", "netns", "exec", ns, *argv]


def start_time(pid: int) -> int | None:
    """The kernel start time of a process (clock ticks), or None when it is gone.

    Recorded beside each pid so that a recycled pid is never mistaken for ours.
    """
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()
    if fields[0] == "Z":
        return None
    return int(fields[19])


@dataclass(frozen=True)
class ProcRef:
    pid: int
    started: int

    @classmethod
    def of(cls, pid: int) -> ProcRef:
        started = start_time(pid)
        if started is None:
            raise LabError(f"process {pid} exited right after it was started")
        return cls(pid, started)

    def alive(self) -> bool:
        return start_time(self.pid) == self.started

    def stop(self, grace_s: float = 3.0) -> None:
        """SIGTERM, then SIGKILL after grace_s; only while the pid is still this process."""
        for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 2.0)):
            if not self.alive():
                return
            os.kill(self.pid, sig)
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline and self.alive():
                time.sleep(0.05)
        if self.alive():
            raise LabError(f"process {self.pid} did not exit after SIGKILL")


def spawn(argv: Sequence[str], log: Path) -> ProcRef:
    """Start a lab daemon in its own session, detached from the caller's terminal."""
    log.parent.mkdir(parents=True, exist_ok=True)
    # Double fork through sh: the daemon outlives the caller (a CLI run, a pytest session)
    # without being its child, so no caller is left holding a process it never waits for.
    launcher = subprocess.run(
        [
            "/bin/sh",
            "-c",
            'log="$1"; shift; "$@" >>"$log" 2>&1 </dev/null & echo $!',
            "sh",
            str(log),
            *argv,
        ],
        capture_output=True,
        text=True,
        start_new_session=True,
        check=True,
    )
    return ProcRef.of(int(launcher.stdout.strip()))


def netns_pids(ns: str) -> list[int]:
    result = run(["ip", "netns", "pids", ns], check=False)
    return [int(p) for p in result.stdout.split() if p.isdigit()]


def kill_netns_processes(ns: str) -> None:
    """Kill every process inside a lab namespace: they can only be the lab's own."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        pids = netns_pids(ns)
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline and netns_pids(ns):
            time.sleep(0.1)
    if netns_pids(ns):
        raise LabError(f"processes still running in namespace {ns}: {netns_pids(ns)}")


def descendants(pid: int) -> list[int]:
    """Every process below `pid` (the children of each of its threads, recursively)."""
    found: list[int] = []
    queue = [pid]
    while queue:
        for task in Path(f"/proc/{queue.pop()}/task").glob("*"):
            try:
                kids = [int(k) for k in (task / "children").read_text().split()]
            except (OSError, ValueError):
                continue
            fresh = [k for k in kids if k not in found and k != pid]
            found += fresh
            queue += fresh
    return found


def kill_tree(pid: int) -> None:
    """SIGKILL a process and every process below it, by id. A killed ansible-playbook leaves
    its forked workers (and Mitogen's, in sessions of their own) running under init, holding
    the run's connections: they are stopped first, so none forks past the count, then
    killed."""
    stopped: list[int] = []
    for _ in range(10):  # until no new process appears below the stopped ones
        tree = [pid, *descendants(pid)]
        fresh = [p for p in tree if p not in stopped]
        if not fresh:
            break
        for p in fresh:
            with contextlib.suppress(ProcessLookupError):
                os.kill(p, signal.SIGSTOP)
        stopped += fresh
    for p in stopped:
        with contextlib.suppress(ProcessLookupError):
            os.kill(p, signal.SIGKILL)
