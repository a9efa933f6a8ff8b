"""Running the project's playbooks against a lab, for tests and benchmarks: the command,
its wall time, and the PLAY RECAP read back per host."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from cluster_plan.lab.proc import kill_tree

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
CONVERGE_TIMEOUT_S = 2400
RECAP = re.compile(
    r"^(\S+)\s+:\s+ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.M
)


@dataclass
class Run:
    """One ansible-playbook run: its result, wall time and combined output."""

    result: subprocess.CompletedProcess[str]
    seconds: float

    @property
    def output(self) -> str:
        return self.result.stdout + self.result.stderr

    @property
    def ok(self) -> bool:
        return self.result.returncode == 0


def sigint_default() -> None:
    """preexec_fn for a lab command a test stops with SIGINT, as Ctrl-C in a terminal would:
    a suite started in the background (`make test &`) inherits SIGINT ignored, and Python
    then never raises KeyboardInterrupt, so the command would not stop."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def ansible_env() -> dict[str, str]:
    return {
        **os.environ,
        "PATH": f"{BIN}:{os.environ.get('PATH', '')}",
        "ANSIBLE_FORCE_COLOR": "0",
        "ANSIBLE_NOCOLOR": "1",
    }


def vault_view(path: Path) -> str:
    """A file the controller keeps, as text: decrypted with `ansible-vault view` (and the vault
    password Ansible is configured with) when Ansible Vault encrypted it, as it is otherwise."""
    text = path.read_text()
    if not text.startswith("$ANSIBLE_VAULT;"):
        return text
    return subprocess.run(
        [str(BIN / "ansible-vault"), "view", str(path)],
        env=ansible_env(),
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def playbook(
    plan: Path,
    playbooks: list[str],
    *extra: str,
    timeout: float = CONVERGE_TIMEOUT_S,
    env: dict[str, str] | None = None,
    on_start: Callable[[subprocess.Popen[str]], None] | None = None,
) -> Run:
    """ansible-playbook -i PLAN EXTRA PLAYBOOKS, from the repository root. `env` is the
    environment (ansible_env() of this moment by default); `on_start` receives the process
    (a caller in another thread keeps it to stop the run)."""
    started = time.monotonic()
    argv = [str(BIN / "ansible-playbook"), "-i", str(plan), *extra, *playbooks]
    with subprocess.Popen(
        argv,
        cwd=REPO,
        env=ansible_env() if env is None else env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as proc:
        if on_start is not None:
            on_start(proc)
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_tree(proc.pid)
            proc.communicate()
            raise
    result = subprocess.CompletedProcess(argv, proc.returncode, out, err)
    return Run(result, time.monotonic() - started)


def recap(output: str) -> dict[str, dict[str, int]]:
    """PLAY RECAP per host, summed over the plays of the run."""
    hosts: dict[str, dict[str, int]] = {}
    for host, ok, changed, unreachable, failed in RECAP.findall(output):
        row = hosts.setdefault(host, {"ok": 0, "changed": 0, "unreachable": 0, "failed": 0})
        row["ok"] += int(ok)
        row["changed"] += int(changed)
        row["unreachable"] += int(unreachable)
        row["failed"] += int(failed)
    return hosts


def changed_lines(output: str) -> list[str]:
    """The task lines that reported a change (for a readable idempotence failure)."""
    lines = output.splitlines()
    shown = []
    for i, line in enumerate(lines):
        if line.startswith("changed:"):
            task = next((lines[j] for j in range(i, -1, -1) if lines[j].startswith("TASK [")), "")
            shown.append(f"{task} {line}")
    return shown


def local_play(
    play_file: Path, env: dict[str, str], *, check: bool = False
) -> subprocess.CompletedProcess[str]:
    """A play on this machine (`-c local`, this Python) under the repository's ansible.cfg,
    with Ansible's linear strategy (the roles' apt tasks re-run themselves, which Mitogen
    cannot: docs/scale.md) and no fact cache; `env` on top of this process's environment."""
    environment = {
        **os.environ,
        **env,
        "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
        "ANSIBLE_CACHE_PLUGIN": "memory",
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_LOCALHOST_WARNING": "false",
        "ANSIBLE_STRATEGY": "linear",
    }
    argv = [str(BIN / "ansible-playbook"), "-i", "localhost,", "-c", "local",
            "-e", f"ansible_python_interpreter={sys.executable}", str(play_file),
            *(["--check"] if check else [])]  # fmt: skip
    return subprocess.run(
        argv, cwd=REPO, env=environment, capture_output=True, text=True, timeout=300, check=False
    )
