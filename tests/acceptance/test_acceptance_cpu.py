"""A starved measurement is not a slow link: each figure keeps both ends' CPU, a low figure a
CPU-bound end accounts for is retested alone and, still starved, an inconclusive warning naming
the host and its load; a slow link stays a fault, on an idle host or a busy one.

The recorded fixtures (tests/acceptance/fixtures/record_fixtures.py) ran iperf3 under the
runner's own CPU probe over a link shaped as the lab's: 100 Mbit/s, or 10 for a rate fault."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
from acceptance_sim import SimNode, SimulatedNetwork, fixture, fixture_result

from cluster_plan.acceptance.html import render_html
from cluster_plan.acceptance.iperf import BandwidthSample, parse_iperf3
from cluster_plan.acceptance.report import validate_report
from cluster_plan.acceptance.runner import NETWORK_PHASES, AcceptanceRunner, RunOptions
from cluster_plan.acceptance.spec import AcceptanceSpec, Criteria, spec_from_expanded
from cluster_plan.acceptance.starvation import EndCpu, HostCpu, parse_probe, probe_argv
from cluster_plan.acceptance.verdicts import BandwidthTest, judge
from cluster_plan.transport.execution import CommandResult, PrefixExecutor

LAB = Criteria(min_gbps=9, max_latency_ms=0.5, max_loss_pct=0.5, duration_s=3, rate_scale=0.01)
FAST = RunOptions(probes=300, phases=NETWORK_PHASES)


def recorded(name: str) -> BandwidthSample:
    """A recorded measurement as the runner keeps it: the client's output and probe, then the
    server's probe from its stderr."""
    server = CommandResult(("iperf3", "--server"), 0, "", str(fixture(name)["server_stderr"]))
    return parse_iperf3(fixture_result(name)).with_server_probe(server)


# ---- what each end's CPU did -------------------------------------------------------------


def test_a_healthy_measurement_keeps_both_ends_cpu_and_is_not_cpu_bound() -> None:
    sample = recorded("iperf3_link_ok")
    for end in (sample.client_cpu, sample.server_cpu):
        assert end.iperf3_pct is not None and 0 < end.iperf3_pct < 20
        assert end.host is not None and end.host.cpus == 2
        assert end.host.wait_pct is not None and end.host.wait_pct < 10
        assert end.host.load1 is not None and end.host.busy_pct is not None
    assert not sample.cpu_bound


def test_a_starved_measurement_is_cpu_bound_on_both_ends() -> None:
    sample = recorded("iperf3_starved")
    assert sample.bps is not None and sample.bps < 90e6  # below the lab's floor (9 plan Gb/s)
    assert sample.client_cpu.host is not None and sample.server_cpu.host is not None
    # iperf3 itself used next to nothing: it was waiting for a CPU
    assert sample.client_cpu.iperf3_pct is not None and sample.client_cpu.iperf3_pct < 5
    assert sample.client_cpu.host.wait_pct is not None and sample.client_cpu.host.wait_pct > 50
    assert sample.client_cpu.bound and sample.server_cpu.bound and sample.cpu_bound


def test_the_probe_keeps_the_commands_exit_status_and_output() -> None:
    busy = "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done; echo out; exit 3"
    done = PrefixExecutor().run("n1", probe_argv(["sh", "-c", busy]), timeout=30)
    assert (done.rc, done.stdout) == (3, "out\n")
    host = parse_probe(done.stderr)
    assert host is not None and host.cpus is not None and host.cpus >= 1
    assert host.wait_pct is not None and 0 <= host.wait_pct <= 100
    assert host.busy_pct is not None and host.load1 is not None
    missing = PrefixExecutor().run("n1", probe_argv(["no-such-tool-here"]), timeout=30)
    assert missing.rc == 127 and parse_probe(missing.stderr) is not None


@pytest.mark.parametrize(
    "stderr",
    ["", "iperf3: error\n", "cpu-probe window x y\ncpu-probe schedstat\ncpu-probe cpus 0\n"],
)
def test_a_probe_that_said_nothing_usable_judges_nothing(stderr: str) -> None:
    host = parse_probe(stderr)
    assert host is None or (host.wait_pct is None and host.cpus is None)
    assert not EndCpu(None, host).bound


def test_the_rule_tool_bound_or_starved_and_the_shortfall_it_accounts_for() -> None:
    tool = EndCpu(97.0, None)
    assert tool.bound and tool.accounts_for(0.9)  # iperf3 was the limit, whatever the figure
    starved = EndCpu(3.0, HostCpu(30.0, 100.0, 0.0, 19.0, 2))
    assert starved.bound
    assert starved.accounts_for(0.5) and not starved.accounts_for(0.61)  # twice its 30 %
    stolen = EndCpu(3.0, HostCpu(1.0, 60.0, 25.0, 1.0, 2))
    assert stolen.bound and stolen.accounts_for(0.4)  # a hypervisor that takes the CPU
    busy = EndCpu(5.0, HostCpu(4.0, 100.0, 0.0, 4.8, 2))
    assert not busy.bound and not busy.accounts_for(0.01)  # busy, but iperf3 ran when ready
    assert "load 19 on 2 CPUs" in starved.describe()


