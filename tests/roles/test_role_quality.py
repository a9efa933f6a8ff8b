"""roles/common and roles/slurm: lint clean, syntax valid, specs complete, READMEs current."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
ROLES = ["common", "slurm", "ceph", "nfs"]
PLAYBOOKS = ["playbooks/common.yml", "playbooks/slurm.yml", "playbooks/storage.yml"]


def run(*argv: str, timeout: int = 300) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PATH": f"{BIN}:{os.environ.get('PATH', '')}",
        "ANSIBLE_HOME": str(ROOT / ".ansible"),
    }
    return subprocess.run(
        list(argv), cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


@pytest.mark.parametrize("role", ROLES)
def test_every_default_has_an_argument_spec(role):
    defaults = yaml.safe_load((ROOT / "roles" / role / "defaults/main.yml").read_text())
    specs = yaml.safe_load((ROOT / "roles" / role / "meta/argument_specs.yml").read_text())
    options = specs["argument_specs"]["main"]["options"]
    assert sorted(set(defaults) - set(options)) == []
    assert sorted(set(options) - set(defaults)) == []
    for name, option in options.items():
        assert name.startswith(f"{role}_"), name
        assert option.get("description"), name
        assert "type" in option, name


def test_readmes_are_generated_from_the_specs():
    result = run(
        str(BIN / "python"),
        "-m",
        "cluster_plan.role_docs",
        "--check",
        *(f"roles/{r}" for r in ROLES),
    )
    assert result.returncode == 0, result.stderr


def test_playbooks_pass_syntax_check():
    result = run(str(BIN / "ansible-playbook"), "--syntax-check", *PLAYBOOKS)
    assert result.returncode == 0, result.stdout + result.stderr


def test_yamllint_clean():
    result = run(str(BIN / "yamllint"), "-s", *(f"roles/{r}" for r in ROLES), *PLAYBOOKS)
    assert result.returncode == 0, result.stdout


def test_ansible_lint_production_profile():
    result = run(
        str(BIN / "ansible-lint"),
        "--profile",
        "production",
        "--offline",
        "--nocolor",
        *(f"roles/{r}" for r in ROLES),
        *PLAYBOOKS,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]


@pytest.mark.parametrize("role", ROLES)
def test_argument_spec_defaults_are_the_role_defaults(role):
    """Ansible templates the specs when it validates them: they must hold the same (safe)
    expressions as defaults/main.yml, and the README shows them."""
    defaults = yaml.safe_load((ROOT / "roles" / role / "defaults/main.yml").read_text())
    specs = yaml.safe_load((ROOT / "roles" / role / "meta/argument_specs.yml").read_text())
    options = specs["argument_specs"]["main"]["options"]
    assert {k: o.get("default") for k, o in options.items()} == defaults
