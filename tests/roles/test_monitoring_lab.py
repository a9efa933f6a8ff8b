"""Monitoring on the converged session lab: Prometheus, Alertmanager and node_exporter as
site.yml's Monitoring stage left them (roles/monitoring), asked through their own HTTP APIs
from inside the monitoring server's node (the root namespace has no route to the lab).

Read-only first: every target the plan renders is scraped and up, nothing fires that the
lab cannot explain, and the dashboards' queries answer from the live server. Then
(`lab_changes`) five faults at once, each with the alert that must fire within a bound and
resolve after the repair, their times printed: a node cut off (NodeDown, which inhibits the
node's other alerts), an OSD stopped, a Slurm node drained, chrony stopped, an MTU lowered.
The lab plan sets every `monitoring.alert_after_minutes` to 0.25 (docs/monitoring.md)."""

from __future__ import annotations

import base64
import json
import re
import shlex
import subprocess
import time
from typing import Any

import pytest
from lab_helpers import BIN, PLAN, cli, on_node
from support.lab_session import Converged, converged_lab, lab  # noqa: F401
from support.waiting import wait_until

from cluster_plan.monitoring.grafana import NODE_VARIABLE, panel_exprs
from cluster_plan.monitoring.render import render

pytestmark = pytest.mark.lab

# Metrics this lab cannot have: the GPU collector's readings need NVML (the lab's GPU nodes
# have none: cluster_plan_gpu_nvml_up says 0 and GpuNvmlDown fires), and the backup status and
# drift documents are the operator's to save (docs/monitoring.md); the suite saves none.
ABSENT_IN_LAB = re.compile(
    r"cluster_plan_gpu_(?!nvml_up|expected)\w+|cluster_plan_(backup|drift)_\w+"
)
# Alerts the lab explains: no NVML on its GPU nodes. (ClockUnsynchronised is not one: it reads
# each node's chronyd through the clock collector, not the kernel flag the nodes share with
# this machine, and head01, the plan's time reference, is healthy while it serves its clock.)
EXPLAINED = {"GpuNvmlDown"}


class Monitor:
    """The lab's Prometheus and Alertmanager, asked from inside the monitoring server."""

    def __init__(self, expanded: dict[str, Any]) -> None:
        (self.server,) = expanded["groups"]["monitoring_server"]
        self.address = expanded["hosts"][self.server]["address"]
        self.expanded = expanded

    def get(self, port: int, path: str, timeout: float = 60) -> Any:
        # Prometheus listens on the management address; Alertmanager on loopback only
        url = f"http://{self.address if port != 9093 else '127.0.0.1'}:{port}{path}"
        script = (
            "import sys, urllib.request; "
            "sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=20).read().decode())"
        )
        done = on_node(
            self.server, f"python3 -c {shlex.quote(script)} {shlex.quote(url)}", timeout=timeout
        )
        assert done.returncode == 0, f"GET {url}: {done.stderr[-2000:]}"
        return json.loads(done.stdout)

    def answered(self, exprs: list[str]) -> dict[str, bool]:
        """Which of these queries answer at least one series: one process in the node for
        all of them (a `lab run` each would take minutes)."""
        script = (
            "import base64, json, sys, urllib.parse, urllib.request\n"
            "out = {}\n"
            "for e in json.loads(base64.b64decode(sys.argv[2])):\n"
            "    url = sys.argv[1] + urllib.parse.quote(e, safe='')\n"
            "    answer = json.load(urllib.request.urlopen(url, timeout=20))\n"
            "    out[e] = answer['status'] == 'success' and bool(answer['data']['result'])\n"
            "print(json.dumps(out))\n"
        )
        encoded = base64.b64encode(json.dumps(exprs).encode()).decode()
        url = f"http://{self.address}:9090/api/v1/query?query="
        done = on_node(
            self.server, f"python3 -c {shlex.quote(script)} {shlex.quote(url)} {encoded}"
        )
        assert done.returncode == 0, done.stderr[-2000:]
        return dict(json.loads(done.stdout))

    def query(self, expr: str) -> list[dict[str, Any]]:
        from urllib.parse import quote

        answer = self.get(9090, "/api/v1/query?query=" + quote(expr, safe=""))
        assert answer["status"] == "success", answer
        return list(answer["data"]["result"])

    def targets(self) -> list[dict[str, Any]]:
        return list(self.get(9090, "/api/v1/targets?state=active")["data"]["activeTargets"])

    def firing(self) -> list[dict[str, Any]]:
        alerts = self.get(9090, "/api/v1/alerts")["data"]["alerts"]
        return [a for a in alerts if a["state"] == "firing"]

    def routed(self) -> list[dict[str, Any]]:
        """Alertmanager's alerts, with their receivers and inhibition."""
        return list(self.get(9093, "/api/v2/alerts"))


