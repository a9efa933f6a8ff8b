"""Run the acceptance tests on the nodes through an injected executor, then judge them.

Phases run one after another so they never disturb each other: latency and loss (fping from
every node to every other, all at once: the probes are tiny), MTU (don't-fragment probes at
the network's MTU), bandwidth (iperf3 in scheduled rounds of disjoint pairs), then every
suspect pair or direction (bandwidth, loss, latency, MTU) retested alone.
"""

from __future__ import annotations

import contextlib
import itertools
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from cluster_plan.acceptance.collectives import run_collectives_phase
from cluster_plan.acceptance.fping import (
    ProbeSample,
    fping_latency_argv,
    fping_mtu_argv,
    loss_lower_bound_pct,
    parse_fping_count,
    parse_fping_vcount,
)
from cluster_plan.acceptance.iperf import (
    BandwidthSample,
    iperf3_client_argv,
    iperf3_server_argv,
    parse_iperf3,
)
from cluster_plan.acceptance.k8s_training import run_k8s_training
from cluster_plan.acceptance.report import build_report
from cluster_plan.acceptance.schedule import schedule_rounds
from cluster_plan.acceptance.spec import AcceptanceSpec, Node, TestedNetwork
from cluster_plan.acceptance.storage import run_storage_phase
from cluster_plan.acceptance.verdicts import (
    BandwidthTest,
    MtuTest,
    ProbeTest,
    bandwidth_suspects,
    judge,
    mtu_suspects,
    probe_suspects,
)
from cluster_plan.transport.execution import CommandResult, Executor

Progress = Callable[[str], None]
NETWORK_PHASES = ("latency", "mtu", "bandwidth")
# storage: plans with Ceph; collectives and training: Slurm pools the plan gives torch or MPI,
# training: a Kubernetes plan's training Job
JOB_PHASES = ("collectives", "training")
PHASES = (*NETWORK_PHASES, "storage", *JOB_PHASES)
MTU_RETEST_PROBES = 10
MTU_TIMEOUT_S = 30  # one fping of a few jumbo frames per target; far more than it needs
SERVER_GRACE_S = 5.0  # how long a one-off iperf3 server may take to end after its client


def rotated_targets(nodes: Sequence[Node], source: str) -> list[str]:
    """Every other node's address, starting with the one after ``source``: fping probes its
    targets in order, so with one shared order every node's first probe goes to the same
    node at once (an incast). Rotated, the k-th probe of each source goes to a different
    node. The crowd still loses jumbo frames in the lab (docs/acceptance.md); the retest
    alone decides."""
    index = next(i for i, n in enumerate(nodes) if n.name == source)
    return [n.address for n in (*nodes[index + 1 :], *nodes[:index])]


