"""`cluster-plan monitoring render`: the files Prometheus and Alertmanager read, checked by
their own tools (promtool check config / check rules, amtool check-config and its routing
tree), and the command's output, exit statuses and directory handling."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from monitoring_tools import need

from cluster_plan.cli.app import main

ROOT = Path(__file__).resolve().parents[2]
LAB = ROOT / "inventory" / "lab" / "cluster.yml"
H100 = ROOT / "inventory" / "examples" / "slurm-h100.yml"
K8S = ROOT / "inventory" / "examples" / "k8s-inference.yml"
PROMTOOL = shutil.which("promtool")
AMTOOL = shutil.which("amtool")


@pytest.fixture(scope="module")
def outputs(tmp_path_factory) -> dict[str, Path]:
    out = {}
    for plan in (LAB, H100, K8S):
        directory = tmp_path_factory.mktemp(plan.stem)
        assert main(["monitoring", "render", str(plan), "-o", str(directory)]) == 0
        out[plan.stem] = directory
    return out


def run(tool: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [tool, *args], cwd=cwd, capture_output=True, text=True, timeout=60, check=False
    )


@pytest.mark.parametrize("plan", ["cluster", "slurm-h100", "k8s-inference"])
def test_promtool_and_amtool_accept_the_rendered_files(outputs, plan):
    promtool = need(PROMTOOL, "prometheus")
    amtool = need(AMTOOL, "prometheus-alertmanager")
    directory = outputs[plan]
    config = run(promtool, "check", "config", "prometheus.yml", cwd=directory)
    assert config.returncode == 0, config.stdout + config.stderr
    assert "1 rule files found" in config.stdout + config.stderr
    rules = run(promtool, "check", "rules", "rules/cluster-plan.rules.yml", cwd=directory)
    assert rules.returncode == 0, rules.stdout + rules.stderr  # lint included: no duplicates
    alerting = run(amtool, "check-config", "alertmanager.yml", cwd=directory)
    assert alerting.returncode == 0, alerting.stdout + alerting.stderr


def receivers_for(directory: Path, *labels: str) -> list[str]:
    amtool = need(AMTOOL, "prometheus-alertmanager")
    done = run(
        amtool, "config", "routes", "test", "--config.file=alertmanager.yml", *labels, cwd=directory
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout.strip().split(",")


def test_routes_send_by_severity_and_team(outputs):
    h100 = outputs["slurm-h100"]
    gpu = ["teams=,llm,eval,", "node=gpu01"]
    # the LLM team's route continues: a critical alert on its nodes reaches it and on-call
    assert receivers_for(h100, "severity=critical", *gpu) == ["llm", "oncall"]
    assert receivers_for(h100, "severity=warning", *gpu) == ["llm"]
    assert receivers_for(h100, "severity=critical", "node=head01") == ["oncall"]
    assert receivers_for(h100, "severity=warning", "node=head01") == ["admins"]
    lab = outputs["cluster"]
    assert receivers_for(lab, "severity=warning", "teams=,research,vision,nlp,") == ["research"]
    assert receivers_for(lab, "severity=warning", "teams=,serving,") == ["ops"]  # the default
    assert receivers_for(lab, "severity=critical", "teams=,serving,") == ["ops"]


def test_a_node_down_silences_that_node_s_other_alerts(outputs):
    config = yaml.safe_load((outputs["cluster"] / "alertmanager.yml").read_text())
    node_down = [
        r for r in config["inhibit_rules"] if r["source_matchers"] == ['alertname="NodeDown"']
    ]
    assert node_down == [
        {
            "source_matchers": ['alertname="NodeDown"'],
            "target_matchers": ['alertname!="NodeDown"'],
            "equal": ["node"],
        }
    ]


def test_targets_name_every_node_with_its_place_and_teams(outputs):
    targets = json.loads((outputs["cluster"] / "file_sd" / "node.json").read_text())
    by_node = {t["labels"]["node"]: t for t in targets}
    assert len(by_node) == 9  # every lab node
    assert by_node["gpu01"] == {
        "targets": ["10.40.0.11:9100"],
        "labels": {
            "node": "gpu01",
            "node_group": "gpu",
            "rack": "r1",
            "pool": "gpu",
            "teams": ",research,vision,nlp,",
        },
    }
    # research and nlp name no classes, so they may use every class (inference too); vision
    # keeps to training and general
    assert by_node["infer01"]["labels"]["teams"] == ",research,nlp,serving,"
    assert "teams" not in by_node["head01"]["labels"]  # no pool: ops alerts, no team's
    ceph = json.loads((outputs["cluster"] / "file_sd" / "ceph.json").read_text())
    # every manager (only the active one answers: the HA pair's backup node runs a second)
    assert ceph == [
        {"targets": ["10.40.0.10:9283"], "labels": {"mgr": "head01"}},
        {"targets": ["10.40.0.18:9283"], "labels": {"mgr": "osd01"}},
    ]
    assert not (outputs["slurm-h100"] / "file_sd" / "ceph.json").exists()  # no Ceph planned


def test_intervals_and_retention_come_from_the_plan(outputs):
    lab = yaml.safe_load((outputs["cluster"] / "prometheus.yml").read_text())
    assert lab["global"]["scrape_interval"] == "15s"
    assert lab["global"]["external_labels"] == {"cluster": "lab"}
    h100 = yaml.safe_load((outputs["slurm-h100"] / "prometheus.yml").read_text())
    assert h100["global"]["scrape_interval"] == "30s"  # the default
    assert "retention.time=30d" in (outputs["slurm-h100"] / "default" / "prometheus").read_text()
    assert "retention.time=2d" in (outputs["cluster"] / "default" / "prometheus").read_text()
    timing = ("group_wait", "group_interval", "repeat_interval")
    route = yaml.safe_load((outputs["cluster"] / "alertmanager.yml").read_text())["route"]
    assert [route[k] for k in timing] == ["5s", "300s", "240m"]  # the lab plan's 5 s wait
    route = yaml.safe_load((outputs["slurm-h100"] / "alertmanager.yml").read_text())["route"]
    assert [route[k] for k in timing] == ["30s", "300s", "240m"]  # Alertmanager's defaults


def test_render_rewrites_the_directory_exactly(tmp_path, capsys):
    assert main(["monitoring", "render", str(LAB), "-o", str(tmp_path)]) == 0
    stale = tmp_path / "file_sd" / "ceph.json"
    assert stale.is_file()
    assert main(["monitoring", "render", str(H100), "-o", str(tmp_path)]) == 0
    assert not stale.exists()  # the slurm-h100 plan has no Ceph: the earlier file goes
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file()) == [
        ".cluster-plan-files.json",  # what the command wrote here: it removes nothing else
        "alertmanager.yml",
        "dashboards/group-gpu.json",
        "dashboards/group-head.json",
        "dashboards/node.json",
        "dashboards/overview.json",
        "dashboards/pool-gpu.json",
        "dashboards/rack-a01.json",
        "default/prometheus",
        "file_sd/node.json",
        "prometheus.yml",
        "rules/cluster-plan.rules.yml",
    ]
    assert f"{tmp_path}: 11 files" in capsys.readouterr().out


def test_without_output_it_prints_every_file(capsys):
    assert main(["monitoring", "render", str(H100)]) == 0
    out = capsys.readouterr().out
    assert "--- prometheus.yml\n" in out and "--- alertmanager.yml\n" in out
    assert "alert: GpuMissing" in out


def test_a_plan_without_a_monitoring_server_is_refused(capsys):
    plan = ROOT / "inventory" / "examples" / "large-training.yml"
    assert main(["monitoring", "render", str(plan)]) == 1
    err = capsys.readouterr().err
    assert "error[no-monitoring]" in err and "monitoring_server" in err
    assert "Traceback" not in err


def test_an_unreadable_plan_is_a_usage_error(tmp_path, capsys):
    assert main(["monitoring", "render", str(tmp_path / "missing.yml")]) == 2
    assert "Traceback" not in capsys.readouterr().err


@pytest.mark.parametrize(
    ("content", "code", "status"),
    [
        (b"\x00\x01\xff\xfe junk", "not-text", 2),
        (b"plugin: cluster_plan\ncluster: [\n", "yaml-syntax", 1),
        (None, "not-a-file", 2),  # a directory
    ],
)
def test_damaged_plans_are_refused_in_words_and_nothing_is_written(
    tmp_path, capsys, content, code, status
):
    plan = tmp_path / "plan.yml"
    if content is None:
        plan.mkdir()
    else:
        plan.write_bytes(content)
    out = tmp_path / "out"
    assert main(["monitoring", "render", str(plan), "-o", str(out)]) == status
    err = capsys.readouterr().err
    assert f"error[{code}]" in err and "Traceback" not in err
    assert not out.exists()


def expanded_text(text: str):
    from cluster_plan.plan.allocate import allocate_addresses
    from cluster_plan.plan.expand import expand
    from cluster_plan.plan.validate import validate_text

    result = validate_text(text, "plan.yml")
    assert [f for f in result.findings if f.severity == "error"] == []
    lock, _ = allocate_addresses(result.plan, result.nodes, None)
    return expand(result.plan, result.nodes, lock)


def test_port_speeds_follow_each_rack_s_switch_and_a_nic_s_own_speed():
    from cluster_plan.monitoring.rules import port_rules

    base = (ROOT / "tests" / "plans" / "base.yml").read_text()
    text = (
        base.replace(
            "roles: [slurm_controller, ceph_mgr]}",
            "roles: [slurm_controller, ceph_mgr, monitoring_server]}",
        )
        .replace("racks: [r2], link_gbps: 10,", "racks: [r2], link_gbps: 25,")
        .replace(
            "  cpu: {cpu_cores: 2, memory_gb: 4, disks:",
            "  cpu: {cpu_cores: 2, memory_gb: 4, nics: [{name: eno1, speed_gbps: 1, "
            "networks: [mgmt]}, {name: ens1, networks: [compute]}], disks:",
        )
    )
    expanded = expanded_text(text)
    speed = {
        (r["labels"]["node_group"], r["labels"]["device"], r["labels"]["planned_gbps"]): r["expr"]
        for r in port_rules(expanded, expanded["monitoring"])
        if r["alert"] == "NicBelowPlanSpeed"
    }
    # the GPU group spans r1 (10 Gb/s) and r2 (25 Gb/s): one rule per rack's speed
    assert speed[("gpu", "compute", "10")].endswith('rack=~"r1"} < 1250000000')
    assert speed[("gpu", "compute", "25")].endswith('rack=~"r2"} < 3125000000')
    # the cpu profile's eno1 is a 1 Gb/s NIC whatever its switch; ens1 runs at the link speed
    assert speed[("cpu", "eno1", "1")] == (
        'node_network_speed_bytes{job="node",node_group="cpu",device="eno1"} < 125000000'
    )
    assert ("cpu", "ens1", "25") in speed and ("head", "ens1", "10") in speed


def test_a_nan_that_reaches_a_json_file_is_an_error_naming_it():
    """The plan's checks refuse NaN; should one get past them, the JSON file that would carry
    it is named, and no bare NaN is written."""
    from cluster_plan.api import load_expanded
    from cluster_plan.monitoring.render import render
    from cluster_plan.output_files import OutputError

    expanded = load_expanded(H100)
    expanded["acceptance"]["gpu"]["max_temp_c"] = float("nan")
    with pytest.raises(OutputError, match=r"^dashboards/[\w-]+\.json: cannot be written as JSON"):
        render(expanded)