@pytest.fixture(scope="module")
def monitor(converged_lab: Converged) -> Monitor:  # noqa: F811
    converged_lab.require_converged()
    return Monitor(dict(converged_lab.expanded))


def rendered(expanded: dict[str, Any]) -> dict[str, str]:
    return render(expanded)  # type: ignore[arg-type]


def test_every_target_the_plan_renders_is_scraped_and_up(monitor: Monitor) -> None:
    files = rendered(monitor.expanded)
    wanted = {
        (job, target)
        for job in ("node", "ceph")
        for group in json.loads(files[f"file_sd/{job}.json"])
        for target in group["targets"]
    }
    wanted.add(("prometheus", f"{monitor.address}:9090"))
    deadline = time.monotonic() + 120  # a target is scraped within a scrape interval
    while True:
        targets = monitor.targets()
        seen = {(t["labels"]["job"], t["labels"]["instance"]): t["health"] for t in targets}
        if set(seen) == wanted and set(seen.values()) == {"up"}:
            break
        if time.monotonic() > deadline:
            down = {k: v for k, v in seen.items() if v != "up"}
            pytest.fail(
                f"targets: missing {wanted - set(seen)}, extra {set(seen) - wanted}, not up {down}"
            )
        time.sleep(5)
    print(f"\n{len(seen)} targets up: " + ", ".join(sorted(i for _, i in seen)))
    # the plan's labels reach the series: each node's group, and its rack
    ups = monitor.query('up{job="node"}')
    hosts = monitor.expanded["hosts"]
    assert {s["metric"]["node"] for s in ups} == set(hosts)
    for series in ups:
        host = hosts[series["metric"]["node"]]
        assert series["metric"]["node_group"] == host["node_group"], series
        assert series["metric"].get("rack") == host["rack"], series


def test_nothing_fires_that_the_lab_cannot_explain(monitor: Monitor) -> None:
    firing = monitor.firing()
    unexplained = [a for a in firing if a["labels"]["alertname"] not in EXPLAINED]
    assert unexplained == [], json.dumps(unexplained, indent=1)[:4000]
    # GpuNvmlDown fires exactly on the GPU nodes, the ones the plan gives NVIDIA GPUs
    gpu_nodes = {
        name
        for name, host in monitor.expanded["hosts"].items()
        if host["accelerators"] and host["accelerators"]["kind"] == "gpu"
    }
    nvml = {a["labels"]["node"] for a in firing if a["labels"]["alertname"] == "GpuNvmlDown"}
    # pending for its first 5 minutes after a fresh converge; once firing, only there
    assert nvml <= gpu_nodes, nvml
    # what Alertmanager holds reached it from this Prometheus, routed by the plan
    for alert in monitor.routed():
        assert alert["receivers"], alert


