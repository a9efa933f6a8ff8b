"""The facts' parsers against outputs recorded on lab nodes (fixtures/*.json, written by
fixtures/record_facts.py with each fact's own command), and against broken output."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cluster_plan.day2.remote import facts, parsers
from cluster_plan.day2.remote.parsers import FactParseError

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def recorded(name: str) -> dict[str, Any]:
    return dict(json.loads((FIXTURES / f"{name}.json").read_text()))


def test_fixtures_were_recorded_with_the_facts_commands() -> None:
    pairs = {
        "hostname": facts.Hostname().command(),
        "links-gpu01": facts.Links().command(),
        "routes-gpu01": facts.DefaultRoutes().command(),
        "manifests-head01": facts.Manifests().command(),
        "scontrol-head01": facts.SlurmNodes().command(),
        "backup-status-gpu01": facts.BackupStatus().command(),
    }
    for name, command in pairs.items():
        assert recorded(name)["command"] == command, name


def test_hostname() -> None:
    assert parsers.parse_hostname(recorded("hostname")["stdout"]) == "gpu01"
    with pytest.raises(FactParseError):
        parsers.parse_hostname("two words\n")


def test_links_carry_each_networks_address_and_mtu() -> None:
    links = parsers.parse_links(recorded("links-gpu01")["stdout"])
    assert links["compute"]["mtu"] == 9000 and links["storage"]["mtu"] == 9000
    assert links["mgmt"]["mtu"] == 1500
    assert links["compute"]["addresses"] == ["10.41.0.2/24"]  # the lock's, for gpu01
    assert links["mgmt"]["addresses"] == ["10.40.0.11/24"]
    assert links["lo"]["addresses"] == ["127.0.0.1/8"]
    assert all(link["up"] for link in links.values())


def test_the_default_route() -> None:
    routes = parsers.parse_default_routes(recorded("routes-gpu01")["stdout"])
    assert routes == [{"gateway": "10.40.0.1", "device": "mgmt"}]
    assert parsers.parse_default_routes("[]") == []


def test_manifests_are_read_per_role() -> None:
    manifests = parsers.parse_manifests(recorded("manifests-head01")["stdout"])
    assert set(manifests) == {"backup", "common", "slurm"}
    assert "slurmctld" in manifests["slurm"]["services"]
    names = [p["name"] for p in manifests["slurm"]["precious"]]
    assert names == ["munge", "slurmctld"]
    assert manifests["common"]["nftables"]["inet cluster_plan"].startswith("table inet")
    broken = parsers.parse_manifests("==> /m/ceph.json <==\n{\n")
    assert broken["ceph"]["error"].startswith("/m/ceph.json: not JSON")


def test_checksums_and_a_missing_file() -> None:
    sums = parsers.parse_checksums(recorded("checksums-head01")["stdout"])
    assert sums["/etc/no-such-file"] is None
    assert len(str(sums["/etc/slurm/slurm.conf"])) == 64 and len(str(sums["/etc/hosts"])) == 64
    with pytest.raises(FactParseError):
        parsers.parse_checksums("sha256sum: /x: Permission denied\n")


def test_units_running_timer_and_not_installed() -> None:
    units = parsers.parse_units(recorded("units-head01")["stdout"])
    assert units["chrony"]["active"] == "active" and units["chrony"]["id"] == "chrony.service"
    assert units["slurmctld"]["sub"] == "running"
    assert units["cluster-plan-backup.timer"]["sub"] == "waiting"
    assert units["no-such-unit"]["load"] == "not-found"
    assert units["no-such-unit"]["active"] == "inactive"
    with pytest.raises(FactParseError):
        parsers.parse_units("==> chrony <==\nFailed to connect to bus\n")


def test_held_and_unheld_packages() -> None:
    packages = parsers.parse_packages(recorded("packages-gpu01")["stdout"])
    assert packages["slurm-client"]["selection"] == "hold"
    assert packages["slurmd"]["status"] == "installed"
    assert packages["munge"]["selection"] == "install"
    assert "no-such-package" not in packages
    with pytest.raises(FactParseError):
        parsers.parse_packages("slurmd 22.05\n")


def test_nftables_tables() -> None:
    tables = parsers.parse_nft_tables(recorded("nftables-gpu01")["stdout"])
    assert tables["ip no_such_table"] is None
    ruleset = str(tables["inet cluster_plan"])
    assert ruleset.startswith("table inet cluster_plan {") and "policy drop;" in ruleset
    assert "\n\n" not in ruleset


def test_slurms_view_of_its_nodes() -> None:
    nodes = parsers.parse_scontrol_nodes(recorded("scontrol-head01")["stdout"])
    assert set(nodes) == {"gpu01", "gpu02", "infer01", "cpu01"}
    gpu = nodes["gpu01"]
    assert gpu["state"] == "IDLE" and gpu["flags"] == []
    assert gpu["gres"].startswith("gpu:h100:2")
    assert "pool_gpu" in gpu["features"] and "rack_r1" in gpu["features"]


def test_slurm_states_with_flags_and_a_controller_that_does_not_answer() -> None:
    line = (
        "NodeName=gpu02 Arch=x86_64 CoresPerSocket=1 CPUAlloc=0 AvailableFeatures=pool_gpu,h100 "
        "ActiveFeatures=pool_gpu,h100 Gres=gpu:h100:2 NodeAddr=10.40.0.12 State=IDLE*+DRAIN "
        "OS=Linux 6.1.0-27-amd64 #1 SMP Reason=maintenance [root@2027-01-05T02:00:00]"
    )
    node = parsers.parse_scontrol_nodes(line)["gpu02"]
    assert (node["state"], node["flags"]) == ("IDLE", ["DRAIN", "NOT_RESPONDING"])
    assert node["reason"] == "maintenance [root@2027-01-05T02:00:00]"
    with pytest.raises(FactParseError, match="Unable to contact"):
        parsers.parse_scontrol_nodes("slurm_load_node error: Unable to contact slurm controller")


def test_backup_status() -> None:
    status = parsers.parse_backup_status(recorded("backup-status-gpu01")["stdout"])
    assert status["host"] == "gpu01" and status["expected"] == ["target"]
    assert status["max_age_s"] == 86400 + 1800 + 3600
    assert parsers.parse_backup_status("missing\n") == {}


@pytest.mark.parametrize(
    ("parser", "text"),
    [
        (parsers.parse_links, "not json"),
        (parsers.parse_links, '{"ifname": "x"}'),
        (parsers.parse_default_routes, "{}"),
        (parsers.parse_backup_status, "[1, 2]"),
    ],
)
def test_broken_output_is_a_parse_error(parser: Any, text: str) -> None:
    with pytest.raises(FactParseError):
        parser(text)


def test_every_fact_only_reads() -> None:
    commands = [
        facts.Hostname().command(),
        facts.Links().command(),
        facts.DefaultRoutes().command(),
        facts.Manifests().command(),
        facts.FileChecksums().command(paths=["/etc/hosts"]),
        facts.Units().command(units=["chrony"]),
        facts.Packages().command(names=["slurmd"]),
        facts.NftTables().command(tables=["inet cluster_plan"]),
        facts.SlurmNodes().command(),
        facts.BackupStatus().command(),
    ]
    writes = (
        "> /",
        ">>",
        " rm ",
        " mv ",
        "systemctl start",
        "systemctl stop",
        "ip addr add",
        "ip link set",
        "nft add",
        "nft delete",
        "nft flush",
        "apt-mark",
        "dpkg --set",
    )
    for command in commands:
        assert not [w for w in writes if w in command.replace(">/dev/null", "")], command


def _status_text(**changes: Any) -> str:
    status = json.loads(recorded("backup-status-gpu01")["stdout"])
    for key, value in changes.items():
        if value is DELETE:
            status.pop(key)
        else:
            status[key] = value
    return json.dumps(status)


DELETE = object()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (_status_text(now="soon"), "$.now is not a number"),
        (_status_text(now=DELETE), "$.now is not a number"),
        (_status_text(expected="target"), "$.expected is not a list of names"),
        (_status_text(repositories=["target"]), "$.repositories is not an object"),
        (_status_text(repositories={"target": {"time": "03:00"}}), "$.repositories.target.time"),
        (_status_text(repositories={"target": {"ok": "yes"}}), "$.repositories.target.ok"),
        (_status_text(drills={"target": {"ok": 1}}), "$.drills.target.ok"),
        (_status_text(max_age_s=[1]), "$.max_age_s is not a number"),
        (_status_text(now=1.5).replace("1.5", "NaN"), "$.now is NaN"),
        (_status_text(max_age_s=1.5).replace("1.5", "Infinity"), "$.max_age_s is Infinity"),
    ],
)
def test_a_backup_status_of_the_wrong_shape_names_the_key(text: str, message: str) -> None:
    with pytest.raises(FactParseError, match="cluster-plan-backup status") as refused:
        parsers.parse_backup_status(text)
    assert message in str(refused.value)


def test_a_role_manifest_with_a_number_json_cannot_hold_is_an_error() -> None:
    text = '==> /m/ceph.json <==\n{"precious": [], "port": NaN}\n'
    assert "$.port is NaN" in parsers.parse_manifests(text)["ceph"]["error"]
