"""The runner against a simulated network: schedule honoured, faults found, report valid."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from acceptance_sim import SimNode, SimulatedNetwork

from cluster_plan.acceptance.report import validate_report
from cluster_plan.acceptance.runner import NETWORK_PHASES, AcceptanceRunner, RunOptions
from cluster_plan.acceptance.spec import AcceptanceSpec, spec_from_expanded

FAST = RunOptions(probes=300, phases=NETWORK_PHASES)  # the simulation has no Ceph


def lab_network(spec: AcceptanceSpec, **faults: dict[str, Any]) -> SimulatedNetwork:
    nodes = {n.name: SimNode(n.address) for n in spec.networks[0].nodes}
    for name, changes in faults.items():
        for key, value in changes.items():
            setattr(nodes[name], key, value)
    return SimulatedNetwork(nodes)


def run(spec: AcceptanceSpec, net: SimulatedNetwork, options: RunOptions = FAST) -> dict[str, Any]:
    messages: list[str] = []
    report = AcceptanceRunner(spec, net, options, progress=messages.append).run()
    assert messages and messages[-1].startswith("lab: ")
    assert validate_report(report) == []
    return report


def test_clean_lab_passes(expanded_lab: dict[str, Any]) -> None:
    spec = spec_from_expanded(expanded_lab, duration_s=2)
    report = run(spec, lab_network(spec))
    assert report["passed"] and report["findings"] == []
    assert len(report["bandwidth"]) == 28  # every pair of 8 nodes
    assert len(report["probes"]) == 56  # every direction
    assert len(report["mtu"]) == 56
    assert {r["round"] for r in report["bandwidth"]} == set(range(7))
    assert report["timing"]["compute.bandwidth_rounds"] == 7
    assert report["timing"]["retests"] == 0


def test_lab_faults_named_exactly(expanded_lab: dict[str, Any]) -> None:
    spec = spec_from_expanded(expanded_lab, duration_s=2)
    net = lab_network(
        spec, gpu02={"rate_bps": 10e6}, stor01={"loss": 0.02}, infer01={"delay_ms": 5.0}
    )
    report = run(spec, net)
    assert not report["passed"]
    assert [(f["node"], f["kind"]) for f in report["nodes_at_fault"]] == [
        ("gpu02", "bandwidth"), ("infer01", "latency"), ("stor01", "loss")
    ]  # fmt: skip
    # every suspect was retested alone: 7 slow pairs; 14 lossy and 14 delayed directions,
    # two of them (stor01 <-> infer01) both
    assert report["timing"]["retests"] == 7 + 14 + 14 - 2
    # a clear failure is settled by the quick first stage of a retest (100 of 300 probes)
    retest_sizes = [
        argv[argv.index("--vcount") + 1]
        for _, argv in net.calls
        if "--vcount" in argv and len([a for a in argv if a.startswith("10.")]) == 2
    ]
    # (a lossy direction that happens to lose 0 or 1 of 100 is undecided and gets all 300)
    assert set(retest_sizes) <= {"100", "300"} and retest_sizes.count("100") >= 20
    retested = [r for r in report["bandwidth"] if r["first_attempt"]]
    assert {frozenset((r["client"], r["server"])) for r in retested} == {
        frozenset(("gpu02", n.name)) for n in spec.networks[0].nodes if n.name != "gpu02"
    }


def test_an_mtu_probe_lost_in_the_crowd_is_retested_alone_and_passes(
    expanded_lab: dict[str, Any],
) -> None:
    spec = spec_from_expanded(expanded_lab, duration_s=2)
    report = run(spec, lab_network(spec, cpu01={"mtu_lost_in_crowd": True}))
    assert report["passed"], report["findings"]
    retested = [r for r in report["mtu"] if r["first_attempt"]]
    assert {r["target"] for r in retested} == {"cpu01"} and len(retested) == 7
    assert all(r["first_attempt"]["received"] == 0 for r in retested)
    assert all(r["status"] == "pass" and r["sent"] == 10 for r in retested)
    assert report["timing"]["retests"] == 7


def test_an_mtu_the_path_cannot_carry_still_fails_after_its_retest(
    expanded_lab: dict[str, Any],
) -> None:
    spec = spec_from_expanded(expanded_lab, duration_s=2)
    report = run(spec, lab_network(spec, gpu01={"mtu": 1500}))
    assert not report["passed"]
    assert [(f["node"], f["kind"]) for f in report["nodes_at_fault"]] == [("gpu01", "mtu")]
    failed = [r for r in report["mtu"] if r["status"] != "pass"]
    assert len(failed) == 14 and all(r["first_attempt"] for r in failed)  # both directions
    assert all("none of 10" in e for f in report["findings"] for e in f["evidence"])


def test_every_node_probes_its_peers_in_its_own_order(expanded_lab: dict[str, Any]) -> None:
    """The k-th target of every source is a different node: no node gets every source's
    probe at once (an incast). At 32 lab nodes this alone did not stop jumbo frames being
    lost in the crowd; the MTU retest above is what settles those."""
    spec = spec_from_expanded(expanded_lab, duration_s=2)
    net = lab_network(spec)
    run(spec, net, RunOptions(probes=300, phases=("latency", "mtu")))
    by_address = {n.address: n.name for n in spec.networks[0].nodes}
    for flag in ("--dontfrag", "--vcount"):
        orders = {
            node: [by_address[a] for a in argv if a in by_address and a != argv[2]]
            for node, argv in net.calls
            if flag in argv
        }
        assert len(orders) == 8
        assert all(len(o) == 7 and node not in o for node, o in orders.items())
        for k in range(7):
            assert len({o[k] for o in orders.values()}) == 8, (flag, k)


def test_each_round_uses_each_node_once(expanded_lab: dict[str, Any]) -> None:
    spec = spec_from_expanded(expanded_lab, duration_s=2)
    net = lab_network(spec)
    run(spec, net, RunOptions(probes=300, phases=("bandwidth",)))
    servers = [argv for _, argv in net.calls if "--server" in argv]
    clients = [argv for _, argv in net.calls if "--client" in argv]
    assert len(servers) == len(clients) == 28
    assert all("--omit" in argv and "--json" in argv and "--bidir" in argv for argv in clients)


def test_missing_tool_on_a_node(expanded_lab: dict[str, Any]) -> None:
    spec = spec_from_expanded(expanded_lab, duration_s=2)
    net = lab_network(spec, cpu01={"tools": {"iperf3", "timeout"}})
    report = run(spec, net)
    assert [(f["node"], f["kind"]) for f in report["nodes_at_fault"]] == [("cpu01", "measurement")]
    raws = [r["raw"] for r in report["probes"] if r["source"] == "cpu01"]
    assert raws and all("fping: not found" in raw for raw in raws)


@pytest.mark.parametrize(
    "broken",
    ["iperf3_empty", "iperf3_text_after_json", "iperf3_printed_twice", "iperf3_nan",
     "iperf3_crash"],
)  # fmt: skip
def test_broken_iperf3_on_a_node_never_passes(expanded_lab: dict[str, Any], broken: str) -> None:
    spec = spec_from_expanded(expanded_lab, duration_s=2)
    report = run(spec, lab_network(spec, head01={"broken_iperf": broken}))
    assert not report["passed"]
    errors = [r for r in report["bandwidth"] if r["status"] == "error"]
    # head01 is the client in some pairs; those fail and keep the raw output
    assert errors and all(r["client"] == "head01" and r["raw"] for r in errors)


def test_transport_exception_is_a_failed_measurement(expanded_lab: dict[str, Any]) -> None:
    class Broken(SimulatedNetwork):
        def run(self, node: str, argv: Any, timeout: float) -> Any:
            if node == "stor03":
                raise ConnectionError("ssh: connect to host stor03: Connection reset")
            return super().run(node, argv, timeout)

    spec = spec_from_expanded(expanded_lab, duration_s=2)
    nodes = {n.name: SimNode(n.address) for n in spec.networks[0].nodes}
    report = run(spec, Broken(nodes))
    assert [(f["node"], f["kind"]) for f in report["nodes_at_fault"]] == [("stor03", "measurement")]


def test_real_tools_on_loopback(tmp_path: Path, expanded_lab: dict[str, Any]) -> None:
    """End to end with real iperf3 and fping between loopback addresses (127.0.0.0/8 only)."""
    if subprocess.run(["which", "iperf3", "fping"], capture_output=True).returncode:
        pytest.skip("iperf3 or fping not installed")
    hosts = dict(list(expanded_lab["hosts"].items())[:3])
    for i, host in enumerate(hosts.values()):
        host["interfaces"]["compute"]["address"] = f"127.0.0.{11 + i}"
    expanded = {**expanded_lab, "hosts": hosts, "lab": {"rate_scale": 1.0}}
    network = {**expanded_lab["acceptance"]["network"], "min_gbps": 0.5}
    expanded["acceptance"] = {**expanded_lab["acceptance"], "network": network}
    path = tmp_path / "expanded.json"
    path.write_text(json.dumps(expanded))
    proc = subprocess.run(
        [sys.executable, "-m", "cluster_plan.cli", "acceptance", "unused.yml",
         "--expanded", str(path), "--transport", "exec", "--exec-prefix", "env",
         "--duration", "1", "--probes", "100", "--output-dir", str(tmp_path / "out"),
         # the network's tools run here; the jobs' phases need the nodes' Slurm
         "--phases", "latency,mtu,bandwidth"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads((tmp_path / "out" / "acceptance.json").read_text())
    assert report["passed"] and len(report["bandwidth"]) == 3
    assert all(r["gbps"] > 0.5 for r in report["bandwidth"])
    assert "bandwidth round 3/3" in proc.stderr  # progress while it runs
    assert (tmp_path / "out" / "acceptance.html").read_text().startswith("<!DOCTYPE html>")


def no_loss_allowed(expanded_lab: dict[str, Any]) -> dict[str, Any]:
    network = {**expanded_lab["acceptance"]["network"], "max_loss_pct": 0}
    return {**expanded_lab, "acceptance": {**expanded_lab["acceptance"], "network": network}}


def test_a_threshold_of_zero_loss_fails_on_the_first_lost_probe(
    expanded_lab: dict[str, Any],
) -> None:
    """`max_loss_pct: 0` passes validation; acceptance takes it as "no probe may be lost"
    (once a ValueError traceback)."""
    spec = spec_from_expanded(no_loss_allowed(expanded_lab), duration_s=2)
    assert spec.criteria.probes == 3000
    options = RunOptions(phases=("latency",))
    clean = run(spec, lab_network(spec), options)
    assert clean["passed"] and clean["criteria"]["max_loss_pct"] == 0
    assert {r["sent"] for r in clean["probes"]} == {3000}
    # 0.05% loss on one node: a handful of 3000 probes, each a failure now
    lossy = run(spec, lab_network(spec, stor01={"loss": 0.0005}), options)
    assert [(f["node"], f["kind"]) for f in lossy["nodes_at_fault"]] == [("stor01", "loss")]


def test_the_acceptance_command_takes_a_zero_loss_threshold(
    tmp_path: Path, expanded_lab: dict[str, Any]
) -> None:
    path = tmp_path / "expanded.json"
    path.write_text(json.dumps(no_loss_allowed(expanded_lab)))
    proc = subprocess.run(
        [sys.executable, "-m", "cluster_plan", "acceptance", "unused.yml",
         "--expanded", str(path), "--transport", "exec", "--exec-prefix", "false",
         "--phases", "latency", "--no-retest", "--output-dir", str(tmp_path / "out")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert "Traceback" not in proc.stderr, proc.stderr
    # `false` answers no probe: every measurement failed, and the run says so
    assert proc.returncode == 1, proc.stdout + proc.stderr
    report = json.loads((tmp_path / "out" / "acceptance.json").read_text())
    assert report["criteria"]["max_loss_pct"] == 0 and report["criteria"]["probes"] == 3000
