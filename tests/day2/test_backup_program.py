"""The node-side backup program (cluster_plan.backup, shipped to the nodes as one zip by the
backup role): what it backs up, how the drill judges a restore, the schedule's allowed age,
what a restore puts back, and that it runs from its zip with the standard library alone.
The lab test runs it for real against BorgBackup."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Any

import pytest

from cluster_plan import node_bundle
from cluster_plan.backup import borg, drill, jobs, program, restore, schedule, settings

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).resolve().parent / "fixtures"


def write_manifest(directory: Path, role: str, precious: list[dict[str, object]]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{role}.json").write_text(json.dumps({"role": role, "precious": precious}))


def test_declarations_come_from_every_manifest_then_the_plan_sources(tmp_path: Path) -> None:
    write_manifest(tmp_path, "common", [{"name": "etc", "paths": ["/etc"]}])
    write_manifest(
        tmp_path,
        "slurm",
        [
            {"name": "munge", "paths": ["/etc/munge/munge.key"], "restore_after": "start"},
            {"name": "slurmctld", "paths": ["/var/lib/slurm/slurmctld"], "before_backup": "x"},
        ],
    )
    found = settings.read_declarations(str(tmp_path), ["/srv/data"])
    assert [d.name for d in found] == ["etc", "munge", "slurmctld", "sources"]
    assert found[2].before_backup == "x" and found[1].restore_after == "start"
    assert found[3].paths == ("/srv/data",)


def test_an_unreadable_manifest_is_named(tmp_path: Path) -> None:
    (tmp_path / "ceph.json").write_text("{not json")
    with pytest.raises(settings.BackupError, match=r"ceph\.json"):
        settings.read_declarations(str(tmp_path), [])


def test_paths_backed_up_exist_and_none_lies_inside_another(tmp_path: Path) -> None:
    (tmp_path / "etc" / "munge").mkdir(parents=True)
    (tmp_path / "etc" / "munge" / "munge.key").write_text("k")
    (tmp_path / "state").mkdir()
    declarations = [
        settings.Precious("etc", (str(tmp_path / "etc"),)),
        settings.Precious("munge", (str(tmp_path / "etc/munge/munge.key"),)),
        settings.Precious("slurmctld", (str(tmp_path / "state") + "/",)),
        settings.Precious("sources", (str(tmp_path / "absent"),)),
    ]
    assert settings.existing_paths(declarations) == [str(tmp_path / "etc"), str(tmp_path / "state")]


def test_retention_is_borgs_keep_rules_without_the_zero_ones() -> None:
    assert borg.retention_args({"daily": 7, "weekly": 4, "monthly": 0}) == [
        "--keep-daily=7",
        "--keep-weekly=4",
    ]
    assert borg.retention_args({"daily": 0, "weekly": 0, "monthly": 0}) == []


def _tree(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def _age(root: Path, seconds: float) -> None:
    """Make every file under root look that old (mtime; ctime cannot be set, so the
    snapshot time used below is in the future of the files' ctime instead)."""
    stamp = time.time() - seconds
    for dirpath, _dirs, names in os.walk(root):
        for name in names:
            os.utime(Path(dirpath, name), (stamp, stamp))


def test_the_drill_passes_when_the_restore_matches_the_source(tmp_path: Path) -> None:
    source, restored = tmp_path / "source", tmp_path / "restored"
    files = {"etc/hosts": "127.0.0.1 localhost\n", "etc/slurm/slurm.conf": "ClusterName=lab\n"}
    _tree(source, files)
    _tree(restored / "etc", {k.removeprefix("etc/"): v for k, v in files.items()})
    result = drill.compare_restored(restored, time.time() + 5, ["/etc"], source_root=source)
    assert result.ok and result.checked == 2 and result.changed_since == 0


def test_the_drill_fails_on_a_file_that_differs_from_an_unchanged_source(tmp_path: Path) -> None:
    source, restored = tmp_path / "source", tmp_path / "restored"
    _tree(source, {"etc/hosts": "127.0.0.1 localhost\n", "etc/issue": "Debian\n"})
    _tree(restored, {"etc/hosts": "127.0.0.1 localhost\n", "etc/issue": "Debian GNU\n"})
    result = drill.compare_restored(restored, time.time() + 5, ["/etc"], source_root=source)
    assert not result.ok
    assert result.mismatches == ["/etc/issue"]


def test_files_changed_after_the_snapshot_are_not_held_against_it(tmp_path: Path) -> None:
    source, restored = tmp_path / "source", tmp_path / "restored"
    _tree(restored, {"state/job_state": "old", "state/node_state": "same"})
    snapshot = time.time() - 60
    _tree(source, {"state/job_state": "new", "state/node_state": "same"})  # written just now
    result = drill.compare_restored(restored, snapshot, ["/state"], source_root=source)
    assert result.ok
    assert (result.checked, result.changed_since) == (0, 2)


@pytest.mark.parametrize("race", ["removed", "replaced"])
def test_a_source_file_rotated_while_it_is_read_is_not_held_against_the_snapshot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, race: str
) -> None:
    """slurmctld renames its state files (part_state -> part_state.old) at any moment: one
    that goes, or is replaced, between the drill's look at it and its read is changed since
    the snapshot (as a CI run met it on head01), not a failed drill."""
    source, restored = tmp_path / "source", tmp_path / "restored"
    _tree(source, {"state/part_state.old": "a", "state/node_state": "same"})
    _tree(restored, {"state/part_state.old": "a", "state/node_state": "same"})
    real = drill.sha256_file

    def rotating(path: Path) -> str:
        if path.name == "part_state.old" and path.is_relative_to(source):
            path.unlink()  # between the drill's lstat and its read
            if race == "replaced":
                path.write_text("b")
        return real(path)

    monkeypatch.setattr(drill, "sha256_file", rotating)
    result = drill.compare_restored(restored, time.time() + 5, ["/state"], source_root=source)
    assert result.ok and (result.checked, result.changed_since) == (1, 1)


