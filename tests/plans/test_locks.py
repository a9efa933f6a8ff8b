"""Lock files through the CLI: missing, stale, unreadable, and refreshing one.

Each test copies the lab plan and its lock into tmp_path and edits the copy.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from support.cli_output import result

from cluster_plan import cli

ROOT = Path(__file__).resolve().parents[2]
LAB = ROOT / "inventory" / "lab" / "cluster.yml"
LAB_LOCK = LAB.with_name("cluster.lock.json")
GPU_COUNT = '    count: 2\n    hostname: "gpu{n:02d}"'
CPU_COUNT = '    count: 1\n    hostname: "cpu{n:02d}"'


@pytest.fixture
def plan(tmp_path: Path) -> Path:
    shutil.copy(LAB, tmp_path / "cluster.yml")
    shutil.copy(LAB_LOCK, tmp_path / "cluster.lock.json")
    return tmp_path / "cluster.yml"


def lock_of(plan: Path) -> Path:
    return plan.with_name("cluster.lock.json")


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


def findings(capsys, plan: Path) -> tuple[int, list[dict]]:
    code, out, _ = run(capsys, "validate", "--format", "json", str(plan))
    (report,) = result(out)
    return code, [f for f in report["findings"] if f["suppressed_by"] is None]


def edit(plan: Path, old: str, new: str) -> None:
    text = plan.read_text()
    assert text.count(old) == 1, old
    plan.write_text(text.replace(old, new))


def test_the_copied_lab_plan_and_lock_are_current(capsys, plan):
    assert findings(capsys, plan) == (0, [])
    code, out, _ = run(capsys, "lock", "--check", str(plan))
    assert code == 0
    assert "up to date" in out


def test_missing_lock(capsys, plan):
    lock_of(plan).unlink()
    code, found = findings(capsys, plan)
    # not locked yet is the next step (the README runs validate before lock), not a mistake
    assert code == 0
    (finding,) = found
    assert (finding["code"], finding["severity"], finding["path"], finding["file"]) == (
        "lock-missing",
        "warning",
        "$",
        str(lock_of(plan)),
    )
    assert finding["message"] == "the plan is not locked yet"
    assert f"cluster-plan lock {plan}" in finding["hint"]
    # --strict makes it an error, as every warning
    assert run(capsys, "validate", "--strict", str(plan))[0] == 1
    # --no-lock validates the plan alone
    assert run(capsys, "validate", "--no-lock", str(plan))[0] == 0
    # expand refuses: a plan without a lock has no addresses
    code, out, err = run(capsys, "expand", str(plan))
    assert (code, out) == (1, "")
    assert "error[lock-missing]" in err
    # lock writes one; then all is well
    assert run(capsys, "lock", str(plan))[0] == 0
    assert findings(capsys, plan) == (0, [])


def test_stale_lock_after_adding_a_node(capsys, plan):
    before = json.loads(lock_of(plan).read_text())
    edit(plan, GPU_COUNT, GPU_COUNT.replace("2", "3", 1))
    code, found = findings(capsys, plan)
    assert code == 1
    (finding,) = found
    assert (finding["code"], finding["path"], finding["file"]) == (
        "lock-stale",
        "$",
        str(lock_of(plan)),
    )
    assert "gpu03" in finding["message"]
    assert "cluster-plan lock" in finding["hint"]
    code, _, err = run(capsys, "lock", "--check", str(plan))
    assert code == 1
    assert "out of date" in err
    assert json.loads(lock_of(plan).read_text()) == before  # --check writes nothing
    assert run(capsys, "lock", str(plan))[0] == 0
    after = json.loads(lock_of(plan).read_text())
    for net, data in before["networks"].items():
        for host, address in data["hosts"].items():
            assert after["networks"][net]["hosts"][host] == address  # survivors keep theirs
        new = after["networks"][net]["hosts"]["gpu03"]
        assert new not in data["hosts"].values()
    assert findings(capsys, plan) == (0, [])


def test_stale_lock_after_removing_a_node(capsys, plan):
    edit(plan, GPU_COUNT, GPU_COUNT.replace("2", "1", 1))
    code, found = findings(capsys, plan)
    assert code == 1
    assert [f["code"] for f in found] == ["lock-stale"]
    assert "gpu02" in found[0]["message"]


def test_a_new_cidr_would_renumber_so_lock_refuses_unless_moves_are_allowed(capsys, plan):
    before = json.loads(lock_of(plan).read_text())
    edit(plan, "cidr: 10.41.0.0/24", "cidr: 10.41.4.0/24")
    code, found = findings(capsys, plan)
    assert code == 1
    (finding,) = found
    assert (finding["code"], finding["path"]) == ("locked-address-lost", "$.networks.compute.cidr")
    assert "outside 10.41.4.0/24" in finding["message"]
    assert "--allow-moves" in finding["hint"]
    code, _, err = run(capsys, "lock", str(plan))
    assert code == 1
    assert "locked-address-lost" in err
    assert json.loads(lock_of(plan).read_text()) == before  # nothing written
    code, out, _ = run(capsys, "lock", "--allow-moves", str(plan))
    assert code == 0
    moved = [line for line in out.splitlines() if line.startswith("  moved ")]
    assert len(moved) == len(before["networks"]["compute"]["hosts"])
    assert "  moved gpu01 on compute: 10.41.0." in out
    after = json.loads(lock_of(plan).read_text())
    assert after["networks"]["mgmt"] == before["networks"]["mgmt"]
    assert findings(capsys, plan) == (0, [])


def test_reordering_node_groups_keeps_the_lock_current(capsys, plan):
    text = plan.read_text()
    start, end = text.index("  head:\n"), text.index("  gpu:\n")
    head = text[start:end]
    text = text[:start] + text[end:]
    text = text.replace("\nscheduler:\n", "\n" + head.rstrip("\n") + "\n\nscheduler:\n", 1)
    plan.write_text(text)
    assert findings(capsys, plan) == (0, [])


@pytest.mark.parametrize(
    ("content", "line"),
    [
        (b'{"version": 1, "networks": {', 1),
        (b'{\n  "version": 1,\n  "networks": {},\n}\n', 4),
        (b"<<<<<<< HEAD\n{}\n=======\n{}\n>>>>>>> theirs\n", 1),
    ],
)
def test_lock_that_is_not_json(capsys, plan, content, line):
    lock_of(plan).write_bytes(content)
    code, found = findings(capsys, plan)
    assert code == 2  # input that cannot be read
    (finding,) = found
    assert (finding["code"], finding["file"], finding["line"]) == (
        "lock-unreadable",
        str(lock_of(plan)),
        line,
    )
    # lock does not overwrite a lock it cannot read: that would renumber every host
    code, _, err = run(capsys, "lock", str(plan))
    assert code == 2
    assert "lock-unreadable" in err
    assert lock_of(plan).read_bytes() == content


@pytest.mark.parametrize(
    "content",
    [
        b"[]",
        b"null",
        b'{"version": 1}',
        b'{"networks": {"mgmt": []}}',
        b'{"networks": {"mgmt": {"hosts": ["head01"]}}}',
        b"\xff\xfe\x00junk",
        b'{"networks": {"mgmt": {"hosts": {}, "released": []}}}',
    ],
)
def test_lock_of_the_wrong_shape(capsys, plan, content):
    lock_of(plan).write_bytes(content)
    code, found = findings(capsys, plan)
    assert code == 2
    assert [f["code"] for f in found] == ["lock-unreadable"]
    assert run(capsys, "lock", str(plan))[0] == 2
    assert lock_of(plan).read_bytes() == content  # left for a human to restore


def test_lock_that_is_a_directory(capsys, plan):
    lock_of(plan).unlink()
    lock_of(plan).mkdir()
    code, found = findings(capsys, plan)
    assert code == 2
    assert [f["code"] for f in found] == ["lock-unreadable"]


def test_lock_with_nonsense_addresses_is_stale_not_a_crash(capsys, plan):
    lock = json.loads(lock_of(plan).read_text())
    lock["networks"]["mgmt"]["hosts"]["gpu01"] = "not an address"
    lock["networks"]["mgmt"]["released"] = {"300.1.1.1": "ghost"}
    lock_of(plan).write_text(json.dumps(lock))
    code, found = findings(capsys, plan)
    assert code == 1
    assert [f["code"] for f in found] == ["lock-stale"]


def test_pin_on_an_address_the_lock_gives_another_host(capsys, plan):
    lock = json.loads(lock_of(plan).read_text())
    taken = lock["networks"]["mgmt"]["hosts"]["gpu02"]
    edit(
        plan,
        "    pool: gpu\n",
        f"    pool: gpu\n    nodes:\n      gpu01:\n        address: {{mgmt: {taken}}}\n",
    )
    code, found = findings(capsys, plan)
    assert code == 1
    (finding,) = found
    assert (finding["code"], finding["path"]) == (
        "pinned-address-taken",
        "$.node_groups.gpu.nodes.gpu01.address.mgmt",
    )
    assert (
        finding["line"]
        == plan.read_text().splitlines().index(f"        address: {{mgmt: {taken}}}") + 1
    )
    code, _, err = run(capsys, "lock", str(plan))
    assert code == 1
    assert "pinned-address-taken" in err
    assert json.loads(lock_of(plan).read_text()) == lock


def test_pin_on_a_free_address_moves_only_that_host(capsys, plan):
    lock = json.loads(lock_of(plan).read_text())
    edit(
        plan,
        "    pool: gpu\n",
        "    pool: gpu\n    nodes:\n      gpu01:\n        address: {mgmt: 10.40.0.200}\n",
    )
    code, found = findings(capsys, plan)
    assert code == 1
    assert [f["code"] for f in found] == ["lock-stale"]
    assert run(capsys, "lock", str(plan))[0] == 0
    after = json.loads(lock_of(plan).read_text())
    expected = dict(lock["networks"]["mgmt"]["hosts"], gpu01="10.40.0.200")
    assert after["networks"]["mgmt"]["hosts"] == expected
    for net in ("compute", "storage"):
        assert after["networks"][net]["hosts"] == lock["networks"][net]["hosts"]
    assert findings(capsys, plan) == (0, [])


def test_lock_that_cannot_be_written_is_a_message_not_a_traceback(capsys, plan, monkeypatch):
    import cluster_plan.api

    def refuse(path, lock, plan_path=None):
        raise PermissionError(13, "Permission denied", str(path))

    lock_of(plan).unlink()
    monkeypatch.setattr(cluster_plan.api, "write_lock", refuse)
    code, _, err = run(capsys, "lock", str(plan))
    assert code == 2
    assert "Permission denied" in err
    assert str(lock_of(plan)) in err


def test_freed_address_is_held_back_until_lock_reclaim(capsys, plan):
    before = json.loads(lock_of(plan).read_text())
    freed = before["networks"]["mgmt"]["hosts"]["gpu02"]
    edit(plan, GPU_COUNT, GPU_COUNT.replace("2", "1", 1))
    assert run(capsys, "lock", str(plan))[0] == 0
    held = json.loads(lock_of(plan).read_text())
    assert held["networks"]["mgmt"]["released"] == {freed: "gpu02"}
    edit(plan, CPU_COUNT, CPU_COUNT.replace("1", "2", 1))
    assert run(capsys, "lock", str(plan))[0] == 0
    grown = json.loads(lock_of(plan).read_text())
    assert grown["networks"]["mgmt"]["hosts"]["cpu02"] != freed
    assert freed not in grown["networks"]["mgmt"]["hosts"].values()
    # --reclaim lets the next new host have it
    edit(plan, CPU_COUNT.replace("1", "2", 1), CPU_COUNT.replace("1", "3", 1))
    assert run(capsys, "lock", "--reclaim", str(plan))[0] == 0
    reclaimed = json.loads(lock_of(plan).read_text())
    assert reclaimed["networks"]["mgmt"]["hosts"]["cpu03"] == freed
    for host, address in grown["networks"]["mgmt"]["hosts"].items():
        assert reclaimed["networks"]["mgmt"]["hosts"][host] == address
    assert findings(capsys, plan) == (0, [])


def test_an_unreadable_lock_is_quoted_from_the_lock_not_the_plan(capsys, plan):
    lock_of(plan).write_text('{\n  "version": 2,\n  "networks": {},\n}\n')
    code, _, err = run(capsys, "validate", str(plan))
    assert code == 2
    head, quoted, caret = err.splitlines()[:3]
    assert head.startswith(f"{lock_of(plan)}:4:1: error[lock-unreadable]")
    assert quoted == "    }"  # line 4 of the lock, not of the plan
    assert caret == "    ^"
