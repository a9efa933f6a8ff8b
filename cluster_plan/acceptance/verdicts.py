"""Measurements -> verdicts per pair -> faults localised to nodes or links.

Absolute thresholds come from the plan; relative outliers (well below the cluster's median)
are flagged too, so a link that passes the plan but lags its peers is seen. A pair that fails
or lags is retested alone by the runner; the retest, when there is one, decides. A figure below
the floor that a CPU-bound end accounts for (cluster_plan.acceptance.starvation) is no evidence
about the link: an inconclusive warning naming the host and its load, never a fault. When several
failing pairs of one kind share a node, the node is named (greedy cover: the node in most
unexplained failing pairs first); a failing pair no named node explains is named as a link.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from cluster_plan.acceptance.fping import ProbeSample
from cluster_plan.acceptance.iperf import BandwidthSample
from cluster_plan.acceptance.spec import Criteria
from cluster_plan.acceptance.starvation import EndCpu

PASS, FAIL, ERROR = "pass", "fail", "error"
INCONCLUSIVE = "inconclusive"  # below the floor, and a CPU-bound end accounts for it
# When a node has several kinds of fault, the first in this order is named as the cause:
# loss and delay slow TCP down, so low bandwidth there is a consequence, not a second fault.
KIND_ORDER = ("measurement", "mtu", "loss", "latency", "bandwidth")


@dataclass
class BandwidthTest:
    network: str
    client: str
    server: str
    round: int
    sample: BandwidthSample
    retest: BandwidthSample | None = None

    @property
    def final(self) -> BandwidthSample:
        return self.retest or self.sample


@dataclass
class ProbeTest:
    network: str
    source: str
    target: str
    sample: ProbeSample
    retest: ProbeSample | None = None

    @property
    def final(self) -> ProbeSample:
        return self.retest or self.sample


@dataclass
class MtuTest:
    network: str
    source: str
    target: str
    mtu: int
    sample: ProbeSample
    retest: ProbeSample | None = None

    @property
    def final(self) -> ProbeSample:
        return self.retest or self.sample


@dataclass
class Finding:
    kind: str
    severity: str  # the report's words: fault | warning (SEVERITY_WORDS puts them on the scale)
    network: str
    pairs: list[tuple[str, str]]
    message: str
    node: str | None = None
    explained_by: str | None = None
    evidence: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "severity": self.severity,
            "scope": "node" if self.node else "link",
            "network": self.network,
            "node": self.node,
            "pairs": [list(p) for p in self.pairs],
            "explained_by": self.explained_by,
            "message": self.message,
            "evidence": self.evidence,
        }


def bandwidth_median(tests: Iterable[BandwidthTest]) -> float | None:
    values = [t.sample.bps for t in tests if t.sample.bps is not None]
    return statistics.median(values) if values else None


def bandwidth_status(sample: BandwidthSample, criteria: Criteria) -> str:
    if sample.bps is None:
        return ERROR
    return PASS if criteria.plan_gbps(sample.bps) >= criteria.min_gbps else FAIL


def cpu_bound_ends(
    sample: BandwidthSample, criteria: Criteria, client: str, server: str
) -> list[tuple[str, EndCpu]]:
    """The ends whose CPU accounts for a figure below the floor (none when it is not below)."""
    if bandwidth_status(sample, criteria) != FAIL or sample.bps is None:
        return []
    shortfall = 1 - criteria.plan_gbps(sample.bps) / criteria.min_gbps
    ends = ((client, sample.client_cpu), (server, sample.server_cpu))
    return [(name, cpu) for name, cpu in ends if cpu.accounts_for(shortfall)]


def bandwidth_verdict(sample: BandwidthSample, criteria: Criteria) -> str:
    """pass, fail, error, or inconclusive: below the floor for want of a CPU."""
    if cpu_bound_ends(sample, criteria, "client", "server"):
        return INCONCLUSIVE
    return bandwidth_status(sample, criteria)


def is_outlier(sample: BandwidthSample, median: float | None, criteria: Criteria) -> bool:
    return (
        sample.bps is not None
        and median is not None
        and sample.bps < criteria.outlier_fraction * median
    )


def latency_status(sample: ProbeSample, criteria: Criteria) -> str:
    if not sample.ok:
        return ERROR
    median = sample.median_ms
    if median is None:  # nothing came back: that is loss, not latency
        return PASS
    return PASS if median <= criteria.max_latency_ms else FAIL


def loss_status(sample: ProbeSample, criteria: Criteria) -> str:
    loss = sample.loss_pct
    if loss is None:
        return ERROR
    return PASS if loss <= criteria.max_loss_pct else FAIL


def mtu_status(sample: ProbeSample) -> str:
    if not sample.ok:
        return ERROR
    return PASS if sample.received > 0 else FAIL


def bandwidth_suspects(tests: Sequence[BandwidthTest], criteria: Criteria) -> list[BandwidthTest]:
    median = bandwidth_median(tests)
    return [
        t
        for t in tests
        if bandwidth_status(t.sample, criteria) != PASS or is_outlier(t.sample, median, criteria)
    ]


def probe_suspects(tests: Sequence[ProbeTest], criteria: Criteria) -> list[ProbeTest]:
    return [
        t
        for t in tests
        if latency_status(t.sample, criteria) != PASS or loss_status(t.sample, criteria) != PASS
    ]


def mtu_suspects(tests: Sequence[MtuTest]) -> list[MtuTest]:
    return [t for t in tests if mtu_status(t.sample) != PASS]


def _key(a: str, b: str) -> tuple[str, str]:
    return (a, b) if a <= b else (b, a)


def localise(
    failing: dict[tuple[str, str], str], kind: str, network: str, severity: str = "fault"
) -> list[Finding]:
    """Greedy cover: name the node in most unexplained failing pairs while it is in two or more."""
    remaining = dict(failing)
    findings = []
    while remaining:
        counts = Counter(n for pair in remaining for n in pair)
        node, count = min(counts.items(), key=lambda item: (-item[1], item[0]))
        if count < 2:
            break
        pairs = sorted(p for p in remaining if node in p)
        findings.append(
            Finding(
                kind=kind,
                severity=severity,
                network=network,
                pairs=pairs,
                node=node,
                message=f"{node}: {kind} fails with {count} peers on {network}",
                evidence=[remaining[p] for p in pairs],
            )
        )
        for pair in pairs:
            del remaining[pair]
    for pair in sorted(remaining):
        findings.append(
            Finding(
                kind=kind,
                severity=severity,
                network=network,
                pairs=[pair],
                message=f"link {pair[0]} <-> {pair[1]}: {kind} fails on {network}",
                evidence=[remaining[pair]],
            )
        )
    return findings


Failing = dict[str, dict[tuple[str, str], str]]


def _bandwidth_failures(
    tests: Sequence[BandwidthTest], criteria: Criteria, failing: Failing
) -> tuple[dict[tuple[str, str], str], list[Finding]]:
    """Record failing pairs in ``failing``; return the outliers (slow but above the floor) and
    the inconclusive figures (below it for want of a CPU)."""
    outliers: dict[tuple[str, str], str] = {}
    inconclusive: list[Finding] = []
    median = bandwidth_median(tests)
    for t in tests:
        key, final = _key(t.client, t.server), t.final
        status = bandwidth_status(final, criteria)
        figure = (
            f"{t.client} <-> {t.server}: {criteria.plan_gbps(final.bps):.2f} Gb/s"
            if final.bps is not None
            else ""
        )
        if status == ERROR:
            failing["measurement"][key] = f"iperf3 {t.client} -> {t.server}: {final.error}"
        elif status == FAIL and (starved := cpu_bound_ends(final, criteria, t.client, t.server)):
            inconclusive.append(_inconclusive(t, key, starved, f"{figure} < {criteria.min_gbps:g}"))
        elif status == FAIL:
            failing["bandwidth"][key] = f"{figure} < {criteria.min_gbps:g}"
        elif is_outlier(final, median, criteria) and final.bps is not None and median:
            outliers[key] = f"{figure}, {final.bps / median:.0%} of the median"
    return outliers, inconclusive


def _inconclusive(
    test: BandwidthTest, key: tuple[str, str], ends: list[tuple[str, EndCpu]], figure: str
) -> Finding:
    hosts = " and ".join(name for name, _ in ends)
    retested = "after a retest alone " if test.retest is not None else ""
    return Finding(
        kind=INCONCLUSIVE,
        severity="warning",
        network=test.network,
        pairs=[key],
        message=(
            f"{figure} on {test.network}, {retested}with {hosts} CPU-bound: "
            + "; ".join(f"{name}: {cpu.describe()}" for name, cpu in ends)
            + ". Not judged as a link fault: measure again when the host is idle"
        ),
        evidence=[f"{name}: {cpu.describe()}" for name, cpu in ends],
    )


def _probe_failures(tests: Sequence[ProbeTest], criteria: Criteria, failing: Failing) -> None:
    for p in tests:
        key, probe = _key(p.source, p.target), p.final
        if not probe.ok:
            failing["measurement"][key] = f"fping {p.source} -> {p.target}: {probe.error}"
            continue
        if loss_status(probe, criteria) == FAIL:
            failing["loss"][key] = (
                f"{p.source} -> {p.target}: {probe.loss_pct:.2f}% lost of {probe.sent}"
            )
        if latency_status(probe, criteria) == FAIL:
            failing["latency"][key] = f"{p.source} -> {p.target}: median {probe.median_ms:.3f} ms"


def _mtu_failures(tests: Sequence[MtuTest], failing: Failing) -> None:
    for m in tests:
        key, final = _key(m.source, m.target), m.final
        status = mtu_status(final)
        if status == ERROR:
            failing["measurement"][key] = f"MTU probe {m.source} -> {m.target}: {final.error}"
        elif status == FAIL:
            failing["mtu"][key] = (
                f"{m.source} -> {m.target}: none of {final.sent} {m.mtu}-byte "
                "don't-fragment probes came back"
            )


def judge(
    bandwidth: Sequence[BandwidthTest],
    probes: Sequence[ProbeTest],
    mtu: Sequence[MtuTest],
    criteria: Criteria,
) -> list[Finding]:
    """All findings, faults and warnings, over every tested network."""
    networks = sorted(
        {t.network for t in bandwidth} | {t.network for t in probes} | {t.network for t in mtu}
    )
    findings: list[Finding] = []
    for net in networks:
        failing: Failing = {k: {} for k in KIND_ORDER}
        outliers, inconclusive = _bandwidth_failures(
            [t for t in bandwidth if t.network == net], criteria, failing
        )
        _probe_failures([t for t in probes if t.network == net], criteria, failing)
        _mtu_failures([t for t in mtu if t.network == net], failing)
        findings += _faults(failing, net)
        findings += localise(outliers, "bandwidth_outlier", net, severity="warning")
        findings += inconclusive
    return findings


def _faults(failing: Failing, net: str) -> list[Finding]:
    """One network's faults, kind by kind (KIND_ORDER); a node already named by an earlier
    kind is explained by it (a node down is also slow, and that is not news)."""
    findings = []
    named: dict[str, str] = {}
    for kind in KIND_ORDER:
        for finding in localise(failing[kind], kind, net):
            if finding.node and finding.node in named:
                finding.explained_by = named[finding.node]
            elif finding.node:
                named[finding.node] = kind
            findings.append(finding)
    return findings


def nodes_at_fault(findings: Sequence[Finding]) -> list[dict[str, Any]]:
    """One entry per named node: its cause (first kind by KIND_ORDER) and every failing kind."""
    kinds: dict[tuple[str, str], list[str]] = {}
    for f in findings:
        if f.severity == "fault" and f.node:
            kinds.setdefault((f.network, f.node), []).append(f.kind)
    return [
        {
            "network": net,
            "node": node,
            "kind": min(ks, key=KIND_ORDER.index),
            "kinds": sorted(set(ks), key=KIND_ORDER.index),
        }
        for (net, node), ks in sorted(kinds.items())
    ]