# ---- verdicts from recorded measurements --------------------------------------------------


def judged(first: str, retest: str | None) -> list[dict[str, Any]]:
    test = BandwidthTest("compute", "gpu01", "gpu02", 0, recorded(first))
    test.retest = recorded(retest) if retest else None
    return [f.as_dict() for f in judge([test], [], [], LAB)]


def test_a_cpu_bound_low_figure_still_starved_on_its_retest_is_inconclusive() -> None:
    (finding,) = judged("iperf3_starved", "iperf3_starved")
    assert (finding["kind"], finding["severity"]) == ("inconclusive", "warning")
    assert finding["pairs"] == [["gpu01", "gpu02"]] and finding["node"] is None
    message = finding["message"]
    assert "after a retest alone" in message and "CPU-bound" in message
    assert "gpu01: load 3.31 on 2 CPUs" in message and "waited for a CPU 97%" in message


def test_a_cpu_bound_low_figure_that_passes_its_retest_passes() -> None:
    assert judged("iperf3_starved", "iperf3_link_ok") == []


def test_a_low_figure_with_idle_cpus_is_a_fault() -> None:
    (finding,) = judged("iperf3_link_slow", "iperf3_link_slow")
    assert (finding["kind"], finding["severity"]) == ("bandwidth", "fault")
    assert recorded("iperf3_link_slow").client_cpu.host.busy_pct < 50  # type: ignore[union-attr]


def test_a_slow_link_stays_a_fault_on_a_busy_host() -> None:
    """iperf3 waited for a CPU a fifth of the test, but the figure is a tenth of the link's:
    the CPU cannot account for that."""
    sample = recorded("iperf3_link_slow_busy")
    assert sample.cpu_bound
    (finding,) = judged("iperf3_link_slow_busy", "iperf3_link_slow_busy")
    assert (finding["kind"], finding["severity"]) == ("bandwidth", "fault")


def test_a_starved_figure_above_the_floor_stands() -> None:
    generous = Criteria(min_gbps=4, max_latency_ms=0.5, max_loss_pct=0.5, duration_s=3,
                        rate_scale=0.01)  # fmt: skip
    test = BandwidthTest("compute", "gpu01", "gpu02", 0, recorded("iperf3_starved"))
    assert judge([test], [], [], generous) == []


# ---- the runner against a simulated lab -----------------------------------------------------


def lab(spec: AcceptanceSpec, **changes: dict[str, Any]) -> SimulatedNetwork:
    nodes = {n.name: SimNode(n.address) for n in spec.networks[0].nodes}
    for name, change in changes.items():
        for key, value in change.items():
            setattr(nodes[name], key, value)
    return SimulatedNetwork(nodes)


def run(spec: AcceptanceSpec, net: SimulatedNetwork) -> dict[str, Any]:
    report = AcceptanceRunner(spec, net, FAST, progress=lambda _: None).run()
    assert validate_report(report) == []
    return report


def rows_of(report: dict[str, Any], node: str) -> list[dict[str, Any]]:
    return [r for r in report["bandwidth"] if node in (r["client"], r["server"])]


def test_every_figure_keeps_both_ends_cpu(expanded_lab: dict[str, Any]) -> None:
    spec = spec_from_expanded(expanded_lab, duration_s=2)
    report = run(spec, lab(spec))
    assert report["passed"] and report["bandwidth"]
    for row in report["bandwidth"]:
        for end in ("client", "server"):
            cpu = row["cpu"][end]
            assert cpu["iperf3_pct"] == 2.0 and cpu["wait_pct"] == 0.5 and cpu["cpus"] == 2
            assert cpu["load1"] == 0.4 and cpu["bound"] is False


def test_a_node_starved_throughout_is_retested_alone_then_inconclusive(
    expanded_lab: dict[str, Any],
) -> None:
    spec = spec_from_expanded(expanded_lab, duration_s=2)
    net = lab(spec, gpu01={"iperf_fixtures": ["iperf3_starved"]})
    report = run(spec, net)
    assert report["passed"], report["findings"]  # warnings only
    assert report["nodes_at_fault"] == []
    mine = rows_of(report, "gpu01")
    assert len(mine) == 7 and all(r["first_attempt"] for r in mine)  # each retested alone
    assert (
        {r["status"] for r in mine}
        == {r["first_attempt"]["status"] for r in mine}
        == {"inconclusive"}
    )
    assert all(r["cpu"]["client"]["bound"] and r["cpu"]["client"]["wait_pct"] > 50 for r in mine)
    found = [f for f in report["findings"] if f["kind"] == "inconclusive"]
    assert {frozenset(f["pairs"][0]) for f in found} == {
        frozenset((r["client"], r["server"])) for r in mine
    }
    assert all(f["severity"] == "warning" and "load 3.31 on 2 CPUs" in f["message"] for f in found)
    # the retests ran after every scheduled round, one at a time: a server, then its client
    iperf = [("server" if "--server" in a else "client", n) for n, a in net.calls if "iperf3" in a]
    assert len(iperf) == 2 * (28 + 7)
    retests = iperf[2 * 28 :]
    assert [kind for kind, _ in retests] == ["server", "client"] * 7
    assert all("gpu01" in (retests[i][1], retests[i + 1][1]) for i in range(0, 14, 2))
    html = render_html(report)
    assert "inconclusive" in html and "CPU-bound" in html and "waited for a CPU 97%" in html


