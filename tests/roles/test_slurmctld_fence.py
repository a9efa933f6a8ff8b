"""slurmctld-fence, the HA pair's fencing helper (roles/slurm/files): how a backup tells a lost
primary from one whose slurmctld merely died, and when it fences. The eviction itself and the
primary's rejoin are proven on the lab (test_slurm_failover_lab.py)."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import socket
import subprocess
import sys
import threading
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "roles" / "slurm" / "files" / "slurmctld-fence"


@pytest.fixture(scope="module")
def fence() -> ModuleType:
    loader = importlib.machinery.SourceFileLoader("slurmctld_fence", str(SCRIPT))
    spec = importlib.util.spec_from_loader("slurmctld_fence", loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


PING_BOTH_UP = "Slurmctld(primary) at head01 is UP\nSlurmctld(backup) at osd01 is UP\n"
PING_PRIMARY_DOWN = "Slurmctld(primary) at head01 is DOWN\nSlurmctld(backup) at osd01 is UP\n"


def test_the_primary_is_up_only_when_scontrol_ping_says_so(fence: ModuleType):
    assert fence.primary_up(PING_BOTH_UP, "head01")
    assert not fence.primary_up(PING_PRIMARY_DOWN, "head01")
    assert not fence.primary_up(PING_BOTH_UP, "head02")  # another primary: not this one
    assert not fence.primary_up("", "head01")


def test_fencing_waits_half_of_slurmctld_timeout_and_happens_once_per_outage(fence: ModuleType):
    assert not fence.should_fence(last_alive=100, now=114, timeout_s=30, fenced=False)
    assert fence.should_fence(last_alive=100, now=115, timeout_s=30, fenced=False)
    assert not fence.should_fence(last_alive=100, now=400, timeout_s=30, fenced=True)


def test_a_host_that_refuses_is_alive_and_one_that_accepts_is_open(fence: ModuleType):
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        port = listener.getsockname()[1]
        # bound, not listening: the kernel answers with a reset, as a host whose slurmctld died
        assert fence.connect("127.0.0.1", port) == "refused"
        listener.listen(1)
        assert fence.connect("127.0.0.1", port) == "open"


def test_wrong_arguments_are_a_usage_error_not_a_traceback():
    for argv in ([], ["backup", "head01"], ["primary"], ["backup", "h", "a", "p", "t", "i", "f"]):
        done = subprocess.run(
            [sys.executable, str(SCRIPT), *argv], capture_output=True, text=True, check=False
        )
        assert done.returncode == 2, (argv, done.stderr)
        assert "Traceback" not in done.stderr, done.stderr
        assert "slurmctld-fence" in done.stderr, done.stderr


def test_after_fencing_the_backup_is_told_to_take_over_and_a_refusal_is_logged(
    fence: ModuleType, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    calls: list[list[str]] = []
    answers: list[subprocess.CompletedProcess[str] | None] = [
        subprocess.CompletedProcess(["scontrol"], 0, "", ""),
        subprocess.CompletedProcess(["scontrol"], 1, "", "Slurm backup controller in standby"),
        None,
    ]

    def fake_run(argv: list[str], timeout: float = 30) -> subprocess.CompletedProcess[str] | None:
        calls.append(argv)
        return answers.pop(0)

    monkeypatch.setattr(fence, "run", fake_run)
    for _ in range(3):
        fence.take_over()
    assert calls == [["scontrol", "takeover"]] * 3
    lines = capsys.readouterr().out.splitlines()
    assert "asked this backup's slurmctld to take control" in lines[0]
    assert "failed (Slurm backup controller in standby)" in lines[1]
    assert "failed (no answer within 60s)" in lines[2]


def test_the_refusal_table_is_valid_nftables_and_spares_ssh(fence: ModuleType):
    rules = fence.block_rules("10.40.0.10")
    assert "ip daddr 10.40.0.10 tcp dport != 22" in rules
    assert "reject with tcp reset" in rules
    # nft's own parser, check only (-c): nothing is applied to this machine
    checked = subprocess.run(
        ["nft", "-c", "-f", "-"], input=rules, capture_output=True, text=True, check=False
    )
    assert checked.returncode == 0, checked.stderr


def test_a_node_is_back_only_when_its_sshd_speaks_not_when_its_kernel_accepts(
    fence: ModuleType, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(fence, "CONNECT_S", 0.5)
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(2)
        monkeypatch.setattr(fence, "SSH_PORT", listener.getsockname()[1])
        # accepted by the kernel, nobody speaks: a frozen node
        assert not fence.userland_answers("127.0.0.1")
        listener.accept()[0].close()  # that first connection, from the backlog
        answered: list[bool] = []
        thread = threading.Thread(
            target=lambda: answered.append(fence.userland_answers("127.0.0.1"))
        )
        thread.start()
        conn, _ = listener.accept()
        with conn:
            conn.sendall(b"SSH-2.0-OpenSSH_9.2\r\n")
            thread.join(timeout=5)
        assert answered == [True]


def test_the_eviction_names_the_client_by_its_id_and_checks_none_is_left(
    fence: ModuleType, monkeypatch: pytest.MonkeyPatch
):
    """The MDS compares `auth_name` with the entity's id: `auth_name=client.head01` matches no
    session, and the eviction silently does nothing (the lab showed it: the MDS let the lost
    client go only when its session timed out, 72 s later)."""
    calls: list[list[str]] = []
    listed = iter(['[{"id": 4782}]', "[]"])

    def fake_run(argv: list[str], timeout: float = 30) -> subprocess.CompletedProcess[str]:
        if argv[3:5] == ["fs", "get"]:
            return subprocess.CompletedProcess(argv, 0, fs_get("up:active"), "")
        calls.append(argv)
        out = next(listed) if "ls" in argv else ""
        return subprocess.CompletedProcess(argv, 0, out, "")

    monkeypatch.setattr(fence, "run", fake_run)
    assert fence.evict("head01", "osd01-fence", "shared")
    assert [c[-3:] for c in calls] == [
        ["client", "ls", "auth_name=head01"],
        ["client", "evict", "auth_name=head01"],
        ["client", "ls", "auth_name=head01"],
    ]
    assert all(
        c[:6] == ["ceph", "--id", "osd01-fence", "tell", "mds.shared:0", "client"] for c in calls
    )
    # a session still there after the eviction is not a fence
    listed = iter(['[{"id": 4782}]', '[{"id": 4782}]'])
    assert not fence.evict("head01", "osd01-fence", "shared")


def fs_get(state: str | None) -> str:
    """`ceph fs get shared --format json` as Ceph 16 answers it (trimmed): rank 0 held by
    osd01's MDS in this state, or held by none."""
    up = {} if state is None else {"mds_0": 4422}
    info = {} if state is None else {"gid_4422": {"name": "osd01", "rank": 0, "state": state}}
    return json.dumps({"mdsmap": {"fs_name": "shared", "up": up, "info": info}})