def test_the_last_acceptance_run_reaches_the_state_collector(monitor: Monitor) -> None:
    """site.yml's acceptance stage ran (and passed) on this lab; its history, delivered to the
    first controller after the run, is what the state collector reports."""
    passed = wait_until(
        lambda: monitor.query("cluster_plan_acceptance_passed"), lambda r: bool(r), 120
    )
    assert [float(s["value"][1]) for s in passed] == [1.0], passed
    (age,) = monitor.query("time() - cluster_plan_acceptance_last_run_timestamp_seconds")
    assert 0 < float(age["value"][1]) < 86400, age  # this session's run, not an old one
    collectors = monitor.query('cluster_plan_collector_success{collector="state"}')
    assert [float(s["value"][1]) for s in collectors] == [1.0], collectors


def test_the_dashboards_queries_answer_from_the_live_prometheus(monitor: Monitor) -> None:
    files = rendered(monitor.expanded)
    gpu_node = next(
        name for name, host in monitor.expanded["hosts"].items() if host["accelerators"]
    )
    exprs = {
        expr.replace(NODE_VARIABLE, gpu_node)
        for path, text in files.items()
        if path.startswith("dashboards/")
        for _title, expr in panel_exprs(json.loads(text))
    }
    asked = monitor.answered(sorted(exprs))
    assert set(asked) == exprs
    empty = [e for e, answered in asked.items() if not answered]
    # a series per pending job's partition and account: none while no job is pending
    controller = monitor.expanded["groups"]["slurm_controller"][0]
    pending = on_node(controller, "squeue -h -t PENDING | wc -l").stdout.strip()
    idle = pending == "0"
    unexplained = [
        e
        for e in empty
        if not ABSENT_IN_LAB.search(e) and not (idle and "cluster_plan_slurm_jobs_pending" in e)
    ]
    print(
        f"\n{len(asked)} distinct panel queries, {len(asked) - len(empty)} answered; "
        f"{len(empty)} read only what the lab cannot have (NVML readings, backup and drift "
        f"documents{', pending jobs' if idle else ''})"
    )
    assert unexplained == [], "\n".join(unexplained)
    # and those that read only what the lab has must answer: not a vacuous pass
    assert len(asked) - len(empty) > len(asked) // 2


# ---- five faults at once --------------------------------------------------------------------

SINK_UNIT = "cluster-plan-test-webhook"
SINK_LOG = "/run/cluster-plan-test-webhook.jsonl"
# Alertmanager's webhook receivers (the lab plan's ops and research, on the monitoring server,
# port 9099): each POST is appended to SINK_LOG as one line, with the path it came to.
SINK = """
import http.server, json, sys
class Sink(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get('Content-Length', 0)))
        with open(sys.argv[2], 'a') as log:
            log.write(json.dumps({'path': self.path, 'body': json.loads(body)}) + '\\n')
        self.send_response(200)
        self.end_headers()
    def log_message(self, *args):
        pass
http.server.HTTPServer((sys.argv[1], 9099), Sink).serve_forever()
"""
FIRE_BOUND_S = 300  # a minute's `for`, a scrape, an evaluation, a collector run: well within
RESOLVE_BOUND_S = 300


@pytest.fixture(scope="module")
def webhook(monitor: Monitor) -> str:
    """The receivers' endpoint, up for the rest of the lab's life (lab down removes it with
    the node): stopping it between tests would lose the resolved notices Alertmanager sends
    later, and Alertmanager would not send those again."""
    active = on_node(monitor.server, f"systemctl is-active {SINK_UNIT}").stdout.strip()
    if active != "active":
        started = on_node(
            monitor.server,
            f"systemd-run --unit={SINK_UNIT} python3 -c {shlex.quote(SINK)} "
            f"{monitor.address} {SINK_LOG}",
        )
        assert started.returncode == 0, started.stderr
    return SINK_LOG


def alert_key(alert: dict[str, Any]) -> tuple[str, str]:
    labels = alert["labels"]
    return labels["alertname"], labels.get("node") or labels.get("hostname", "")


