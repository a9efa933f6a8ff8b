"""roles/net_acceptance and playbooks/acceptance.yml: specs complete, README current, lint clean,
and the role's command line is one the acceptance CLI accepts."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

from cluster_plan.cli import main

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
ROLE = ROOT / "roles" / "net_acceptance"
PLAYBOOK = "playbooks/acceptance.yml"


def run(*argv: str, timeout: int = 300) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": f"{BIN}:{os.environ.get('PATH', '')}",
           "ANSIBLE_HOME": str(ROOT / ".ansible")}  # fmt: skip
    return subprocess.run(list(argv), cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)  # fmt: skip


def test_every_default_has_an_argument_spec() -> None:
    defaults = yaml.safe_load((ROLE / "defaults/main.yml").read_text())
    options = yaml.safe_load((ROLE / "meta/argument_specs.yml").read_text())["argument_specs"][
        "main"
    ]["options"]
    assert sorted(set(defaults) ^ set(options)) == []
    for name, option in options.items():
        assert name.startswith("net_acceptance_") and option.get("description") and "type" in option
        assert str(option["default"]).split() == str(defaults[name]).split(), name


def test_readme_is_generated_from_the_specs() -> None:
    result = run(str(BIN / "python"), "-m", "cluster_plan.role_docs", "--check", str(ROLE))
    assert result.returncode == 0, result.stdout + result.stderr


def test_lint_clean() -> None:
    result = run(str(BIN / "yamllint"), "-s", str(ROLE), PLAYBOOK)
    assert result.returncode == 0, result.stdout
    result = run(str(BIN / "ansible-lint"), "--profile", "production", "--offline", "--nocolor",
                 str(ROLE), PLAYBOOK, timeout=600)  # fmt: skip
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]


def test_playbook_syntax() -> None:
    result = run(str(BIN / "ansible-playbook"), "--syntax-check", PLAYBOOK)
    assert result.returncode == 0, result.stdout + result.stderr


def test_role_options_parse(tmp_path: Path) -> None:
    # the options the role's run.yml passes, in the form it passes them (--name=value)
    tasks = (ROLE / "tasks/run.yml").read_text()
    for option in ("--transport=", "--ssh-user=", "--ssh-args=", "--ssh-key=", "--duration=",
                   "--probes=", "--nodes=", "--output-dir="):  # fmt: skip
        assert option in tasks
    code = main(["acceptance", "p.yml", "--expanded", str(tmp_path / "none.json"),
                 "--transport=ssh", "--ssh-user=root", "--ssh-args=-o 'ProxyCommand=nc %h %p'",
                 "--ssh-key=/k", "--duration=2", "--probes=300", "--nodes=a,b",
                 f"--output-dir={tmp_path}"])  # fmt: skip
    assert code == 2  # got as far as reading the (missing) expanded plan
