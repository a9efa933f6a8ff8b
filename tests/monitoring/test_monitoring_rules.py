"""Every alert rule rendered from a plan, under `promtool test rules`: it fires with the
labels and summary it must when its fault is there, and stays quiet when it is not (or not
for long enough). One promtool run per plan holds every case; the plans' facts (node names,
GPU counts, MTUs, thresholds) are written here by hand from the plan files, not read back
from the renderer, so a rule that lost its plan threshold fails."""

from __future__ import annotations

import math
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from monitoring_tools import need

from cluster_plan.api import load_expanded
from cluster_plan.monitoring.render import render, write
from cluster_plan.monitoring.runbooks import RUNBOOK_PAGE
from cluster_plan.reference_docs import anchors

ROOT = Path(__file__).resolve().parents[2]
PROMTOOL = shutil.which("promtool")
METRICS_ANCHORS = anchors((ROOT / "docs" / "METRICS.md").read_text())


@dataclass(frozen=True)
class Facts:
    """What the plan file says, as a person reads it."""

    plan: str
    cluster: str
    gpu_node: str  # a node of the GPU group, its address and labels
    gpu_address: str
    gpu_rack: str
    gpu_teams: str | None
    gpus: int
    model: str
    head: str
    head_address: str
    head_rack: str
    fast_device: str  # a jumbo-frame network's device on the GPU nodes
    fast_mtu: int
    gbps: int
    slow: str  # a tenth of the line rate, as Prometheus' humanize prints it
    max_temp_c: int
    backup_hours: int  # the schedule's gap (daily) plus two hours
    ceph: bool
    node_down_minutes: float  # monitoring.alert_after_minutes (the lab plan's are 0.25)
    node_down_for: str  # how its `for` reads: 15s, 2m
    clock_minutes: float
    drained_minutes: float
    time_reference: bool  # cluster.time_reference: the head (ntp_server) is the site's reference


LAB = Facts(
    plan="inventory/lab/cluster.yml",
    cluster="lab",
    gpu_node="gpu02",
    gpu_address="10.40.0.12",
    gpu_rack="r2",
    gpu_teams=",research,vision,nlp,",
    gpus=2,
    model="H100-PCIE-80GB",
    head="head01",
    head_address="10.40.0.10",
    head_rack="r1",
    fast_device="compute",
    fast_mtu=9000,
    gbps=10,
    slow="125MB/s",
    max_temp_c=85,
    backup_hours=26,
    ceph=True,
    node_down_minutes=0.25,
    node_down_for="15s",
    clock_minutes=0.25,
    drained_minutes=0.25,
    time_reference=True,
)
H100 = Facts(
    plan="inventory/examples/slurm-h100.yml",
    cluster="h100",
    gpu_node="gpu03",
    gpu_address="172.20.0.22",
    gpu_rack="a01",
    gpu_teams=",llm,eval,",
    gpus=8,
    model="H100-SXM5-80GB",
    head="head01",
    head_address="172.20.0.21",
    head_rack="a01",
    fast_device="storage",
    fast_mtu=9000,
    gbps=100,
    slow="1.25GB/s",
    max_temp_c=83,
    backup_hours=26,
    ceph=False,
    node_down_minutes=2,
    node_down_for="2m",
    clock_minutes=10,
    drained_minutes=10,
    time_reference=False,
)


def briefly(value: int, usual: int, at: int, wait: float) -> str:
    """A series (a sample a minute) that holds `usual` and has held `value` for the last
    ceil(`wait`) samples up to minute `at`: pending for one minute less than that, short of
    the rule's `for` of `wait` minutes (a `for` under a minute: pending at one evaluation,
    and the next sees the usual value), so the alert must stay quiet."""
    samples = math.ceil(wait)  # the schema holds every wait above 0
    return f"{usual}x{at - samples} " + " ".join([str(value)] * samples)


