"""Every figure of an acceptance report, one row each, as the history keeps and compares them.

A figure is one metric of one direction of one pair on one network (bandwidth, round trip,
loss, MTU), or one storage benchmark. Its key (metric, network, source, target) is the same in
every run that measured it, whichever node was the iperf3 client, so runs of a changed plan
compare on the keys both have.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

HIGHER, LOWER = "higher", "lower"  # which way is better


@dataclass(frozen=True)
class Metric:
    unit: str
    better: str  # HIGHER or LOWER
    tolerance: str | None  # the plan's acceptance.history.tolerance key; None: never judged
    label: str


METRICS: dict[str, Metric] = {
    "bandwidth_gbps": Metric("Gb/s", HIGHER, "bandwidth", "bandwidth"),
    "rtt_median_ms": Metric("ms", LOWER, "latency", "median round trip"),
    "loss_pct": Metric("%", LOWER, None, "loss"),
    "mtu_bytes": Metric("bytes", HIGHER, None, "MTU carried"),
    "storage_write_mb_s": Metric("MB/s", HIGHER, "storage", "rados bench write"),
    "storage_read_mb_s": Metric("MB/s", HIGHER, "storage", "rados bench read"),
}

Key = tuple[str, str, str, str]  # metric, network, source, target


@dataclass(frozen=True)
class Figure:
    metric: str
    network: str  # "ceph" for storage figures
    source: str  # the node the figure is about (storage: the host the bench ran on)
    target: str  # the other end; "" for storage
    value: float | None  # None: the measurement failed, or a CPU-bound one was inconclusive
    floor: float | None  # the plan's bound for it in that run (a ceiling for latency, loss)

    @property
    def key(self) -> Key:
        return (self.metric, self.network, self.source, self.target)

    def where(self) -> str:
        return f"{self.source} -> {self.target}" if self.target else self.source


def _bandwidth(report: Mapping[str, Any]) -> Iterator[Figure]:
    """Both directions of each pair; none of an inconclusive one (a CPU-bound figure says
    nothing about the link, so it is neither compared nor kept as a later run's reference)."""
    floor = report["criteria"]["min_gbps"]
    for row in report["bandwidth"]:
        net, client, server = row["network"], row["client"], row["server"]
        unjudged = row["status"] == "inconclusive"
        forward, reverse = (
            (None, None) if unjudged else (row.get("forward_gbps"), row.get("reverse_gbps"))
        )
        yield Figure("bandwidth_gbps", net, client, server, forward, floor)
        yield Figure("bandwidth_gbps", net, server, client, reverse, floor)


def _probes(report: Mapping[str, Any]) -> Iterator[Figure]:
    criteria = report["criteria"]
    for row in report["probes"]:
        where = (row["network"], row["source"], row["target"])
        yield Figure("rtt_median_ms", *where, row["rtt_median_ms"], criteria["max_latency_ms"])
        yield Figure("loss_pct", *where, row["loss_pct"], criteria["max_loss_pct"])


def _mtu(report: Mapping[str, Any]) -> Iterator[Figure]:
    for row in report["mtu"]:
        status = row["status"]
        carried = None if status == "error" else (row["mtu"] if status == "pass" else 0)
        yield Figure("mtu_bytes", row["network"], row["source"], row["target"], carried, row["mtu"])


def _storage(report: Mapping[str, Any]) -> Iterator[Figure]:
    storage = report.get("storage")
    if not storage:
        return
    for name in ("write", "read"):
        value = storage["bench"][name]["mb_s"]
        yield Figure(f"storage_{name}_mb_s", "ceph", storage["host"], "", value, None)


def figures_from_report(report: Mapping[str, Any]) -> list[Figure]:
    """Every figure the report measured, in report order."""
    return [*_bandwidth(report), *_probes(report), *_mtu(report), *_storage(report)]