def test_a_declared_path_missing_from_the_snapshot_fails_the_drill(tmp_path: Path) -> None:
    source, restored = tmp_path / "source", tmp_path / "restored"
    _tree(source, {"etc/munge/munge.key": "key"})
    restored.mkdir()
    result = drill.compare_restored(
        restored, time.time() + 5, ["/etc/munge/munge.key"], source_root=source
    )
    assert result.missing == ["/etc/munge/munge.key"] and not result.ok


@pytest.mark.parametrize(
    ("fixture", "gap_s"),
    [
        ("calendar-daily.txt", 86400),
        ("calendar-mon-fri.txt", 4 * 86400),  # Mon 02:00 -> Fri 02:00
        ("calendar-hourly-berlin.txt", 3600),  # the (in UTC) lines are not counted twice
    ],
)
def test_the_schedules_longest_gap_from_systemd_analyze(fixture: str, gap_s: int) -> None:
    assert schedule.calendar_max_gap((FIXTURES / fixture).read_text()) == gap_s


def test_no_gap_from_an_expression_systemd_refused() -> None:
    assert schedule.calendar_max_gap("Failed to parse calendar specification 'nope'") is None


def _declarations() -> list[object]:
    return [
        settings.Precious("etc", ("/etc",)),
        settings.Precious("munge", ("/etc/munge/munge.key",), restore_before="stop munge"),
        settings.Precious("slurmctld", ("/var/lib/slurm/slurmctld",)),
    ]


def test_a_restore_names_declared_state_or_absolute_paths() -> None:
    chosen, paths = restore.restore_plan(_declarations(), ["munge", "slurmctld"], ["/etc/issue/"])
    assert [d.name for d in chosen] == ["munge", "slurmctld"]
    assert paths == ["/etc/munge/munge.key", "/var/lib/slurm/slurmctld", "/etc/issue"]


@pytest.mark.parametrize(
    ("names", "paths", "message"),
    [
        (["ceph-mon"], [], "no precious state named ceph-mon here"),
        ([], ["etc/issue"], "paths must be absolute"),
        ([], [], "name what to restore"),
    ],
)
def test_a_restore_refuses_what_it_cannot_know(
    names: list[str], paths: list[str], message: str
) -> None:
    with pytest.raises(settings.BackupError, match=message):
        restore.restore_plan(_declarations(), names, paths)


