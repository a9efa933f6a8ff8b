"""authorized_keys lines read as sshd reads them: options, type, the decoded blob."""

from __future__ import annotations

import base64
import hashlib

import pytest

from cluster_plan.plan.ssh_keys import blob_problem, key_problem, split_options


def blob(key_type: str, *parts: bytes) -> str:
    data = b"".join(len(p).to_bytes(4, "big") + p for p in (key_type.encode(), *parts))
    return base64.b64encode(data).decode()


ED25519 = blob("ssh-ed25519", hashlib.sha256(b"ana").digest())
RSA = blob("ssh-rsa", b"\x01\x00\x01", b"\x00" + hashlib.sha512(b"n").digest())
ECDSA = blob("ecdsa-sha2-nistp256", b"nistp256", b"\x04" + bytes(64))
SK = blob("sk-ssh-ed25519@openssh.com", bytes(32), b"ssh:")


@pytest.mark.parametrize(
    "line",
    [
        f"ssh-ed25519 {ED25519}",
        f"ssh-ed25519 {ED25519} ana@laptop",
        f"ssh-ed25519 {ED25519} a comment with spaces",
        f"ssh-rsa {RSA} ana@old",
        f"ecdsa-sha2-nistp256 {ECDSA}",
        f"sk-ssh-ed25519@openssh.com {SK} ana@yubikey",
        f'from="10.0.0.0/8" ssh-ed25519 {ED25519} ana@laptop',
        f'from="10.0.0.0/8,192.168.1.*",no-pty,no-port-forwarding ssh-ed25519 {ED25519}',
        f'restrict,command="borg serve --append-only \\"x\\"" ssh-ed25519 {ED25519}',
        f"no-agent-forwarding,No-X11-Forwarding ssh-ed25519 {ED25519}",
    ],
)
def test_sound_keys_and_options_are_accepted(line: str) -> None:
    assert key_problem(line) is None


@pytest.mark.parametrize(
    ("line", "says"),
    [
        (f"ssh-rsa {ED25519} ana", "says it is ssh-rsa but its data is a ssh-ed25519 key"),
        (f"ssh-ed25519 {RSA} ana", "its data is a ssh-rsa key"),
        (f"ssh-ed25519 {ED25519[:30]} ana", "not valid base64"),
        (f"ssh-ed25519 {blob('ssh-ed25519', bytes(16))}", "not 32 bytes"),
        ("ssh-ed25519 AAAAC3Nza ana", "not valid base64"),
        ("ssh-ed25519 ", "missing"),
        ("ssh-dss AAAAB3NzaC1kc3M= ana", "unknown key type 'ssh-dss'"),
        (f'from="10.0.0.0/8 ssh-ed25519 {ED25519}', "no closing quote"),
        (f"from=10.0.0.0/8 ssh-ed25519 {ED25519}", "double quotes"),
        (f'frm="10.0.0.0/8" ssh-ed25519 {ED25519}', "unknown option 'frm'"),
        (f"no-pty=1 ssh-ed25519 {ED25519}", "takes no value"),
        (f"command ssh-ed25519 {ED25519}", "needs a value"),
        (f'from="10.0.0.0/8"ssh-ed25519 {ED25519}', "not followed by a key"),
        (f"no-pty ssh-ed448 {ED25519}", "unknown key type 'ssh-ed448'"),
        (f'ssh-ed25519 {ED25519} a\ncommand="sh" ssh-ed25519 {ED25519}', "newline"),
        (f"ssh-ed25519 {ED25519} a\x00", "control character"),
        ("   ", "empty"),
    ],
)
def test_what_sshd_would_refuse_is_named(line: str, says: str) -> None:
    problem = key_problem(line)
    assert problem is not None
    assert says in problem


def test_options_are_split_at_the_first_space_outside_quotes() -> None:
    assert split_options(f'from="a b",pty ssh-ed25519 {ED25519} c') == (
        ["from", "pty"],
        f"ssh-ed25519 {ED25519} c",
    )


def test_a_blob_that_is_not_length_prefixed_strings_is_refused() -> None:
    assert "does not decode" in str(
        blob_problem("ssh-ed25519", base64.b64encode(b"\xff" * 12).decode())
    )
