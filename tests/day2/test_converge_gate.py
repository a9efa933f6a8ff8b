"""The stage gate of site.yml: a role's record read back from a host (role_record,
role_converged) and the digest of what a role converges from (lookup converge_inputs).
The lab test (tests/roles/test_stage_gate_lab.py) runs them on real nodes."""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import collection_loader  # noqa: F401  (the modules import their helper from the collection)
import pytest
from ansible.parsing.dataloader import DataLoader
from ansible.plugins.loader import lookup_loader
from ansible.template import Templar

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "plugins" / "modules"))

import role_converged  # noqa: E402
import role_manifest  # noqa: E402
from ansible_collections.cluster_plan.cluster.plugins.module_utils import (  # noqa: E402
    role_record,
)

UNITS = (
    "Id=chrony.service\nActiveState=active\nUnitFileState=enabled\n\n"
    "Id=ceph.target\nActiveState=active\nUnitFileState=enabled\n"
)
POOLS = [{"pool_name": "datasets", "size": 3, "pg_num": 32, "last_change": "41"}]


class Host:
    """A host's commands, answered from a table the test edits (argv[0], or the shell
    command of a probe)."""

    def __init__(self) -> None:
        self.answers: dict[str, tuple[int, str, str]] = {
            "systemctl": (0, UNITS, ""),
            "dpkg-query": (0, "chrony\tinstalled\nnftables\tinstalled\n", ""),
            "ceph osd pool ls detail --format json": (0, json.dumps(POOLS), ""),
            "hostname": (0, "cpu01\n", ""),
        }

    @staticmethod
    def key(argv: list[str]) -> str:
        return argv[2] if argv[:2] == ["/bin/sh", "-c"] else argv[0]

    def __call__(self, argv: list[str]) -> tuple[int, str, str]:
        key = self.key(argv)
        return self.answers.get(key, (127, "", f"{key}: not found"))


def params_of(**what: Any) -> dict[str, Any]:
    """role_manifest's parameters for `what`, the rest empty."""
    return {
        "role": "common",
        "inputs": "digest-1",
        "files": [],
        "paths": [],
        "packages": [],
        "services": [],
        "boot_units": [],
        "held_packages": [],
        "nftables_tables": [],
        "probes": [],
        "precious": [],
        **what,
    }


def record(tmp_path: Path, host: Host, **what: Any) -> dict[str, Any]:
    """The record role_manifest writes for `what` (its files under tmp_path)."""
    manifest, problems, warnings = role_manifest.build_manifest(params_of(**what), host)
    assert problems == warnings == []
    return manifest


@pytest.fixture
def conf(tmp_path: Path) -> Path:
    path = tmp_path / "chrony.conf"
    path.write_text("server 10.40.0.2 iburst\n")
    path.chmod(0o644)
    return path