@pytest.mark.parametrize(
    ("state", "evicts"),
    [
        ("up:active", True),
        ("up:clientreplay", True),  # waiting for the lost client's sessions: evict them
        ("up:replay", False),
        ("up:reconnect", False),  # the lab's case: `client ls` answers [] here
        ("up:rejoin", False),
        (None, False),  # no MDS holds rank 0
    ],
)
def test_no_eviction_while_rank_0_fails_over(
    fence: ModuleType, monkeypatch: pytest.MonkeyPatch, state: str | None, evicts: bool
):
    """When the lost node ran the active MDS, a standby takes rank 0 over; until it serves, no
    session is listed and an eviction matches nothing. "None left" then is no fence: the
    helper must wait and try again, not tell its slurmctld to take over."""
    asked: list[list[str]] = []

    def fake_run(argv: list[str], timeout: float = 30) -> subprocess.CompletedProcess[str]:
        asked.append(argv)
        if argv[3:5] == ["fs", "get"]:
            return subprocess.CompletedProcess(argv, 0, fs_get(state), "")
        return subprocess.CompletedProcess(argv, 0, "[]", "")

    monkeypatch.setattr(fence, "run", fake_run)
    assert fence.evict("head01", "osd01-fence", "shared") is evicts
    assert any("evict" in argv for argv in asked) is evicts
    assert fence.rank0_state(fs_get(state)) == (state or "failed")
    assert fence.rank0_state("not json") is None


