"""One exit policy for every subcommand: the same broken input gives the same status and a
message, never a traceback (cluster_plan/cli/policy.py).

0 ok, 1 the plan fails a check, 2 usage or input that cannot be read, 3 a destructive change
not confirmed, 130 interrupted.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from cluster_plan import cli

ROOT = Path(__file__).resolve().parents[2]
LAB = ROOT / "inventory" / "lab" / "cluster.yml"
BAD = ROOT / "tests" / "plans" / "bad" / "network-overlap.yml"


def make_inputs(tmp: Path) -> dict[str, Path]:
    junk = tmp / "junk.yml"
    junk.write_bytes(bytes(range(256)) * 4)
    empty = tmp / "empty.yml"
    empty.write_text("# nothing here\n")
    unlocked = tmp / "unlocked" / "cluster.yml"
    unlocked.parent.mkdir()
    shutil.copy(LAB, unlocked)
    odd = tmp / "mes plans \u00e9t\u00e9 \u2013 \u65e5\u672c" / "cluster plan.yml"
    odd.parent.mkdir()
    shutil.copy(LAB, odd)
    shutil.copy(LAB.with_name("cluster.lock.json"), odd.with_name("cluster plan.lock.json"))
    return {
        "missing": tmp / "no-such.yml",
        "directory": tmp,
        "binary": junk,
        "empty": empty,
        "invalid": BAD,
        "unlocked": unlocked,
        "spaces and non-ASCII": odd,
    }


# subcommand -> how it takes a plan path
COMMANDS: dict[str, Callable[[str], list[str]]] = {
    "validate": lambda p: ["validate", p],
    "lock --check": lambda p: ["lock", "--check", p],
    "expand": lambda p: ["expand", p],
    "diff (as OLD)": lambda p: ["diff", p, str(LAB)],
    "diff (as NEW)": lambda p: ["diff", str(LAB), p],
    "graph": lambda p: ["graph", p],
    "audit": lambda p: ["audit", p],
    "capacity": lambda p: ["capacity", p],
    "lab status": lambda p: ["lab", "status", p],
    "lab fault": lambda p: ["lab", "fault", p, "gpu01", "--clear"],
    "acceptance": lambda p: ["acceptance", p],
    "drift": lambda p: ["drift", p],
    "backup status": lambda p: ["backup", "status", p],
    "usage": lambda p: ["usage", p],
}

# input -> exit status for every command, with the exceptions each command makes
EXPECTED: dict[str, tuple[int, dict[str, int]]] = {
    "missing": (2, {}),
    "directory": (2, {}),
    "binary": (2, {}),
    "empty": (1, {}),
    "invalid": (1, {}),
    # not locked yet: a warning for validate; diff allocates it from OLD's lock; a --check
    # of the lock says it is out of date; everything that needs addresses fails the check
    # capacity needs nodes and racks, not addresses
    "unlocked": (1, {"validate": 0, "diff (as OLD)": 0, "diff (as NEW)": 0, "capacity": 0}),
}
CASES = [
    (command, name, EXPECTED[name][1].get(command, EXPECTED[name][0]))
    for name in EXPECTED
    for command in COMMANDS
]


@pytest.fixture
def inputs(tmp_path: Path) -> dict[str, Path]:
    return make_inputs(tmp_path)


@pytest.mark.parametrize(("command", "name", "status"), CASES)
def test_every_command_maps_the_same_input_to_the_same_status(
    capsys: pytest.CaptureFixture[str],
    inputs: dict[str, Path],
    command: str,
    name: str,
    status: int,
) -> None:
    code = cli.main(COMMANDS[command](str(inputs[name])))
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    assert code == status, f"{command} on {name}: {code}\n{err}"
    if status:
        assert err.strip(), f"{command} on {name}: exit {status} without a word"


@pytest.mark.parametrize(
    "command", ["validate", "expand", "graph", "audit", "capacity", "diff (as NEW)"]
)
def test_a_plan_path_with_spaces_and_non_ascii_works(
    capsys: pytest.CaptureFixture[str], inputs: dict[str, Path], command: str
) -> None:
    code = cli.main(COMMANDS[command](str(inputs["spaces and non-ASCII"])))
    out, err = capsys.readouterr()
    assert (code, "Traceback" in out + err) == (0, False), err


def test_report_of_unreadable_results_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], inputs: dict[str, Path]
) -> None:
    for name in ("missing", "directory", "binary", "empty"):
        assert cli.main(["report", str(inputs[name])]) == 2, name
        assert "error:" in capsys.readouterr().err


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["no-such-command"], ["validate"], ["lock", "--bogus", str(LAB)], []):
        with pytest.raises(SystemExit) as exc:
            cli.main(argv)
        assert exc.value.code == 2, argv
    assert cli.main(["expand", str(LAB), "--host", "nope"]) == 2
    assert "no host 'nope'" in capsys.readouterr().err


def test_destructive_changes_are_refused_with_their_own_status(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    new = tmp_path / "cluster.yml"
    new.write_text(LAB.read_text().replace("size_gb: 4000, type: hdd", "size_gb: 8000, type: hdd"))
    shutil.copy(LAB.with_name("cluster.lock.json"), tmp_path / "cluster.lock.json")
    assert cli.main(["diff", str(LAB), str(new)]) == 3
    assert "--allow-destructive" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["validate", str(LAB)], ["lab", "status", str(LAB)]])
def test_ctrl_c_is_130_everywhere(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    def interrupted(*_args: object, **_kwargs: object) -> None:
        raise KeyboardInterrupt

    import cluster_plan.cli.plan_commands
    import cluster_plan.lab.command

    monkeypatch.setattr(cluster_plan.cli.plan_commands, "validate_file", interrupted)
    monkeypatch.setattr(cluster_plan.lab.command, "load_plan", interrupted)
    assert cli.main(argv) == 130
    assert "interrupted" in capsys.readouterr().err


def test_one_module_defines_the_exit_codes() -> None:
    offenders = [
        str(path.relative_to(ROOT))
        for path in (ROOT / "cluster_plan").rglob("*.py")
        if path.name != "policy.py" and "EXIT_" in path.read_text()
    ]
    assert offenders == []
