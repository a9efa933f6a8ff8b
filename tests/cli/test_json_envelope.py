"""Every command's `--format json`: stdout is exactly one JSON document, the envelope of
schemas/cli-output.schema.json, whether the command succeeds, finds problems or stops with an
error; and its exit status is the one the command has without --format json."""

from __future__ import annotations

import argparse
import ast
import dataclasses
import io
import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from support.cli_output import envelope

from cluster_plan.acceptance.history import History
from cluster_plan.cli import main
from cluster_plan.cli.app import build_parser, command_name
from cluster_plan.cli.reporters import REPORTERS, JsonReporter, Reporter, TextReporter
from cluster_plan.plan.findings import SEVERITIES, Finding

ROOT = Path(__file__).resolve().parents[2]
LAB = ROOT / "inventory" / "lab" / "cluster.yml"
EXPANDED = ROOT / "tests" / "plans" / "golden" / "lab.expanded.json"
SACCT = "11|vision|alice|COMPLETED|60|billing=1,cpu=1,mem=1G,node=1\n"


@dataclass(frozen=True)
class Case:
    argv: list[str]  # {plan}, {stale}, {fewer}, {sacct}, {history}, {expanded}, {tmp}
    exit: int
    status: str
    command: str


CASES = {
    "validate ok": Case(["validate", "{plan}"], 0, "ok", "validate"),
    "validate failed": Case(["validate", "{stale}"], 1, "failed", "validate"),
    "validate unreadable": Case(["validate", "{tmp}/none.yml"], 2, "error", "validate"),
    "lock ok": Case(["lock", "--check", "{plan}"], 0, "ok", "lock"),
    "lock out of date": Case(["lock", "--check", "{stale}"], 1, "error", "lock"),
    "expand ok": Case(["expand", "{plan}", "--host", "gpu01"], 0, "ok", "expand"),
    "expand no host": Case(["expand", "{plan}", "--host", "nope01"], 2, "error", "expand"),
    "diff ok": Case(["diff", "{plan}", "{plan}"], 0, "ok", "diff"),
    "diff refused": Case(["diff", "{plan}", "{fewer}"], 3, "error", "diff"),
    "audit ok": Case(["audit", "{plan}"], 0, "ok", "audit"),
    "audit stale lock": Case(["audit", "{stale}"], 1, "error", "audit"),
    "capacity ok": Case(["capacity", "{plan}"], 0, "ok", "capacity"),
    "capacity no plan": Case(["capacity", "{tmp}/none.yml"], 2, "error", "capacity"),
    "usage ok": Case(["usage", "{plan}", "--from", "{sacct}"], 0, "ok", "usage"),
    "usage bad date": Case(
        ["usage", "{plan}", "--since", "May", "--from", "{sacct}"], 2, "error", "usage"
    ),
    "drift unreachable": Case(["drift", "{plan}"], 1, "failed", "drift"),
    "drift no host": Case(["drift", "{plan}", "--hosts", "nope"], 2, "error", "drift"),
    "backup status unreachable": Case(["backup", "status", "{plan}"], 1, "failed", "backup status"),
    "backup status no host": Case(
        ["backup", "status", "{plan}", "--hosts", "nope"], 2, "error", "backup status"
    ),
    "lab status down": Case(["lab", "status", "{plan}"], 1, "failed", "lab status"),
    "lab status no plan": Case(["lab", "status", "{tmp}/none.yml"], 2, "error", "lab status"),
    "acceptance history ok": Case(
        ["acceptance", "history", "{plan}", "--history", "{history}"], 0, "ok", "acceptance history"
    ),
    "acceptance history absent": Case(
        ["acceptance", "history", "{plan}", "--history", "{tmp}/none.sqlite"],
        2,
        "error",
        "acceptance history",
    ),
    "acceptance failed": Case(
        [
            "acceptance",
            "unused.yml",
            "--expanded",
            "{expanded}",
            "--transport",
            "exec",
            "--exec-prefix",
            "false",
            "--phases",
            "latency",
            "--no-retest",
            "--no-history",
            "--output-dir",
            "{tmp}/out",
        ],
        1,
        "failed",
        "acceptance",
    ),
    "acceptance unknown phase": Case(
        ["acceptance", "{plan}", "--phases", "nope"], 2, "error", "acceptance"
    ),
    # the same run with its action named: `acceptance run|history`, each through the reporter
    "acceptance run failed": Case(
        [
            "acceptance",
            "run",
            "unused.yml",
            "--expanded",
            "{expanded}",
            "--transport",
            "exec",
            "--exec-prefix",
            "false",
            "--phases",
            "latency",
            "--no-retest",
            "--no-history",
            "--output-dir",
            "{tmp}/out",
        ],
        1,
        "failed",
        "acceptance run",
    ),
    "acceptance run unknown phase": Case(
        ["acceptance", "run", "{plan}", "--phases", "nope"], 2, "error", "acceptance run"
    ),
    "report no file": Case(["report", "{tmp}/none.json"], 2, "error", "report"),
}


