"""A simulated cluster network for runner tests: an Executor that answers iperf3 and fping.

Each node has a link rate (bits/s), a loss fraction and an added delay; a pair gets the slower
rate, the sum of losses and delays, like the lab's per-node link faults. Outputs are the real
fixtures' formats, so the runner's parsing is exercised too.

iperf3 runs under the runner's CPU probe (`sh -c PROBE cpu-probe iperf3 ...`): the simulation
answers its lines on stderr, the client's with the client's output and the server's when the
server is stopped, from each node's CPU (idle unless told; `starved_for` makes a node's first
measurements starved), or from a recorded fixture (`iperf_fixtures`) that carries both.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cluster_plan.transport.execution import CommandResult

FIXTURES = Path(__file__).parent / "fixtures"


def fixture(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((FIXTURES / f"{name}.json").read_text())
    return loaded


def fixture_result(name: str) -> CommandResult:
    f = fixture(name)
    return CommandResult(tuple(f["argv"]), int(f["rc"]), str(f["stdout"]), str(f["stderr"]))


@dataclass
class SimNode:
    address: str
    rate_bps: float = 100e6
    loss: float = 0.0
    delay_ms: float = 0.0
    mtu: int = 9000
    # jumbo frames to this node are lost while every node probes at once (a queue that
    # overflows in the crowd), and come back when it is probed alone
    mtu_lost_in_crowd: bool = False
    tools: set[str] = field(default_factory=lambda: {"iperf3", "fping", "timeout"})
    broken_iperf: str | None = None  # name of a broken iperf3 fixture this node's client prints
    # CPU: its first `starved_for` measurements (either end) run starved of CPU at
    # `starved_rate` of the link's; recorded fixtures for its measurements, in order (the
    # last repeats), override the simulated figures and CPU of both ends
    starved_for: int = 0
    starved_rate: float = 0.5
    iperf_fixtures: list[str] = field(default_factory=list)
    measurements: int = 0


IDLE = {"wait_pct": 0.5, "busy_pct": 8.0, "load1": 0.4, "iperf3_pct": 2.0}
STARVED = {"wait_pct": 60.0, "busy_pct": 100.0, "load1": 19.0, "iperf3_pct": 3.0}


def probe_lines(wait_pct: float, busy_pct: float, load1: float, seconds: float = 4.0) -> str:
    """What the runner's CPU probe prints for a host of 2 CPUs (starvation.PROBE_SCRIPT)."""
    ticks = int(seconds * 200)  # 2 CPUs at 100 ticks a second
    idle = round(ticks * (100 - busy_pct) / 100)
    return "".join(
        f"cpu-probe {line}\n"
        for line in (
            f"window 1000.00 {1000 + seconds:.2f}",
            f"schedstat {int(seconds * 1e7)} {int(seconds * wait_pct * 1e7)} 50",
            "before cpu  5000 0 1000 90000 100 0 10 0 0 0",
            f"after cpu  {5000 + ticks - idle} 0 1000 {90000 + idle} 100 0 10 0 0 0",
            f"loadavg {load1:.2f} {load1:.2f} {load1:.2f} 3/200 4242",
            "cpus 2",
        )
    )


class _Stopped:
    """A server: its stderr is its probe's report of the last measurement it served."""

    def __init__(self, argv: Sequence[str], reports: dict[str, str], node: str) -> None:
        self.argv = tuple(argv)
        self.reports, self.node = reports, node
        self.graces: list[float] = []

    def stop(self, grace_s: float = 0.0) -> CommandResult:
        self.graces.append(grace_s)
        return CommandResult(self.argv, 0, "", self.reports.pop(self.node, ""))