def test_putting_back_keeps_what_stood_there(tmp_path: Path) -> None:
    staging, live = tmp_path / "staging", tmp_path / "live"
    _tree(staging, {f"{live}/etc/issue".lstrip("/"): "from the backup\n"})
    _tree(live, {"etc/issue": "edited by hand\n"})
    note = restore.put_back(staging, str(live / "etc/issue"), "20261130T180000")
    assert (live / "etc/issue").read_text() == "from the backup\n"
    kept = live / "etc/issue.before-restore-20261130T180000"
    assert kept.read_text() == "edited by hand\n"
    assert str(kept) in note


def test_putting_back_a_lost_directory(tmp_path: Path) -> None:
    staging, live = tmp_path / "staging", tmp_path / "live"
    _tree(staging, {f"{live}/state/job_state".lstrip("/"): "jobs"})
    restore.put_back(staging, str(live / "state"), "x")
    assert (live / "state/job_state").read_text() == "jobs"
    assert not list(live.glob("state.before-restore-*"))


@pytest.mark.skipif(os.geteuid() != 0, reason="chown needs root")
def test_putting_back_across_file_systems_keeps_owners(tmp_path: Path) -> None:
    """An HA pair's state lives on a shared file system, the staging on the node's disk: the
    restored directory keeps its owner (slurmctld writes it as `slurm`), mode and contents."""
    shared = Path(tempfile.mkdtemp(dir="/dev/shm"))  # tmpfs: another file system than /tmp
    try:
        if os.stat(shared).st_dev == os.stat(tmp_path).st_dev:
            pytest.skip("/dev/shm and the test's folder are one file system here")
        staging, live = tmp_path / "staging", shared / "live"
        _tree(staging, {f"{live}/state/job_state".lstrip("/"): "jobs"})
        state = staging / str(live / "state").lstrip("/")
        for path in (state, state / "job_state"):
            os.chown(path, 4242, 4243)
        state.chmod(0o700)
        note = restore.put_back(staging, str(live / "state"), "x")
        assert note == f"restored {live / 'state'}"
        restored = live / "state"
        assert (restored / "job_state").read_text() == "jobs"
        for path in (restored, restored / "job_state"):
            assert (path.stat().st_uid, path.stat().st_gid) == (4242, 4243), path
        assert restored.stat().st_mode & 0o777 == 0o700
    finally:
        shutil.rmtree(shared)


def test_the_command_line_says_what_is_wrong_without_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert program.main(["--config", str(tmp_path / "none.json"), "status"]) == 1
    err = capsys.readouterr().err
    assert "none.json" in err and "backup role" in err and "Traceback" not in err


def _status_config(tmp_path: Path, status: dict[str, Any] | None = None, **extra: object) -> Path:
    """A node's backup.json under tmp_path (``extra`` keys added) with ``status`` as its last
    results; its path."""
    state = tmp_path / "state"
    config = {
        "host": "gpu01",
        "repositories": [{"name": "target", "url": "ssh://borg@10.40.0.10:22/srv/backup/gpu01"}],
        "passphrase_file": str(state / "passphrase"),
        "ssh_key": str(state / "id_ed25519"),
        "known_hosts": str(state / "known_hosts"),
        "state_dir": str(state),
        "manifest_dir": str(tmp_path / "manifest"),
        **extra,
    }
    path = tmp_path / "backup.json"
    path.write_text(json.dumps(config))
    written = status or {"repositories": {"target": {"time": 2.0}}}
    jobs.write_status(settings.load_config(path), written)
    return path


