"""Secrets on the converged session lab: each one's content is in no Ansible output (the
converge and its verbose idempotence run), no file of the repository (reports and the fact
cache included), no acceptance or drift report; the backup passphrases Ansible keeps on the
controller are Ansible-Vault-encrypted at rest (the session configures a vault password,
support.lab_session.vault_password).

Secrets read from the nodes, inside their namespaces: the munge key, the Ceph keys, the
slurmdbd database password, every node's backup repository passphrase."""

from __future__ import annotations

import base64
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from lab_helpers import PLAN, cli, on_node

# The shared session fixtures (`lab`, `converged_lab`), requested below.
from support.lab_session import Converged, converged_lab, lab  # noqa: F401
from support.playbooks import vault_view

pytestmark = pytest.mark.lab
REPO = Path(__file__).resolve().parents[2]
PASSPHRASE = "/var/lib/cluster-plan-backup/passphrase"


def _sh(host: str, script: str) -> str:
    result = on_node(host, script)
    assert result.returncode == 0, f"{host}: {script}\n{result.stdout}\n{result.stderr}"
    return result.stdout


def _secrets(expanded: dict[str, Any]) -> dict[str, str]:
    """name -> content, for every secret the converge made."""
    groups = expanded["groups"]
    controller = groups["slurm_controller"][0]
    found = {"munge key": _sh(controller, "base64 -w0 /etc/munge/munge.key").strip()}
    raw = base64.b64decode(found["munge key"])
    found["munge key (hex)"] = raw.hex()[:32]
    dbd = (groups.get("slurmdbd") or [controller])[0]
    found["slurmdbd password"] = _sh(dbd, "cat /etc/slurm/.slurmdbd-db-password").strip()
    mon = groups["ceph_mon"][0]
    keys = _sh(mon, "sed -n 's/^[[:space:]]*key = //p' /etc/ceph/cluster-plan/*.keyring").split()
    found |= {f"ceph key {i}": key for i, key in enumerate(keys)}
    for host in expanded["hosts"]:
        found[f"backup passphrase of {host}"] = _sh(host, f"cat {PASSPHRASE}").strip()
    assert all(len(value) >= 16 for value in found.values()), "a secret is too short to grep"
    return found


@pytest.fixture(scope="module")
def secrets(converged_lab: Converged) -> dict[str, str]:  # noqa: F811
    converged_lab.require_converged()
    return _secrets(converged_lab.expanded)


def _kept(expanded: dict[str, Any], host: str) -> Path:
    root = os.environ.get("CLUSTER_PLAN_SECRETS_DIR") or str(
        Path.home() / ".config" / "cluster-plan" / "secrets"
    )
    return Path(root) / str(expanded["cluster"]["name"]) / f"{host}.passphrase"


def test_backup_passphrases_are_vault_encrypted_on_the_controller(
    converged_lab: Converged,  # noqa: F811
    secrets: dict[str, str],
) -> None:
    assert os.environ.get("ANSIBLE_VAULT_PASSWORD_FILE"), "the session configures a vault"
    rows = []
    for host in converged_lab.expanded["hosts"]:
        kept = _kept(converged_lab.expanded, host)
        stored = kept.read_text()
        assert stored.startswith("$ANSIBLE_VAULT;1.1;AES256\n"), host
        assert oct(kept.stat().st_mode & 0o777) == "0o600", host
        plain = vault_view(kept).strip()
        assert plain == secrets[f"backup passphrase of {host}"], host
        rows.append(f"{host:<8} {kept}  vault-encrypted, 0600, decrypts to the node's")
    print("\nbackup passphrases on the controller:\n" + "\n".join(rows))


def test_no_secret_in_ansible_output_the_repository_or_the_reports(
    converged_lab: Converged,  # noqa: F811
    secrets: dict[str, str],
    tmp_path: Path,
) -> None:
    first, second = converged_lab.require_runs()
    drift = cli("drift", str(PLAN), "--format", "json", timeout=600)
    assert drift.returncode in (0, 1) and drift.stdout.lstrip().startswith("{"), drift.stderr
    report_dir = REPO / "reports" / str(converged_lab.expanded["cluster"]["name"])
    reports = sorted(p for p in report_dir.rglob("*") if p.is_file())  # gpu/: GPU health
    assert any(p.name == "acceptance.json" for p in reports), reports
    texts = {
        "converge output": first.output,
        "verbose idempotence run output": second.output,
        "drift report": drift.stdout + drift.stderr,
        **{f"report {p.relative_to(report_dir)}": p.read_text(errors="replace") for p in reports},
    }
    leaks = [
        (name, where)
        for name, value in secrets.items()
        for where, text in texts.items()
        if value in text
    ]
    # every file under the repository, ignored ones too (reports, fact cache), but the venv
    patterns = tmp_path / "patterns"
    patterns.write_text("\n".join(secrets.values()) + "\n")
    grep = subprocess.run(
        ["grep", "-rlF", "-f", str(patterns), "--exclude-dir=.venv", str(REPO)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert grep.returncode == 1, f"secrets in {grep.stdout.split()} {grep.stderr}"
    assert leaks == []
    print(
        f"\n{len(secrets)} secrets ({', '.join(sorted({n.split(' of ')[0] for n in secrets}))})"
        f" grepped in {len(texts)} outputs and reports and every file of {REPO}: none found"
    )