class SimulatedNetwork:
    """Executor over simulated nodes; `calls` records (node, argv) for assertions."""

    def __init__(self, nodes: dict[str, SimNode], seed: int = 1) -> None:
        self.nodes = nodes
        self.by_address = {n.address: name for name, n in nodes.items()}
        self.random = random.Random(seed)
        self.calls: list[tuple[str, tuple[str, ...]]] = []
        self._template = fixture("iperf3_bidir_ok")["stdout"]
        self.server_reports: dict[str, str] = {}  # server node -> its probe's last report

    def spawn(self, node: str, argv: Sequence[str]) -> _Stopped:
        self.calls.append((node, tuple(argv)))
        return _Stopped(argv, self.server_reports, node)

    def run(self, node: str, argv: Sequence[str], timeout: float) -> CommandResult:
        self.calls.append((node, tuple(argv)))
        probed = tuple(argv[:2]) == ("sh", "-c")  # under the runner's CPU probe
        command = list(argv[4:]) if probed else list(argv)
        tool = command[0]
        if tool not in self.nodes[node].tools:
            return CommandResult(tuple(argv), 127, "", f"sh: 1: {tool}: not found\n")
        if tool == "iperf3":
            return self._iperf(node, command)
        if tool == "fping":
            return self._fping(node, command)
        raise AssertionError(f"unexpected command {argv}")

    def _pair(self, a: str, b: str) -> tuple[float, float, float]:
        x, y = self.nodes[a], self.nodes[b]
        loss = 1 - (1 - x.loss) * (1 - y.loss)
        return min(x.rate_bps, y.rate_bps), loss, x.delay_ms + y.delay_ms

    def _iperf(self, node: str, argv: Sequence[str]) -> CommandResult:
        sim = self.nodes[node]
        if sim.broken_iperf:
            f = fixture(sim.broken_iperf)
            return CommandResult(tuple(argv), int(f["rc"]), str(f["stdout"]), str(f["stderr"]))
        server = self.by_address[argv[argv.index("--client") + 1]]
        if "iperf3" not in self.nodes[server].tools:
            text = json.dumps(
                {"start": {}, "end": {}, "error": "unable to connect to server: Connection refused"}
            )
            return CommandResult(tuple(argv), 1, text, "")
        ends = (sim, self.nodes[server])
        starved = [n.measurements < n.starved_for for n in ends]
        for n in ends:
            n.measurements += 1
        recorded = next((n for n in ends if n.iperf_fixtures), None)
        if recorded is not None:
            names = recorded.iperf_fixtures
            f = fixture(names[min(recorded.measurements, len(names)) - 1])
            self.server_reports[server] = str(f["server_stderr"])
            return CommandResult(tuple(argv), int(f["rc"]), str(f["stdout"]), str(f["stderr"]))
        rate, _, _ = self._pair(node, server)
        measured = rate * self.random.uniform(0.95, 0.99)
        if any(starved):
            measured *= min(n.starved_rate for n, s in zip(ends, starved, strict=True) if s)
        cpu = [STARVED if s else IDLE for s in starved]
        doc = json.loads(str(self._template))
        for key in (
            "sum_sent",
            "sum_received",
            "sum_sent_bidir_reverse",
            "sum_received_bidir_reverse",
        ):
            doc["end"][key]["bits_per_second"] = measured
        doc["end"]["cpu_utilization_percent"].update(
            host_total=cpu[0]["iperf3_pct"], remote_total=cpu[1]["iperf3_pct"]
        )
        client_probe, server_probe = (
            probe_lines(c["wait_pct"], c["busy_pct"], c["load1"]) for c in cpu
        )
        self.server_reports[server] = server_probe
        return CommandResult(tuple(argv), 0, json.dumps(doc, indent="\t"), client_probe)

    def _fping(self, node: str, argv: Sequence[str]) -> CommandResult:
        targets = [a for a in argv if a in self.by_address]
        lines = []
        if "--dontfrag" in argv:
            size = int(argv[argv.index("--size") + 1])
            count = int(argv[argv.index("--count") + 1])
            for address in targets:
                peer = self.by_address[address]
                fits = size + 28 <= min(self.nodes[node].mtu, self.nodes[peer].mtu)
                crowded = self.nodes[peer].mtu_lost_in_crowd and len(targets) > 2  # --src too
                got = count if fits and not crowded else 0
                lines.append(
                    f"{address} : xmt/rcv/%loss = {count}/{got}/{100 - 100 * got // count}%"
                )
            rc = 0 if all("/0%" in line for line in lines) else 1
            return CommandResult(tuple(argv), rc, "", "\n".join(lines) + "\n")
        probes = int(argv[argv.index("--vcount") + 1])
        for address in targets:
            _, loss, delay = self._pair(node, self.by_address[address])
            values = [
                "-"
                if self.random.random() < loss
                else f"{0.05 + delay + self.random.random() * 0.02:.3f}"
                for _ in range(probes)
            ]
            lines.append(f"{address} : {' '.join(values)}")
        return CommandResult(tuple(argv), 0, "", "\n".join(lines) + "\n")