def selector(labels: dict[str, str]) -> str:
    return ",".join(f'{k}="{v}"' for k, v in labels.items())


class Cases:
    """Two promtool test groups: every firing case in one, every quiet case in the other (a
    group per case would cost a fresh TSDB each). Each case's series carry their own `case`
    label, so that cases of one group never share a series; the cases are chosen so that one
    case's series set off no other alert of its group at its evaluation time."""

    def __init__(self, facts: Facts, runbooks: dict[str, dict[str, str]]) -> None:
        self.f = facts
        # the rendered description and runbook_url (their presence is tested below)
        self.runbooks = runbooks
        self.series: dict[bool, list[dict[str, str]]] = {True: [], False: []}
        self.checks: dict[bool, list[dict[str, Any]]] = {True: [], False: []}
        self.fired: set[str] = set()
        self.quiet: set[str] = set()
        self.count = 0

    def gpu_target(self) -> dict[str, str]:
        f = self.f
        labels = {
            "job": "node",
            "instance": f"{f.gpu_address}:9100",
            "node": f.gpu_node,
            "node_group": "gpu",
            "rack": f.gpu_rack,
            "pool": "gpu",
        }
        if f.gpu_teams:
            labels["teams"] = f.gpu_teams
        return labels

    def head_target(self) -> dict[str, str]:
        f = self.f
        return {
            "job": "node",
            "instance": f"{f.head_address}:9100",
            "node": f.head,
            "node_group": "head",
            "rack": f.head_rack,
        }

    def fires(
        self,
        alert: str,
        series: list[tuple[str, dict[str, str], str]],
        at: str,
        labels: dict[str, str],
        summary: str,
    ) -> None:
        case = self._add(True, series)
        expected = {
            "exp_labels": {**labels, "case": case},
            # the runbook is only checked to be there (test_every_rule_has_...)
            "exp_annotations": {"summary": summary, **self.runbooks[alert]},
        }
        self.checks[True].append({"eval_time": at, "alertname": alert, "exp_alerts": [expected]})
        self.fired.add(alert)

    def quiet_when(
        self, alert: str, series: list[tuple[str, dict[str, str], str]], at: str
    ) -> None:
        self._add(False, series)
        self.checks[False].append({"eval_time": at, "alertname": alert, "exp_alerts": []})
        self.quiet.add(alert)

    def _add(self, firing: bool, series: list[tuple[str, dict[str, str], str]]) -> str:
        self.count += 1
        case = f"c{self.count}"
        self.series[firing] += [
            {"series": f"{name}{{{selector({**labels, 'case': case})}}}", "values": values}
            for name, labels, values in series
        ]
        return case

    def groups(self) -> list[dict[str, Any]]:
        return [
            {
                "name": f"{self.f.cluster}: every rule {'fires' if firing else 'stays quiet'}",
                "interval": "1m",
                "input_series": self.series[firing],
                "alert_rule_test": self.checks[firing],
            }
            for firing in (True, False)
        ]


def clock(
    target: dict[str, str], synchronised: str, local: str
) -> list[tuple[str, dict[str, str], str]]:
    """The clock collector's two series for a host: chronyd tracks a real source; chronyd
    serves its own clock (chrony's local directive)."""
    return [
        ("cluster_plan_clock_synchronised", target, synchronised),
        ("cluster_plan_clock_local_reference", target, local),
    ]


