"""Every role under roles/ (a new one is covered as soon as its folder exists): argument specs
for every default, a generated README that is current, prefixed variables, quoted file modes,
and clean under ansible-lint's production profile (FQCN, risky octal, no-changed-when, ...)
and yamllint. The linters run once per session over the whole tree (tests/conftest.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from linters import LintRun

from cluster_plan.ansible import role_docs

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
ROLES = sorted(p.name for p in (ROOT / "roles").iterdir() if p.is_dir())
PLAYBOOKS = ["site.yml", *sorted(f"playbooks/{p.name}" for p in (ROOT / "playbooks").glob("*.yml"))]
BLOCK_KEYS = ("block", "rescue", "always")


def load(path: Path) -> Any:
    return yaml.safe_load(path.read_text()) if path.is_file() else None


def options_of(role: str) -> dict[str, Any]:
    """The options of every entry point of the role's argument specs."""
    specs = load(ROOT / "roles" / role / "meta" / "argument_specs.yml")
    assert specs, f"roles/{role}/meta/argument_specs.yml is missing or empty"
    entry_points = specs["argument_specs"]
    assert "main" in entry_points, f"roles/{role}: no `main` entry point in the argument specs"
    options: dict[str, Any] = {}
    for entry in entry_points.values():
        options |= entry.get("options") or {}
    return options


def defaults_of(role: str) -> dict[str, Any]:
    defaults: dict[str, Any] = {}
    for path in sorted((ROOT / "roles" / role / "defaults").glob("*.yml")):
        defaults |= load(path) or {}
    return defaults


def tasks_in(items: Any) -> Iterator[dict[str, Any]]:
    """Every task, and every task inside a block, rescue or always, of a task file."""
    for task in items or []:
        if isinstance(task, dict):
            yield task
            for key in BLOCK_KEYS:
                yield from tasks_in(task.get(key))


def task_files(role: str) -> list[Path]:
    base = ROOT / "roles" / role
    return sorted([*base.glob("tasks/**/*.yml"), *base.glob("handlers/**/*.yml")])


def variables_set_by_tasks(task: dict[str, Any]) -> list[str]:
    """Names a task gives a value to: register, set_fact, task vars, loop_var."""
    names = [task["register"]] if isinstance(task.get("register"), str) else []
    for module in ("ansible.builtin.set_fact", "set_fact"):
        if isinstance(task.get(module), dict):
            names += [k for k in task[module] if k != "cacheable"]
    names += list(task.get("vars") or {})
    loop_var = (task.get("loop_control") or {}).get("loop_var")
    return names + ([loop_var] if loop_var else [])


def modes_in(value: Any) -> Iterator[Any]:
    """Every `mode:` value in a task's arguments and loop items."""
    if isinstance(value, dict):
        for key, sub in value.items():
            if key == "mode":
                yield sub
            elif key not in BLOCK_KEYS:
                yield from modes_in(sub)
    elif isinstance(value, list):
        for sub in value:
            yield from modes_in(sub)


def run(*argv: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PATH": f"{BIN}:{os.environ.get('PATH', '')}",
        "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"),
        "ANSIBLE_HOME": str(ROOT / ".ansible"),
    }
    return subprocess.run(
        list(argv), cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False
    )


def test_there_are_roles() -> None:
    assert {"common", "slurm", "nvidia_driver", "gpu_health", "net_acceptance"} <= set(ROLES)


@pytest.mark.parametrize("role", ROLES)
def test_argument_specs_cover_every_default(role: str) -> None:
    """Ansible templates the specs when it validates them: each default there must be the
    (safe) expression of defaults/, and the README shows it."""
    options = options_of(role)
    defaults = defaults_of(role)
    assert sorted(set(defaults) - set(options)) == [], "defaults without an argument spec"
    assert sorted(set(options) - set(defaults)) == [], "argument specs without a default"
    for name, option in options.items():
        assert name.startswith(f"{role}_"), name
        assert option.get("description"), f"{name}: no description"
        assert "type" in option, f"{name}: no type"
        assert "default" in option, f"{name}: no default"
        assert option["default"] == defaults[name], f"{name}: spec default != defaults/"


@pytest.mark.parametrize("role", ROLES)
def test_readme_is_generated_and_current(role: str, capsys: pytest.CaptureFixture[str]) -> None:
    readme = ROOT / "roles" / role / "README.md"
    assert readme.is_file(), f"run: python -m cluster_plan.ansible.role_docs roles/{role}"
    assert role_docs.BEGIN in readme.read_text(), f"{readme}: no generated variable table"
    # what `python -m cluster_plan.ansible.role_docs --check roles/NAME` (make lint) runs
    assert role_docs.main(["--check", str(ROOT / "roles" / role)]) == 0, capsys.readouterr().err


@pytest.mark.parametrize("role", ROLES)
def test_every_role_variable_is_prefixed(role: str) -> None:
    base = ROOT / "roles" / role
    unprefixed = [
        f"{path.relative_to(ROOT)}: {name}"
        for path in sorted([*base.glob("defaults/*.yml"), *base.glob("vars/*.yml")])
        for name in (load(path) or {})
        if not name.startswith(f"{role}_")
    ]
    unprefixed += [
        f"{path.relative_to(ROOT)}: {task.get('name')}: {name}"
        for path in task_files(role)
        for task in tasks_in(load(path))
        for name in variables_set_by_tasks(task)
        if not name.startswith(f"{role}_")
    ]
    assert unprefixed == []


@pytest.mark.parametrize("role", ROLES)
def test_file_modes_are_quoted(role: str) -> None:
    unquoted = [
        f"{path.relative_to(ROOT)}: {task.get('name')}: mode {mode!r}"
        for path in task_files(role)
        for task in tasks_in(load(path))
        for mode in modes_in(task)
        if not isinstance(mode, str)
    ]
    assert unquoted == []


def excluded(config: Path, key: str, folder: str) -> list[str]:
    """The entries of a linter's exclude list that would leave ``folder`` unlinted."""
    data = load(config) or {}
    entries = data.get(key) or []
    if isinstance(entries, str):
        entries = entries.splitlines()
    entries = [e.strip().rstrip("/") for e in entries if e.strip() and not e.startswith("#")]
    return [e for e in entries if folder == e or folder.startswith(e + "/")]


@pytest.mark.parametrize("role", ROLES)
def test_ansible_lint_production_clean(role: str, ansible_lint: LintRun) -> None:
    folder = f"roles/{role}"
    assert excluded(ROOT / ".ansible-lint", "exclude_paths", folder) == []
    assert ansible_lint.complete, ansible_lint.report()
    assert ansible_lint.under(folder) == []


@pytest.mark.parametrize("role", ROLES)
def test_yamllint_clean(role: str, yamllint: LintRun) -> None:
    folder = f"roles/{role}"
    assert excluded(ROOT / ".yamllint", "ignore", folder) == []
    assert yamllint.complete, yamllint.report()
    assert yamllint.under(folder) == []


def test_playbooks_pass_syntax_check() -> None:
    result = run(str(BIN / "ansible-playbook"), "--syntax-check", *PLAYBOOKS)
    assert result.returncode == 0, result.stdout + result.stderr