def test_a_shutdown_that_logs_nothing_for_a_minute_is_hung(fence: ModuleType, tmp_path: Path):
    log = tmp_path / "slurmctld.log"
    log.write_text(
        "[2026-12-02T19:16:15.150] Performing RPC: REQUEST_SHUTDOWN\n"
        "[2026-12-02T19:16:15.150] Terminate signal (SIGINT or SIGTERM) received\n"
        "[2026-12-02T19:16:15.182] Saving all slurm state\n"
    )
    written = log.stat().st_mtime
    assert not fence.stop_hung(str(log), 60, written + 30)  # still within its minute
    assert fence.stop_hung(str(log), 60, written + 61)
    log.write_text("[2026-12-02T19:16:20.000] Running as primary controller\n")
    assert not fence.stop_hung(str(log), 60, log.stat().st_mtime + 600)  # quiet, not stopping
    assert not fence.stop_hung(str(tmp_path / "missing.log"), 60, written + 600)


def test_a_slurmctld_stopped_for_a_fenced_mount_is_started_once_a_later_try_brings_it_back(
    fence: ModuleType, monkeypatch: pytest.MonkeyPatch
):
    """Seen in a verification run: the first remount found the old (evicted) client still
    holding the mount; the second worked, but that try no longer knew slurmctld had run, and
    the primary stayed down. The start is owed across tries."""
    # looks at the mount: before try 1, after it, before try 2, after it, a last look
    states = iter(["stale", "stale", "stale", "ok", "ok"])
    calls: list[str] = []
    active = {"slurmctld": True}

    def run(argv: list[str], timeout: float = 30) -> subprocess.CompletedProcess[str]:
        calls.append(" ".join(argv[1:]))
        if argv[1:3] == ["is-active", "--quiet"]:
            return subprocess.CompletedProcess(argv, 0 if active["slurmctld"] else 3)
        if argv[1] == "kill":
            active["slurmctld"] = False
        if argv[1] == "start":
            active["slurmctld"] = True
        return subprocess.CompletedProcess(argv, 0)

    monkeypatch.setattr(fence, "run", run)
    monkeypatch.setattr(fence, "mount_state", lambda _mount: next(states))
    owed = fence.mount_step("/shared", "shared.mount", False)  # stale: kill, remount, not back
    assert owed and not active["slurmctld"]
    owed = fence.mount_step("/shared", "shared.mount", owed)  # stale again: remount, back
    assert not owed and active["slurmctld"], calls
    assert (
        calls.count("start slurmctld") == 1 and calls.count("kill --signal=SIGKILL slurmctld") == 1
    )
    # the mount fine and nothing owed: nothing more is done
    before = len(calls)
    assert fence.mount_step("/shared", "shared.mount", False) is False
    assert len(calls) == before


def test_a_mount_that_comes_back_by_itself_still_gets_the_owed_start(
    fence: ModuleType, monkeypatch: pytest.MonkeyPatch
):
    calls: list[str] = []
    monkeypatch.setattr(
        fence,
        "run",
        lambda argv, timeout=30: (
            calls.append(" ".join(argv[1:])) or subprocess.CompletedProcess(argv, 0)
        ),
    )
    monkeypatch.setattr(fence, "mount_state", lambda _mount: "ok")
    assert fence.mount_step("/shared", "shared.mount", True) is False
    assert calls == ["reset-failed slurmctld", "start slurmctld"]
