"""The lock is bound to its plan: it records which plan it belongs to and is refused by
another; a version it does not know is refused, never rewritten as an older one; `lock` writes
its own file only, through a symlink, keeping the owner, group and mode.

Each test copies the lab plan and its lock (a version 2 lock, from before the plan was
recorded) into tmp_path.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from support.cli_output import result

from cluster_plan import cli
from cluster_plan.plan.lockfile import LOCK_VERSION

ROOT = Path(__file__).resolve().parents[2]
LAB = ROOT / "inventory" / "lab" / "cluster.yml"
LAB_LOCK = LAB.with_name("cluster.lock.json")


@pytest.fixture
def plan(tmp_path: Path) -> Path:
    shutil.copy(LAB, tmp_path / "c.yml")
    shutil.copy(LAB_LOCK, tmp_path / "c.lock.json")
    return tmp_path / "c.yml"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


def lock_of(plan: Path) -> dict:
    return json.loads(plan.with_name("c.lock.json").read_text())


def test_an_older_lock_is_accepted_and_gets_the_plan_on_the_next_lock(capsys, plan):
    old = lock_of(plan)
    assert "plan" not in old and old["version"] < LOCK_VERSION  # what the repository holds
    assert run(capsys, "validate", str(plan))[0] == 0
    code, out, _ = run(capsys, "lock", "--check", str(plan))
    assert (code, "up to date" in out) == (0, True)  # addresses current: not out of date
    code, out, _ = run(capsys, "lock", str(plan))
    assert (code, "wrote" in out) == (0, True)
    new = lock_of(plan)
    assert new["version"] == LOCK_VERSION
    assert new["plan"] == {"file": "c.yml", "cluster": "lab"}
    assert new["networks"] == old["networks"] and new["racks"] == old["racks"]
    assert run(capsys, "lock", str(plan))[1].startswith(f"{plan.with_name('c.lock.json')}: unch")


def test_two_plans_that_share_a_lock_name(capsys, plan):
    """c.yml and c.yaml both have the lock c.lock.json: the one it was not written for is
    refused, and `lock` of it does not replace the other's addresses."""
    assert run(capsys, "lock", str(plan))[0] == 0
    before = plan.with_name("c.lock.json").read_bytes()
    other = plan.with_name("c.yaml")
    other.write_text(plan.read_text().replace("gpu{n:02d}", "gpx{n:02d}"))
    code, _, err = run(capsys, "validate", str(other))
    assert code == 1
    assert "error[lock-foreign]" in err and "c.yml" in err and "rename" in err
    assert run(capsys, "lock", str(other))[0] == 1
    assert run(capsys, "expand", str(other))[0] == 1
    assert plan.with_name("c.lock.json").read_bytes() == before
    assert run(capsys, "validate", str(plan))[0] == 0  # the owner still reads it


def test_a_plan_renamed_with_its_lock_keeps_it(capsys, plan):
    assert run(capsys, "lock", str(plan))[0] == 0
    renamed = plan.rename(plan.with_name("d.yml"))
    plan.with_name("c.lock.json").rename(plan.with_name("d.lock.json"))
    assert run(capsys, "validate", str(renamed))[0] == 0
    code, out, _ = run(capsys, "lock", "--check", str(renamed))
    assert code == 0, out
    assert run(capsys, "lock", str(renamed))[0] == 0
    assert json.loads(plan.with_name("d.lock.json").read_text())["plan"]["file"] == "d.yml"


def test_a_lock_of_another_cluster_is_refused(capsys, plan):
    lock = lock_of(plan)
    lock.update(version=LOCK_VERSION, plan={"file": "c.yml", "cluster": "elsewhere"})
    plan.with_name("c.lock.json").write_text(json.dumps(lock))
    code, _, err = run(capsys, "validate", str(plan))
    assert code == 1
    assert "error[lock-foreign]" in err and "'elsewhere'" in err and "'lab'" in err
    assert run(capsys, "lock", str(plan))[0] == 1
    assert lock_of(plan)["plan"]["cluster"] == "elsewhere"  # left as it was


def test_a_newer_lock_is_refused_never_downgraded(capsys, plan):
    lock = lock_of(plan)
    lock.update(version=LOCK_VERSION + 1, plan={"file": "c.yml", "cluster": "lab"}, future={})
    text = json.dumps(lock)
    plan.with_name("c.lock.json").write_text(text)
    code, out, _ = run(capsys, "validate", "--format", "json", str(plan))
    assert code == 2
    (finding,) = [f for f in result(out)[0]["findings"] if f["suppressed_by"] is None]
    assert finding["code"] == "lock-too-new" and "upgrade" in finding["hint"]
    assert run(capsys, "lock", str(plan))[0] == 2
    assert plan.with_name("c.lock.json").read_text() == text


def test_lock_touches_no_file_but_its_own(capsys, plan):
    """An editor's swap file and a backup beside the lock, named like it, are the user's."""
    theirs = [plan.with_name(".c.lock.json.swp"), plan.with_name(".c.lock.json.orig")]
    for path in theirs:
        path.write_text("mine\n")
    assert run(capsys, "lock", str(plan))[0] == 0
    assert [path.read_text() for path in theirs] == ["mine\n", "mine\n"]
    left = sorted(p.name for p in plan.parent.iterdir())
    assert left == [".c.lock.json.orig", ".c.lock.json.swp", "c.lock.json", "c.yml"]


def test_a_symlinked_lock_stays_a_symlink(capsys, plan, tmp_path):
    store = tmp_path / "store"
    store.mkdir()
    target = store / "real.lock.json"
    plan.with_name("c.lock.json").rename(target)
    plan.with_name("c.lock.json").symlink_to(target)
    assert run(capsys, "lock", str(plan))[0] == 0
    link = plan.with_name("c.lock.json")
    assert link.is_symlink() and link.resolve() == target
    assert json.loads(target.read_text())["plan"]["file"] == "c.yml"
    assert sorted(p.name for p in store.iterdir()) == ["real.lock.json"]


def test_the_lock_keeps_its_owner_group_and_mode(capsys, plan):
    lock = plan.with_name("c.lock.json")
    os.chmod(lock, 0o640)
    if os.geteuid() == 0:  # root rewriting a user's lock must not take it
        os.chown(lock, 12345, 23456)
    before = lock.stat()
    assert run(capsys, "lock", str(plan))[0] == 0
    after = lock.stat()
    assert after.st_ino != before.st_ino  # rewritten (atomically, a new file)...
    assert (after.st_uid, after.st_gid, after.st_mode) == (  # ...and still the user's
        before.st_uid,
        before.st_gid,
        before.st_mode,
    )