def test_a_record_read_back_unchanged_has_no_differences(tmp_path: Path, conf: Path) -> None:
    host = Host()
    kept = record(
        tmp_path,
        host,
        files=[str(conf), str(tmp_path / "absent")],
        paths=[str(tmp_path)],
        packages=["chrony", "nftables"],
        services=["chrony"],
        boot_units=["ceph.target"],
        probes=[{"name": "the host name", "command": "hostname"}],
    )
    assert kept["files"][str(tmp_path / "absent")] is None
    assert kept["paths"][str(conf)].startswith("file ") and kept["paths"][str(conf)].endswith(
        " 0644"
    )
    assert kept["enabled"] == {"ceph.target": "enabled", "chrony": "enabled"}
    assert kept["packages"] == {"chrony": True, "nftables": True}
    assert set(kept["probes"]["the host name"]) == {"command", "digest"}
    assert role_record.differences(json.loads(json.dumps(kept)), host) == []


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (lambda conf, host: conf.write_text("server 192.0.2.1\n"), "changed"),
        (lambda conf, host: conf.unlink(), "is gone"),
        (lambda conf, host: conf.chmod(0o600), "0600, was file"),
        (
            lambda conf, host: host.answers.update(
                {"systemctl": (0, UNITS.replace("=active", "=inactive", 1), "")}
            ),
            "service chrony is inactive",
        ),
        (
            lambda conf, host: host.answers.update(
                {"systemctl": (0, UNITS.replace("=enabled", "=disabled"), "")}
            ),
            "service ceph.target is disabled at boot, was enabled",
        ),
        (
            lambda conf, host: host.answers.update(
                {"dpkg-query": (1, "chrony\tinstalled\nnftables\tnot-installed\n", "")}
            ),
            "package nftables is not installed",
        ),
        (
            lambda conf, host: host.answers.update({"hostname": (0, "foo\n", "")}),
            "the host name changed",
        ),
        (
            lambda conf, host: host.answers.update(
                {
                    "ceph osd pool ls detail --format json": (
                        0,
                        json.dumps([{**POOLS[0], "size": 2}]),
                        "",
                    )
                }
            ),
            "the pools changed",
        ),
    ],
)
def test_each_kind_of_change_is_a_difference(
    tmp_path: Path, conf: Path, change: Any, reason: str
) -> None:
    host = Host()
    kept = record(
        tmp_path,
        host,
        files=[str(conf)],
        packages=["chrony", "nftables"],
        services=["chrony"],
        boot_units=["ceph.target"],
        probes=[
            {"name": "the host name", "command": "hostname"},
            {
                "name": "the pools",
                "command": "ceph osd pool ls detail --format json",
                "keep": ["pool_name", "size"],
            },
        ],
    )
    change(conf, host)
    found = role_record.differences(kept, host)
    assert any(reason in line for line in found), found


def test_a_probe_counts_only_the_keys_it_keeps() -> None:
    host = Host()
    spec = ["pool_name", "size"]
    before = role_record.probe_digest("ceph osd pool ls detail --format json", spec, host)
    moved = [{**POOLS[0], "pg_num": 64, "last_change": "97"}]  # the autoscaler, an epoch
    host.answers["ceph osd pool ls detail --format json"] = (0, json.dumps(moved), "")
    assert role_record.probe_digest("ceph osd pool ls detail --format json", spec, host) == before
    # a failing command reads as a change too: its exit status counts
    host.answers["ceph osd pool ls detail --format json"] = (1, "", "timed out")
    assert role_record.probe_digest("ceph osd pool ls detail --format json", spec, host) != before


class SlowOnce(Host):
    """A loaded host: the first `slow` asks of each command get no answer in time."""

    def __init__(self, slow: int) -> None:
        super().__init__()
        self.slow = slow
        self.asked: dict[str, int] = {}

    def __call__(self, argv: list[str]) -> tuple[int, str, str]:
        key = self.key(argv)
        self.asked[key] = self.asked.get(key, 0) + 1
        if key != "systemctl" and self.asked[key] <= self.slow:
            return role_record.TIMED_OUT, "", "no answer"
        return super().__call__(argv)


PROBES = [
    {"name": "the host name", "command": "hostname"},
    {"name": "the pools", "command": "ceph osd pool ls detail --format json", "keep": ["size"]},
]


def test_a_probe_unanswered_in_the_burst_is_asked_again_alone(tmp_path: Path) -> None:
    calm = record(tmp_path, Host(), probes=PROBES)
    loaded = SlowOnce(slow=1)
    assert record(tmp_path, loaded, probes=PROBES) == calm
    assert loaded.asked["hostname"] == 2
    assert role_record.differences(calm, SlowOnce(slow=1)) == []


def test_a_probe_never_answered_is_a_warning_and_drift_says_so(tmp_path: Path) -> None:
    calm = record(tmp_path, Host(), probes=PROBES)
    manifest, problems, warnings = role_manifest.build_manifest(
        params_of(probes=PROBES), SlowOnce(slow=2)
    )
    assert problems == []
    assert [w.split(":")[0] for w in warnings] == ["probe the host name", "probe the pools"]
    # recorded as it read, so the stage gate runs the stage next time
    assert manifest["probes"] != calm["probes"]
    found = role_record.differences(calm, SlowOnce(slow=2))
    assert found == [
        f"the host name: no answer within {role_record.PROBE_TIMEOUT_S} s, twice",
        f"the pools: no answer within {role_record.PROBE_TIMEOUT_S} s, twice",
    ]


