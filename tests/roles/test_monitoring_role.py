"""roles/monitoring rendered for lab hosts without a host: the plan's monitoring files as the
role copies them, node_exporter's and the server's flags, the collectors' units, the firewall
opening for node_exporter, and the collectors' zip."""

from __future__ import annotations

import shlex
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible.errors import AnsibleFilterError
from ansible.template import trust_as_template
from host_values import systemd_argument
from role_render import ROLES, host_variables, render, templar, value

from cluster_plan.api import load_expanded
from cluster_plan.monitoring.render import render as core_render
from cluster_plan.monitoring.role_view import monitoring_gpus, monitoring_rendering
from cluster_plan.node_bundle import bundle, write_bundle

ROLE = "monitoring"
RENDERING = trust_as_template(
    "{{ cluster_plan | cluster_plan.cluster.monitoring_rendering(dict(groups['all']"
    " | zip(groups['all'] | map('extract', hostvars, 'plan_host'))), groups) }}"
)


def _rendering(expanded: dict[str, Any]) -> dict[str, Any]:
    cluster = {k: v for k, v in expanded.items() if k not in ("hosts", "groups")}
    return monitoring_rendering(cluster, expanded["hosts"], {"all": [], **expanded["groups"]})


def _args(text: str) -> list[str]:
    """The flags of an /etc/default file's ARGS, as the unit's $ARGS splits them."""
    (line,) = [li for li in text.splitlines() if li.startswith("ARGS=")]
    (quoted,) = shlex.split(line.removeprefix("ARGS="))
    return quoted.split()


def _vars(extra: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"monitoring_rendering": RENDERING, **(extra or {})}


def test_the_role_copies_what_monitoring_render_writes(lab_expanded):
    rendering = _rendering(lab_expanded)
    assert rendering["problems"] == ""
    assert rendering["server"] == "head01"
    assert rendering["files"] == core_render(lab_expanded)
    assert rendering["retention_days"] == lab_expanded["monitoring"]["retention_days"]
    assert rendering["ceph"] is True
    # the Ceph job's port is the manager module's, which the role enables
    assert (
        f"{lab_expanded['hosts']['head01']['address']}:9283"
        in rendering["files"]["file_sd/ceph.json"]
    )


def test_prometheus_scrapes_itself_where_the_role_makes_it_listen(lab_expanded):
    text = _rendering(lab_expanded)["files"]["prometheus.yml"]
    assert f"{lab_expanded['hosts']['head01']['address']}:9090" in text
    assert "localhost:9090" not in text
    assert "localhost:9093" in text  # Alertmanager on loopback beside it


def test_a_plan_without_monitoring_gives_the_role_nothing(lab_expanded):
    lab_expanded["monitoring"] = None
    rendering = _rendering(lab_expanded)
    assert rendering["server"] is None
    assert rendering["files"] == {}
    lab_expanded["monitoring"] = {"scrape_interval_s": 30}
    lab_expanded["groups"]["monitoring_server"] = []
    assert _rendering(lab_expanded)["server"] is None


def test_node_exporter_listens_on_the_management_address_with_the_textfile_dir(lab_expanded):
    text = render(ROLE, "prometheus-node-exporter.default.j2", lab_expanded, "gpu01", _vars())
    address = lab_expanded["hosts"]["gpu01"]["address"]
    assert _args(text) == [
        f"--web.listen-address={address}:9100",
        "--collector.textfile.directory=/var/lib/prometheus/node-exporter",
        # chrony's unit, for ClockServiceStopped; the regex is anchored by node_exporter
        "--collector.systemd",
        "--collector.systemd.unit-include=chronyd?[.]service",
    ]


