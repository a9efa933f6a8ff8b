"""The whole tree stays clean under the project's linters, as CI requires."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import complexity
import import_contract
import pytest
from linters import LintRun

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
PLANS = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "inventory").rglob("*.yml"))


def run(*cmd: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), NO_COLOR="1")
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=env, timeout=900)


@pytest.mark.parametrize(
    "tool",
    [
        ("ruff", "check", "cluster_plan", "plugins", "roles", "tests", "benchmarks"),
        ("ruff", "format", "--check", "cluster_plan", "plugins", "roles", "tests", "benchmarks"),
        ("mypy",),
    ],
    ids=["ruff-check", "ruff-format", "mypy"],
)
def test_python_linters(tool: tuple[str, ...]) -> None:
    result = run(str(BIN / tool[0]), *tool[1:])
    assert result.returncode == 0, result.stdout + result.stderr


def test_generated_reference_pages_are_current() -> None:
    """docs/METRICS.md and the other pages generated from the package's tables (make lint)."""
    result = run(str(BIN / "python"), "-m", "cluster_plan.reference_docs", "--check")
    assert result.returncode == 0, result.stderr


def test_no_production_function_over_the_complexity_limit() -> None:
    assert complexity.problems(complexity.measure()) == []


def test_the_complexity_gate_names_a_tangled_function(tmp_path: Path) -> None:
    (tmp_path / "cluster_plan").mkdir()
    branches = "\n".join(f"    if x == {i} and y:\n        return {i}" for i in range(8))
    (tmp_path / "cluster_plan" / "m.py").write_text(
        f"def tangled(x, y):\n{branches}\n    return -1\n"
    )
    (tmp_path / "plugins").mkdir()
    (tmp_path / "plugins" / "ok.py").write_text("def simple(x):\n    return x or 1\n")
    over = complexity.measure(tmp_path)
    # 8 ifs and 8 `and`s: mccabe's count (9) would let it pass
    assert over == {"cluster_plan/m.py::tangled": 17}
    assert complexity.problems(over) == [
        "cluster_plan/m.py::tangled: complexity 17, over 15: split it into named steps"
    ]


def test_the_layers_hold() -> None:
    """tests/import_contract.py (make lint): the plan core imports nothing above it, the parts
    import each other only where the contract says why, and no modules import each other."""
    assert import_contract.violations() == []
    assert import_contract.unused_allowances() == []
    assert import_contract.cycles() == []


def test_the_import_contract_names_an_upward_import_and_a_cycle(tmp_path: Path) -> None:
    package = tmp_path / "cluster_plan"
    for folder in ("plan", "views", "monitoring", "cli"):
        (package / folder).mkdir(parents=True)
        (package / folder / "__init__.py").write_text("")
    (package / "plan" / "a.py").write_text("from cluster_plan.views.b import x\n")
    (package / "views" / "b.py").write_text("def f():\n    from cluster_plan.plan import a\n")
    (package / "monitoring" / "c.py").write_text("import cluster_plan.cli.app\n")
    (package / "cli" / "policy.py").write_text("from cluster_plan.views import b\n")
    (package / "views" / "d.py").write_text("from cluster_plan.cli import policy\n")
    assert import_contract.violations(tmp_path) == [
        "cluster_plan/cli/policy.py:1: cli.policy imports views (cluster_plan.views): against "
        "the layers (tests/import_contract.py)",
        "cluster_plan/monitoring/c.py:1: monitoring imports cli (cluster_plan.cli.app): "
        "against the layers (tests/import_contract.py)",
        "cluster_plan/plan/a.py:1: plan imports views (cluster_plan.views.b): against the "
        "layers (tests/import_contract.py)",
    ]
    assert import_contract.cycles(tmp_path) == [
        "import cycle: cluster_plan.plan.a <-> cluster_plan.views.b"
    ]


def test_yamllint_strict(yamllint: LintRun) -> None:
    assert yamllint.returncode == 0, yamllint.report()


def test_ansible_lint_production_profile(ansible_lint: LintRun) -> None:
    assert ansible_lint.returncode == 0, ansible_lint.report()


def test_plans_validate_with_current_locks() -> None:
    assert PLANS, "no plans under inventory/"
    result = run(str(BIN / "cluster-plan"), "validate", *PLANS)
    assert result.returncode == 0, result.stderr
    assert result.stderr.count(": ok:") == len(PLANS)


def test_schema_is_a_valid_2020_12_schema_with_descriptions() -> None:
    import json

    import jsonschema

    schema = json.loads((ROOT / "schemas" / "cluster-plan.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["$id"].startswith("https://")
    missing = []

    def walk(node: object, path: str) -> None:
        if isinstance(node, dict):
            for name, sub in node.get("properties", {}).items():
                if isinstance(sub, dict) and "description" not in sub:
                    missing.append(f"{path}.{name}")
            if node.get("type") == "object" and "properties" in node:
                assert node.get("additionalProperties") is False, path
            for key, sub in node.items():
                walk(sub, f"{path}/{key}")
        elif isinstance(node, list):
            for i, sub in enumerate(node):
                walk(sub, f"{path}[{i}]")

    walk(schema, "#")
    assert not missing, missing


# Scaffold text: "TODO"/"FIXME"/"XXX" without an issue number, or a template's "replace with".
PLACEHOLDER = re.compile(
    r"\b(?:TODO|FIXME|XXX)\b(?!\s*\(?(?:#|issue\s*)\d)|\breplace (?:this|with the)\b", re.I
)
NOT_OURS = {".git", ".venv", ".cache", ".ansible", ".hypothesis", "reports", "build", "dist"}


def tree_files() -> list[Path]:
    files = []
    for folder, subfolders, names in os.walk(ROOT):
        subfolders[:] = [
            d
            for d in subfolders
            if d not in NOT_OURS and not d.endswith((".egg-info", "_cache", "__pycache__"))
        ]
        files += [Path(folder) / name for name in names]
    return files


def test_no_placeholder_left_in_the_tree() -> None:
    """No scaffold is called done: the Molecule converge.yml that said "Replace with the role
    under test" and applied no role is what this catches."""
    found = []
    for path in tree_files():
        if path == Path(__file__) or "tests/plans/bad" in path.as_posix():
            continue
        try:
            text = path.read_text()
        except (UnicodeDecodeError, OSError):
            continue  # not text
        found += [
            f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
            for number, line in enumerate(text.splitlines(), 1)
            if PLACEHOLDER.search(line)
        ]
    assert found == []


# The project's issue numbers and CI runs' names mean nothing to a reader of the code: they go
# in commit messages (docs/lab.md's table of measured runs names runs as data, in its rows).
TRACKER_WORDS = re.compile(r"\bissue\s*#?\d|\bci\d\d\b", re.I)
CODE_FOLDERS = ("cluster_plan", "plugins", "roles", "tests")


def test_no_issue_numbers_or_run_names_in_code_or_doc_headings() -> None:
    found = []
    for path in tree_files():
        rel = path.relative_to(ROOT).as_posix()
        if path == Path(__file__) or "/fixtures/" in rel or "/golden/" in rel:
            continue
        in_code = rel.startswith(CODE_FOLDERS)
        if not in_code and not (rel.startswith("docs/") or rel == "README.md"):
            continue
        try:
            lines = path.read_text().splitlines()
        except (UnicodeDecodeError, OSError):
            continue
        found += [
            f"{rel}:{number}: {line.strip()}"
            for number, line in enumerate(lines, 1)
            if (in_code or line.startswith("#")) and TRACKER_WORDS.search(line)
        ]
    assert found == []
