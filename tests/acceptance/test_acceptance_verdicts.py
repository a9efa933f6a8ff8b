"""Absolute thresholds, relative outliers, retests and localisation to nodes."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from cluster_plan.acceptance.fping import ProbeSample
from cluster_plan.acceptance.iperf import BandwidthSample
from cluster_plan.acceptance.spec import Criteria
from cluster_plan.acceptance.verdicts import (
    BandwidthTest,
    MtuTest,
    ProbeTest,
    bandwidth_suspects,
    judge,
    localise,
    nodes_at_fault,
)

LAB = Criteria(min_gbps=9, max_latency_ms=0.5, max_loss_pct=0.1, duration_s=2, rate_scale=0.01)
NODES = [f"n{i}" for i in range(8)]


def bw(bps: float) -> BandwidthSample:
    return BandwidthSample(bps, bps, 0, None, None)


def probe(received: int = 3000, rtt: float = 0.05) -> ProbeSample:
    return ProbeSample(3000, received, (rtt,) * received, None, None)


def mesh(
    slow: dict[str, float] | None = None,
    lossy: dict[str, int] | None = None,
    delayed: dict[str, float] | None = None,
) -> tuple[list[BandwidthTest], list[ProbeTest]]:
    slow, lossy, delayed = slow or {}, lossy or {}, delayed or {}
    bandwidth = [
        BandwidthTest("compute", a, b, 0, bw(min(slow.get(a, 96e6), slow.get(b, 96e6))))
        for a, b in itertools.combinations(NODES, 2)
    ]
    probes = [
        ProbeTest(
            "compute",
            a,
            b,
            probe(
                3000 - lossy.get(a, 0) - lossy.get(b, 0),
                0.05 + delayed.get(a, 0) + delayed.get(b, 0),
            ),
        )
        for a, b in itertools.permutations(NODES, 2)
    ]
    return bandwidth, probes


def test_clean_cluster_passes() -> None:
    bandwidth, probes = mesh()
    findings = judge(bandwidth, probes, [], LAB)
    assert findings == []


def test_lab_faults_are_named_with_their_kind() -> None:
    bandwidth, probes = mesh(slow={"n1": 9.6e6}, lossy={"n3": 60}, delayed={"n5": 5.0})
    faults = nodes_at_fault(judge(bandwidth, probes, [], LAB))
    assert [(f["node"], f["kind"]) for f in faults] == [
        ("n1", "bandwidth"), ("n3", "loss"), ("n5", "latency")
    ]  # fmt: skip


def test_uniformly_slow_cluster_fails_though_no_pair_is_an_outlier() -> None:
    # what relative-only tools miss: every link at 80% of the plan
    bandwidth, probes = mesh(slow={n: 72e6 for n in NODES})
    findings = judge(bandwidth, probes, [], LAB)
    assert findings and all(f.kind == "bandwidth" and f.severity == "fault" for f in findings)
    assert not [f for f in findings if f.kind == "bandwidth_outlier"]


def test_outlier_above_threshold_is_a_warning() -> None:
    bandwidth, probes = mesh()
    for t in bandwidth:
        t.sample = bw(400e6)  # a fast cluster: 40 Gb/s in plan units
    bandwidth[0].sample = bw(200e6)  # passes 9 Gb/s, half the median
    findings = judge(bandwidth, probes, [], LAB)
    assert [(f.kind, f.severity, f.pairs) for f in findings] == [
        ("bandwidth_outlier", "warning", [("n0", "n1")])
    ]
    assert bandwidth_suspects(bandwidth, LAB) == [bandwidth[0]]


def test_retest_decides() -> None:
    bandwidth, probes = mesh()
    bandwidth[0].sample = bw(10e6)
    assert bandwidth_suspects(bandwidth, LAB) == [bandwidth[0]]
    bandwidth[0].retest = bw(95e6)  # contention, not the link
    assert judge(bandwidth, probes, [], LAB) == []
    bandwidth[0].retest = bw(10e6)
    assert [f.kind for f in judge(bandwidth, probes, [], LAB)] == ["bandwidth"]


def test_single_failing_pair_is_named_as_a_link() -> None:
    findings = localise({("a", "b"): "slow"}, "bandwidth", "compute")
    assert findings[0].node is None and findings[0].pairs == [("a", "b")]
    assert findings[0].as_dict()["scope"] == "link"


def test_two_failing_pairs_sharing_a_node_name_it() -> None:
    findings = localise({("a", "b"): "x", ("b", "c"): "y", ("d", "e"): "z"}, "loss", "compute")
    assert [(f.node, f.pairs) for f in findings] == [
        ("b", [("a", "b"), ("b", "c")]), (None, [("d", "e")])
    ]  # fmt: skip


def test_failed_measurements_are_faults_never_passes() -> None:
    bandwidth, probes = mesh()
    broken = BandwidthSample(None, None, None, "iperf3 not found on the node", "raw")
    for t in bandwidth:
        if "n2" in (t.client, t.server):
            t.sample = broken
    findings = judge(bandwidth, probes, [], LAB)
    assert [(f.kind, f.node) for f in findings] == [("measurement", "n2")]


def test_loss_explains_low_bandwidth_on_the_same_node() -> None:
    bandwidth, probes = mesh(slow={"n3": 50e6}, lossy={"n3": 60})
    findings = judge(bandwidth, probes, [], LAB)
    by_kind = {f.kind: f for f in findings}
    assert by_kind["bandwidth"].explained_by == "loss"
    assert nodes_at_fault(findings) == [
        {"network": "compute", "node": "n3", "kind": "loss", "kinds": ["loss", "bandwidth"]}
    ]


def test_mtu_failure_is_localised() -> None:
    bandwidth, probes = mesh()
    mtu = [
        MtuTest("compute", a, b, 9000, ProbeSample(3, 0 if "n4" in (a, b) else 3, (), None, None))
        for a, b in itertools.permutations(NODES, 2)
    ]
    faults = nodes_at_fault(judge(bandwidth, probes, mtu, LAB))
    assert faults == [{"network": "compute", "node": "n4", "kind": "mtu", "kinds": ["mtu"]}]


@settings(max_examples=80, deadline=None)
@given(
    size=st.integers(min_value=3, max_value=12),
    data=st.data(),
)
def test_faulty_nodes_are_named_exactly(size: int, data: st.DataObject) -> None:
    """Any set of up to N-2 faulty nodes: every pair touching one fails; exactly they are named
    (a healthy node is in |F| <= N-2 failing pairs, a faulty one in N-1)."""
    names = [f"n{i:02d}" for i in range(size)]
    faulty = set(data.draw(st.lists(st.sampled_from(names), max_size=size - 2, unique=True)))
    failing = {(a, b): "slow" for a, b in itertools.combinations(names, 2) if {a, b} & faulty}
    findings = localise(failing, "bandwidth", "compute")
    assert {f.node for f in findings} == faulty if faulty else findings == []
    assert all(f.node for f in findings)  # every failing pair explained by a named node
