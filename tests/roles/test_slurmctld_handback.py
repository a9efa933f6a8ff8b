"""slurmctld-handback, the HA pair's hand-back helper (roles/slurm/files): the returning
primary waits for the backup in control to save its state and stop. Runs the script itself,
with a stand-in `scontrol` that plays the backup: it writes the backup's stopped note (as the
backup's ExecStopPost would) after a delay, or never."""

from __future__ import annotations

import os
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "roles" / "slurm" / "files" / "slurmctld-handback"


def beat(state: Path, written: float, index: int) -> None:
    (state / "heartbeat").write_bytes(struct.pack(">QQ", int(written), index))


def run(
    state: Path,
    tmp_path: Path,
    backup_stops_after: float | None,
    timeout_s: int = 20,
    slurmctld_timeout_s: int | None = None,
):
    """The primary's ExecStartPre, with `scontrol` replaced: it logs its arguments and, like
    the backup told to shut down, notes 'stopped' after `backup_stops_after` seconds."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    act = ""
    if backup_stops_after is not None:
        act = (
            f"(sleep {backup_stops_after}; {sys.executable} {SCRIPT} --stopped {state} osd01) "
            ">/dev/null 2>&1 &"
        )
    scontrol = bin_dir / "scontrol"
    scontrol.write_text(
        f'#!/bin/sh\necho "$@" >> {tmp_path}/scontrol.calls\n{act}\n'
        'echo "slurm_shutdown error: Unable to contact slurm controller" >&2\nexit 1\n'
    )
    scontrol.chmod(0o755)
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, str(SCRIPT), str(state), str(timeout_s)]
        + ([] if slurmctld_timeout_s is None else [str(slurmctld_timeout_s)]),
        env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"},
        capture_output=True,
        text=True,
        timeout=timeout_s + 30,
        check=False,
    )
    calls = tmp_path / "scontrol.calls"
    return (
        done,
        (calls.read_text().splitlines() if calls.exists() else []),
        (time.monotonic() - started),
    )


@pytest.fixture
def state(tmp_path: Path) -> Path:
    folder = tmp_path / "state"
    folder.mkdir()
    return folder


def test_a_backup_in_control_is_stopped_and_waited_for(state: Path, tmp_path: Path) -> None:
    beat(state, time.time() - 3, index=1)
    done, calls, seconds = run(state, tmp_path, backup_stops_after=2)
    assert done.returncode == 0, done.stderr
    assert calls == ["shutdown slurmctld"]
    assert "backup controller 1 is in control" in done.stdout
    assert "osd01 saved its state and stopped" in done.stdout
    # It waited for the backup: the backup stops 2 s in, so anything sooner is wrong. "And no
    # longer" is the stopped note seen above, not an upper bound on the wall clock (a loaded
    # machine only makes this later; the subprocess timeout stops a hang).
    assert seconds >= 2
    assert (state / "cluster-plan-handback" / "osd01.stopped").read_text().strip().isdigit()


@pytest.mark.parametrize(
    ("written_ago", "index", "why"),
    [
        (3, 0, "the primary wrote the last heartbeat: no takeover happened"),
        (3600, 1, "a backup's heartbeat an hour old: that backup is gone too"),
        (None, None, "no heartbeat at all (a new cluster)"),
    ],
)
def test_nothing_to_take_back_starts_at_once(
    state: Path, tmp_path: Path, written_ago: int | None, index: int | None, why: str
) -> None:
    if written_ago is not None and index is not None:
        beat(state, time.time() - written_ago, index)
    done, calls, _ = run(state, tmp_path, backup_stops_after=None)
    assert done.returncode == 0, why
    assert calls == [], why
    assert "no backup controller is in control; starting" in done.stdout, why


@pytest.mark.parametrize(
    "noted_ago", [600, -600], ids=["stopped-long-ago", "its-clock-ten-minutes-ahead"]
)
def test_an_old_note_does_not_count_and_a_silent_backup_does_not_block(
    state: Path, tmp_path: Path, noted_ago: int
) -> None:
    # osd01 stopped long ago (an old note, or one its clock dated ahead of this host's); now
    # it holds control and never answers: only a note that changes counts
    (state / "cluster-plan-handback").mkdir()
    (state / "cluster-plan-handback" / "osd01.stopped").write_text(
        f"{int(time.time()) - noted_ago}\n"
    )
    beat(state, time.time(), index=1)
    done, calls, seconds = run(state, tmp_path, backup_stops_after=None, timeout_s=3)
    assert done.returncode == 0  # the primary starts anyway: Slurm's own hand-back follows
    assert calls == ["shutdown slurmctld"]
    assert "no backup reported it had stopped within 3s; starting anyway" in done.stdout
    # the protocol's timeout: it gave the backup its full 3 s before starting anyway (the
    # lower bound is the property; the subprocess timeout, not an assertion, stops a hang)
    assert seconds >= 3


def test_with_nobody_in_control_the_primary_starts_once_the_heartbeat_is_stale(
    state: Path, tmp_path: Path
) -> None:
    # A thawed primary took control back from the backup (which saved and went standby) and
    # was stopped by its fence: the backup's last heartbeat is 20 s old, nobody takes the
    # shutdown. Half of SlurmctldTimeout (30 s) has passed without a beat: the state is final.
    beat(state, time.time() - 20, index=1)
    done, calls, _ = run(state, tmp_path, backup_stops_after=None, slurmctld_timeout_s=30)
    assert done.returncode == 0, done.stderr
    assert calls == ["shutdown slurmctld"]
    assert "no controller is in control" in done.stdout, done.stdout
    assert "the state is final: starting" in done.stdout
    assert "within 20s" not in done.stdout  # it did not sit out the hand-back's timeout


def test_a_heartbeat_missing_for_a_moment_is_not_nobody_in_control(
    state: Path, tmp_path: Path
) -> None:
    # slurmctld replaces its heartbeat by unlink and link: a read between the two finds no
    # file. Here the backup's beat is gone for 3 s after the shutdown is asked (a stand-in
    # for that window, made long enough to be read), then it beats again and stops at 5 s.
    beat(state, time.time(), index=1)
    heartbeat = state / "heartbeat"
    gap = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import os, struct, sys, time\n"
            f"path = {str(heartbeat)!r}\n"
            "time.sleep(0.5); os.unlink(path); time.sleep(3)\n"
            "open(path, 'wb').write(struct.pack('>QQ', int(time.time()), 1))\n",
        ]
    )
    try:
        done, calls, seconds = run(
            state, tmp_path, backup_stops_after=5, timeout_s=20, slurmctld_timeout_s=30
        )
    finally:
        gap.wait(timeout=30)
    assert done.returncode == 0, done.stderr
    assert "no controller is in control" not in done.stdout, done.stdout
    assert "osd01 saved its state and stopped" in done.stdout, done.stdout
    assert seconds >= 5
    # asked again while it waited (every 5 s), whatever scontrol's exit status said
    assert len(calls) >= 2 and set(calls) == {"shutdown slurmctld"}, calls


def test_a_backup_still_beating_is_asked_again_until_it_takes_the_shutdown(
    state: Path, tmp_path: Path
) -> None:
    # The heartbeat is fresh (a backup in control, or about to be) but the shutdown found no
    # controller: asked again every 5 s; it never stops here, so the timeout ends the wait.
    beat(state, time.time(), index=1)
    done, calls, _ = run(
        state, tmp_path, backup_stops_after=None, timeout_s=12, slurmctld_timeout_s=60
    )
    assert done.returncode == 0, done.stderr
    assert len(calls) >= 2 and set(calls) == {"shutdown slurmctld"}, calls
    assert "no controller is in control" not in done.stdout
    assert "no backup reported it had stopped within 12s; starting anyway" in done.stdout


def test_a_cut_short_heartbeat_or_bad_arguments(state: Path, tmp_path: Path) -> None:
    (state / "heartbeat").write_bytes(b"\x00\x01")
    done, calls, _ = run(state, tmp_path, backup_stops_after=None)
    assert done.returncode == 0 and calls == []
    usage = subprocess.run(
        [sys.executable, str(SCRIPT)], capture_output=True, text=True, check=False
    )
    assert usage.returncode == 2 and "slurmctld-handback STATE_DIR TIMEOUT_S" in usage.stderr
    bad = subprocess.run(
        [sys.executable, str(SCRIPT), str(state), "soon"], capture_output=True, text=True
    )
    assert bad.returncode == 0 and "ValueError" in bad.stdout  # never keeps slurmctld down
