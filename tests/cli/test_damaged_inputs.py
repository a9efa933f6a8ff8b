"""Every subcommand over a corpus of damaged inputs, each run in a process of its own (forked,
so the imports are paid once) that is killed past a timeout, so a hang fails: a FIFO, a
directory, a socket, /dev/zero, binary junk, truncated text, nesting thousands deep, a
5,000-digit number, and locks, reports and sacct output of the wrong shape.

Each run must exit as documented (2: input that cannot be read at all, or is not what it
should be; 1: a plan that reads but fails a check, such as YAML too deep to be a plan), print
no traceback, name the file, and under --format json print one JSON document on stdout. The
hosts of the plan are never reached: every input is refused before that.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from support.cli_output import envelope

from cluster_plan.cli import app as cli

ROOT = Path(__file__).resolve().parents[2]
LAB = ROOT / "inventory" / "lab" / "cluster.yml"
EXPANDED = ROOT / "tests" / "plans" / "golden" / "lab.expanded.json"
TIMEOUT_S = 120  # far over a run's few seconds; a run that blocks on a FIFO never ends
SACCT = "11|vision|alice|COMPLETED|60|billing=1,cpu=1,mem=1G,node=1\n"

# What makes a file damaged, written at a path. None: the path is made by hand (below).
Maker = Callable[[Path], None]


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _directory(path: Path) -> None:
    path.mkdir()


def _socket(path: Path) -> None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.bind(str(path))  # the socket file stays after the socket closes


def _dev_zero(path: Path) -> None:
    path.symlink_to("/dev/zero")


def _bytes(data: bytes) -> Maker:
    return lambda path: path.write_bytes(data)


def _lock_edit(change: Callable[[dict[str, Any]], None]) -> Maker:
    def make(path: Path) -> None:
        lock = json.loads(LAB.with_name("cluster.lock.json").read_text())
        change(lock)
        path.write_text(json.dumps(lock))

    return make


def _report_edit(change: Callable[[dict[str, Any]], None]) -> Maker:
    def make(path: Path) -> None:
        report = {"report": "network-acceptance", "version": 1, "passed": True}
        change(report)
        path.write_text(json.dumps(report))

    return make


SPECIAL: dict[str, Maker] = {
    "fifo": _fifo,
    "directory": _directory,
    "socket": _socket,
    "dev-zero": _dev_zero,
    "binary": _bytes(b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 4),
}
JSON_DAMAGE: dict[str, Maker] = {
    **SPECIAL,
    "truncated": _bytes(b'{"version": 2, "networks": {"mgmt": {"cidr": "10.40.0.0/24", "ho'),
    "deep": _bytes(b"[" * 5000 + b"]" * 5000),
    "deep-objects": _bytes(b'{"a":' * 3000 + b"1" + b"}" * 3000),
    "huge-number": _bytes(b'{"version": ' + b"7" * 5000 + b"}"),
    "not-an-object": _bytes(b"[1, 2, 3]"),
}
# A plan that reads as YAML but cannot be a plan is a finding of the plan (exit 1), as every
# YAML error is; input that is no text at all is exit 2.
PLAN_DAMAGE: dict[str, tuple[Maker, int]] = {
    **{name: (make, 2) for name, make in SPECIAL.items()},
    "truncated": (_bytes(LAB.read_bytes()[:700] + b'\n  "unterminated'), 1),
    "deep": (_bytes(b"plugin: cluster_plan\nx: " + b"[" * 5000 + b"]" * 5000 + b"\n"), 1),
    "deep-blocks": (
        _bytes(
            b"plugin: cluster_plan\nx:\n"
            + b"".join(b"  " * (i + 1) + b"a:\n" for i in range(2000))
            + b"  " * 2001
            + b"1\n"
        ),
        1,
    ),
    "huge-number": (_bytes(b"plugin: cluster_plan\nx: " + b"9" * 5000 + b"\n"), 1),
}
LOCK_DAMAGE: dict[str, Maker] = {
    **JSON_DAMAGE,
    "racks-not-a-mapping": _lock_edit(lambda lock: lock.update(racks=["r1", "r2"])),
    "network-without-hosts": _lock_edit(lambda lock: lock["networks"]["mgmt"].pop("hosts")),
    "cidr-not-text": _lock_edit(lambda lock: lock["networks"]["mgmt"].update(cidr=24)),
    "version-text": _lock_edit(lambda lock: lock.update(version="2")),
    "plan-not-a-mapping": _lock_edit(lambda lock: lock.update(plan="c.yml")),
    "version-too-new": _lock_edit(lambda lock: lock.update(version=99)),
}
REPORT_DAMAGE: dict[str, Maker] = {
    **JSON_DAMAGE,
    "wrong-shape": _report_edit(lambda report: report.update(passed="yes", findings={})),
    "null-everything": _report_edit(lambda report: report.update(dict.fromkeys(report))),
    "nan": _report_edit(lambda report: report.update(version=float("nan"))),
}
EXPANDED_DAMAGE: dict[str, Maker] = {
    **JSON_DAMAGE,
    "wrong-shape": _bytes(b'{"hosts": [], "groups": 5}'),
    "infinity": _bytes(b'{"hosts": {}, "cluster": {"name": "lab"}, "mtu": -Infinity}'),
}
SACCT_DAMAGE: dict[str, Maker] = {
    **{k: v for k, v in SPECIAL.items() if k != "dev-zero"},
    "latin1": _bytes("12|vision|jos\xe9|COMPLETED|60|cpu=1\n".encode("latin-1")),
    "empty-state": _bytes(b"12|vision|alice||60|cpu=1\n"),
    "empty-fields": _bytes(b"|||||\n"),
    "huge-elapsed": _bytes(b"12|vision|alice|COMPLETED|" + b"9" * 5000 + b"|cpu=1\n"),
    "unicode-digits": _bytes("12|vision|alice|COMPLETED|\u00b2\u00b3|cpu=1\n".encode()),
}

# subcommand -> argv with {plan} for the plan, and whether it takes --format json
PLAN_COMMANDS: dict[str, tuple[list[str], bool]] = {
    "validate": (["validate", "{plan}"], True),
    "validate-text": (["validate", "{plan}"], False),
    "lock": (["lock", "{plan}"], True),
    "lock-check": (["lock", "--check", "{plan}"], True),
    "expand": (["expand", "{plan}"], True),
    "diff": (["diff", "{good}", "{plan}"], True),
    "graph": (["graph", "{plan}"], False),
    "audit": (["audit", "{plan}"], True),
    "usage": (["usage", "{plan}", "--from", "{sacct}"], True),
    "backup-status": (["backup", "status", "{plan}"], True),
    "drift": (["drift", "{plan}"], True),
    "k8s-render": (["k8s", "render", "{plan}"], False),
}


DAMAGED_LOCKS: dict[Path, bytes] = {}  # each damaged lock file as it was made


@dataclass(frozen=True)
class Case:
    name: str
    argv: list[str]
    exit: int
    names: str  # the file the error must name
    json: bool


def _good_plan(folder: Path) -> Path:
    folder.mkdir(parents=True)
    shutil.copy(LAB, folder / "cluster.yml")
    shutil.copy(LAB.with_name("cluster.lock.json"), folder / "cluster.lock.json")
    (folder / "sacct.txt").write_text(SACCT)
    return folder / "cluster.yml"


def _argv(template: list[str], json_format: bool, **paths: Path) -> list[str]:
    argv = [part.format(**{k: str(v) for k, v in paths.items()}) for part in template]
    return argv + (["--format", "json"] if json_format else [])


def _plan_cases(base: Path) -> list[Case]:
    good = _good_plan(base / "good")
    cases = []
    for damage, (make, code) in PLAN_DAMAGE.items():
        folder = base / f"plan-{damage}"
        folder.mkdir()
        plan = folder / "cluster.yml"
        make(plan)
        for command, (template, takes_json) in PLAN_COMMANDS.items():
            argv = _argv(
                template, takes_json, plan=plan, good=good, sacct=good.parent / "sacct.txt"
            )
            cases.append(Case(f"plan {damage}: {command}", argv, code, str(plan), takes_json))
    return cases


def _lock_cases(base: Path) -> list[Case]:
    cases = []
    good = _good_plan(base / "good-for-locks")
    for damage, make in LOCK_DAMAGE.items():
        plan = _good_plan(base / f"lock-{damage}")
        lock = plan.with_name("cluster.lock.json")
        lock.unlink()
        make(lock)
        if lock.is_file() and not lock.is_symlink():
            DAMAGED_LOCKS[lock] = lock.read_bytes()
        for command, (template, takes_json) in PLAN_COMMANDS.items():
            if command == "k8s-render":
                continue  # the lab plan is no Kubernetes plan: refused before its lock
            argv = _argv(
                template, takes_json, plan=plan, good=good, sacct=good.parent / "sacct.txt"
            )
            cases.append(Case(f"lock {damage}: {command}", argv, 2, str(lock), takes_json))
    return cases


def _file_cases(base: Path) -> list[Case]:
    good = _good_plan(base / "good-for-files")
    cases = []
    for damage, make in REPORT_DAMAGE.items():
        path = base / f"report-{damage}.json"
        make(path)
        argv = ["report", str(path), "--output", str(base / "r.html"), "--format", "json"]
        cases.append(Case(f"report {damage}", argv, 2, str(path), True))
    for damage, make in EXPANDED_DAMAGE.items():
        path = base / f"expanded-{damage}.json"
        make(path)
        argv = ["acceptance", str(good), "--expanded", str(path), "--format", "json"]
        cases.append(Case(f"acceptance --expanded {damage}", argv, 2, str(path), True))
    for damage, make in SACCT_DAMAGE.items():
        path = base / f"sacct-{damage}.txt"
        make(path)
        argv = ["usage", str(good), "--from", str(path), "--format", "json"]
        cases.append(Case(f"usage --from {damage}", argv, 2, str(path), True))
    return cases


@dataclass(frozen=True)
class Run:
    returncode: int
    stdout: str
    stderr: str


def _child(case: Case, out: Path, err: Path) -> None:
    """In the forked process: the command as `cluster-plan ARGV` runs it, output to files."""
    os.environ["CLUSTER_PLAN_NOW"] = "2027-01-01T00:00:00"
    for fd, path in ((1, out), (2, err)):
        os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), fd)
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    # pytest's capture replaced sys.stdout and sys.stderr: write to the files instead
    sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115 - until os._exit
    sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115
    try:
        code = cli.main(case.argv)
    except BaseException:  # a traceback is what the test looks for
        traceback.print_exc()
        code = 70
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _start(case: Case, folder: Path) -> tuple[int, Path, Path, float]:
    out, err = folder / "stdout", folder / "stderr"
    folder.mkdir()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        _child(case, out, err)
    return pid, out, err, time.monotonic() + TIMEOUT_S


def _finish(pid: int, out: Path, err: Path, deadline: float) -> Run:
    """The child's exit status and output; a child that runs past the deadline (blocked on
    a FIFO) is killed, and its status says so."""
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return Run(-9, out.read_text(errors="replace"), "timed out (a hang)")
        time.sleep(0.02)
    code = os.waitstatus_to_exitcode(status)
    return Run(code, out.read_text(errors="replace"), err.read_text(errors="replace"))


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[Case, Run]]:
    """Every case in a process of its own, forked from this one (so the imports are paid
    once), four at a time, each killed past TIMEOUT_S."""
    base = tmp_path_factory.mktemp("damaged")
    cases = _plan_cases(base) + _lock_cases(base) + _file_cases(base)
    cli.build_parser()  # import every subcommand before forking
    outputs = base / "outputs"
    outputs.mkdir()
    results: list[tuple[Case, Run]] = []
    for first in range(0, len(cases), 4):
        batch = cases[first : first + 4]
        started = [_start(case, outputs / str(first + i)) for i, case in enumerate(batch)]
        results += [(case, _finish(*child)) for case, child in zip(batch, started, strict=True)]
    return results


def _problems(case: Case, proc: Run) -> list[str]:
    problems = []
    if proc.returncode != case.exit:
        problems.append(f"exit {proc.returncode}, not {case.exit}")
    if "Traceback" in proc.stdout + proc.stderr:
        problems.append("a traceback")
    # validate --format json puts its findings, with their file, in the document
    shown = proc.stderr + (proc.stdout if case.argv[0] == "validate" else "")
    if not any(case.names in line for line in shown.splitlines()):
        problems.append(f"no line of the output names {case.names}")
    if case.json:
        try:
            envelope(proc.stdout)
        except (ValueError, AssertionError) as exc:
            problems.append(f"stdout is not one JSON envelope ({exc}): {proc.stdout[:200]!r}")
    return problems


def test_every_command_refuses_damaged_input_in_words(runs: list[tuple[Case, Run]]) -> None:
    failures = {
        case.name: (problems, proc.stderr[-600:])
        for case, proc in runs
        if (problems := _problems(case, proc))
    }
    assert not failures, json.dumps(failures, indent=1)
    assert len(runs) >= 150  # the corpus is all there


def test_the_error_is_one_line_and_says_what_is_wrong(runs: list[tuple[Case, Run]]) -> None:
    """Where the input cannot be read at all, the line naming it says why, briefly."""
    words = {
        "fifo": "FIFO",
        "directory": "directory",
        "socket": "socket",
        "dev-zero": "character device",
        "deep": "deep",
        "huge-number": "too long",
        "racks-not-a-mapping": "racks is not an object",
        "network-without-hosts": "no 'hosts'",
        "version-too-new": "version 99",
        "nan": "$.version is NaN",
        "infinity": "$.mtu is -Infinity",
    }
    checked = 0
    for case, proc in runs:
        damage = case.name.split(":")[0].split()[-1]
        if (
            case.exit != 2
            or damage not in words
            or case.argv[:1] + case.argv[-1:]
            == [
                "validate",
                "json",
            ]
        ):
            continue  # validate --format json: the findings are in the document
        (line, *_) = [line for line in proc.stderr.splitlines() if case.names in line]
        assert words[damage] in line, (case.name, line)
        assert len(line) < 400, (case.name, line)
        checked += 1
    assert checked >= 80


def test_a_huge_number_in_a_plan_is_quoted_short(runs: list[tuple[Case, Run]]) -> None:
    """The finding quotes the start of the 5,000 digits, and not Python's own advice."""
    checked = 0
    for case, proc in runs:
        if case.name.startswith("plan huge-number") and "--format" not in case.argv:
            (line, *_) = [line for line in proc.stderr.splitlines() if case.names in line]
            assert "9999..." in line and len(line) < 300, line
            assert "sys.set_int_max_str_digits" not in proc.stderr, case.name
            checked += 1
    assert checked >= 2


def test_the_json_error_is_an_envelope(runs: list[tuple[Case, Run]]) -> None:
    """A command that fails with an error (not a plan's findings) says so in one document."""
    seen = 0
    for case, proc in runs:
        if not case.json or proc.returncode != 2 or case.argv[0] == "validate":
            continue
        document = envelope(proc.stdout)
        assert document["status"] == "error" and document["exit"] == 2, case.name
        assert document["error"]["message"], case.name
        assert isinstance(document["findings"], list), case.name
        seen += 1
    assert seen >= 100


def test_nothing_damaged_was_written_over(runs: list[tuple[Case, Run]]) -> None:
    """`lock` (and every other command) leaves a damaged lock for a human to restore."""
    assert len(DAMAGED_LOCKS) >= 10
    for lock, content in DAMAGED_LOCKS.items():
        assert lock.read_bytes() == content, lock
        assert sorted(p.name for p in lock.parent.iterdir()) == [
            "cluster.lock.json",
            "cluster.yml",
            "sacct.txt",
        ]