def test_prometheus_flags_carry_the_plan_retention_and_listen_on_management(lab_expanded):
    lab_expanded["monitoring"]["retention_days"] = 9
    text = render(ROLE, "prometheus.default.j2", lab_expanded, "head01", _vars())
    address = lab_expanded["hosts"]["head01"]["address"]
    assert _args(text) == [
        f"--web.listen-address={address}:9090",
        "--storage.tsdb.retention.time=9d",
    ]
    am = render(ROLE, "prometheus-alertmanager.default.j2", lab_expanded, "head01", _vars())
    assert _args(am) == [
        "--web.listen-address=127.0.0.1:9093",
        "--cluster.listen-address=",
    ]


def test_a_hostile_listen_address_is_refused(lab_expanded):
    lab_expanded["hosts"]["gpu01"]["address"] = "10.40.0.11 --web.config.file=/tmp/x"
    with pytest.raises(AnsibleFilterError, match="refusing to write"):
        render(ROLE, "prometheus-node-exporter.default.j2", lab_expanded, "gpu01", _vars())


def _collectors(expanded: dict[str, Any], host: str) -> list[dict[str, Any]]:
    return list(value(ROLE, "monitoring_collectors", expanded, host, _vars()))


CLOCK = {"name": "clock", "timeout_s": 30, "args": []}  # chronyd's time source, every host


def test_collectors_run_where_the_plan_says(lab_expanded):
    gpu = _collectors(lab_expanded, "gpu01")
    assert gpu == [
        CLOCK, {"name": "gpu", "timeout_s": 60, "args": ["--node", "gpu01", "--expected", "2"]}
    ]  # fmt: skip
    assert [c["name"] for c in _collectors(lab_expanded, "head01")] == ["clock", "slurm", "state"]
    # the second Slurm controller does not report the same series again
    assert "osd01" in lab_expanded["groups"]["slurm_controller"]
    assert _collectors(lab_expanded, "osd01") == [CLOCK]
    # a generic accelerator gets no NVML collector
    assert _collectors(lab_expanded, "infer01") == [CLOCK]
    assert monitoring_gpus(lab_expanded["hosts"]["infer01"]) == 0


def test_one_package_list_per_host(lab_expanded):
    def packages(host: str) -> list[str]:
        return list(value(ROLE, "monitoring_host_packages", lab_expanded, host, _vars()))

    node = ["prometheus-node-exporter", "dbus", "python3", "python3-prometheus-client"]
    assert packages("stor01") == node  # the clock collector runs everywhere
    assert packages("gpu01") == node
    assert packages("head01") == [*node, "prometheus", "prometheus-alertmanager"]


def _unit(expanded: dict[str, Any], host: str, item: dict[str, Any], **extra: Any) -> str:
    return render(
        ROLE, "cluster-plan-exporter.service.j2", expanded, host, _vars({"item": item, **extra})
    )


def _exec_start(text: str) -> list[str]:
    (line,) = [li for li in text.splitlines() if li.startswith("ExecStart=")]
    return shlex.split(line.removeprefix("ExecStart="))


def test_gpu_collector_unit_runs_the_zip_with_the_plan_count(lab_expanded):
    (_, item) = _collectors(lab_expanded, "gpu01")
    text = _unit(lab_expanded, "gpu01", item)
    assert _exec_start(text) == [
        "/usr/bin/python3",
        "/usr/local/lib/cluster-plan/cluster-plan-exporter.pyz",
        "exporter",
        "gpu",
        "--textfile-dir",
        "/var/lib/prometheus/node-exporter",
        "--node",
        "gpu01",
        "--expected",
        "2",
    ]
    assert "Type=oneshot" in text
    assert "TimeoutStartSec=60" in text


def test_timer_follows_the_plan_scrape_interval(lab_expanded):
    lab_expanded["monitoring"]["scrape_interval_s"] = 20
    item = {"name": "slurm", "timeout_s": 120, "args": []}
    text = render(
        ROLE, "cluster-plan-exporter.timer.j2", lab_expanded, "head01", _vars({"item": item})
    )
    assert "OnUnitActiveSec=20" in text.splitlines()
    assert "WantedBy=timers.target" in text