class Faults:
    """The five faults, each undone by `repair` (and by the test's finally, whatever failed)."""

    def __init__(self, monitor: Monitor) -> None:
        groups = monitor.expanded["groups"]
        hosts = monitor.expanded["hosts"]
        compute = groups["slurm_compute"]
        gpu = [h for h in compute if (hosts[h]["accelerators"] or {}).get("kind") == "gpu"]
        # a CPU node is cut off (nothing else needs it meanwhile), one GPU node drained, the
        # other's fast port lowered, chrony stopped on a compute node none of these touch
        self.cut = next(h for h in compute if not hosts[h]["accelerators"])
        self.drained, self.mtu_node = gpu[-1], gpu[0]
        self.chrony_node = next(h for h in compute if h not in (self.cut, *gpu))
        self.osd_node = groups["ceph_osd"][-1]
        device, mtu = next(
            (i["device"], i["mtu"])
            for i in hosts[self.mtu_node]["interfaces"].values()
            if i["vlan"] is None and i["mtu"] > 1500
        )
        self.device, self.mtu = device, mtu
        self.server = monitor.server
        self.outage: subprocess.Popen[str] | None = None
        self.osd = ""
        self.repaired = False

    def expected(self) -> set[tuple[str, str]]:
        return {
            ("NodeDown", self.cut),
            ("CephOsdDown", self.osd_node),
            ("SlurmNodeDrained", self.drained),
            ("ClockServiceStopped", self.chrony_node),
            ("NicWrongMtu", self.mtu_node),
        }

    def apply(self) -> None:
        osd = on_node(self.osd_node, "ls /var/lib/ceph/osd | sed -n 's/^ceph-//p' | head -1")
        self.osd = osd.stdout.strip()
        assert self.osd.isdigit(), osd.stdout + osd.stderr
        self.outage = subprocess.Popen(
            [
                str(BIN / "cluster-plan"),
                "lab",
                "fault",
                str(PLAN),
                self.cut,
                "--down",
                "--duration",
                "900",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        assert self.outage.stdout is not None
        assert "link down" in self.outage.stdout.readline()
        for host, script in (
            # the cut node drained too: its Slurm alert must be inhibited by its NodeDown
            (
                self.server,
                f"scontrol update nodename={self.cut},{self.drained} state=drain "
                "reason=monitoring-proof",
            ),
            (self.osd_node, f"systemctl stop ceph-osd@{self.osd}"),
            (self.chrony_node, "systemctl stop chrony"),
            (self.mtu_node, f"ip link set dev {self.device} mtu {self.mtu - 1000}"),
        ):
            done = on_node(host, script)
            assert done.returncode == 0, f"{host}: {script}: {done.stderr}"

    def repair(self) -> list[str]:
        """Undo every fault, once; what could not be undone, for the failure message."""
        if self.repaired:
            return []
        self.repaired = True
        problems = []
        if self.outage is not None:
            cleared = cli("lab", "fault", str(PLAN), self.cut, "--clear")
            if cleared.returncode != 0:
                problems.append(f"lab fault --clear {self.cut}: {cleared.stderr}")
            self.outage.terminate()
            self.outage.communicate(timeout=60)  # reaps it and closes its pipe
            self.outage = None
        for host, script in (
            (self.server, f"scontrol update nodename={self.cut},{self.drained} state=resume"),
            # a unit stopped by hand may have hit its start limit meanwhile
            (
                self.osd_node,
                f"systemctl reset-failed ceph-osd@{self.osd}; systemctl start ceph-osd@{self.osd}"
                if self.osd
                else "true",
            ),
            (self.chrony_node, "systemctl start chrony"),
            (self.mtu_node, f"ip link set dev {self.device} mtu {self.mtu}"),
        ):
            done = on_node(host, script)
            if done.returncode != 0:
                problems.append(f"{host}: {script}: {done.stderr.strip()}")
        return problems


def test_every_node_reports_its_clock_and_the_reference_none_standing(monitor: Monitor) -> None:
    """The clock collector runs on every node; head01, the plan's time reference, tracks its
    upstream or serves its own clock, and neither is an alert (not even a pending one)."""
    (reference,) = monitor.expanded["groups"]["ntp_server"]
    assert monitor.expanded["cluster"]["time_reference"]
    hosts = set(monitor.expanded["hosts"])
    reported = wait_until(
        lambda: {s["metric"]["node"] for s in monitor.query("cluster_plan_clock_synchronised")},
        lambda got: got == hosts,
        120,
    )
    assert reported == hosts
    (state,) = monitor.query(
        f'cluster_plan_clock_synchronised{{node="{reference}"}}'
        f' + cluster_plan_clock_local_reference{{node="{reference}"}}'
    )
    assert float(state["value"][1]) == 1, state  # one of the two, never neither
    alerts = monitor.get(9090, "/api/v1/alerts")["data"]["alerts"]
    assert not [a for a in alerts if a["labels"]["alertname"] == "ClockUnsynchronised"], alerts


class ClockFaults:
    """The reference loses its upstream and a client loses the reference: each host's NTP
    traffic to them dropped by a table of the test's own in the node's network namespace, and
    chronyd restarted so that it starts without what it had (a source lost while running is
    given up after eight missed polls, minutes at chrony's intervals)."""

    TABLE = "cluster_plan_clock_proof"

    def __init__(self, expanded: dict[str, Any]) -> None:
        (self.reference,) = expanded["groups"]["ntp_server"]
        hosts = expanded["hosts"]
        mgmt = expanded["cluster"]["management_network"]
        self.upstream = expanded["networks"][mgmt]["ntp"]
        self.client = next(h for h in expanded["groups"]["slurm_compute"] if h != self.reference)
        self.cut = {self.reference: self.upstream, self.client: [hosts[self.reference]["address"]]}

    def apply(self) -> None:
        for host, addresses in self.cut.items():
            rules = "; ".join(
                f"nft add rule inet {self.TABLE} out ip daddr {a} udp dport 123 drop"
                for a in addresses
            )
            script = (
                f"nft add table inet {self.TABLE}; nft add chain inet {self.TABLE} out "
                f"'{{ type filter hook output priority 0; }}'; {rules}; systemctl restart chrony"
            )
            done = on_node(host, script)
            assert done.returncode == 0, f"{host}: {done.stderr}"

    def repair(self) -> list[str]:
        problems = []
        for host in self.cut:
            done = on_node(
                host, f"nft delete table inet {self.TABLE} 2>/dev/null; systemctl restart chrony"
            )
            if done.returncode != 0:
                problems.append(f"{host}: {done.stderr.strip()}")
        return problems


@pytest.mark.lab_changes
def test_the_reference_serves_its_own_clock_and_a_client_without_it_alerts(
    monitor: Monitor,
) -> None:
    faults = ClockFaults(monitor.expanded)
    reference, client = faults.reference, faults.client

    def clock_alerts() -> dict[str, str]:
        alerts = monitor.get(9090, "/api/v1/alerts")["data"]["alerts"]
        return {
            a["labels"]["node"]: a["state"]
            for a in alerts
            if a["labels"]["alertname"] == "ClockUnsynchronised"
        }

    try:
        started = time.monotonic()
        faults.apply()
        alerts = wait_until(clock_alerts, lambda got: got.get(client) == "firing", FIRE_BOUND_S)
        fired = time.monotonic() - started
        assert alerts.get(client) == "firing", f"{client}: not firing in {FIRE_BOUND_S} s"
        # the reference lost its upstream at the same moment: it serves its own clock, and that
        # is no alert, pending or firing
        (local,) = monitor.query(f'cluster_plan_clock_local_reference{{node="{reference}"}}')
        assert float(local["value"][1]) == 1, local
        assert reference not in alerts, alerts
        repaired = time.monotonic()
        assert faults.repair() == []
        left = wait_until(clock_alerts, lambda got: client not in got, RESOLVE_BOUND_S)
        assert client not in left, f"{client}: still {left} {RESOLVE_BOUND_S} s after the repair"
        print(
            f"\n{client} without its server: ClockUnsynchronised in {fired:.1f} s, resolved "
            f"{time.monotonic() - repaired:.1f} s after the repair; {reference} served its "
            "own clock meanwhile, no alert"
        )
    finally:
        assert faults.repair() == []


@pytest.mark.lab_changes
def test_five_faults_fire_their_alerts_route_and_inhibit_then_resolve(
    monitor: Monitor, webhook: str
) -> None:
    faults = Faults(monitor)
    expected = faults.expected()
    sent_before = int(on_node(monitor.server, f"cat {webhook} 2>/dev/null | wc -l").stdout or 0)
    fired: dict[tuple[str, str], float] = {}
    resolved: dict[tuple[str, str], float] = {}
    try:
        started = time.monotonic()
        faults.apply()

        def firing_now() -> set[tuple[str, str]]:
            now = {alert_key(a) for a in monitor.firing()} & expected
            for key in now - set(fired):
                fired[key] = time.monotonic() - started
            return set(fired)

        wait_until(firing_now, lambda got: got == expected, FIRE_BOUND_S)
        assert set(fired) == expected, (
            f"did not fire within {FIRE_BOUND_S} s: {expected - set(fired)}"
        )

        # Alertmanager: the cut node's drained alert is inhibited by its NodeDown, the other
        # node's is not; each goes to the plan's receivers
        def drained_in_am() -> dict[str, dict[str, Any]]:
            return {
                a["labels"]["node"]: a
                for a in monitor.routed()
                if a["labels"]["alertname"] == "SlurmNodeDrained"
            }

        drained = wait_until(drained_in_am, lambda d: faults.cut in d, 120)
        assert drained[faults.cut]["status"]["state"] == "suppressed", drained[faults.cut]
        assert drained[faults.cut]["status"]["inhibitedBy"], drained[faults.cut]
        other = drained[faults.drained]
        assert other["status"]["state"] == "active", other
        # the lab plan's routes: a team's alert to its receiver (research), else the default
        # (ops); only critical ones page ops as well
        teams = other["labels"].get("teams", "")
        receivers = {r["name"] for r in other["receivers"]}
        assert receivers == ({"research"} if ",research," in teams else {"ops"}), other

        # the page reached the critical receiver's webhook
        def paged() -> list[dict[str, Any]]:
            lines = on_node(monitor.server, f"tail -n +{sent_before + 1} {webhook}").stdout
            return [json.loads(line) for line in lines.splitlines() if line.strip()]

        pages = wait_until(
            paged,
            lambda sent: any(
                s["path"] == "/ops"
                and a["labels"]["alertname"] == "NodeDown"
                and a["labels"]["node"] == faults.cut
                and a["status"] == "firing"
                for s in sent
                for a in s["body"]["alerts"]
            ),
            120,
        )
        assert any(
            a["labels"]["alertname"] == "NodeDown" and a["labels"]["node"] == faults.cut
            for s in pages
            if s["path"] == "/ops"
            for a in s["body"]["alerts"]
        ), pages

        repaired = time.monotonic()
        problems = faults.repair()
        assert problems == [], problems

        def still_firing() -> set[tuple[str, str]]:
            now = {alert_key(a) for a in monitor.firing()} & expected
            for key in expected - now - set(resolved):
                resolved[key] = time.monotonic() - repaired
            return now

        left = wait_until(still_firing, lambda now: not now, RESOLVE_BOUND_S)
        assert left == set(), f"still firing {RESOLVE_BOUND_S} s after the repair: {left}"
    finally:
        problems = faults.repair()
        print("\nalert: fault -> firing, repair -> resolved")
        for key in sorted(expected):
            print(
                f"  {key[0]:<20} {key[1]:<8} {fired.get(key, float('nan')):6.1f} s "
                f"{resolved.get(key, float('nan')):6.1f} s"
            )
        assert problems == [], problems
