"""Whether a bandwidth figure is evidence about the link, or only about a CPU.

iperf3 measures what two processes moved through a link. When one of them could not run (its
host's CPUs held by other work, a hypervisor taking the CPU) or was itself the limit (one
iperf3 thread driving a link faster than one CPU can), a low figure says nothing about the
cable. Each end of each measurement therefore keeps what its CPU did (docs/acceptance.md):

- iperf3's own use of a CPU, from its JSON (`end.cpu_utilization_percent`: `host_total` for the
  client, `remote_total` for the server; 100 is one whole CPU);
- how long iperf3 waited for a CPU while it was ready to run: the run-queue wait of its process
  (`/proc/PID/schedstat`, read by a small shell wrapper around it), as a share of the test;
- the host's CPUs over the test (`/proc/stat` before and after: busy and steal shares) and its
  load average with its CPU count, for the message.

An end is CPU-bound when iperf3 used at least TOOL_BOUND_PCT of a CPU, or waited (run queue or
steal) at least STARVED_PCT of the test. A figure below the plan's floor with an end CPU-bound
is put down to the CPU, and reported inconclusive instead of a link fault, when the CPU can
account for the shortfall: iperf3 itself was the limit, or the share of the test it could not
run is at least half the share the figure falls short of the floor (a stalled sender loses about
its stall, and TCP's restart after a stall up to as much again). A link shaped to a tenth of its
speed stays a fault on a busy host: iperf3 sleeps on it far more than it waits for a CPU.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

TOOL_BOUND_PCT = 90.0  # iperf3 (one thread before 3.16) used this much of one CPU
STARVED_PCT = 10.0  # ...or could not run this share of the test: run-queue wait or steal
STALL_COST = 2.0  # a share of the test spent stalled costs up to twice that share of the figure
PREFIX = "cpu-probe "

# POSIX sh (dash, busybox): runs "$@" and reports on stderr what the CPU did meanwhile. The
# loop reads the process's schedstat (run ns, run-queue wait ns, slices) with builtins only, up
# to its exit (a zombie still has it); the window ends at the last reading.
PROBE_SCRIPT = r"""read -r u0 _ 2>/dev/null </proc/uptime; read -r s0 2>/dev/null </proc/stat
"$@" & p=$!
t=$u0 w=
while read -r ss 2>/dev/null <"/proc/$p/schedstat"; do
  read -r t _ </proc/uptime; w=$ss
  read -r st 2>/dev/null <"/proc/$p/stat" || break
  case ${st##*) } in Z*) break;; esac
  sleep 0.1 2>/dev/null || sleep 1
done
wait "$p"; rc=$?
read -r s1 2>/dev/null </proc/stat; read -r la 2>/dev/null </proc/loadavg
printf 'cpu-probe %s\n' "window $u0 $t" "schedstat $w" "before $s0" "after $s1" \
  "loadavg $la" "cpus $(grep -c '^cpu[0-9]' /proc/stat 2>/dev/null)" >&2
exit "$rc"
"""


def probe_argv(argv: Sequence[str]) -> list[str]:
    """argv run under the probe: same exit status, same stdout, the probe's lines on stderr."""
    return ["sh", "-c", PROBE_SCRIPT, "cpu-probe", *argv]


@dataclass(frozen=True)
class HostCpu:
    """What one end's CPUs did over one measurement."""

    wait_pct: float | None  # iperf3 ready to run but waiting for a CPU, share of the test
    busy_pct: float | None  # the host's CPUs busy (user, system, interrupts, steal)
    steal_pct: float | None  # taken by the hypervisor
    load1: float | None  # 1-minute load average at the end
    cpus: int | None


@dataclass(frozen=True)
class EndCpu:
    """One end of a measurement: iperf3's own CPU use, and its host's (None: not read)."""

    iperf3_pct: float | None = None
    host: HostCpu | None = None

    @property
    def lost_pct(self) -> float:
        """The share of the test iperf3 could not run although it was ready to."""
        host = self.host
        if host is None:
            return 0.0
        return max(host.wait_pct or 0.0, host.steal_pct or 0.0)

    @property
    def tool_bound(self) -> bool:
        return self.iperf3_pct is not None and self.iperf3_pct >= TOOL_BOUND_PCT

    @property
    def bound(self) -> bool:
        return self.tool_bound or self.lost_pct >= STARVED_PCT

    def accounts_for(self, shortfall: float) -> bool:
        """Whether this end's CPU explains a figure `shortfall` (0..1) below the floor."""
        return self.bound and (self.tool_bound or shortfall <= STALL_COST * self.lost_pct / 100)

    def describe(self) -> str:
        """`load 19.3 on 2 CPUs, CPUs 99% busy, iperf3 waited for a CPU 48% of the test, ...`"""
        parts = []
        host = self.host
        if host is not None:
            if host.load1 is not None:
                parts.append(f"load {host.load1:g} on {host.cpus or '?'} CPUs")
            if host.busy_pct is not None:
                parts.append(f"CPUs {host.busy_pct:.0f}% busy")
            if host.steal_pct is not None and host.steal_pct >= 1:
                parts.append(f"{host.steal_pct:.0f}% stolen by the hypervisor")
            if host.wait_pct is not None:
                parts.append(f"iperf3 waited for a CPU {host.wait_pct:.0f}% of the test")
        if self.iperf3_pct is not None:
            parts.append(f"iperf3 used {self.iperf3_pct:.0f}% of a CPU")
        return ", ".join(parts) or "CPU not read"


def iperf3_cpu(end: object) -> tuple[float | None, float | None]:
    """(client, server) CPU use from iperf3's `end` section (None where it says nothing)."""
    section = end.get("cpu_utilization_percent") if isinstance(end, dict) else None
    if not isinstance(section, dict):
        return None, None
    return _percent(section.get("host_total")), _percent(section.get("remote_total"))


def _percent(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    # 0..100 per CPU; more than one CPU (iperf3 3.16 runs a thread per stream) is possible
    return float(value) if 0 <= value < 1e4 else None


def parse_probe(stderr: str) -> HostCpu | None:
    """The probe's lines (PROBE_SCRIPT) in a command's stderr; None when it printed none."""
    fields = {}
    for line in stderr.splitlines():
        if line.startswith(PREFIX):
            key, _, value = line[len(PREFIX) :].partition(" ")
            fields[key] = value.split()
    if not fields:
        return None
    window = _floats(fields.get("window"), 2)
    seconds = window[1] - window[0] if window else 0.0
    schedstat = _floats(fields.get("schedstat"), 3)
    wait = None
    if schedstat and seconds > 0:
        wait = _clip(schedstat[1] / 1e9 / seconds * 100)
    busy, steal = _stat_shares(fields.get("before"), fields.get("after"))
    load = _floats(fields.get("loadavg"), 1)
    cpus = _floats(fields.get("cpus"), 1)
    return HostCpu(
        wait_pct=wait,
        busy_pct=busy,
        steal_pct=steal,
        load1=load[0] if load else None,
        cpus=int(cpus[0]) if cpus and cpus[0] >= 1 else None,
    )


def _floats(values: list[str] | None, count: int) -> list[float] | None:
    try:
        numbers = [float(v) for v in (values or [])[:count]]
    except ValueError:
        return None
    finite = [n for n in numbers if n == n and abs(n) != float("inf")]
    return finite if len(finite) == count else None


def _clip(pct: float) -> float:
    return round(min(100.0, max(0.0, pct)), 1)


def _stat_shares(
    before: list[str] | None, after: list[str] | None
) -> tuple[float | None, float | None]:
    """(busy %, steal %) of the host's CPUs between two `cpu ...` lines of /proc/stat."""
    first, last = _floats((before or [])[1:9], 8), _floats((after or [])[1:9], 8)
    if not first or not last:
        return None, None
    delta = [b - a for a, b in zip(first, last, strict=True)]
    total = sum(delta)
    if total <= 0:
        return None, None
    idle = delta[3] + delta[4]  # idle and iowait: a CPU free to run iperf3
    return _clip((total - idle) / total * 100), _clip(delta[7] / total * 100)