def node_cases(c: Cases) -> None:
    f, gpu = c.f, c.gpu_target()
    c.fires(
        "NodeDown",
        [("up", gpu, "1 0x10")],
        "10m",
        {**gpu, "severity": "critical"},
        f"{f.gpu_node} is down: its node_exporter has not answered for {f.node_down_for}",
    )
    c.quiet_when("NodeDown", [("up", gpu, briefly(0, 1, 10, f.node_down_minutes))], "10m")
    c.quiet_when("NodeDown", [("up", gpu, "1x10")], "10m")
    c.fires(  # a client that lost its server (more cases: test_the_clock_rule_...)
        "ClockUnsynchronised",
        clock(gpu, synchronised="1x4 0x11", local="0x15"),
        "15m",
        {**gpu, "severity": "warning"},
        f"{f.gpu_node}'s clock is not synchronised",
    )
    c.quiet_when("ClockUnsynchronised", clock(c.head_target(), "1x15", "0x15"), "15m")
    chrony = {**c.head_target(), "name": "chrony.service", "state": "active"}
    c.fires(
        "ClockServiceStopped",
        [("node_systemd_unit_state", chrony, "0x15")],
        "15m",
        {**chrony, "severity": "warning"},
        f"chrony is not running on {f.head}: its clock drifts unchecked",
    )
    c.quiet_when("ClockServiceStopped", [("node_systemd_unit_state", chrony, "1x15")], "15m")
    c.quiet_when(  # a restart, stopped for less than the plan's wait
        "ClockServiceStopped",
        [("node_systemd_unit_state", chrony, briefly(0, 1, 15, f.clock_minutes))],
        "15m",
    )
    port = {**gpu, "device": f.fast_device}
    c.fires(
        "NicBelowPlanSpeed",
        [("node_network_speed_bytes", port, f"{f.gbps * 1e9 / 8 / 10:.0f}x10")],
        "10m",
        {**port, "severity": "warning", "planned_gbps": str(f.gbps)},
        f"{f.fast_device} of {f.gpu_node} runs at {f.slow}, below the plan's {f.gbps} Gb/s",
    )
    line_rate = f"{f.gbps * 1e9 / 8:.0f}x10"
    c.quiet_when("NicBelowPlanSpeed", [("node_network_speed_bytes", port, line_rate)], "10m")
    c.fires(
        "NicWrongMtu",
        [("node_network_mtu_bytes", port, "1500x10")],
        "10m",
        {**port, "severity": "warning", "planned_mtu": str(f.fast_mtu)},
        f"{f.fast_device} of {f.gpu_node} has MTU 1500, the plan says {f.fast_mtu}",
    )
    mgmt = {**gpu, "device": "mgmt"}
    c.quiet_when(
        "NicWrongMtu",
        [
            ("node_network_mtu_bytes", port, f"{f.fast_mtu}x10"),
            ("node_network_mtu_bytes", mgmt, "1500x10"),
        ],
        "10m",
    )


