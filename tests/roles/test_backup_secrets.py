"""The backup role's repository passphrases on the controller (roles/backup/tasks/
passphrase.yml), run by Ansible on this machine with a local connection: the controller's
secrets directory and the "node's" state directory are both temporary directories.

With a vault password configured (Ansible's own setting, here $ANSIBLE_VAULT_PASSWORD_FILE)
the controller's copy is Ansible-Vault-encrypted at rest; without one it is a plain 0600
file; a plain file is encrypted once a vault password is set; a second run keeps the same
passphrase and changes nothing; no run prints it, even verbose."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.playbooks import ansible_env, recap

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
PLAYBOOK = """
- name: One node's repository passphrase
  hosts: all
  gather_facts: false
  tasks:
    - name: Keep and install the passphrase
      ansible.builtin.include_role:
        name: backup
        tasks_from: passphrase
"""

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the role installs root's files")


class Controller:
    def __init__(self, tmp_path: Path) -> None:
        self.tmp = tmp_path
        self.secrets = tmp_path / "secrets"
        self.node = tmp_path / "node"
        self.node.mkdir()
        self.vault_password = tmp_path / "vault-password"
        self.vault_password.write_text("a vault password for the test\n")
        (tmp_path / "play.yml").write_text(PLAYBOOK)

    @property
    def kept(self) -> Path:
        return self.secrets / "node01.passphrase"

    @property
    def installed(self) -> str:
        return (self.node / "passphrase").read_text()

    def run(self, vault: bool, *extra: str) -> subprocess.CompletedProcess[str]:
        env = {
            **ansible_env(),
            "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
            "ANSIBLE_PYTHON_INTERPRETER": sys.executable,
        }
        env.pop("ANSIBLE_VAULT_PASSWORD_FILE", None)
        if vault:
            env["ANSIBLE_VAULT_PASSWORD_FILE"] = str(self.vault_password)
        return subprocess.run(
            [
                str(BIN / "ansible-playbook"),
                "-i",
                "node01,",
                "-c",
                "local",
                "-e",
                f"backup_secrets_dir={self.secrets} backup_state_dir={self.node}",
                *extra,
                str(self.tmp / "play.yml"),
            ],
            cwd=self.tmp,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )

    def decrypt(self) -> str:
        return subprocess.run(
            [
                str(BIN / "ansible-vault"),
                "view",
                f"--vault-password-file={self.vault_password}",
                str(self.kept),
            ],
            # Only this password: a lab session exports its own ANSIBLE_VAULT_PASSWORD_FILE.
            env={k: v for k, v in os.environ.items() if k != "ANSIBLE_VAULT_PASSWORD_FILE"},
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()


@pytest.fixture
def controller(tmp_path: Path) -> Controller:
    return Controller(tmp_path)


def _ok(run: subprocess.CompletedProcess[str]) -> dict[str, int]:
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    return recap(run.stdout)["node01"]


def test_with_a_vault_password_the_passphrase_is_encrypted_at_rest_and_kept(
    controller: Controller,
) -> None:
    first = controller.run(True, "-v")
    assert _ok(first)["changed"] > 0
    stored = controller.kept.read_text()
    assert stored.startswith("$ANSIBLE_VAULT;1.1;AES256\n")
    assert oct(controller.kept.stat().st_mode & 0o777) == "0o600"
    assert oct(controller.secrets.stat().st_mode & 0o777) == "0o700"
    passphrase = controller.decrypt()
    assert len(passphrase) == 48 and passphrase.isalnum()
    assert controller.installed == passphrase
    assert passphrase not in stored

    second = controller.run(True, "-vv")
    assert _ok(second)["changed"] == 0
    assert controller.kept.read_text() == stored  # not even re-encrypted
    assert controller.installed == passphrase
    for run in (first, second):
        assert passphrase not in run.stdout + run.stderr


def test_without_a_vault_password_the_file_is_plain_and_private_then_encrypted_once_set(
    controller: Controller,
) -> None:
    plain = controller.run(False, "-v")
    _ok(plain)
    passphrase = controller.kept.read_text().strip()
    assert len(passphrase) == 48 and controller.installed == passphrase
    assert oct(controller.kept.stat().st_mode & 0o777) == "0o600"

    encrypted = controller.run(True, "-v")
    assert _ok(encrypted)["changed"] == 1  # the controller's file, and nothing on the node
    assert controller.kept.read_text().startswith("$ANSIBLE_VAULT;")
    assert controller.decrypt() == passphrase == controller.installed
    again = controller.run(True)
    assert _ok(again)["changed"] == 0
    for run in (plain, encrypted, again):
        assert passphrase not in run.stdout + run.stderr


def test_a_lost_controller_copy_is_taken_back_from_the_node_encrypted(
    controller: Controller,
) -> None:
    _ok(controller.run(True))
    passphrase = controller.installed
    controller.kept.unlink()
    taken_back = controller.run(True, "-v")
    _ok(taken_back)
    assert controller.decrypt() == passphrase == controller.installed
    assert passphrase not in taken_back.stdout + taken_back.stderr


def test_a_controller_copy_that_differs_from_the_nodes_stops_the_run(
    controller: Controller,
) -> None:
    _ok(controller.run(True))
    passphrase = controller.installed
    controller.kept.write_text("not-the-passphrase\n")
    refused = controller.run(True)
    assert refused.returncode != 0
    assert "differs from" in refused.stdout
    assert controller.installed == passphrase  # the node's stays
    assert controller.kept.read_text() == "not-the-passphrase\n"  # and nothing was encrypted
