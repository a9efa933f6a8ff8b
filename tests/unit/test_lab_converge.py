"""support.playbooks helpers that need no lab: reading a file the controller keeps,
Vault-encrypted or not, with the ansible-vault of this environment."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.playbooks import vault_view

BIN = Path(sys.executable).parent


def test_vault_view_decrypts_an_encrypted_file_and_reads_a_plain_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    password = tmp_path / "vault-pass"
    password.write_text("not-a-real-password\n")
    monkeypatch.setenv("ANSIBLE_VAULT_PASSWORD_FILE", str(password))
    secret = tmp_path / "passphrase"
    secret.write_text("correct horse battery staple\n")
    subprocess.run(
        [str(BIN / "ansible-vault"), "encrypt", str(secret)],
        env={**os.environ, "ANSIBLE_VAULT_PASSWORD_FILE": str(password)},
        capture_output=True,
        check=True,
    )
    assert secret.read_text().startswith("$ANSIBLE_VAULT;1.1;AES256\n")
    assert vault_view(secret) == "correct horse battery staple\n"
    plain = tmp_path / "plain"
    plain.write_text("as it is\n")
    assert vault_view(plain) == "as it is\n"


def test_vault_view_with_the_wrong_password_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    right, wrong = tmp_path / "right", tmp_path / "wrong"
    right.write_text("one\n")
    wrong.write_text("two\n")
    secret = tmp_path / "passphrase"
    secret.write_text("x\n")
    # The password comes from the environment only: a lab session exports its own
    # ANSIBLE_VAULT_PASSWORD_FILE, and a second --vault-password-file beside it makes
    # ansible-vault refuse to choose between two default vault ids (exit 5).
    subprocess.run(
        [str(BIN / "ansible-vault"), "encrypt", str(secret)],
        env={**os.environ, "ANSIBLE_VAULT_PASSWORD_FILE": str(right)},
        capture_output=True,
        check=True,
    )
    monkeypatch.setenv("ANSIBLE_VAULT_PASSWORD_FILE", str(wrong))
    with pytest.raises(subprocess.CalledProcessError):
        vault_view(secret)
