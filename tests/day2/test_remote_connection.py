"""pyinfra reaches hosts the way Ansible does: the inventory's connection variables, the lab's
ProxyCommand through the admin namespace included."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import paramiko
import pytest
from ansible_output import plain
from support.cli_output import result

from cluster_plan import cli
from cluster_plan.api import load_expanded
from cluster_plan.day2.remote.connection import connection_vars, pyinfra_hosts, ssh_config_options
from cluster_plan.day2.remote.session import parse_results, run_gatherer
from cluster_plan.transport.options import SshOptions

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
    # the ProxyCommand names the interpreter that builds it: ansible-inventory's (its shebang),
    # which is not ours when pytest was started as `python -m pytest`
    shebang = (BIN / "ansible-inventory").read_text().splitlines()[0].removeprefix("#!")
    monkeypatch.setattr(sys, "executable", shebang.strip())
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


def test_the_users_ssh_options_join_the_inventorys(tmp_path: Path) -> None:
    """drift and backup status take acceptance's --ssh-*: a user, a key and -o options (a
    ProxyCommand to a bastion) over the plan's access."""
    expanded = load_expanded(PLAN)
    expanded["lab"] = None
    ssh = SshOptions(user="audit", key="/keys/audit", options=("ConnectTimeout=3",),
                     args="-o 'ProxyCommand=ssh -W %h:%p bastion' -v")  # fmt: skip
    host = pyinfra_hosts(expanded, str(PLAN), tmp_path, ["gpu01"], ssh)["gpu01"]
    assert (host["ssh_user"], host["ssh_key"], host["ssh_look_for_keys"]) == (
        "audit",
        "/keys/audit",
        False,
    )
    looked_up = paramiko.SSHConfig.from_path(host["ssh_config_file"]).lookup("gpu01")
    assert looked_up["proxycommand"] == "ssh -W gpu01:22 bastion"
    assert looked_up["connecttimeout"] == "3"
    # without them, the plan's access as before
    assert (
        pyinfra_hosts(expanded, str(PLAN), tmp_path, ["gpu01"], SshOptions())["gpu01"]
        == (pyinfra_hosts(expanded, str(PLAN), tmp_path, ["gpu01"])["gpu01"])
    )


def test_drift_and_backup_status_refuse_unknown_hosts_and_plans_without_backups(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["drift", str(PLAN), "--hosts", "gpu01,nope"]) == 2
    assert "no host 'nope'" in capsys.readouterr().err
    plan = tmp_path / "cluster.yml"
    text = PLAN.read_text()
    start = text.index("backups:")
    # backups through software cut out: collectives acceptance, which needs software, too
    rest = text[text.index("\npackages:") + 1 :]
    plan.write_text(text[:start] + re.sub(r"\n  collectives:\n(    .*\n)+", "\n", rest))
    (tmp_path / "cluster.lock.json").write_text(PLAN.with_name("cluster.lock.json").read_text())
    assert cli.main(["backup", "status", str(plan)]) == 2
    assert "no backups section" in capsys.readouterr().err


def test_a_lab_that_is_not_up_makes_every_host_unreachable_with_the_reason(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CLUSTER_PLAN_LAB_ID", "no-such-lab")
    assert cli.main(["drift", str(PLAN), "--format", "json"]) == 1
    report = result(capsys.readouterr().out)
    assert report["reachable"] == 0
    assert {f["found"] for f in report["findings"]} == {
        "the lab 'no-such-lab' is not up (cluster-plan lab up PLAN)"
    }
    assert len(report["findings"]) == len(load_expanded(PLAN)["hosts"])


def test_the_gatherer_reports_a_host_it_cannot_reach_without_a_traceback(tmp_path: Path) -> None:
    """The real child process (gevent, pyinfra, paramiko) against a proxy that fails at once:
    nothing leaves this machine."""
    config = tmp_path / "ssh_config"
    config.write_text("Host *\n    ProxyCommand sh -c 'echo no route >&2; exit 1'\n")
    host = {"ssh_hostname": "node.invalid", "ssh_user": "root", "ssh_port": 22,
            "ssh_config_file": str(config), "ssh_known_hosts_file": "/dev/null",
            "ssh_strict_host_key_checking": "no", "ssh_look_for_keys": False,
            "ssh_allow_agent": False, "ssh_connect_retries": 0}  # fmt: skip
    request = {"hosts": {"a": host, "b": host}, "collect": "drift", "options": {}}
    results = parse_results(run_gatherer(request, timeout_s=120), ["a", "b"])
    assert [r.reachable for r in results.values()] == [False, False]
    assert all(r.reason and "SSH" in r.reason for r in results.values()), results
