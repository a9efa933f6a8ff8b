"""pytest fixtures that bring the lab up once per session and always take it down, and
converge site.yml on it once per session.

Use from any conftest.py:  `pytest_plugins = ["support.lab_session"]` (top-level
conftest only), or import the fixtures: `from support.lab_session import lab`.

The session lab runs under its own id ($CLUSTER_PLAN_LAB_ID, default "test"), so a
developer's `make lab` (id "lab") is neither reused nor torn down by a test run; the id is
exported so that Ansible run by tests reaches this lab through the inventory plugin.

`converged_lab` runs site.yml six times on the session lab (the converge; the idempotence
run, every stage in full and verbose; after ten hand changes, the run that puts them right;
a re-run through the stage gate, as a user's re-run is; a run that loses a node part-way
and the run after its return), and `site.yml --check` beside the
idempotence run, and hands every test the runs. Those
runs start in the background as soon as the lab tests that need no converge are done, while
the tests that need no lab run (`converge_in_background`). Tests marked `lab_changes` change the
shared lab (faults, growth) and restore it; they run after every other test of the session.
CLUSTER_PLAN_LAB_CONVERGED=1 uses the lab already running under $CLUSTER_PLAN_LAB_ID as it
is (no session lab, no converge; tests reading the converge output skip): quick iterations.
"""

from __future__ import annotations

import fcntl
import os
import secrets
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import NamedTuple

import pytest

from cluster_plan.lab import lifecycle, state
from cluster_plan.lab.names import RUN_ROOT, LabNames, for_plan
from cluster_plan.lab.proc import ProcRef, kill_tree
from cluster_plan.plan.contract import ExpandedPlan
from support import hand_changes, lost_node, run_split
from support.hand_changes import HandChanged
from support.lost_node import LostNode
from support.playbooks import Run, ansible_env, playbook

REPO = Path(__file__).resolve().parents[2]
LAB_PLAN = REPO / "inventory" / "lab" / "cluster.yml"
SESSION_WAIT_S = 1200.0
TOOLS = (
    "debootstrap",
    "unshare",
    "nsenter",
    "ip",
    "tc",
    "nft",
    "iptables",
    "nc",
    "iperf3",
    "fping",
    "ssh",
    "ssh-keygen",
    "losetup",
)


def missing_prerequisites() -> list[str]:
    """What this machine lacks to run the lab, in words; empty when it can."""
    missing = [] if os.geteuid() == 0 else ["root (namespaces, bridges, mounts)"]
    tools = [tool for tool in TOOLS if shutil.which(tool) is None]
    if tools:
        missing.append(f"host tools {', '.join(tools)} (make apt-deps)")
    return missing


def skip_unless_lab_machine() -> None:
    """Skip (with the reason) where the lab cannot run: not root, or tools missing. Under CI
    and `make test` the session never gets here: tests/support/lab_gate.py stops it first."""
    missing = missing_prerequisites()
    if missing:
        pytest.skip(f"the lab needs {'; '.join(missing)}")