def test_dotted_keys_keep_a_part_of_each_item_of_a_list() -> None:
    dump = {"epoch": 7, "osds": [{"osd": 0, "up": 1, "in": 1, "up_from": 5}]}
    assert role_record.project(dump, ["osds.osd", "osds.up"]) == {"osds": [{"osd": 0, "up": 1}]}
    assert role_record.project(dump, ["osds"]) == {"osds": dump["osds"]}


def test_systemctl_show_blocks_are_read_per_unit() -> None:
    units = role_record.unit_states(["chrony", "ceph.target", "gone"], Host())
    assert units["chrony"] == {"active": "active", "enabled": "enabled"}
    assert units["ceph.target"]["enabled"] == "enabled"
    assert units["gone"]["active"] == "unknown"


def write_record(directory: Path, kept: dict[str, Any], age_s: float = 0) -> Path:
    path = directory / "common.json"
    path.write_text(json.dumps(kept))
    then = time.time() - age_s
    os.utime(path, (then, then))
    return path


def test_a_role_holds_only_from_the_same_inputs_recently_and_unchanged(
    tmp_path: Path, conf: Path
) -> None:
    host = Host()
    directory = tmp_path / "manifest"
    directory.mkdir()
    now = time.time()

    def holds(inputs: str = "digest-1", max_age_s: int = 86400) -> list[str]:
        return role_converged.role_holds("common", inputs, max_age_s, str(directory), host, now)

    assert holds() == ["no record of a converge here"]
    write_record(directory, record(tmp_path, host, files=[str(conf)]))
    assert holds() == []
    assert "changed since the last converge" in holds("digest-2")[0]
    assert "changed since the last converge" in holds("")[0]  # inputs unknown: never holds
    write_record(directory, record(tmp_path, host, files=[str(conf)]), age_s=2 * 86400)
    assert "48.0 h ago" in holds()[0]
    assert holds(max_age_s=0) == []  # no age limit
    conf.write_text("changed by hand\n")
    assert holds(max_age_s=0) == [f"file {conf} changed"]
    (directory / "common.json").write_text("{")
    assert "unreadable" in holds()[0]


def test_an_unchanged_record_is_touched_as_the_last_converge(tmp_path: Path) -> None:
    path = tmp_path / "common.json"
    role_manifest.write_if_changed(str(path), {"role": "common"}, check_mode=False)
    os.utime(path, (1, 1))
    assert role_manifest.write_if_changed(str(path), {"role": "common"}, check_mode=True) is False
    assert path.stat().st_mtime == 1  # check mode leaves it
    touched = time.time()
    assert role_manifest.write_if_changed(str(path), {"role": "common"}, check_mode=False) is False
    assert path.stat().st_mtime >= touched - 1  # touched now (1 s: the file system's coarse clock)


@pytest.mark.parametrize(
    "item",
    [
        {"name": "x"},
        {"command": "true"},
        {"name": "x", "command": "true", "when": True},
    ],
)
def test_a_bad_probe_declaration_is_refused(item: dict[str, Any]) -> None:
    _, problems = role_manifest.probe_specs([item])
    assert problems


# --- converge_inputs -----------------------------------------------------------------------


@pytest.fixture
def inputs(tmp_path: Path) -> Any:
    """converge_inputs over a plan and lock in tmp_path, for a variables dict."""
    plan = tmp_path / "cluster.yml"
    plan.write_text("plugin: cluster_plan\n")
    (tmp_path / "cluster.lock.json").write_text("{}\n")
    loader = DataLoader()
    lookup = lookup_loader.get(
        "cluster_plan.cluster.converge_inputs", loader=loader, templar=Templar(loader)
    )

    def digest(role: str = "backup", **variables: Any) -> str:
        base = {
            "cluster_plan_file": str(plan),
            "inventory_hostname": "gpu01",
            "plan_host": {"hostname": "gpu01"},
            "ansible_facts": {"distribution": "Debian", "memtotal_mb": 8000, "uptime_seconds": 1},
            "backup_secret_file": str(tmp_path / "gpu01.passphrase"),
            "backup_controller_files": [str(tmp_path / "gpu01.passphrase")],
        }
        return str(lookup.run([role], {**base, **variables})[0])

    digest.plan = plan  # type: ignore[attr-defined]
    digest.dir = tmp_path  # type: ignore[attr-defined]
    digest.lookup = lookup  # type: ignore[attr-defined]
    return digest