def print_progress(message: str) -> None:
    print(f"[acceptance] {message}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class RunOptions:
    omit_s: int = 1  # TCP slow start, left out of the figures
    port_base: int = 5201
    ports: int = 100  # servers take ports base..base+ports-1 in turn, so a stale one never blocks
    probes: int | None = None  # default: what the loss threshold needs (Criteria.probes)
    probe_interval_ms: int = 1  # fping's gap between any two probes of one node
    phases: tuple[str, ...] = PHASES
    retest: bool = True
    sequential: bool = False  # pair by pair, one at a time: the benchmark's baseline
    connect_retry_s: float = 3.0  # how long a client retries a server that is still starting
    node_programs: bool = True  # False: the transport runs this machine's tools (lab-netns)


class AcceptanceRunner:
    def __init__(
        self,
        spec: AcceptanceSpec,
        executor: Executor,
        options: RunOptions | None = None,
        progress: Progress = print_progress,
    ) -> None:
        self.spec = spec
        self.executor = executor
        self.options = options or RunOptions()
        self.progress = progress
        self._ports = itertools.count()
        self.bandwidth: list[BandwidthTest] = []
        self.probes: list[ProbeTest] = []
        self.mtu: list[MtuTest] = []
        self.timing: dict[str, float | int | str] = {}

    @property
    def probe_count(self) -> int:
        return self.options.probes or self.spec.criteria.probes

    @property
    def test_seconds(self) -> float:
        """Wall time of one iperf3 test: the omitted warm-up plus the measured part."""
        return self.spec.criteria.duration_s + self.options.omit_s

    # -- transport, never raising ------------------------------------------------------
    def _run(self, node: str, argv: Sequence[str], timeout: float) -> CommandResult:
        try:
            return self.executor.run(node, argv, timeout)
        except Exception as exc:  # any transport failure is a failed measurement, not a crash
            return CommandResult(tuple(argv), 255, "", f"transport failed: {exc!r}")

    # -- bandwidth -----------------------------------------------------------------------
    def measure_pair(self, client: Node, server: Node) -> BandwidthSample:
        port = self.options.port_base + next(self._ports) % self.options.ports
        limit = self.test_seconds + self.options.connect_retry_s + 30
        try:
            handle = self.executor.spawn(
                server.name, iperf3_server_argv(server.address, port, limit)
            )
        except Exception as exc:  # see _run
            result = CommandResult(("iperf3", "--server"), 255, "", f"transport failed: {exc!r}")
            return parse_iperf3(result)
        argv = iperf3_client_argv(
            server.address, client.address, port, self.spec.criteria.duration_s,
            self.options.omit_s,
        )  # fmt: skip
        deadline = time.monotonic() + self.options.connect_retry_s
        sample = parse_iperf3(self._run(client.name, argv, limit))
        while sample.error and "refused" in sample.error and time.monotonic() <= deadline:
            time.sleep(0.05)  # the server is not listening yet
            sample = parse_iperf3(self._run(client.name, argv, limit))
        # a one-off server ends with its client, and its probe reports the server's CPU then;
        # one that will not stop dies by its own timeout
        stopped = None
        with contextlib.suppress(Exception):  # see _run
            stopped = handle.stop(SERVER_GRACE_S if sample.ok else 0.0)
        return sample.with_server_probe(stopped) if stopped is not None else sample

    def _round(self, net: TestedNetwork, index: int, pairs: Sequence[tuple[str, str]]) -> None:
        nodes = {n.name: n for n in net.nodes}
        with ThreadPoolExecutor(max_workers=max(1, len(pairs))) as pool:
            samples = list(pool.map(lambda p: self.measure_pair(nodes[p[0]], nodes[p[1]]), pairs))
        for (client, server), sample in zip(pairs, samples, strict=True):
            self.bandwidth.append(BandwidthTest(net.name, client, server, index, sample))

    def bandwidth_phase(self, net: TestedNetwork) -> None:
        if self.options.sequential:
            rounds = [[pair] for r in schedule_rounds(net.nodes, self.spec.fabric) for pair in r]
        else:
            rounds = schedule_rounds(net.nodes, self.spec.fabric)
        started = time.monotonic()
        for index, pairs in enumerate(rounds):
            self.progress(
                f"{net.name}: bandwidth round {index + 1}/{len(rounds)}: "
                + ", ".join(f"{a}<->{b}" for a, b in pairs)
            )
            self._round(net, index, pairs)
        elapsed = time.monotonic() - started
        self.timing[f"{net.name}.bandwidth_s"] = round(elapsed, 2)
        self.timing[f"{net.name}.bandwidth_rounds"] = len(rounds)
        self.timing[f"{net.name}.bandwidth_goal_s"] = round(
            1.3 * max(1, len(net.nodes) - 1) * self.test_seconds, 2
        )

    # -- latency, loss, MTU ----------------------------------------------------------------
    def _fping_all(
        self,
        net: TestedNetwork,
        argv_for: Callable[[Node, list[str]], list[str]],
        timeout: float,
    ) -> dict[str, tuple[CommandResult, list[str]]]:
        def one(node: Node) -> tuple[str, tuple[CommandResult, list[str]]]:
            targets = rotated_targets(net.nodes, node.name)
            return node.name, (self._run(node.name, argv_for(node, targets), timeout), targets)

        with ThreadPoolExecutor(max_workers=max(1, len(net.nodes))) as pool:
            return dict(pool.map(one, net.nodes))

    def _probe_seconds(self, targets: int) -> float:
        return self.probe_count * max(1, targets) * self.options.probe_interval_ms / 1000

    def latency_phase(self, net: TestedNetwork) -> None:
        by_address = {n.address: n.name for n in net.nodes}
        period = max(1, (len(net.nodes) - 1) * self.options.probe_interval_ms)
        timeout = self._probe_seconds(len(net.nodes) - 1) * 2 + 15
        self.progress(
            f"{net.name}: latency and loss, {self.probe_count} probes per pair and direction "
            f"(about {self._probe_seconds(len(net.nodes) - 1):.0f} s)"
        )
        started = time.monotonic()
        results = self._fping_all(
            net,
            lambda node, targets: fping_latency_argv(
                node.address, targets, self.probe_count, period, self.options.probe_interval_ms
            ),
            timeout,
        )
        for source, (result, targets) in results.items():
            samples = parse_fping_vcount(result, targets, self.probe_count)
            for address, sample in samples.items():
                self.probes.append(ProbeTest(net.name, source, by_address[address], sample))
        self.timing[f"{net.name}.latency_s"] = round(time.monotonic() - started, 2)

    def mtu_phase(self, net: TestedNetwork) -> None:
        by_address = {n.address: n.name for n in net.nodes}
        self.progress(f"{net.name}: MTU {net.mtu}, don't-fragment probes")
        started = time.monotonic()
        results = self._fping_all(
            net,
            lambda node, targets: fping_mtu_argv(node.address, targets, net.mtu),
            MTU_TIMEOUT_S,
        )
        for source, (result, targets) in results.items():
            for address, sample in parse_fping_count(result, targets).items():
                self.mtu.append(MtuTest(net.name, source, by_address[address], net.mtu, sample))
        self.timing[f"{net.name}.mtu_s"] = round(time.monotonic() - started, 2)

    # -- retests ---------------------------------------------------------------------------
    def _fping_one(self, net: TestedNetwork, source: str, target: str, probes: int) -> ProbeSample:
        nodes = {n.name: n for n in net.nodes}
        address = nodes[target].address
        interval = self.options.probe_interval_ms
        argv = fping_latency_argv(nodes[source].address, [address], probes, interval, interval)
        result = self._run(source, argv, probes * interval / 1000 * 2 + 15)
        return parse_fping_vcount(result, [address], probes)[address]

    def retest_probe(self, net: TestedNetwork, source: str, target: str) -> ProbeSample:
        """Alone, in two stages: a tenth of the probes settles a clear failure (loss whose
        95% lower bound is above the threshold, or a median over it); anything else gets the
        full count, which a pass needs."""
        criteria = self.spec.criteria
        first = max(100, self.probe_count // 10)
        if first < self.probe_count:
            quick = self._fping_one(net, source, target, first)
            median = quick.median_ms
            if quick.ok and (
                loss_lower_bound_pct(quick.sent, quick.received) > criteria.max_loss_pct
                or (median is not None and median > criteria.max_latency_ms)
            ):
                return quick
        return self._fping_one(net, source, target, self.probe_count)

    def retest_mtu(self, net: TestedNetwork, source: str, target: str) -> ProbeSample:
        """Alone, with more probes: a jumbo frame lost in the all-at-once phase's crowd is not
        a path that cannot carry it; a path that drops every one of these cannot."""
        nodes = {n.name: n for n in net.nodes}
        address = nodes[target].address
        argv = fping_mtu_argv(nodes[source].address, [address], net.mtu, MTU_RETEST_PROBES)
        return parse_fping_count(self._run(source, argv, MTU_TIMEOUT_S), [address])[address]

    def retest_phase(self) -> None:
        started = time.monotonic()
        count = 0
        criteria = self.spec.criteria
        for net in self.spec.networks:
            nodes = {n.name: n for n in net.nodes}
            net_probes = [p for p in self.probes if p.network == net.name]
            for probe in probe_suspects(net_probes, criteria):
                self.progress(f"{net.name}: retest alone: fping {probe.source} -> {probe.target}")
                probe.retest = self.retest_probe(net, probe.source, probe.target)
                count += 1
            for mtu in mtu_suspects([m for m in self.mtu if m.network == net.name]):
                self.progress(f"{net.name}: retest alone: MTU {mtu.source} -> {mtu.target}")
                mtu.retest = self.retest_mtu(net, mtu.source, mtu.target)
                count += 1
            net_bw = [t for t in self.bandwidth if t.network == net.name]
            for test in bandwidth_suspects(net_bw, criteria):
                self.progress(f"{net.name}: retest alone: iperf3 {test.client} <-> {test.server}")
                test.retest = self.measure_pair(nodes[test.client], nodes[test.server])
                count += 1
        self.timing["retests"] = count
        self.timing["retest_s"] = round(time.monotonic() - started, 2)

    # -- storage ---------------------------------------------------------------------------
    def storage_phase(self) -> dict[str, Any] | None:
        """Ceph's health, OSDs, PGs and a rados bench, on the first monitor (plans with Ceph)."""
        spec = self.spec.storage
        if spec is None or "storage" not in self.options.phases:
            return None
        started = time.monotonic()
        section = run_storage_phase(
            spec, lambda argv, timeout: self._run(spec.admin, argv, timeout), self.progress
        )
        self.timing["storage_s"] = round(time.monotonic() - started, 2)
        return section

    # -- collectives and training ------------------------------------------------------------
    def network_suspects(self, nodes: Sequence[str]) -> list[str]:
        """The nodes among `nodes` the bandwidth phase of this run found slow."""
        found = judge(self.bandwidth, [], [], self.spec.criteria)
        named = {
            f.node for f in found if f.node and f.kind == "bandwidth" and f.severity == "fault"
        }
        return sorted(named & set(nodes))

    def collectives_phase(self) -> dict[str, Any] | None:
        """All-reduce sweeps and a training job through Slurm, on its first controller; on a
        Kubernetes plan, its training Job through the API server."""
        spec = self.spec.collectives
        phases = [p for p in JOB_PHASES if p in self.options.phases]
        kubernetes = self.spec.kubernetes_training
        if (spec is None and kubernetes is None) or not phases:
            return None
        if not self.options.node_programs:
            self.progress("collectives: skipped, the transport runs this machine's tools")
            return None
        started = time.monotonic()
        if spec is not None:
            section = run_collectives_phase(
                spec, self._run, self.progress, self.network_suspects, phases
            )
        elif "training" in phases and kubernetes is not None:
            section = run_k8s_training(kubernetes, self._run, self.progress)
        else:
            return None
        self.timing["collectives_s"] = round(time.monotonic() - started, 2)
        return section

    # -- all -------------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        started = time.monotonic()
        for net in self.spec.networks:
            if len(net.nodes) < 2:
                self.progress(f"{net.name}: fewer than two nodes, nothing to test")
                continue
            if "latency" in self.options.phases:
                self.latency_phase(net)
            if "mtu" in self.options.phases:
                self.mtu_phase(net)
            if "bandwidth" in self.options.phases:
                self.bandwidth_phase(net)
        if self.options.retest:
            self.retest_phase()
        storage = self.storage_phase()
        collectives = self.collectives_phase()
        self.timing["total_s"] = round(time.monotonic() - started, 2)
        self.timing["test_s"] = self.test_seconds
        findings = judge(self.bandwidth, self.probes, self.mtu, self.spec.criteria)
        report = build_report(
            self.spec, self.bandwidth, self.probes, self.mtu, findings, self.timing,
            self.options.omit_s, storage, collectives,
        )  # fmt: skip
        verdict = "PASSED" if report["passed"] else "FAILED"
        self.progress(f"{self.spec.cluster}: {verdict} in {self.timing['total_s']} s")
        return report