def gpu_cases(c: Cases) -> None:
    f, gpu = c.f, c.gpu_target()
    c.fires(
        "GpuMissing",
        [("cluster_plan_gpu_present", gpu, f"{f.gpus}x3 {f.gpus - 1}x10")],
        "10m",
        {**gpu, "severity": "critical", "planned_gpus": str(f.gpus)},
        f"{f.gpu_node} sees {f.gpus - 1} of its {f.gpus} {f.model} GPUs",
    )
    c.quiet_when("GpuMissing", [("cluster_plan_gpu_present", gpu, f"{f.gpus}x10")], "10m")
    c.fires(
        "GpuNvmlDown",
        [("cluster_plan_gpu_nvml_up", gpu, "0x10")],
        "10m",
        {**gpu, "severity": "critical"},
        f"NVML does not answer on {f.gpu_node}: its GPUs cannot be seen",
    )
    # the head node has no GPUs in the plan: NVML missing there is no alert
    c.quiet_when("GpuNvmlDown", [("cluster_plan_gpu_nvml_up", c.head_target(), "0x10")], "10m")
    board = {**gpu, "gpu": "3", "uuid": "GPU-0003"}
    hot = {**board, "reason": "hw_thermal"}
    c.fires(
        "GpuThrottled",
        [("cluster_plan_gpu_throttle", hot, "1x10")],
        "10m",
        {**hot, "severity": "warning"},
        f"GPU 3 of {f.gpu_node} is throttled (hw_thermal) for 5m",
    )
    capped = {**board, "reason": "sw_power_cap"}
    c.quiet_when(
        "GpuThrottled",
        [
            ("cluster_plan_gpu_throttle", capped, "1x10"),
            ("cluster_plan_gpu_throttle", hot, "0x6 1x4"),
        ],
        "10m",
    )
    c.fires(
        "GpuTooHot",
        [("cluster_plan_gpu_temperature_celsius", board, f"{f.max_temp_c + 5}x10")],
        "10m",
        {**board, "severity": "warning"},
        f"GPU 3 of {f.gpu_node} is at {f.max_temp_c + 5} °C, above the plan's {f.max_temp_c} °C",
    )
    c.quiet_when(
        "GpuTooHot", [("cluster_plan_gpu_temperature_celsius", board, f"{f.max_temp_c}x10")], "10m"
    )
    fallen = {**board, "xid": "79"}
    c.fires(
        "GpuCriticalXid",
        [("cluster_plan_gpu_xid_events_total", fallen, "_x5 1x10")],
        "10m",
        {**fallen, "severity": "critical"},
        f"GPU 3 of {f.gpu_node} reported XID 79",
    )
    app_error = {**board, "xid": "13"}  # a program's own fault: not in fail_on_xids
    # evaluated at 130m like the next case, whose series is new (and so fires) before 60m
    c.quiet_when(
        "GpuCriticalXid", [("cluster_plan_gpu_xid_events_total", app_error, "_x5 1x150")], "130m"
    )
    # an hour after the event, with no new one, it no longer fires
    c.quiet_when("GpuCriticalXid", [("cluster_plan_gpu_xid_events_total", fallen, "1x150")], "130m")
    ecc = {**board, "scope": "volatile", "kind": "uncorrected"}
    c.fires(
        "GpuEccUncorrectable",
        [("cluster_plan_gpu_ecc_errors_total", ecc, "0 2x5")],
        "5m",
        {**ecc, "severity": "critical"},
        f"GPU 3 of {f.gpu_node} has 2 uncorrectable ECC errors since its driver loaded",
    )
    aggregate = {**ecc, "scope": "aggregate"}
    c.quiet_when(
        "GpuEccUncorrectable",
        [
            ("cluster_plan_gpu_ecc_errors_total", ecc, "0x5"),
            ("cluster_plan_gpu_ecc_errors_total", aggregate, "7x5"),
        ],
        "5m",
    )
    failure = {**board, "kind": "failure"}
    c.fires(
        "GpuRowRemapFailure",
        [("cluster_plan_gpu_remapped_rows", failure, "1x5")],
        "5m",
        {**failure, "severity": "critical"},
        f"GPU 3 of {f.gpu_node} failed to remap a memory row",
    )
    c.quiet_when("GpuRowRemapFailure", [("cluster_plan_gpu_remapped_rows", failure, "0x5")], "5m")
    pending = {**board, "kind": "pending"}
    c.fires(
        "GpuRowRemapPending",
        [("cluster_plan_gpu_remapped_rows", pending, "1x5")],
        "5m",
        {**pending, "severity": "warning"},
        f"GPU 3 of {f.gpu_node} has 1 row remaps pending",
    )
    c.quiet_when(
        "GpuRowRemapPending",
        [
            ("cluster_plan_gpu_remapped_rows", pending, "0x5"),
            ("cluster_plan_gpu_remapped_rows", {**board, "kind": "correctable"}, "4x5"),
        ],
        "5m",
    )