@pytest.fixture
def paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    # no lab of this name is up: drift and backup status find every host unreachable
    monkeypatch.setenv("CLUSTER_PLAN_LAB_ID", "no-such-lab")
    lock = LAB.with_name("cluster.lock.json")
    folders = {name: tmp_path / name for name in ("plan", "stale", "fewer")}
    for folder in folders.values():
        folder.mkdir()
        shutil.copy(lock, folder / "cluster.lock.json")
    text = LAB.read_text()
    (folders["plan"] / "cluster.yml").write_text(text)
    gpus = "  gpu:\n    count: 2"
    (folders["stale"] / "cluster.yml").write_text(text.replace(gpus, "  gpu:\n    count: 3"))
    (folders["fewer"] / "cluster.yml").write_text(text.replace(gpus, "  gpu:\n    count: 1"))
    (tmp_path / "sacct.txt").write_text(SACCT)
    with History(tmp_path / "history.sqlite", create=True):
        pass
    return {
        **{name: str(folder / "cluster.yml") for name, folder in folders.items()},
        "sacct": str(tmp_path / "sacct.txt"),
        "history": str(tmp_path / "history.sqlite"),
        "expanded": str(EXPANDED),
        "tmp": str(tmp_path),
    }


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("name", list(CASES))
def test_json_stdout_is_one_envelope(
    name: str, paths: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    case = CASES[name]
    argv = [part.format(**paths) for part in case.argv]
    text_code, _, _ = _run(argv, capsys)
    code, out, err = _run([*argv, "--format", "json"], capsys)
    assert (text_code, code) == (case.exit, case.exit), err
    document = envelope(out)  # json.loads: nothing before or after the one document
    assert (document["command"], document["status"], document["exit"]) == (
        case.command,
        case.status,
        case.exit,
    )
    if document["error"] is not None:
        # people read it on stderr: the line, or the findings that name the file
        assert (document["error"]["file"] or document["error"]["message"]) in err
    elif case.status == "error":  # validate: an unreadable plan is a finding, exit 2
        assert [f["code"] for f in document["findings"]] == ["file-not-found"]
    # one severity scale, whichever command found it
    assert {f["severity"] for f in document["findings"]} <= set(SEVERITIES)


def test_an_acceptance_fault_is_an_error_in_the_envelope(
    paths: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """A program keeping the envelope's errors keeps an acceptance run's faults; the report's
    own word stays in the report and beside the severity."""
    argv = [part.format(**paths) for part in CASES["acceptance failed"].argv]
    code, out, _ = _run([*argv, "--format", "json"], capsys)
    document = envelope(out)
    report = document["result"]["findings"]
    assert code == 1 and report and {f["severity"] for f in report} == {"fault"}
    errors = [f for f in document["findings"] if f["severity"] == "error"]
    assert len(errors) == len(report)
    assert all(f["report_severity"] == "fault" for f in errors)


def test_the_findings_of_a_result_are_in_the_envelope(
    paths: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """validate's per-file findings, drift's host findings: all under `findings` too."""
    code, out, _ = _run(["validate", paths["stale"], "--format", "json"], capsys)
    document = envelope(out)
    (report,) = document["result"]
    assert code == 1 and document["findings"] == report["findings"]
    assert "lock-stale" in [f["code"] for f in document["findings"]]
    code, out, _ = _run(["drift", paths["plan"], "--hosts", "gpu01", "--format", "json"], capsys)
    document = envelope(out)
    assert code == 1 and document["findings"] == document["result"]["findings"]
    assert [f["host"] for f in document["findings"]] == ["gpu01"]


def test_warnings_beside_a_result_are_findings(
    paths: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """capacity prints its warnings on stderr for people; programs find them in `findings`."""
    plan = Path(paths["tmp"], "local.yml")
    plan.write_text(LAB.read_text().replace("domain: lab.internal", "domain: lab.local"))
    code, _, err = _run(["capacity", str(plan)], capsys)
    assert code == 0 and "warning[domain-local]" in err
    code, out, _ = _run(["capacity", str(plan), "--format", "json"], capsys)
    document = envelope(out)
    assert code == 0 and document["status"] == "ok"
    assert [(f["severity"], f["code"]) for f in document["findings"]] == [
        ("warning", "domain-local")
    ]


def test_expand_output_is_an_expanded_plan_to_the_lab_and_acceptance(
    paths: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """`expand --format json > x.json` is a plan the lab and `acceptance --expanded` read, as
    the bare expanded plan was; an envelope without a result is refused in words."""
    code, out, _ = _run(["expand", paths["plan"], "--format", "json"], capsys)
    saved = Path(paths["tmp"], "expanded.json")
    saved.write_text(out)
    bare = Path(paths["tmp"], "bare.json")
    bare.write_text(json.dumps(envelope(out)["result"]))
    results = []
    for plan in (saved, bare):
        code, out, _ = _run(["lab", "status", str(plan), "--format", "json"], capsys)
        results.append((code, envelope(out)["result"]["total"]))
    assert results == [(1, 9), (1, 9)]
    stopped = Path(paths["tmp"], "stopped.json")
    _, out, _ = _run(["expand", paths["plan"], "--host", "nope01", "--format", "json"], capsys)
    stopped.write_text(out)
    for argv in (["lab", "status", str(stopped)], ["acceptance", "x", "--expanded", str(stopped)]):
        code, _, err = _run(argv, capsys)
        assert code == 2 and f"{stopped}: not an expanded plan: error: " in err, err
    argv = ["acceptance", "x", "--expanded", str(saved), "--transport", "exec", "--exec-prefix",
            "false", "--phases", "latency", "--no-retest", "--no-history",
            "--output-dir", str(Path(paths["tmp"], "out")), "--format", "json"]  # fmt: skip
    code, out, _ = _run(argv, capsys)
    assert code == 1 and envelope(out)["result"]["cluster"] == "lab"


def test_the_json_reporter_writes_one_document_and_only_at_the_end() -> None:
    """Whatever a command calls, and in which order, nothing reaches stdout before `finish`:
    the JSON reporter implements the abstract reporter without inheriting the text one."""
    assert not issubclass(JsonReporter, TextReporter)
    assert all(issubclass(kind, Reporter) for kind in REPORTERS.values())
    out, err = io.StringIO(), io.StringIO()
    reporter = JsonReporter(out, err, command="capacity")
    warning = Finding("domain-local", "ends in .local", ("cluster", "domain"), severity="warning")
    reporter.note("wrote page.html")
    reporter.warnings([warning, dataclasses.replace(warning, severity="error")])
    reporter.result({"pools": []}, lambda: "text for people", [{"severity": "info",
                                                                "message": "x"}])  # fmt: skip
    assert out.getvalue() == "" and err.getvalue() == "wrote page.html\n"
    reporter.finish(0)
    document = envelope(out.getvalue())
    assert document["result"] == {"pools": []} and document["status"] == "ok"
    assert [f["severity"] for f in document["findings"]] == ["warning", "info"]
    assert "text for people" not in out.getvalue()


@pytest.mark.parametrize("action", ["ssh", "run"])
def test_a_node_command_does_not_take_the_commands_name(action: str) -> None:
    """`lab run PLAN NODE -- hostname`: the words after NODE are the node's command, and the
    command's name stays `lab run` (its argument once overwrote it, and every lab run failed)."""
    args = build_parser().parse_args(["lab", action, "plan.yml", "cpu01", "--", "hostname"])
    assert command_name(args) == f"lab {action}"
    assert args.node_command[-1:] == ["hostname"]  # argparse keeps "--" or not, by version


def _dests(parser: argparse.ArgumentParser) -> Iterator[tuple[str, str]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from ((f"{name} {path}".strip(), dest) for path, dest in _dests(sub))
        else:
            yield "", action.dest


def test_no_subcommand_argument_overwrites_the_commands_name() -> None:
    clashes = [path for path, dest in _dests(build_parser()) if path and dest == "command"]
    assert clashes == []


def test_a_number_json_cannot_carry_never_reaches_the_envelope() -> None:
    """A NaN that got past every check before it (a bug) stops the command with an error that
    says where it stood, rather than printing a document no JSON parser reads."""
    out, err = io.StringIO(), io.StringIO()
    reporter = JsonReporter(out, err, command="capacity")
    reporter.result({"racks": [{"rack": "r1", "power_pct": float("nan")}]}, lambda: "")
    assert reporter.finish(0) == 2
    document = envelope(out.getvalue())  # strict: a bare NaN fails here
    assert document["status"] == "error" and document["exit"] == 2
    assert document["result"] is None
    assert "$.result.racks[0].power_pct is nan" in document["error"]["message"]
    assert "$.result.racks[0].power_pct is nan" in err.getvalue()


def test_a_plan_with_nan_gives_no_bare_nan_on_stdout(tmp_path: Path, capsys) -> None:
    """However the plan's NaN is caught (the plan's checks, or this last guard), stdout is JSON
    and the command does not exit 0."""
    lab = Path(__file__).resolve().parents[2] / "inventory" / "lab"
    plan = tmp_path / "cluster.yml"
    plan.write_text((lab / "cluster.yml").read_text().replace("power_w: 1600", "power_w: .nan"))
    shutil.copy(lab / "cluster.lock.json", tmp_path / "cluster.lock.json")
    code = main(["capacity", str(plan), "--format", "json"])
    document = envelope(capsys.readouterr().out)
    assert code != 0 and document["status"] in ("failed", "error")


def _reads_the_format(tree: ast.AST) -> list[int]:
    """Lines that read a command's `--format`: `args.format`, `getattr(args, "format")`."""
    lines = []
    for node in ast.walk(tree):
        attribute = isinstance(node, ast.Attribute) and node.attr == "format"
        if attribute and isinstance(node.value, ast.Name) and node.value.id == "args":
            lines.append(node.lineno)
        called = isinstance(node, ast.Call) and getattr(node.func, "id", None) == "getattr"
        if called and any(isinstance(a, ast.Constant) and a.value == "format" for a in node.args):
            lines.append(node.lineno)
    return lines


def test_no_command_branches_on_the_format() -> None:
    """Only the CLI reads --format, to pick the reporter; every command hands its results,
    findings and refusals to that reporter (docs/ARCHITECTURE.md, Command output)."""
    readers = {
        str(path.relative_to(ROOT))
        for path in sorted((ROOT / "cluster_plan").rglob("*.py"))
        if _reads_the_format(ast.parse(path.read_text()))
    }
    assert readers == {"cluster_plan/cli/app.py"}
    assert _reads_the_format(ast.parse("if args.format == 'json':\n    print(1)\n")) == [1]