def test_the_state_collector_reads_the_documents_delivered_to_it(lab_expanded):
    (_, _, state) = _collectors(lab_expanded, "head01")
    args = _exec_start(_unit(lab_expanded, "head01", state))
    folder = "/var/lib/cluster-plan/state"
    assert args[args.index("state") + 3 :] == [
        "--history", f"{folder}/history.sqlite", "--cluster", "lab",
        "--backup-status", f"{folder}/backup-status.json", "--drift", f"{folder}/drift.json",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("database", "expected"),
    [
        (None, "/repo/playbooks/../reports/lab/history.sqlite"),  # beside the reports
        ("/srv/history.sqlite", "/srv/history.sqlite"),
        ("history/lab.sqlite", "/repo/inventory/lab/history/lab.sqlite"),  # the plan's folder
    ],
)
def test_the_history_delivered_is_the_one_acceptance_writes(lab_expanded, database, expected):
    lab_expanded["acceptance"]["history"]["database"] = database
    places = {"playbook_dir": "/repo/playbooks", "inventory_dir": "/repo/inventory/lab"}
    documents = value(ROLE, "monitoring_state_documents", lab_expanded, "head01", _vars(places))
    assert documents == {
        "history.sqlite": expected,
        "backup-status.json": "/repo/playbooks/../reports/lab/backup-status.json",
        "drift.json": "/repo/playbooks/../reports/lab/drift.json",
    }


@pytest.mark.parametrize(
    "hostile",
    ['x" --plan /etc/shadow', "/srv/%h/$USER", "a b", "back\\slash"],
)
def test_state_arguments_are_written_as_single_arguments(lab_expanded, hostile):
    item = {"name": "state", "timeout_s": 900, "args": ["--history", hostile]}
    args = _exec_start(_unit(lab_expanded, "head01", item))
    # systemd unquotes, then turns %% into % and $$ into $: one argument, the value itself
    assert args[-2] == "--history"
    assert args[-1].replace("%%", "%").replace("$$", "$") == hostile


def test_a_line_break_in_an_argument_is_refused():
    with pytest.raises(AnsibleFilterError, match="control characters"):
        systemd_argument("x\nExecStartPre=/bin/sh")
    assert systemd_argument('a"%$\\') == '"a\\"%%$$\\\\"'


def test_node_exporter_port_opens_to_the_monitoring_server_only(lab_expanded):
    from role_render import render as render_common

    text = render_common("common", "nftables.conf.j2", lab_expanded, "gpu01")
    server = lab_expanded["hosts"]["head01"]["address"]
    assert "set node_exporter_sources" in text
    assert f"elements = {{ {server}/32 }}" in text
    assert "tcp dport { 9100 } ip saddr != @node_exporter_sources drop" in text
    lab_expanded["monitoring"] = None
    text = render_common("common", "nftables.conf.j2", lab_expanded, "gpu01")
    assert "node_exporter" not in text


def test_the_collectors_zip_is_the_same_bytes_each_time(tmp_path: Path):
    first = bundle("exporter")
    assert bundle("exporter") == first
    target = tmp_path / "cache" / "cluster-plan-exporter.pyz"
    assert write_bundle("exporter", target) is True
    assert write_bundle("exporter", target) is False
    names = zipfile.ZipFile(target).namelist()
    assert names[0] == "__main__.py"
    assert "cluster_plan/exporters/gpu.py" in names
    assert not [n for n in names if "__pycache__" in n]


