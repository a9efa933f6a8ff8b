"""Bounded measurements between lab nodes, run with host tools inside node namespaces."""

from __future__ import annotations

import json
import re
import subprocess
import time
from dataclasses import dataclass

from support.lab_session import Lab

_FPING = re.compile(
    r"xmt/rcv/%loss = (\d+)/(\d+)/[\d.]+%(?:, min/avg/max = "
    r"([\d.]+)/([\d.]+)/([\d.]+))?"
)


@dataclass(frozen=True)
class Pings:
    sent: int
    received: int
    avg_ms: float | None

    @property
    def lost(self) -> int:
        return self.sent - self.received


def ping(lab: Lab, src: str, dst_address: str, count: int, interval_ms: int = 10) -> Pings:
    """fping from a node's namespace: `count` probes, so it ends by itself."""
    result = lab.in_netns(
        src,
        ["fping", "-q", "-c", str(count), "-p", str(interval_ms), "-t", "500", dst_address],
        timeout=count * interval_ms / 1000 + 30,
        check=False,
    )
    match = _FPING.search(result.stderr + result.stdout)
    assert match, f"unreadable fping output: {result.stderr!r}"
    avg = float(match.group(4)) if match.group(4) else None
    return Pings(int(match.group(1)), int(match.group(2)), avg)


def wait_reachable(lab: Lab, src: str, dst_address: str, within_s: float = 15) -> None:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if ping(lab, src, dst_address, 3, 100).received == 3:
            return
    raise AssertionError(f"{dst_address} not reachable from {src} within {within_s}s")


def iperf_mbit(lab: Lab, client: str, server: str, server_address: str, seconds: int = 3) -> float:
    """TCP throughput client -> server in Mbit/s (iperf3, one bounded run per attempt)."""
    port = "5299"
    failures = []
    for _attempt in range(5):
        srv = subprocess.Popen(
            ["ip", "netns", "exec", lab.names.node_ns(server), "iperf3", "-s", "-1", "-p", port],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            time.sleep(0.5)  # let the server listen
            result = lab.in_netns(
                client,
                [
                    "iperf3",
                    "-c",
                    server_address,
                    "-p",
                    port,
                    "-t",
                    str(seconds),
                    "-J",
                    "--connect-timeout",
                    "2000",
                ],
                timeout=seconds + 30,
                check=False,
            )
            try:
                report = json.loads(result.stdout)
                return float(report["end"]["sum_received"]["bits_per_second"]) / 1e6
            except (ValueError, KeyError):
                failures.append(result.stdout[-300:] + result.stderr[-300:])
        finally:
            try:
                srv.wait(timeout=10)
            except subprocess.TimeoutExpired:
                srv.kill()
                srv.wait()
    raise AssertionError(f"iperf3 failed: {failures}")
