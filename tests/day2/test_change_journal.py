"""The change journal read and written safely: a record of the wrong shape, with non-finite
numbers, a FIFO or a symbolic link in its place is an error naming the file (never a
traceback, a hang, or a write through the link)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support.change_plans import LAB_PLAN

from cluster_plan.day2.change.journal import Journal, JournalError, digest

REPO = Path(__file__).resolve().parents[2]
IDENTITY = {"old": {"a": 1}, "new": {"a": 2}, "replace": [], "batch": 1}
D = digest(IDENTITY)


def record(**fields: Any) -> str:
    return json.dumps({"digest": D, "done": {}, "failed": None, **fields})


BAD_RECORDS = {
    "a-list": ("[]", "not a change record"),
    "done-a-list": (record(done=[]), "done"),
    "done-step-a-number": (record(done={"1/drain:cpu01": 5}), "1/drain:cpu01"),
    "seconds-a-string": (record(done={"1/drain:cpu01": {"at": 1.0, "seconds": "x"}}), "seconds"),
    "failed-a-string": (record(failed="boom"), "failed"),
    "failed-without-step": (record(failed={"at": 1.0, "message": "m"}), "step"),
    "another-change": (record(digest="0123456789abcdef"), "another change"),
    "nan": (record(done={"1/drain:cpu01": {"at": 1.0, "seconds": float("nan")}}), "NaN"),
    "infinity": (record(done={"1/drain:cpu01": {"at": float("inf"), "seconds": 1}}), "Infinity"),
}


@pytest.mark.parametrize("name", sorted(BAD_RECORDS))
def test_a_record_of_the_wrong_shape_is_an_error_naming_the_file(tmp_path: Path, name: str):
    text, words = BAD_RECORDS[name]
    path = tmp_path / f"change-{D}.json"
    path.write_text(text)
    with pytest.raises(JournalError) as error:
        Journal(tmp_path, IDENTITY)
    assert str(error.value).startswith(f"{path}: "), error.value
    assert words in str(error.value)
    assert path.read_text() == text  # left as it was


def test_a_closed_record_with_a_non_finite_time_is_an_error(tmp_path: Path):
    journal = Journal(tmp_path, IDENTITY)
    journal.finished_path.write_text(json.dumps({"digest": D, "finished": float("nan")}))
    with pytest.raises(JournalError, match=f"{journal.finished_path}: .*NaN"):
        journal.finished_at()


def test_a_good_record_still_reads(tmp_path: Path):
    journal = Journal(tmp_path, IDENTITY)
    journal.mark_done("1/drain:cpu01", 2.0)
    journal.mark_failed("1/wait-jobs:cpu01", "running job(s) 7")
    again = Journal(tmp_path, IDENTITY)
    assert again.done("1/drain:cpu01") and again.failed is not None
    assert again.seconds() == {"1/drain:cpu01": 2.0}


def test_a_fifo_or_a_link_in_the_record_s_place_is_refused(tmp_path: Path):
    path = tmp_path / f"change-{D}.json"
    os.mkfifo(path)
    # in a child process: a reader that opens the FIFO blocks for ever
    opened = subprocess.run(
        [sys.executable, "-c", "import sys, json, pathlib\n"
         "from cluster_plan.day2.change.journal import Journal, JournalError\n"
         "try:\n    Journal(pathlib.Path(sys.argv[1]), json.loads(sys.argv[2]))\n"
         "except JournalError as exc:\n    print(exc)",
         str(tmp_path), json.dumps(IDENTITY)],
        capture_output=True, text=True, check=False, timeout=30,
    )  # fmt: skip
    assert opened.stdout.startswith(f"{path}: ") and "FIFO" in opened.stdout, opened
    path.unlink()
    target = tmp_path / "elsewhere.json"
    target.write_text(record())
    path.symlink_to(target)
    with pytest.raises(JournalError, match=f"{path}: .*symbolic link"):
        Journal(tmp_path, IDENTITY)


def test_a_linked_lock_is_refused_and_its_target_kept(tmp_path: Path):
    journal = Journal(tmp_path, IDENTITY)
    precious = tmp_path / "precious.txt"
    precious.write_text("keep me\n")
    lock = journal.path.with_suffix(".lock")
    lock.symlink_to(precious)
    with pytest.raises(JournalError, match=f"{lock}: .*symbolic link"), journal.held():
        pass
    assert precious.read_text() == "keep me\n"
    lock.unlink()
    os.mkfifo(lock)
    with pytest.raises(JournalError, match=f"{lock}: .*not a regular file"), journal.held():
        pass


def test_a_link_where_the_record_is_written_is_never_written_through(tmp_path: Path):
    journal = Journal(tmp_path, IDENTITY)
    precious = tmp_path / "precious.txt"
    precious.write_text("keep me\n")
    journal.path.with_suffix(".tmp").symlink_to(precious)
    journal.mark_done("1/drain:cpu01", 1.0)
    assert precious.read_text() == "keep me\n"
    assert Journal(tmp_path, IDENTITY).done("1/drain:cpu01")


def change_dry_run(journal_dir: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cluster_plan", "change", str(LAB_PLAN), str(LAB_PLAN),
         "--replace", "cpu01", "--dry-run", "--journal-dir", str(journal_dir)],
        capture_output=True, text=True, check=False, cwd=REPO, timeout=60,
    )  # fmt: skip


@pytest.mark.parametrize("kind", ["fifo", "wrong-shape"])
def test_a_dry_run_over_a_broken_record_exits_2_naming_it(tmp_path: Path, kind: str):
    """A FIFO made the dry run hang for ever; a record of the wrong shape gave a traceback."""
    journal_dir = tmp_path / "changes"
    journal_dir.mkdir()
    first = subprocess.run(
        [sys.executable, "-m", "cluster_plan", "change", str(LAB_PLAN), str(LAB_PLAN),
         "--replace", "cpu01", "--dry-run", "--journal-dir", str(journal_dir), "--format",
         "json"],
        capture_output=True, text=True, check=False, cwd=REPO, timeout=60,
    )  # fmt: skip
    path = Path(json.loads(first.stdout)["result"]["journal"])
    if kind == "fifo":
        os.mkfifo(path)
    else:
        name = path.name.removeprefix("change-").removesuffix(".json")
        path.write_text(json.dumps({"digest": name, "done": {"1/drain:cpu01": 5}, "failed": None}))
    done = change_dry_run(journal_dir)
    assert done.returncode == 2, done.stdout + done.stderr
    assert str(path) in done.stderr and "Traceback" not in done.stderr


def test_a_linked_machine_id_record_is_refused_not_read_or_written(tmp_path: Path):
    from test_change_operations import FakeExecutor

    from cluster_plan.day2.change import runner
    from cluster_plan.day2.change.operations import Step
    from cluster_plan.views.diff import deployed_pair

    old, new = deployed_pair(LAB_PLAN, LAB_PLAN)
    executor = FakeExecutor({"machine-id": [(0, "aaa\n")]})
    ctx = runner.Context(old, new, LAB_PLAN, executor, lab=False, sleep=lambda s: None)
    ctx.state_dir = tmp_path
    precious = tmp_path / "precious.txt"
    precious.write_text("keep me\n")
    (tmp_path / "replace-cpu01.machine-id").symlink_to(precious)
    with pytest.raises(runner.StepFailed, match="symbolic link"):
        runner.provision(ctx, Step("provision", ("cpu01",), ""), "replace")
    assert precious.read_text() == "keep me\n"