def ceph_cases(c: Cases) -> None:
    f = c.f
    mgr = {"job": "ceph", "instance": f"{f.head_address}:9283"}
    c.fires(
        "CephHealthWarning",
        [("ceph_health_status", mgr, "1x10")],
        "10m",
        {**mgr, "severity": "warning"},
        f"Ceph of cluster {f.cluster} reports HEALTH_WARN",
    )
    c.quiet_when("CephHealthWarning", [("ceph_health_status", mgr, "0x10")], "10m")
    c.fires(
        "CephHealthError",
        [("ceph_health_status", mgr, "2x10")],
        "10m",
        {**mgr, "severity": "critical"},
        f"Ceph of cluster {f.cluster} reports HEALTH_ERR",
    )
    # HEALTH_ERR for less than its minute (and no HEALTH_WARN, which has a quiet case here)
    c.quiet_when("CephHealthError", [("ceph_health_status", mgr, "0x9 2")], "10m")
    osd = {**mgr, "ceph_daemon": "osd.2"}
    meta = {**osd, "hostname": "stor03"}
    c.fires(
        "CephOsdDown",
        [("ceph_osd_up", osd, "0x10"), ("ceph_osd_metadata", meta, "1x10")],
        "10m",
        {**meta, "node": "stor03", "severity": "critical"},
        "osd.2 on stor03 is down",
    )
    c.quiet_when(
        "CephOsdDown", [("ceph_osd_up", osd, "1x10"), ("ceph_osd_metadata", meta, "1x10")], "10m"
    )
    pool = {**mgr, "pool_id": "1"}
    named = {**pool, "name": "datasets"}
    c.fires(
        "CephPoolNearlyFull",
        [
            ("ceph_pool_stored", pool, "900x10"),
            ("ceph_pool_max_avail", pool, "100x10"),
            ("ceph_pool_metadata", named, "1x10"),
        ],
        "10m",
        {**named, "severity": "warning"},
        "Ceph pool datasets is 90 % full (the plan alerts at 85 %)",
    )
    c.quiet_when(
        "CephPoolNearlyFull",
        [
            ("ceph_pool_stored", pool, "800x10"),
            ("ceph_pool_max_avail", pool, "200x10"),
            ("ceph_pool_metadata", named, "1x10"),
        ],
        "10m",
    )


def slurm_cases(c: Cases) -> None:
    f, head, gpu = c.f, c.head_target(), c.gpu_target()
    # the Slurm collector runs on the controller: its series carry the controller's target
    # labels, and the alert takes the GPU node's own group, rack, pool and teams instead
    state = {**head, "node": f.gpu_node, "partition": "training"}
    own = {k: v for k, v in gpu.items() if k not in ("job", "instance")}
    c.fires(
        "SlurmNodeDown",
        [
            ("cluster_plan_slurm_node_state", {**state, "state": "down"}, "1x10"),
            ("up", gpu, "1x10"),
        ],
        "10m",
        {**own, "partition": "training", "state": "down", "severity": "critical"},
        f"Slurm node {f.gpu_node} is down in partition training",
    )
    c.quiet_when(
        "SlurmNodeDown",
        [
            ("cluster_plan_slurm_node_state", {**state, "state": "down"}, "0x10"),
            ("cluster_plan_slurm_node_state", {**state, "state": "idle"}, "1x10"),
            ("up", gpu, "1x10"),
        ],
        "10m",
    )
    c.fires(
        "SlurmNodeDrained",
        [
            ("cluster_plan_slurm_node_state", {**state, "state": "drained"}, "1x15"),
            ("up", gpu, "1x15"),
        ],
        "15m",
        {**own, "partition": "training", "state": "drained", "severity": "warning"},
        f"Slurm node {f.gpu_node} is drained in partition training",
    )
    c.quiet_when(  # drained for less than the plan's wait: someone at work on it
        "SlurmNodeDrained",
        [
            (
                "cluster_plan_slurm_node_state",
                {**state, "state": "drained"},
                briefly(1, 0, 15, f.drained_minutes),
            ),
            ("up", gpu, "1x15"),
        ],
        "15m",
    )