def test_the_same_inputs_give_the_same_digest_and_any_input_another(inputs: Any) -> None:
    first = inputs()
    assert first == inputs()
    assert len(first) == 64
    facts = {"distribution": "Debian", "memtotal_mb": 8000, "uptime_seconds": 99}
    assert inputs(ansible_facts=facts) == first  # a fact no role renders from
    assert inputs(backup_grace_s=60) != first  # a role variable (as -e would set it)
    assert inputs(inventory_hostname="gpu02") != first
    assert inputs(plan_host={"hostname": "gpu01", "rack": "r2"}) != first
    assert inputs(ansible_facts={**facts, "memtotal_mb": 16000}) != first
    assert inputs(common_timezone="UTC") == first  # another role's variable
    inputs.plan.write_text("plugin: cluster_plan\n# a comment\n")
    assert inputs() != first  # the plan file (the backup role copies it as it is)


def test_facts_gathered_again_in_another_order_are_the_same_inputs(inputs: Any) -> None:
    """Two gatherings of one lab node listed virtualization_tech_guest in two orders; the
    stage gate then ran every stage again and a check-mode run reported every record changed."""
    facts = {"distribution": "Debian", "virtualization_tech_guest": ["container", "other"]}
    first = inputs(ansible_facts=facts)
    again = {**facts, "virtualization_tech_guest": ["other", "container"]}
    assert inputs(ansible_facts=again) == first
    assert inputs(ansible_facts={**facts, "virtualization_tech_guest": ["container"]}) != first


def test_a_controller_file_a_role_keeps_is_an_input(inputs: Any) -> None:
    missing = inputs()
    passphrase = inputs.dir / "gpu01.passphrase"
    passphrase.write_text("secret\n")
    passphrase.chmod(0o600)
    present = inputs()
    assert present != missing
    passphrase.chmod(0o644)
    assert inputs() != present
    explained = inputs.lookup.run(["backup"], {"cluster_plan_file": str(inputs.plan)}, explain=True)
    assert "variables" in explained[0] and "code" in explained[0]


def test_the_role_code_is_an_input(inputs: Any, tmp_path: Path, monkeypatch: Any) -> None:
    import importlib

    module = importlib.import_module(type(inputs.lookup).__module__)
    copy = tmp_path / "collection"
    shutil.copytree(ROOT / "roles" / "backup", copy / "roles" / "backup")
    (copy / "plugins").mkdir()
    monkeypatch.setattr(module, "COLLECTION", copy)
    before = inputs()
    (copy / "roles" / "backup" / "README.md").write_text("docs only\n")
    assert inputs() == before  # a README is not code
    tasks = copy / "roles" / "backup" / "tasks" / "main.yml"
    tasks.write_text(tasks.read_text() + "\n# changed\n")
    assert inputs() != before


def test_a_role_declares_its_variables_but_not_its_distribution_data() -> None:
    import importlib

    module = importlib.import_module(
        "ansible_collections.cluster_plan.cluster.plugins.lookup.converge_inputs"
    )
    names = module.declared_variables("common")
    assert "common_timezone" in names and "common_admin_users" in names
    assert "common_packages" not in names  # vars/Debian.yml: loaded when the role starts
    with pytest.raises(Exception, match="no role"):
        module.declared_variables("no_such_role")


def test_the_code_digest_covers_file_names_as_well_as_contents(tmp_path: Path) -> None:
    import importlib

    module = importlib.import_module(
        "ansible_collections.cluster_plan.cluster.plugins.lookup.converge_inputs"
    )
    a, b = tmp_path / "a", tmp_path / "b"
    a.write_text("x")
    b.write_text("x")
    assert module.tree_digest([a]) != module.tree_digest([b])
    assert module.tree_digest([a]) == module.tree_digest([a])
