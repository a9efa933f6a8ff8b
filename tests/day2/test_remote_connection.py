"""pyinfra reaches hosts the way Ansible does: the inventory's connection variables, the lab's
ProxyCommand through the admin namespace included."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import paramiko
import pytest
from ansible_output import plain

from cluster_plan import cli
from cluster_plan.api import load_expanded
from cluster_plan.remote.connection import connection_vars, pyinfra_hosts, ssh_config_options

ROOT = Path(__file__).resolve().parents[2]
PLAN = ROOT / "inventory" / "lab" / "cluster.yml"
BIN = Path(sys.executable).parent


def test_the_connection_is_what_the_inventory_plugin_gives_ansible(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CLUSTER_PLAN_LAB_ID", "conn-test")
    done = subprocess.run(
        [str(BIN / "ansible-inventory"), "-i", str(PLAN), "--list"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        env={**os.environ, "ANSIBLE_HOME": str(ROOT / ".ansible")},
    )
    inventory = plain(json.loads(done.stdout)["_meta"]["hostvars"]["gpu01"])
    ours = connection_vars(load_expanded(PLAN), str(PLAN))
    assert ours == {key: inventory[key] for key in ours}
    assert "cpl-conn-test-admin" in ours["ansible_ssh_common_args"]


def test_pyinfra_gets_the_same_proxy_key_and_address(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("CLUSTER_PLAN_LAB_ID", "conn-test")
    expanded = load_expanded(PLAN)
    hosts = pyinfra_hosts(expanded, str(PLAN), tmp_path, ["gpu01", "head01"])
    gpu = hosts["gpu01"]
    assert gpu["ssh_hostname"] == expanded["hosts"]["gpu01"]["address"]
    assert (gpu["ssh_user"], gpu["ssh_port"]) == ("root", 22)
    assert gpu["ssh_key"].endswith("id_ed25519") and gpu["ssh_look_for_keys"] is False
    assert (gpu["ssh_known_hosts_file"], gpu["ssh_strict_host_key_checking"]) == ("/dev/null", "no")
    config = paramiko.SSHConfig.from_path(gpu["ssh_config_file"])
    looked_up = config.lookup(gpu["ssh_hostname"])
    assert looked_up["proxycommand"].endswith(
        f"cluster_plan.lab.proxycommand cpl-conn-test-admin {gpu['ssh_hostname']} 22"
    )
    assert "controlpath" not in looked_up  # connection sharing is ssh's, not paramiko's
    assert looked_up["connecttimeout"] == "10"


def test_ssh_options_are_read_from_ansibles_common_args() -> None:
    args = "-o 'ProxyCommand=nc -X 5 %h %p' -o ControlPath=/x/%C -o ConnectTimeout=5 -v"
    assert ssh_config_options(args) == {"ProxyCommand": "nc -X 5 %h %p", "ConnectTimeout": "5"}


def test_a_real_cluster_uses_the_plans_access(tmp_path: Path) -> None:
    expanded = load_expanded(PLAN)
    expanded["lab"] = None
    expanded["access"]["ssh_port"] = 2222
    expanded["access"]["ansible_user"] = "ops"
    host = pyinfra_hosts(expanded, str(PLAN), tmp_path, ["gpu01"])["gpu01"]
    assert (host["ssh_user"], host["ssh_port"]) == ("ops", 2222)
    assert host["ssh_strict_host_key_checking"] == "accept-new"
    assert "ssh_config_file" not in host and "ssh_key" not in host


def test_drift_and_backup_status_refuse_unknown_hosts_and_plans_without_backups(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["drift", str(PLAN), "--hosts", "gpu01,nope"]) == 2
    assert "no host 'nope'" in capsys.readouterr().err
    plan = tmp_path / "cluster.yml"
    text = PLAN.read_text()
    start = text.index("backups:")
    plan.write_text(text[:start] + text[text.index("packages:") :])
    (tmp_path / "cluster.lock.json").write_text(PLAN.with_name("cluster.lock.json").read_text())
    assert cli.main(["backup", "status", str(plan)]) == 2
    assert "no backups section" in capsys.readouterr().err