def state_cases(c: Cases) -> None:
    f, head = c.f, c.head_target()
    backed_up = {**head, "node": f.gpu_node}
    hours = f.backup_hours
    # promtool's clock starts at 0 (1970): a run T seconds before the eval time at 10m is a
    # timestamp of 600 - T, negative here; the age is what the rules read
    c.fires(
        "BackupTooOld",
        [
            (
                "cluster_plan_backup_last_success_timestamp_seconds",
                backed_up,
                f"{600 - (hours + 4) * 3600}x10",
            )
        ],
        "10m",
        {**backed_up, "severity": "warning"},
        f"The last backup of {f.gpu_node} is 1d {hours + 4 - 24}h 0m 0s old; the plan's "
        f"schedule ({'*-*-* 02:00:00' if f.cluster == 'lab' else '*-*-* 03:00:00'}) allows "
        f"{hours} h",
    )
    c.quiet_when(
        "BackupTooOld",
        [
            (
                "cluster_plan_backup_last_success_timestamp_seconds",
                backed_up,
                f"{600 - (hours - 1) * 3600}x10",
            )
        ],
        "10m",
    )
    c.fires(
        "BackupDrillFailed",
        [("cluster_plan_backup_drill_passed", backed_up, "0x5")],
        "5m",
        {**backed_up, "severity": "warning"},
        f"The last restore drill of {f.gpu_node}'s backup failed",
    )
    c.quiet_when(
        "BackupDrillFailed", [("cluster_plan_backup_drill_passed", backed_up, "1x5")], "5m"
    )
    c.fires(
        "AcceptanceStale",
        [("cluster_plan_acceptance_last_run_timestamp_seconds", head, f"{600 - 8 * 86400}x10")],
        "10m",
        {**head, "severity": "warning"},
        f"Acceptance of cluster {f.cluster} last ran 8d 0h 0m 0s ago, more than the plan's 7 days",
    )
    c.quiet_when(
        "AcceptanceStale",
        [("cluster_plan_acceptance_last_run_timestamp_seconds", head, f"{600 - 6 * 86400}x10")],
        "10m",
    )
    c.fires(
        "AcceptanceFailed",
        [("cluster_plan_acceptance_passed", head, "0x5")],
        "5m",
        {**head, "severity": "critical"},
        f"The last acceptance run of cluster {f.cluster} failed",
    )
    c.quiet_when("AcceptanceFailed", [("cluster_plan_acceptance_passed", head, "1x5")], "5m")
    collector = {**c.gpu_target(), "collector": "gpu"}
    c.fires(
        "CollectorFailing",
        [("cluster_plan_collector_success", collector, "0x20")],
        "20m",
        {**collector, "severity": "warning"},
        f"The gpu collector on {f.gpu_node} failed its last run",
    )
    c.quiet_when(  # one failed run, then clean again
        "CollectorFailing", [("cluster_plan_collector_success", collector, "1x10 0 1x9")], "20m"
    )


def build_cases(facts: Facts, runbooks: dict[str, dict[str, str]]) -> Cases:
    cases = Cases(facts, runbooks)
    node_cases(cases)
    gpu_cases(cases)
    if facts.ceph:
        ceph_cases(cases)
    slurm_cases(cases)
    state_cases(cases)
    return cases


@pytest.fixture(scope="module", params=[LAB, H100], ids=lambda f: f.cluster)
def rendered(request, tmp_path_factory) -> tuple[Facts, Path]:
    facts: Facts = request.param
    directory = tmp_path_factory.mktemp(facts.cluster)
    write(render(load_expanded(ROOT / facts.plan)), directory)
    return facts, directory


def runbook_of(rule: dict[str, Any]) -> dict[str, str]:
    """The annotations of a rule beside its summary: what to do first, and the runbook's link."""
    notes = rule["annotations"]
    return {"description": notes["description"], "runbook_url": notes["runbook_url"]}


def rules_of(directory: Path) -> list[dict[str, Any]]:
    document = yaml.safe_load((directory / "rules" / "cluster-plan.rules.yml").read_text())
    return [rule for group in document["groups"] for rule in group["rules"]]