def test_status_reports_the_last_results_and_the_allowed_age(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _status_config(
        tmp_path,
        {"repositories": {"target": {"archive": "gpu01-x", "time": 1.0}}},
        schedule="*-*-* 02:00:00",
        randomized_delay_s=1800,
        grace_s=3600,
    )
    assert program.main(["--config", str(path), "status"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert status["repositories"]["target"]["archive"] == "gpu01-x"
    assert status["expected"] == ["target"]
    if status["max_age_s"] is not None:  # systemd-analyze is there (Debian 12 has it)
        assert status["max_age_s"] == 86400 + 1800 + 3600


def test_borgs_own_words_without_its_traceback() -> None:
    # borg extract's stderr on gpu01 after the lab test corrupted a segment of its repository
    stderr = (FIXTURES / "borg-extract-corrupted.txt").read_text()
    assert borg.borg_error(stderr) == (
        "Data integrity error: Segment entry checksum mismatch [segment 2, offset 272658]"
    )
    assert borg.borg_error("Repository /srv/backup/x does not exist.\n") == (
        "Repository /srv/backup/x does not exist."
    )
    assert borg.borg_error("") == "no message"


# The modules the nodes run (cluster_plan.backup's status and command are the controller's).
NODE_MODULES = ("settings", "borg", "hooks", "drill", "schedule", "jobs", "restore", "program")

# Run with `python -I`: every import outside the standard library and cluster_plan fails, as
# on a node, whose python3 has none of the controller's packages.
_STDLIB_ONLY = """
import importlib, sys
sys.path.insert(0, sys.argv[1])
class Blocker:
    def find_spec(self, name, path=None, target=None):
        top = name.partition(".")[0]
        if top in sys.stdlib_module_names or top == "cluster_plan":
            return None
        raise ImportError(f"not on a node: {name}")
sys.meta_path.insert(0, Blocker())
try:
    import yaml
except ImportError:
    pass
else:
    sys.exit("the blocker let yaml in")
for name in sys.argv[2:]:
    importlib.import_module("cluster_plan.backup." + name)
from cluster_plan.backup.program import main
sys.exit(main(["--config", "/nonexistent/backup.json", "status"]))
"""


def test_the_programs_modules_need_only_the_standard_library() -> None:
    done = subprocess.run(
        [sys.executable, "-I", "-c", _STDLIB_ONLY, str(ROOT), *NODE_MODULES],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert "not on a node" not in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 1 and "/nonexistent/backup.json" in done.stderr, done.stderr


def test_the_backup_zip_is_the_same_bytes_and_holds_only_the_backup_modules(
    tmp_path: Path,
) -> None:
    first = node_bundle.bundle("backup")
    assert node_bundle.bundle("backup") == first
    target = tmp_path / "cache" / "cluster-plan-backup.pyz"
    assert node_bundle.write_bundle("backup", target) is True
    assert node_bundle.write_bundle("backup", target) is False
    assert target.read_bytes() == first
    names = zipfile.ZipFile(target).namelist()
    assert names[0] == "__main__.py"
    assert {f"cluster_plan/backup/{m}.py" for m in NODE_MODULES} <= set(names)
    assert not [n for n in names[1:] if not n.startswith("cluster_plan/backup/")
                and n != "cluster_plan/__init__.py"]  # fmt: skip


def test_the_backup_zip_runs_with_the_standard_library_alone(tmp_path: Path) -> None:
    """`python3 -I -S ZIP`: no site-packages at all, as /usr/local/sbin/cluster-plan-backup
    runs it on a node (with the distribution's python3)."""
    target = tmp_path / "cluster-plan-backup.pyz"
    node_bundle.write_bundle("backup", target)
    config = _status_config(tmp_path)

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-I", "-S", str(target), *args],
            capture_output=True, text=True, check=False, cwd=tmp_path,
        )  # fmt: skip

    helped = run("--help")
    assert helped.returncode == 0, helped.stderr
    assert helped.stdout.startswith("usage: cluster-plan-backup")
    shown = run("--config", str(config), "status")
    assert shown.returncode == 0, shown.stderr
    status = json.loads(shown.stdout)
    assert status["host"] == "gpu01" and status["expected"] == ["target"]
    assert status["repositories"] == {"target": {"time": 2.0}}
    missing = run("--config", str(tmp_path / "none.json"), "status")
    assert missing.returncode == 1 and "Traceback" not in missing.stderr
    assert missing.stderr.startswith("cluster-plan-backup: ")


def test_the_bundle_command_builds_a_named_program(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "backup.pyz"
    assert node_bundle.main(["backup", str(target)]) == 0
    assert node_bundle.main(["backup", str(target)]) == 0
    assert capsys.readouterr().out.split() == ["changed", "unchanged"]
    assert target.read_bytes() == node_bundle.bundle("backup")
    assert node_bundle.main(["nothing", str(target)]) == 2
    assert "backup|collectives|exporter FILE" in capsys.readouterr().err