@dataclass
class Lab:
    """A running lab, as tests see it."""

    plan: Path
    expanded: ExpandedPlan
    names: LabNames

    def init(self, host: str) -> ProcRef:
        st = state.load(self.names.state_file)
        assert st is not None, "the lab has no state file"
        return st.nodes[host]

    def in_node(
        self, host: str, argv: list[str], timeout: float = 60, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        """Run a command inside a node (its namespaces and root), without SSH."""
        init = self.init(host)
        return subprocess.run(
            ["nsenter", "-t", str(init.pid), "-a", "-r", "-w", *argv],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=check,
        )

    def in_netns(
        self, host: str, argv: list[str], timeout: float = 60, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        """Run a host tool (iperf3, fping) in a node's network namespace only."""
        return subprocess.run(
            ["ip", "netns", "exec", self.names.node_ns(host), *argv],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=check,
        )

    def address(self, host: str, network: str) -> str:
        return str(self.expanded["hosts"][host]["interfaces"][network]["address"])


@contextmanager
def session_claim(lab_id: str, wait_s: float = SESSION_WAIT_S) -> Iterator[None]:
    """Hold the lab id for a whole pytest session: a second session on this machine (another
    engineer's) waits for the first instead of tearing its lab down under it."""
    RUN_ROOT.mkdir(parents=True, exist_ok=True)
    with open(RUN_ROOT / f"{lab_id}.session.lock", "w") as handle:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    pytest.fail(
                        f"lab {lab_id!r} stayed busy with another test session for "
                        f"{wait_s:.0f}s; set CLUSTER_PLAN_LAB_ID to use another id"
                    )
                time.sleep(1)
        yield


def _interrupt(_signum: int, _frame: FrameType | None) -> None:
    """SIGTERM (a CI timeout) ends the session like Ctrl-C, so the lab is still taken down."""
    raise KeyboardInterrupt


# The lab this test process brought up. Each conftest or module that imports `lab` registers
# its own copy of the fixture, and pytest sets each copy up once: the first brings the lab
# up and owns it, the others share it.
_SESSION_LABS: list[Lab] = []


def vault_password(names: LabNames) -> Path:
    """A random Ansible Vault password for the session lab, in its run directory: the backup
    passphrases Ansible keeps on the controller are encrypted with it, as an operator's would
    be with theirs (roles/backup, docs/reliability.md)."""
    path = names.run_dir / "vault-password"
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        path.touch(mode=0o600)
        path.write_text(secrets.token_urlsafe(32) + "\n")
    return path


@pytest.fixture(scope="session")
def lab() -> Iterator[Lab]:
    skip_unless_lab_machine()
    if _SESSION_LABS:
        yield _SESSION_LABS[0]
        return
    from cluster_plan.api import load_expanded

    lab_id = os.environ.get("CLUSTER_PLAN_LAB_ID", "test")
    patch = pytest.MonkeyPatch()
    patch.setenv("CLUSTER_PLAN_LAB_ID", lab_id)
    try:
        expanded = load_expanded(str(LAB_PLAN))
    except BaseException:
        patch.undo()
        raise
    # backup passphrases of the session's nodes live and die with the lab (lab down removes
    # its run directory), never in the tester's home; they are vault-encrypted (see below)
    patch.setenv("CLUSTER_PLAN_SECRETS_DIR", str(for_plan(expanded).run_dir / "secrets"))
    previous = signal.signal(signal.SIGTERM, _interrupt)
    with session_claim(lab_id):
        try:
            lifecycle.down(expanded)  # whatever an interrupted run left behind
            lifecycle.up(expanded, str(LAB_PLAN))
            patch.setenv("ANSIBLE_VAULT_PASSWORD_FILE", str(vault_password(for_plan(expanded))))
            _SESSION_LABS.append(Lab(LAB_PLAN, expanded, for_plan(expanded)))
            yield _SESSION_LABS[0]
        finally:
            _SESSION_LABS.clear()
            try:
                lifecycle.down(expanded)
            finally:
                patch.undo()
                signal.signal(signal.SIGTERM, previous)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "lab_changes: changes the shared lab and restores it; runs after the others"
    )
    config.addinivalue_line(
        "markers",
        "lab_reprovisions: adds, re-provisions or retires nodes of the shared lab; runs last, "
        "so that what a node's new life leaves behind meets no other test",
    )
    if run_split.side() == "beside":  # its labs of their own, taken down on SIGTERM too
        signal.signal(signal.SIGTERM, _interrupt)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    run_split.summary(terminalreporter)


def part_of(item: pytest.Item) -> int:
    """Where a test runs in a session (see `pytest_collection_modifyitems`): 0 the bare
    session lab's, 1 no lab or a lab of its own, 2 the converged lab's, 3 its changes, 4 its
    re-provisioned nodes."""
    fixtures = getattr(item, "fixturenames", ())
    if item.get_closest_marker("lab_reprovisions") is not None:
        return 4
    if item.get_closest_marker("lab_changes") is not None:
        return 3
    if "converged_lab" in fixtures:
        return 2
    return 0 if item.get_closest_marker("lab") is not None and "lab" in fixtures else 1


@pytest.hookimpl(trylast=True)  # after -m and -k dropped what this run does not select
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Lab tests that need no converge first: the bare session lab's (they restart nodes and
    inject faults, as a lab user would, before any role has set a node up); then, while the
    session lab converges in the background (see `converge_in_background`), the tests that
    need no lab and those of labs of their own (the Kubernetes lab, the lifecycle labs: their
    own ids and subnets; they leave CPU-sensitive measurement to the session lab's tests,
    which never overlap the converge); then the tests of the converged lab; then the tests
    that change the shared lab; last those that re-provision its nodes. A stable sort: within
    each part the tests keep their order. `make test` splits the session in two runs at once
    (support/run_split.py): the one beside takes part 1, labs of their own first."""
    items[:] = run_split.split(config, items, part_of)
    items.sort(key=part_of)
    if os.environ.get("CLUSTER_PLAN_LAB_CONVERGED") == "1" or missing_prerequisites():
        return
    if not any(part_of(item) >= 2 for item in items):
        return
    # The first test that needs no lab starts the converge; with none, the first converged one.
    first = next(item for item in items if part_of(item) >= 1)
    names = getattr(first, "fixturenames", None)
    if isinstance(names, list) and "converge_in_background" not in names:
        names.insert(0, "converge_in_background")


@dataclass
class Converged:
    """The session lab after site.yml: the plan, the converge and idempotence runs, a third
    run as a user's re-run is, through the stage gate, and the check-mode run (each None when
    CLUSTER_PLAN_LAB_CONVERGED=1 reused a converged lab); `runs_s`: their wall time."""

    plan: Path
    expanded: ExpandedPlan
    first: Run | None
    second: Run | None
    gated: Run | None = None
    check: Run | None = None
    hand: HandChanged | None = None
    lost: LostNode | None = None
    runs_s: float | None = None

    @property
    def outputs(self) -> list[str]:
        mended = self.hand.run if self.hand is not None else None
        lost = (self.lost.lost, self.lost.again) if self.lost is not None else ()
        runs = (self.first, self.second, mended, self.gated, *lost)
        return [run.output for run in runs if run is not None]

    def require_converged(self) -> None:
        """Fail the calling test when site.yml failed on the session lab."""
        if self.first is not None and not self.first.ok:
            pytest.fail("site.yml failed on the lab:\n" + self.first.result.stdout[-6000:])

    def require_runs(self) -> tuple[Run, Run]:
        """Both runs; skips when no converge ran in this session."""
        self.require_converged()
        if self.first is None or self.second is None:
            pytest.skip("CLUSTER_PLAN_LAB_CONVERGED=1: no converge ran in this session")
        return self.first, self.second


class Runs(NamedTuple):
    """The session converge's runs, in order; `check` ran beside `second`, `hand` holds the
    hand changes made after those two and the run that put them right, before `gated`;
    `lost`, after it, the node lost in the middle of site.yml and the run after its return."""

    first: Run
    second: Run | None
    gated: Run | None
    check: Run | None
    hand: HandChanged | None = None
    lost: LostNode | None = None


_CONVERGED: list[Converged] = []
PLAYBOOKS = os.environ.get("CLUSTER_PLAN_LAB_PLAYBOOKS", "site.yml").split()
# Every stage in full, whatever the stage gate of site.yml finds (playbooks/tasks/stage_gate.yml).
FULL_RUN = ("-e", "site_converge_when=always")
# The check-mode run keeps its own fact cache: two runs at once must not write one file.
CHECK_FACTS = REPO / ".cache" / "facts-check"
# and runs under Ansible's own linear strategy: the fallback when Mitogen is not usable
# (plugins/strategy/mitogen_linear.py) stays proven on every stage of the lab
CHECK_STRATEGY = {"ANSIBLE_STRATEGY": "linear"}


def converge_runs(env: dict[str, str], on_start: Callable[[subprocess.Popen[str]], None]) -> Runs:
    """site.yml six times on the session lab: the converge; every stage in full and
    verbose (the roles' own idempotence, no stage skipped by the stage gate; verbose on
    purpose: secrets must stay hidden even then); after ten hand changes (support.hand_changes),
    the run that puts them right through the stage gate; then, before any test touches the
    lab, a re-run where nothing changed, through the stage gate as a user's re-run is; last
    a run that loses a node part-way and the run after its return (support.lost_node).
    `site.yml --check` (every stage, under Ansible's own linear strategy) runs beside the
    idempotence run: neither changes a converged lab, and one ansible-playbook leaves one of
    the two cores idle."""
    first = playbook(LAB_PLAN, PLAYBOOKS, env=env, on_start=on_start)
    second = check = None
    if first.ok:
        check_env = {
            **env, "ANSIBLE_CACHE_PLUGIN_CONNECTION": str(CHECK_FACTS), **CHECK_STRATEGY
        }  # fmt: skip
        with ThreadPoolExecutor(2) as pool:
            full = pool.submit(
                playbook, LAB_PLAN, PLAYBOOKS, "-v", *FULL_RUN, env=env, on_start=on_start
            )
            checked = pool.submit(
                playbook, LAB_PLAN, PLAYBOOKS, "--check", *FULL_RUN, env=check_env,
                on_start=on_start,
            )  # fmt: skip
            second, check = full.result(), checked.result()
    gated = hand = lost = None
    if second is not None and second.ok:
        hand = hand_changes.make(LAB_PLAN, env)
        hand.run = playbook(LAB_PLAN, PLAYBOOKS, env=env, on_start=on_start)
        if hand.run.ok:
            gated = playbook(LAB_PLAN, PLAYBOOKS, env=env, on_start=on_start)
    if gated is not None and gated.ok:
        from cluster_plan.api import load_expanded

        expanded = load_expanded(str(LAB_PLAN))
        lost = lost_node.lose_and_return(LAB_PLAN, expanded, PLAYBOOKS, env, on_start)
    return Runs(first, second, gated, check, hand, lost)


class BackgroundConverge:
    """The session's converge in a thread of its own, started once the lab tests that need no
    converge are done, while the tests that need no lab run: those are CPU work, the converge
    waits on its nodes' daemons much of the time, and together they take less wall time on
    two cores than one after the other. The thread only waits on ansible-playbook processes;
    the environment is taken once, when it starts, so a test's monkeypatch cannot reach it."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.runs: Runs | None = None
        self.error: BaseException | None = None
        self.processes: list[subprocess.Popen[str]] = []
        self.stopped = False
        self.ended: float | None = None
        env = ansible_env()
        self.thread = threading.Thread(target=self._run, args=(env,), daemon=True)
        self.thread.start()

    def _keep(self, proc: subprocess.Popen[str]) -> None:
        self.processes.append(proc)
        if self.stopped:
            kill_tree(proc.pid)

    def _run(self, env: dict[str, str]) -> None:
        try:
            self.runs = converge_runs(env, self._keep)
        except BaseException as error:  # handed to the converged_lab fixture, raised there
            self.error = error
        finally:
            self.ended = time.monotonic()

    def wait(self) -> Runs:
        self.thread.join()
        if self.error is not None:
            raise self.error
        assert self.runs is not None
        return self.runs

    def stop(self) -> None:
        """The session ends before the converge did (Ctrl-C, a CI timeout): stop its run."""
        self.stopped = True
        for proc in list(self.processes):
            if proc.poll() is None:  # with its workers: a killed run's forks live on
                kill_tree(proc.pid)
        self.thread.join(timeout=60)


_BACKGROUND: list[BackgroundConverge] = []


@pytest.fixture(scope="session")
def converge_in_background(request: pytest.FixtureRequest) -> Iterator[None]:
    """Starts the session lab's converge (collection puts this fixture on the first test that
    needs no lab). Where the lab cannot be had, nothing starts: `converged_lab` meets the same
    failure itself, on a test that needs it."""
    try:
        request.getfixturevalue("lab")
    except (Exception, pytest.skip.Exception):
        yield
        return
    _BACKGROUND.append(BackgroundConverge())
    try:
        yield
    finally:
        _BACKGROUND.pop().stop()


@pytest.fixture(scope="session")
def converged_lab(request: pytest.FixtureRequest) -> Converged:
    """site.yml converged once per session on the session lab, and run five times more."""
    if _CONVERGED:
        return _CONVERGED[0]
    from cluster_plan.api import load_expanded

    expanded = load_expanded(str(LAB_PLAN))
    if os.environ.get("CLUSTER_PLAN_LAB_CONVERGED") == "1":
        skip_unless_lab_machine()
        names = for_plan(expanded)
        if not fabric_up(names):
            pytest.skip("CLUSTER_PLAN_LAB_CONVERGED=1 but no lab is up under this id")
        _CONVERGED.append(Converged(LAB_PLAN, expanded, None, None))
        return _CONVERGED[0]
    request.getfixturevalue("lab")  # brings the session lab up, exports CLUSTER_PLAN_LAB_ID
    if _BACKGROUND:
        background, waited = _BACKGROUND[0], time.monotonic()
        runs = background.wait()
        runs_s = (background.ended or time.monotonic()) - background.started
        print(
            f"\nsite.yml ran in the background for {runs_s:.0f}s while the tests that need no"
            f" lab ran; the converged lab's tests waited {time.monotonic() - waited:.0f}s for it",
            end="",
        )
    else:
        started = time.monotonic()
        runs = converge_runs(ansible_env(), lambda _proc: None)
        runs_s = time.monotonic() - started
    print(f"\nsite.yml on the session lab: converge {runs.first.seconds:.0f}s", end="")
    if runs.second is not None:
        print(f", idempotence run {runs.second.seconds:.0f}s", end="")
    if runs.check is not None:
        print(f" (--check beside it {runs.check.seconds:.0f}s)", end="")
    if runs.hand is not None and runs.hand.run is not None:
        print(f", after the hand changes {runs.hand.run.seconds:.0f}s", end="")
    if runs.gated is not None:
        print(f", gated re-run {runs.gated.seconds:.0f}s", end="")
    if runs.lost is not None and runs.lost.lost is not None:
        print(f", losing {runs.lost.victim} {runs.lost.lost.seconds:.0f}s", end="")
    if runs.lost is not None and runs.lost.again is not None:
        print(f", after its return {runs.lost.again.seconds:.0f}s", end="")
    _CONVERGED.append(Converged(LAB_PLAN, expanded, *runs, runs_s=runs_s))
    return _CONVERGED[0]


def fabric_up(names: LabNames) -> bool:
    st = state.load(names.state_file)
    return st is not None and all(ref.alive() for ref in st.nodes.values())