def test_the_collectors_zip_runs_a_collector(tmp_path: Path):
    """The zip alone (no installed package on its path) writes the GPU collector's files."""
    target = tmp_path / "exporter.pyz"
    write_bundle("exporter", target)
    textfiles = tmp_path / "textfile"
    textfiles.mkdir()
    run = subprocess.run(
        [sys.executable, "-I", str(target), "exporter", "gpu", "--textfile-dir", str(textfiles),
         "--node", "gpu01", "--expected", "2", "--xid-wait-ms", "0"],
        capture_output=True, text=True, check=False, cwd=tmp_path,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    text = (textfiles / "cluster_plan_gpu.prom").read_text()
    assert 'cluster_plan_gpu_expected{node="gpu01"} 2.0' in text
    status = (textfiles / "cluster_plan_collector_gpu.prom").read_text()
    assert 'cluster_plan_collector_success{collector="gpu"} 1\n' in status
    usage = subprocess.run(
        [sys.executable, "-I", str(target), "exporter", "gpu", "--textfile-dir", "/nonexistent"],
        capture_output=True, text=True, check=False, cwd=tmp_path,
    )  # fmt: skip
    assert usage.returncode == 2
    assert "Traceback" not in usage.stderr


def _record(expanded: dict[str, Any], host: str) -> dict[str, Any]:
    """What the role's manifest task records for `host`, templated as the play would."""
    tasks = yaml.safe_load((ROLES / ROLE / "tasks" / "manifest.yml").read_text())
    (task,) = [t for t in tasks if "cluster_plan.cluster.role_manifest" in t]
    variables = host_variables(ROLE, expanded, host, _vars())
    variables.update({k: _trusted(v) for k, v in task["vars"].items()})
    args = task["cluster_plan.cluster.role_manifest"]
    keys = ("files", "paths", "packages", "services")
    return {key: templar(ROLE, variables).template(trust_as_template(args[key])) for key in keys}


def _trusted(value: Any) -> Any:
    if isinstance(value, str):
        return trust_as_template(value)
    if isinstance(value, list):
        return [_trusted(v) for v in value]
    return value


def test_the_record_names_what_each_host_runs(lab_expanded):
    head = _record(lab_expanded, "head01")
    assert "/etc/prometheus/prometheus.yml" in head["files"]
    assert "/etc/prometheus/file_sd/ceph.json" in head["files"]
    assert "/etc/default/prometheus" in head["files"]
    assert not [f for f in head["files"] if f.startswith("/etc/prometheus/default/")]
    assert head["services"] == [
        "prometheus-node-exporter",
        "cluster-plan-exporter-clock.timer",
        "cluster-plan-exporter-slurm.timer",
        "cluster-plan-exporter-state.timer",
        "prometheus",
        "prometheus-alertmanager",
    ]
    gpu = _record(lab_expanded, "gpu01")
    assert "/etc/systemd/system/cluster-plan-exporter-gpu.timer" in gpu["files"]
    assert gpu["services"] == [
        "prometheus-node-exporter",
        "cluster-plan-exporter-clock.timer",
        "cluster-plan-exporter-gpu.timer",
    ]
    stor = _record(lab_expanded, "stor01")
    assert stor["services"] == ["prometheus-node-exporter", "cluster-plan-exporter-clock.timer"]
    assert "/etc/systemd/system/cluster-plan-exporter-clock.timer" in stor["files"]
    assert stor["packages"] == [
        "prometheus-node-exporter", "dbus", "python3", "python3-prometheus-client"
    ]  # fmt: skip
    lab_expanded["monitoring"] = None
    assert _record(lab_expanded, "head01") == {
        "files": [],
        "paths": [],
        "packages": [],
        "services": [],
    }


def test_timers_of_collectors_the_plan_dropped_are_found(lab_expanded):
    listed = {
        "stdout_lines": [
            "cluster-plan-exporter-gpu.timer enabled enabled",
            "cluster-plan-exporter-slurm.timer enabled enabled",
        ]
    }
    extra = {"monitoring_timers_present": listed}
    gpu = value(ROLE, "monitoring_stale_timers", lab_expanded, "gpu01", _vars(extra))
    assert gpu == ["cluster-plan-exporter-slurm.timer"]
    stor = value(ROLE, "monitoring_stale_timers", lab_expanded, "stor01", _vars(extra))
    assert stor == ["cluster-plan-exporter-gpu.timer", "cluster-plan-exporter-slurm.timer"]
    none = value(ROLE, "monitoring_stale_timers", lab_expanded, "head01", _vars())
    assert none == []


@pytest.mark.parametrize("service", ["Prometheus", "Alertmanager"])
def test_a_reload_never_follows_a_restart_of_the_same_service(service: str):
    """Both notified in one run: the restart (first in the file, so first to run) reads every
    file; a SIGHUP right after it, before the new process sets its handler, would stop it."""
    handlers = yaml.safe_load((ROLES / "monitoring/handlers/main.yml").read_text())
    names = [h["name"] for h in handlers]
    restart = handlers[names.index(f"Restart {service}")]
    reload = handlers[names.index(f"Reload {service}")]
    assert names.index(f"Restart {service}") < names.index(f"Reload {service}")
    assert reload["when"] == f"{restart['register']} is not defined"


K8S_PLAN = Path(__file__).resolve().parents[2] / "inventory" / "examples" / "k8s-inference.yml"


@pytest.fixture
def k8s_expanded() -> dict[str, Any]:
    return load_expanded(str(K8S_PLAN))


def test_the_kubernetes_collector_runs_on_the_first_control_plane(k8s_expanded):
    kubernetes = {
        "name": "kubernetes",
        "timeout_s": 120,
        "args": ["--kubeconfig", "/etc/kubernetes/admin.conf"],
    }
    assert _collectors(k8s_expanded, "cp1") == [CLOCK, kubernetes]
    # one writer, as for Slurm: the other control planes do not report the nodes again
    assert _collectors(k8s_expanded, "cp2") == [CLOCK]
    assert [c["name"] for c in _collectors(k8s_expanded, "l40s-01")] == ["clock", "gpu"]
    args = _exec_start(_unit(k8s_expanded, "cp1", kubernetes))
    assert args[2:] == [
        "exporter", "kubernetes", "--textfile-dir", "/var/lib/prometheus/node-exporter",
        "--kubeconfig", "/etc/kubernetes/admin.conf",
    ]  # fmt: skip
    assert "cluster-plan-exporter-kubernetes.timer" in _record(k8s_expanded, "cp1")["services"]
    rendering = _rendering(k8s_expanded)
    assert rendering["problems"] == "" and rendering["server"] == "mon01"
    # the control plane that no longer is the first stops its timer
    listed = {"stdout_lines": ["cluster-plan-exporter-kubernetes.timer enabled enabled"]}
    extra = {"monitoring_timers_present": listed}
    stale = value(ROLE, "monitoring_stale_timers", k8s_expanded, "cp2", _vars(extra))
    assert stale == ["cluster-plan-exporter-kubernetes.timer"]


def test_no_host_of_a_slurm_plan_runs_the_kubernetes_collector(lab_expanded):
    for host in lab_expanded["hosts"]:
        assert "kubernetes" not in [c["name"] for c in _collectors(lab_expanded, host)], host


def test_the_collectors_zip_runs_the_kubernetes_collector(tmp_path: Path):
    """The zip alone, with a kubectl on PATH whose API server is not there: apiserver_up 0,
    success; the kubeconfig gone: exit 1."""
    target = tmp_path / "exporter.pyz"
    write_bundle("exporter", target)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "kubectl").write_text("#!/bin/sh\necho 'connection refused' >&2\nexit 1\n")
    (bin_dir / "kubectl").chmod(0o755)
    config = tmp_path / "admin.conf"
    config.write_text("kind: Config\n")
    textfiles = tmp_path / "textfile"
    textfiles.mkdir()
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin"}
    argv = [sys.executable, "-I", str(target), "exporter", "kubernetes",
            "--textfile-dir", str(textfiles), "--kubeconfig", str(config)]  # fmt: skip
    run = subprocess.run(argv, capture_output=True, text=True, check=False, cwd=tmp_path, env=env)
    assert run.returncode == 0, run.stderr
    text = (textfiles / "cluster_plan_kubernetes.prom").read_text()
    assert "cluster_plan_kubernetes_apiserver_up 0.0" in text
    config.unlink()
    run = subprocess.run(argv, capture_output=True, text=True, check=False, cwd=tmp_path, env=env)
    assert run.returncode == 1 and "admin kubeconfig" in run.stderr
