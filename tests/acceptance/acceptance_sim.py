"""A simulated cluster network for runner tests: an Executor that answers iperf3 and fping.

Each node has a link rate (bits/s), a loss fraction and an added delay; a pair gets the slower
rate, the sum of losses and delays, like the lab's per-node link faults. Outputs are the real
fixtures' formats, so the runner's parsing is exercised too.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cluster_plan.acceptance.execution import CommandResult

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


class _Stopped:
    def __init__(self, argv: Sequence[str]) -> None:
        self.argv = tuple(argv)

    def stop(self) -> CommandResult:
        return CommandResult(self.argv, 0, "", "")


class SimulatedNetwork:
    """Executor over simulated nodes; `calls` records (node, argv) for assertions."""

    def __init__(self, nodes: dict[str, SimNode], seed: int = 1) -> None:
        self.nodes = nodes
        self.by_address = {n.address: name for name, n in nodes.items()}
        self.random = random.Random(seed)
        self.calls: list[tuple[str, tuple[str, ...]]] = []
        self._template = fixture("iperf3_bidir_ok")["stdout"]

    def spawn(self, node: str, argv: Sequence[str]) -> _Stopped:
        self.calls.append((node, tuple(argv)))
        return _Stopped(argv)

    def run(self, node: str, argv: Sequence[str], timeout: float) -> CommandResult:
        self.calls.append((node, tuple(argv)))
        tool = argv[0]
        if tool not in self.nodes[node].tools:
            return CommandResult(tuple(argv), 127, "", f"sh: 1: {tool}: not found\n")
        if tool == "iperf3":
            return self._iperf(node, argv)
        if tool == "fping":
            return self._fping(node, argv)
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
        rate, _, _ = self._pair(node, server)
        measured = rate * self.random.uniform(0.95, 0.99)
        doc = json.loads(str(self._template))
        for key in (
            "sum_sent",
            "sum_received",
            "sum_sent_bidir_reverse",
            "sum_received_bidir_reverse",
        ):
            doc["end"][key]["bits_per_second"] = measured
        return CommandResult(tuple(argv), 0, json.dumps(doc, indent="\t"), "")

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