def test_a_node_starved_in_the_rounds_passes_on_its_retest(expanded_lab: dict[str, Any]) -> None:
    spec = spec_from_expanded(expanded_lab, duration_s=2)
    report = run(spec, lab(spec, gpu01={"starved_for": 7}))  # its seven scheduled pairs
    assert report["passed"] and report["findings"] == []
    mine = rows_of(report, "gpu01")
    assert all(r["status"] == "pass" and not r["cpu"]["client"]["bound"] for r in mine)
    assert all(r["first_attempt"]["status"] == "inconclusive" for r in mine)
    assert all(
        r["first_attempt"]["cpu"]["client" if r["client"] == "gpu01" else "server"]["load1"] == 19
        for r in mine
    )


def test_a_rate_fault_with_idle_cpus_is_a_fault(expanded_lab: dict[str, Any]) -> None:
    spec = spec_from_expanded(expanded_lab, duration_s=2)
    report = run(spec, lab(spec, gpu02={"iperf_fixtures": ["iperf3_link_slow"]}))
    assert not report["passed"]
    assert [(f["node"], f["kind"]) for f in report["nodes_at_fault"]] == [("gpu02", "bandwidth")]
    assert not any(f["kind"] == "inconclusive" for f in report["findings"])
    assert all(r["status"] == "fail" for r in rows_of(report, "gpu02"))


def test_the_server_is_given_time_to_report_its_cpu(expanded_lab: dict[str, Any]) -> None:
    spec = spec_from_expanded(expanded_lab, duration_s=2)
    net = lab(spec)
    stopped: list[Any] = []
    spawn = net.spawn

    def keep(node: str, argv: Any) -> Any:
        handle = spawn(node, argv)
        stopped.append(handle)
        return handle

    net.spawn = keep  # type: ignore[method-assign]
    run(spec, net)
    assert stopped and all(h.graces == [5.0] for h in stopped)
    servers = [argv for _, argv in net.calls if "--server" in argv]
    assert all(argv[:3] == ("timeout", argv[1], "sh") and "cpu-probe" in argv for argv in servers)


def test_the_report_of_an_earlier_version_without_cpu_still_loads(
    expanded_lab: dict[str, Any],
) -> None:
    spec = spec_from_expanded(expanded_lab, duration_s=2)
    report = run(spec, lab(spec))
    for row in report["bandwidth"]:
        del row["cpu"]
    assert validate_report(json.loads(json.dumps(report))) == []


def test_real_iperf3_under_the_probe_on_loopback() -> None:
    if subprocess.run(["which", "iperf3"], capture_output=True).returncode:
        pytest.skip("iperf3 not installed")
    script = (
        "import json, sys\n"
        "from cluster_plan.transport.execution import PrefixExecutor\n"
        "from cluster_plan.acceptance.iperf import iperf3_client_argv, iperf3_server_argv\n"
        "from cluster_plan.acceptance.iperf import parse_iperf3\n"
        "import time\n"
        "ex = PrefixExecutor()\n"
        "server = ex.spawn('s', iperf3_server_argv('127.0.0.1', 5498, 30))\n"
        "time.sleep(0.5)\n"
        "sample = parse_iperf3(ex.run('c', iperf3_client_argv('127.0.0.1', '127.0.0.1', 5498,"
        " 1, 0), 30))\n"
        "sample = sample.with_server_probe(server.stop(5))\n"
        "print(json.dumps([sample.ok, sample.client_cpu.iperf3_pct, sample.server_cpu.iperf3_pct,"
        " sample.client_cpu.host.cpus, sample.server_cpu.host.cpus]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    ok, client_pct, server_pct, client_cpus, server_cpus = json.loads(done.stdout)
    assert ok and client_pct is not None and server_pct is not None
    assert client_cpus >= 1 and server_cpus >= 1


def test_an_inconclusive_figure_is_kept_out_of_the_history(expanded_lab: dict[str, Any]) -> None:
    from cluster_plan.acceptance.figures import figures_from_report

    spec = spec_from_expanded(expanded_lab, duration_s=2)
    report = run(spec, lab(spec, gpu01={"iperf_fixtures": ["iperf3_starved"]}))
    figures = [f for f in figures_from_report(report) if f.metric == "bandwidth_gbps"]
    assert len(figures) == 2 * 28
    starved = [f for f in figures if "gpu01" in (f.source, f.target)]
    assert len(starved) == 14 and all(f.value is None for f in starved)
    assert all(f.value for f in figures if f not in starved)