def promtool_test(
    promtool: str, test_file: Path, tests: list[dict[str, Any]], interval: str | None = None
) -> subprocess.CompletedProcess[str]:
    """`promtool test rules` of these test groups against the rendered rule file, the test
    file written beside the rendering's `rules/` (and `evaluation_interval` when given)."""
    document: dict[str, Any] = {"rule_files": ["rules/cluster-plan.rules.yml"]}
    if interval is not None:
        document["evaluation_interval"] = interval
    test_file.write_text(yaml.safe_dump({**document, "tests": tests}, sort_keys=False))
    return subprocess.run(
        [promtool, "test", "rules", test_file.name],
        cwd=test_file.parent, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def test_every_rule_fires_and_stays_quiet_under_promtool(rendered):
    promtool = need(PROMTOOL, "prometheus")
    facts, directory = rendered
    rules = rules_of(directory)
    runbooks = {r["alert"]: runbook_of(r) for r in rules}
    cases = build_cases(facts, runbooks)
    names = set(runbooks)
    assert names == cases.fired, f"rules without a firing case: {names - cases.fired}"
    assert names == cases.quiet, f"rules without a quiet case: {names - cases.quiet}"
    done = promtool_test(promtool, directory / "rules.test.yml", cases.groups(), "1m")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout + done.stderr


def test_the_clock_rule_judges_what_each_host_promises(rendered):
    """A site reference server (the lab plan's head01, cluster.time_reference) is healthy
    while it serves its own clock; an NTP server that is not one, and every client, alert when
    they track no real source, whatever they serve. One promtool group per case."""
    promtool = need(PROMTOOL, "prometheus")
    facts, directory = rendered
    (runbook,) = [runbook_of(r) for r in rules_of(directory) if r["alert"] == "ClockUnsynchronised"]
    c = Cases(facts, {})
    head, gpu = c.head_target(), c.gpu_target()
    cases = [  # (what, host's labels, synchronised, serves its own clock, fires)
        ("the NTP server serves its own clock", head, 0, 1, not facts.time_reference),
        ("the NTP server serves nothing", head, 0, 0, True),
        ("the NTP server tracks its upstream", head, 1, 0, False),
        ("a client lost its server", gpu, 0, 0, True),
        ("a client serves its own clock", gpu, 0, 1, True),
        ("a client tracks its server", gpu, 1, 0, False),
    ]
    groups = []
    for what, target, synchronised, local, fires in cases:
        series = clock(target, f"{synchronised}x15", f"{local}x15")
        annotations = {"summary": f"{target['node']}'s clock is not synchronised", **runbook}
        expected = [
            {"exp_labels": {**target, "severity": "warning"}, "exp_annotations": annotations}
        ]
        expected = expected if fires else []
        groups.append({
            "name": f"{facts.cluster}: {what}",
            "interval": "1m",
            "input_series": [
                {"series": f"{name}{{{selector(labels)}}}", "values": values}
                for name, labels, values in series
            ],
            "alert_rule_test": [
                {"eval_time": "15m", "alertname": "ClockUnsynchronised", "exp_alerts": expected}
            ],
        })  # fmt: skip
    done = promtool_test(promtool, directory / "clock.test.yml", groups)
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_rule_has_a_severity_a_summary_and_a_runbook(rendered):
    _, directory = rendered
    for rule in rules_of(directory):
        assert rule["labels"]["severity"] in ("warning", "critical"), rule["alert"]
        assert rule["annotations"]["summary"].strip(), rule["alert"]
        assert len(rule["annotations"]["description"]) > 20, rule["alert"]
        page, anchor = rule["annotations"]["runbook_url"].split("#")
        assert page == RUNBOOK_PAGE, rule["alert"]
        assert anchor in METRICS_ANCHORS, rule["alert"]  # the runbook's heading is there
