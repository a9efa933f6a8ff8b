"""The inventory plugin as Ansible's `constructed` behaves: `groups` and `keyed_groups` see the
variables `compose` made. And a damaged lock (of the wrong shape, too deep, a number too long
to read) fails with the file and the problem, never a traceback."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from ansible_output import plain
from test_inventory_plugin import LAB, ansible


@pytest.fixture
def plan_copy(tmp_path: Path) -> Path:
    shutil.copy(LAB, tmp_path / "cluster.yml")
    shutil.copy(LAB.with_name("cluster.lock.json"), tmp_path / "cluster.lock.json")
    return tmp_path / "cluster.yml"


def test_groups_and_keyed_groups_see_composed_variables(plan_copy: Path) -> None:
    with plan_copy.open("a") as handle:
        handle.write(
            "compose:\n"
            "  big: plan_host.memory_gb >= 8\n"
            "  tier: \"'fast' if plan_host.memory_gb >= 8 else 'slow'\"\n"
            "groups:\n  composed_big: big\n"
            "keyed_groups:\n  - key: tier\n    prefix: tier\n"
        )
    result = ansible("ansible-inventory", "-i", str(plan_copy), "--list")
    assert result.returncode == 0, result.stderr
    data = plain(json.loads(result.stdout))
    assert isinstance(data, dict)
    assert set(data["composed_big"]["hosts"]) == {"gpu01", "gpu02"}
    assert set(data["tier_fast"]["hosts"]) == {"gpu01", "gpu02"}
    everyone = set(data["_meta"]["hostvars"])
    assert set(data["tier_slow"]["hosts"]) == everyone - {"gpu01", "gpu02"}
    assert data["_meta"]["hostvars"]["gpu01"]["tier"] == "fast"


@pytest.mark.parametrize(
    ("content", "shown"),
    [
        (lambda lock: {**lock, "racks": [1, 2]}, "racks is not an object"),
        (
            lambda lock: {**lock, "networks": {**lock["networks"], "mgmt": {"cidr": "x"}}},
            "networks.mgmt has no 'hosts'",
        ),
        ("[" * 5000 + "]" * 5000, "nests too deeply"),
        ('{"version": ' + "1" * 5000 + "}", "too long"),
    ],
    ids=["racks-list", "network-without-hosts", "deep", "huge-number"],
)
def test_a_damaged_lock_is_a_parser_error(plan_copy: Path, content: object, shown: str) -> None:
    lock_path = plan_copy.with_name("cluster.lock.json")
    if callable(content):
        lock_path.write_text(json.dumps(content(json.loads(lock_path.read_text()))))
    else:
        lock_path.write_text(str(content))
    result = ansible("ansible-inventory", "-i", str(plan_copy), "--list")
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert "Traceback" not in output
    assert "[lock-unreadable]" in output and shown in output
    assert str(lock_path) in output
