"""`cluster-plan change`: a plan change turned into ordered operations (pure), the journal that
makes a run resumable, the runner's stop at the first failing step, and the command's exits.

Plans are real edits of the lab plan, locked from its lock (support.change_plans)."""

from __future__ import annotations

import argparse
import copy
import io
import json
import shlex
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml
from slurm_nodes import node_line
from support.change_plans import (
    LAB_PLAN,
    grow_cpu,
    grow_osd_only,
    smaller_cpu_memory,
    write_plan,
)

from cluster_plan.day2.change import runner
from cluster_plan.day2.change.journal import Journal, JournalError
from cluster_plan.day2.change.operations import (
    CEPH_DAEMON_ROLES,
    Operation,
    Options,
    Step,
    _inform,
    _inform_stages,
    plan_operations,
    render,
)
from cluster_plan.day2.change.playbooks import stages_of
from cluster_plan.day2.change.triage import ChangeRefused
from cluster_plan.transport.execution import CommandResult
from cluster_plan.views.diff import deployed_pair, diff_expanded

REPO = Path(__file__).resolve().parents[2]
STAGES = stages_of(REPO / "site.yml")


def operations(old: Path, new: Path, **options: Any) -> list[Operation]:
    before, after = deployed_pair(old, new)
    chosen = Options(stages=STAGES, **options)
    return plan_operations(before, after, diff_expanded(before, after), chosen)


def actions(op: Operation) -> list[str]:
    return [s.action for s in op.steps]


@pytest.fixture(scope="module")
def plans(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("plans")
    grown = write_plan(root / "grown", grow_cpu)
    return {
        "lab": LAB_PLAN,
        "grown": grown,
        "upgraded": write_plan(root / "upgraded", smaller_cpu_memory, base=grown),
        "osd": write_plan(root / "osd", grow_osd_only),
        "k8s": LAB_PLAN.with_name("k8s.yml"),
    }


def test_a_grown_group_adds_its_new_host_and_tells_every_other(plans: dict[str, Path]):
    (add,) = operations(plans["lab"], plans["grown"])
    assert (add.kind, add.hosts) == ("add", ("cpu02",))
    assert actions(add) == ["provision", "converge", "inform", "resume", "check"]
    inform = add.steps[2]
    assert "head01" in inform.hosts and "cpu02" in inform.hosts  # every host of the new plan


def test_a_shrunk_group_drains_then_forgets_then_retires_and_reconfigures(plans):
    ops = operations(plans["grown"], plans["lab"])
    assert [(o.kind, o.hosts) for o in ops] == [
        ("remove", ("cpu02",)),
        ("reconfigure", ops[1].hosts),
    ]
    assert actions(ops[0]) == ["drain", "wait-jobs", "forget", "cephfs-evict", "retire"]
    assert "cpu02" not in ops[1].hosts
    # forget already gave every Slurm host slurm.conf without cpu02: the rest learn of it
    stages = [stage for stage, _, _ in ops[1].steps[0].param("plays")]
    assert stages == ["common", "monitoring"]
    wait = ops[0].steps[1]
    assert wait.param("timeout_s") == 600 and wait.param("force") is False
    forced = operations(plans["grown"], plans["lab"], force=True, drain_timeout_s=30)
    assert forced[0].steps[1].param("force") is True
    assert forced[0].steps[1].param("timeout_s") == 30


def test_a_storage_node_is_emptied_of_data_before_its_osds_are_purged(plans):
    remove, reconfigure = operations(plans["osd"], plans["lab"])
    assert remove.hosts == ("osdn01",)
    # not in the scheduler: no drain; data first, then the OSDs, then the node
    assert actions(remove) == ["osd-out", "osd-empty", "osd-purge", "cephfs-evict", "retire"]
    assert reconfigure.kind == "reconfigure"


def test_a_changed_profile_rolls_one_host_at_a_time_then_reconfigures(plans):
    ops = operations(plans["grown"], plans["upgraded"])
    assert [(o.kind, o.hosts) for o in ops[:2]] == [
        ("upgrade", ("cpu01",)),
        ("upgrade", ("cpu02",)),
    ]
    assert "memory_gb changed" in ops[0].reason
    assert actions(ops[0]) == ["drain", "wait-jobs", "converge", "resume", "check"]
    assert ops[0].steps[2].hosts == ("cpu01",)  # the batch only
    assert ops[-1].kind == "reconfigure"
    batched = operations(plans["grown"], plans["upgraded"], batch=2)
    assert batched[0].hosts == ("cpu01", "cpu02") and batched[1].kind == "reconfigure"


def test_replace_drains_reprovisions_and_checks_keeping_the_host(plans):
    (replace,) = operations(plans["lab"], plans["lab"], replace=("cpu01",))
    assert (replace.kind, replace.hosts) == ("replace", ("cpu01",))
    assert actions(replace) == [
        "drain",
        "wait-jobs",
        "cephfs-evict",
        "provision",
        "converge",
        "resume",
        "check",
    ]
    (osd,) = operations(plans["osd"], plans["osd"], replace=("osdn01",))
    assert actions(osd) == [
        "osd-out",
        "osd-empty",
        "osd-purge",
        "cephfs-evict",
        "provision",
        "converge",
        "check",
    ]


def test_removals_run_before_replacements_in_one_change(plans):
    """cpu02 leaves while cpu01 gets new hardware and its old profile back: cpu02's drain
    (and the wait for its jobs) comes first, not after cpu01's re-provisioning; one
    reconfigure at the end tells every host of both."""
    ops = operations(plans["upgraded"], plans["lab"], replace=("cpu01",))
    assert [(o.kind, o.hosts[:1]) for o in ops] == [
        ("remove", ("cpu02",)),
        ("replace", ("cpu01",)),
        ("reconfigure", ("head01",)),
    ]
    # cpu01's memory is back on the controller: the slurm stage is told, not only forgotten
    assert "slurm.yml" in ops[-1].steps[0].detail


def test_new_disks_in_a_profile_are_a_replacement(plans, tmp_path):
    def bigger_disk(plan: dict[str, Any]) -> None:
        plan["hardware"]["cpu-big"] = copy.deepcopy(plan["hardware"]["cpu"])
        plan["hardware"]["cpu-big"]["disks"][0]["size_gb"] = 200
        plan["node_groups"]["cpu"]["hardware"] = "cpu-big"

    changed = write_plan(tmp_path, bigger_disk)
    ops = operations(plans["lab"], changed)
    assert [(o.kind, o.hosts[:1]) for o in ops] == [
        ("replace", ("cpu01",)),
        ("reconfigure", ("head01",)),
    ]
    # what the others know of cpu01 (its slurm.conf line, its scrape target) follows
    assert "slurm.yml" in ops[1].steps[0].detail


@pytest.mark.parametrize(
    ("edit", "words"),
    [
        (lambda p: p["node_groups"]["osd"].update(count=0), "osd01 runs ceph_mds, ceph_mgr"),
        (lambda p: p["node_groups"]["cpu"].update(racks=["r1"]), "removing it and adding it"),
        (lambda p: p["cluster"].update(name="lab2"), "a rebuild"),
    ],
    ids=["service-host-removed", "host-moved-to-another-rack", "cluster-renamed"],
)
def test_changes_a_running_cluster_cannot_take_are_refused_with_what_to_do(
    plans, tmp_path, edit, words
):
    changed = tmp_path / "cluster.yml"
    plan = yaml.safe_load(LAB_PLAN.read_text())
    edit(plan)
    changed.write_text(yaml.safe_dump(plan, sort_keys=False))
    (tmp_path / "cluster.lock.json").write_text(LAB_PLAN.with_suffix(".lock.json").read_text())
    try:
        operations(plans["lab"], changed)
    except ChangeRefused as refused:
        assert any(words in r for r in refused.reasons), refused.reasons
    else:
        pytest.fail("the change was not refused")


def test_replacing_an_unknown_host_is_refused(plans):
    with pytest.raises(ChangeRefused, match="no such host"):
        operations(plans["lab"], plans["lab"], replace=("gpu99",))


def test_render_lists_each_operation_and_its_steps(plans):
    text = render(operations(plans["grown"], plans["lab"]))
    assert text.splitlines()[0] == "1. remove cpu02: gone from the plan"
    assert "   - drain cpu02 in the scheduler (reason: cluster-plan:change: removal)" in text
    assert "2. reconfigure all 9 hosts" in text
    assert render([]).startswith("no operations")


# --- journal ------------------------------------------------------------------------------


def test_the_journal_remembers_done_steps_per_change_and_closes_when_done(tmp_path):
    identity = {"old": {"a": 1}, "new": {"a": 2}, "replace": [], "batch": 1}
    journal = Journal(tmp_path, identity)
    assert not journal.started and journal.finished_at() is None
    journal.mark_done("1/drain:cpu02", 1.5)
    journal.mark_failed("1/wait-jobs:cpu02", "running job(s) 7")
    again = Journal(tmp_path, identity)
    assert again.done("1/drain:cpu02") and not again.done("1/wait-jobs:cpu02")
    assert again.failed is not None and again.failed["step"] == "1/wait-jobs:cpu02"
    # the same kind of edit with other values (memory 4 -> 3, then 3 -> 2) is another change
    other = Journal(tmp_path, {**identity, "new": {"a": 3}})
    assert other.path != journal.path and not other.started
    again.finish()
    assert not again.path.exists() and Journal(tmp_path, identity).finished_at() is not None


def test_a_broken_record_or_a_second_run_is_refused_with_the_file_named(tmp_path):
    identity = {"old": 1, "new": 2}
    journal = Journal(tmp_path, identity)
    second = Journal(tmp_path, identity)
    with (
        journal.held(),
        pytest.raises(JournalError, match="another run of this change holds"),
        second.held(),
    ):
        pass
    journal.path.write_text("{not json")
    with pytest.raises(JournalError, match=f"{journal.path}: not a readable change record"):
        Journal(tmp_path, identity)


# --- runner -------------------------------------------------------------------------------


class FakeExecutor:
    """Answers scheduler commands from a script: {substring: [results in turn]}."""

    def __init__(self, answers: dict[str, list[tuple[int, str]]]) -> None:
        self.answers = answers
        self.calls: list[tuple[str, str]] = []

    def run(self, node: str, argv: Sequence[str], timeout: float) -> CommandResult:
        script = argv[-1]
        self.calls.append((node, script))
        for key, results in self.answers.items():
            if key in script:
                rc, out = results.pop(0) if len(results) > 1 else results[0]
                return CommandResult(tuple(argv), rc, out, "" if rc == 0 else "boom")
        return CommandResult(tuple(argv), 0, "", "")

    def spawn(self, node: str, argv: Sequence[str]) -> Any:
        """Scripted like run: the process has already ended when stop() is called."""
        done = self.run(node, argv, 0)
        return type("Finished", (), {"stop": lambda _self: done})()


def context(plans: dict[str, Path], executor: FakeExecutor, old: str, new: str) -> runner.Context:
    before, after = deployed_pair(plans[old], plans[new])
    return runner.Context(
        before, after, plans[new], executor, lab=False, log=io.StringIO(), sleep=lambda s: None
    )


def test_drain_and_a_bounded_wait_for_the_jobs_then_requeue_on_force(plans, monkeypatch):
    executor = FakeExecutor({"show node": [(0, node_line("cpu02", "MIXED"))],
                             "squeue": [(0, "41\n")]})  # fmt: skip
    ctx = context(plans, executor, "grown", "lab")
    runner.drain(ctx, Step("drain", ("cpu02",), "", (("why", "x"),)))
    assert executor.calls[-1] == (
        "head01",
        "scontrol update NodeName=cpu02 State=DRAIN 'Reason=cluster-plan:change: x'",
    )
    monkeypatch.setattr(runner, "POLL_S", 0.0)
    with pytest.raises(runner.StepFailed, match=r"running job\(s\) 41 after 0 s.*--force"):
        runner.wait_jobs(ctx, Step("wait-jobs", ("cpu02",), "", (("timeout_s", 0),)))
    executor.answers["squeue"] = [(0, "41\n"), (0, "41\n"), (0, "")]
    runner.wait_jobs(ctx, Step("wait-jobs", ("cpu02",), "", (("timeout_s", 5), ("force", True))))
    assert ("head01", "scontrol requeue 41") in executor.calls


def test_a_health_check_that_fails_names_the_host_and_leaves_it_drained(plans, monkeypatch):
    executor = FakeExecutor({"sinfo --noheader": [(0, "idle\n")],
                             "sinfo -h -N": [(0, "general\n")],
                             "show node": [(0, node_line("cpu01"))],
                             "srun": [(1, "")]})  # fmt: skip
    ctx = context(plans, executor, "lab", "lab")
    with pytest.raises(
        runner.StepFailed, match=r"cpu01: a job did not run on it.*cpu01 is drained"
    ):
        runner.check(ctx, Step("check", ("cpu01",), ""))
    assert any(
        "State=DRAIN 'Reason=cluster-plan:change: failed its health" in c for _, c in executor.calls
    )
    # its next try: the change's own drain is lifted first
    drained = node_line("cpu01", "IDLE+DRAIN", "cluster-plan:change: failed its health check")
    executor.answers["show node"] = [(0, drained)]
    executor.answers["srun"] = [(0, "cpu01\n")]
    runner.check(ctx, Step("check", ("cpu01",), ""))
    assert ("head01", "scontrol update NodeName=cpu01 State=RESUME") in executor.calls
    assert any("--partition=general --nodelist=cpu01" in c for _, c in executor.calls)


def test_a_run_stops_at_the_first_failing_step_and_the_next_run_continues_there(
    plans, tmp_path, monkeypatch
):
    ops = operations(plans["grown"], plans["upgraded"])
    identity = {"test": "stop and continue"}
    seen: list[str] = []
    broken = {"check:cpu01"}

    def fake_step(ctx: runner.Context, op: Operation, step: Step) -> None:
        seen.append(step.key)
        if step.key in broken:
            raise runner.StepFailed("cpu01: a job did not run on it")

    monkeypatch.setattr(runner, "run_step", fake_step)
    ctx = context(plans, FakeExecutor({}), "grown", "upgraded")
    assert runner.carry_out(ctx, ops, Journal(tmp_path, identity)) is False
    assert seen[-1] == "check:cpu01" and not any("cpu02" in k for k in seen)  # rest untouched
    broken.clear()
    seen.clear()
    assert runner.carry_out(ctx, ops, Journal(tmp_path, identity)) is True
    assert seen[0] == "check:cpu01"  # the steps done before are not run again
    assert "converge:cpu02" in seen and "drain:cpu01" not in seen


# --- the command --------------------------------------------------------------------------


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cluster_plan", *args],
        capture_output=True,
        text=True,
        check=False,
        cwd=REPO,
        stdin=subprocess.DEVNULL,
    )


def test_dry_run_prints_the_operations_and_changes_nothing(plans, tmp_path):
    done = cli("change", str(plans["grown"]), str(plans["lab"]), "--dry-run",
               "--journal-dir", str(tmp_path))  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "1. remove cpu02" in done.stdout
    assert not list(tmp_path.iterdir())
    as_json = cli("change", str(plans["grown"]), str(plans["lab"]), "--dry-run", "--format", "json")
    assert json.loads(as_json.stdout)["result"]["operations"][0]["kind"] == "remove"
    assert "1. remove cpu02" in as_json.stderr  # for people, beside the document


def test_without_yes_and_no_terminal_nothing_runs(plans, tmp_path):
    done = cli("change", str(plans["grown"]), str(plans["lab"]), "--journal-dir", str(tmp_path))
    assert done.returncode == 3
    assert "pass --yes" in done.stderr and not list(tmp_path.iterdir())


def test_a_refused_change_exits_3_with_each_reason(plans, tmp_path):
    done = cli("change", str(plans["lab"]), str(plans["lab"]), "--replace", "nope", "--yes")
    assert done.returncode == 3
    assert "refused: --replace nope: no such host" in done.stdout
    assert "refused (1 reason(s)): --replace nope: no such host" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_plan_that_fails_its_checks_names_file_and_key_and_exits_1(plans, tmp_path):
    bad = tmp_path / "cluster.yml"
    text = LAB_PLAN.read_text()
    line = text[: text.index("count: 2\n")].count("\n") + 1  # the lab plan's own line
    bad.write_text(text.replace("count: 2\n", "count: two\n", 1))
    done = cli("change", str(plans["lab"]), str(bad), "--dry-run")
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"{bad}:{line}:" in done.stdout + done.stderr and "count" in done.stdout + done.stderr
    assert "Traceback" not in done.stderr


def test_bad_options_are_usage_errors(plans):
    done = cli("change", str(plans["lab"]), str(plans["grown"]), "--batch", "0", "--dry-run")
    assert done.returncode == 2 and "--batch" in done.stderr


def test_options_reach_the_operations():
    args = argparse.Namespace(replace=["a"], batch=3, force=True, drain_timeout=9)
    from cluster_plan.day2.change.command import _options

    assert _options(args, ("common",)) == Options(
        stages=("common",), replace=("a",), batch=3, force=True, drain_timeout_s=9
    )


def inform_runs(
    plans: dict[str, Path], grown: str, monkeypatch: pytest.MonkeyPatch
) -> tuple[Step, list[tuple[tuple[str, ...], tuple[str, ...], str]]]:
    """The inform step of adding plans[grown]'s hosts to the lab, and the ansible-playbook
    runs (playbooks, limit, tags) the runner makes of it."""
    (add,) = operations(plans["lab"], plans[grown])
    inform = next(s for s in add.steps if s.action == "inform")
    runs: list[tuple[tuple[str, ...], tuple[str, ...], str]] = []
    monkeypatch.setattr(
        runner, "playbook", lambda ctx, books, limit, tags="": runs.append((books, limit, tags))
    )
    runner.inform(context(plans, FakeExecutor({}), "lab", grown), inform)
    return inform, runs


def test_inform_tells_every_host_only_what_hosts_know_of_each_other(plans, monkeypatch):
    """common and slurm with their `peers` tasks only, on every host; monitoring in full, only
    where the targets live; a cluster-wide reconfigure runs every stage in full everywhere."""
    inform, runs = inform_runs(plans, "grown", monkeypatch)
    everyone = inform.hosts
    assert runs == [
        (("common", "slurm"), everyone, "peers"),
        (("monitoring",), ("head01",), ""),
    ]
    assert "common.yml [peers]" in inform.detail


def test_a_storage_node_coming_or_going_runs_no_other_hosts_storage_stage(
    plans, monkeypatch, tmp_path
):
    """No other host's files name an OSD host (a client's ceph.conf names the monitors): an
    OSD node that comes is put into CRUSH by its own converge, one that goes by its purge.
    Only the peers' run and monitoring tell the others. Where the storage stage does run to
    tell (a host with a daemon others name), it runs on the Ceph daemons' hosts only. A
    cluster-wide change still runs every stage on every host."""
    inform, runs = inform_runs(plans, "osd", monkeypatch)
    assert runs == [
        (("common",), inform.hosts, "peers"),
        (("monitoring",), ("head01",), ""),
    ]
    _, reconfigure = operations(plans["osd"], plans["lab"])  # the removal
    plays = dict((stage, hosts) for stage, hosts, _ in reconfigure.steps[0].param("plays"))
    assert "storage" not in plays and "common" in plays

    _, grown = deployed_pair(plans["lab"], plans["osd"])
    daemons = tuple(
        h for h, spec in grown["hosts"].items() if CEPH_DAEMON_ROLES & set(spec["roles"])
    )
    assert "osdn01" in daemons and not {"cpu01", "gpu01", "infer01"} & set(daemons)
    mds = {"roles": ["ceph_mds"]}
    storage = _inform(grown, _inform_stages([mds], grown, STAGES), "told")
    plays = dict((stage, hosts) for stage, hosts, _ in storage.param("plays"))
    assert plays["storage"] == daemons

    # a change of the cluster's own settings: every stage, in full, on every host
    def slower_scrapes(plan: dict[str, Any]) -> None:
        plan["monitoring"]["scrape_interval_s"] = 20
        plan["monitoring"]["alert_after_minutes"]["node_down"] = 0.5  # a wait of a scrape at least

    cluster = write_plan(tmp_path, slower_scrapes)
    (whole,) = operations(plans["lab"], cluster)
    full = whole.steps[0].param("plays")
    assert all(hosts == whole.hosts and tags == "" for _, hosts, tags in full), full


def test_a_new_host_is_converged_with_the_acceptance_tools_but_nothing_measured(plans, monkeypatch):
    """Without iperf3 a new or re-provisioned host refuses the others' acceptance runs."""
    (add,) = operations(plans["lab"], plans["grown"])
    converge = next(s for s in add.steps if s.action == "converge")
    runs: list[tuple[Any, ...]] = []
    monkeypatch.setattr(
        runner,
        "playbook",
        lambda ctx, books, limit, tags="", extra=(): runs.append((books, limit, extra)),
    )
    runner.run_step(context(plans, FakeExecutor({}), "lab", "grown"), add, converge)
    ((books, limit, extra),) = runs
    assert books == STAGES and books[-1] == "acceptance" and limit == ("cpu02",)
    assert extra == ("-e", "net_acceptance_run=false")


def test_a_removed_host_s_addresses_stay_held_back_in_the_new_lock(plans, tmp_path):
    """What `cluster-plan lock NEW` (from the deployed lock) does with a host that left: its
    addresses are released to it alone, so no other host is given them by a later change."""

    def shrink(plan: dict[str, Any]) -> None:
        plan["node_groups"]["cpu"]["count"] = 1

    grown = json.loads(plans["grown"].with_suffix(".lock.json").read_text())
    shrunk = write_plan(tmp_path, shrink, base=plans["grown"])
    lock = json.loads(shrunk.with_suffix(".lock.json").read_text())
    held = {}
    for name, network in lock["networks"].items():
        address = grown["networks"][name]["hosts"].get("cpu02")
        assert "cpu02" not in network["hosts"]
        held[name] = network.get("released", {}).get(address)
    assert held == {"mgmt": held["mgmt"], "compute": held["mgmt"], "storage": held["mgmt"]}
    assert held["mgmt"] == "cpu02"


def edited(tmp_path: Path, edit: Any, base: Path = LAB_PLAN) -> Path:
    """The plan with `edit` applied and the base's lock beside it (not re-locked)."""
    plan = yaml.safe_load(base.read_text())
    edit(plan)
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "cluster.yml"
    path.write_text(yaml.safe_dump(plan, sort_keys=False))
    (tmp_path / "cluster.lock.json").write_text(base.with_suffix(".lock.json").read_text())
    return path


@pytest.mark.parametrize(
    ("edit", "words"),
    [
        (
            lambda p: p["node_groups"]["cpu"].update(roles=["slurm_compute", "login"]),
            "roles change",
        ),
        (lambda p: p["networks"]["compute"].update(mtu=1500), "drain and restart at once"),
    ],
    ids=["a-host-changes-roles", "a-network-changes-mtu"],
)
def test_changes_that_would_skip_a_drain_are_refused(plans, tmp_path, edit, words):
    with pytest.raises(ChangeRefused) as refused:
        operations(plans["lab"], edited(tmp_path, edit))
    assert any(words in r for r in refused.value.reasons), refused.value.reasons


def test_adding_a_service_host_is_refused(plans, tmp_path):
    def second_login(plan: dict[str, Any]) -> None:
        roles = ["slurm_compute", "login"]
        group = {**plan["node_groups"]["cpu"], "hostname": "login{n:02d}", "roles": roles}
        plan["node_groups"]["extra_login"] = group

    with pytest.raises(ChangeRefused, match="login01 would run login: every host uses"):
        operations(plans["lab"], edited(tmp_path, second_login))


def test_adding_and_upgrading_in_one_change_is_refused(plans, tmp_path):
    both = write_plan(tmp_path, grow_cpu, smaller_cpu_memory)
    with pytest.raises(ChangeRefused, match="one plan change and the upgrade the next"):
        operations(plans["lab"], both)


def test_a_host_setting_that_is_neither_version_nor_hardware_reconfigures_everything(
    plans, tmp_path
):
    def other_pool(plan: dict[str, Any]) -> None:
        plan["node_groups"]["cpu"]["pool"] = "cpu2"
        plan["scheduler"]["workload_classes"]["general"]["pool"] = "cpu2"

    (reconfigure,) = operations(plans["lab"], edited(tmp_path, other_pool))
    assert reconfigure.kind == "reconfigure"
    plays = {stage: hosts for stage, hosts, _ in reconfigure.steps[0].param("plays")}
    assert {tags for _, _, tags in reconfigure.steps[0].param("plays")} == {""}  # in full
    assert plays["monitoring"] == reconfigure.hosts  # everywhere
    assert "storage" in plays


def test_an_upgraded_storage_node_is_asked_ok_to_stop_before_its_converge(plans, tmp_path):
    def storage_memory(plan: dict[str, Any]) -> None:
        plan["hardware"]["storage"]["memory_gb"] = 3

    ops = operations(plans["lab"], edited(tmp_path, storage_memory))
    stor01 = next(o for o in ops if o.hosts == ("stor01",))
    assert actions(stor01) == ["osd-ok-to-stop", "converge", "check"]


def test_an_operator_s_own_drain_is_kept_and_never_lifted(plans):
    operator = node_line("cpu01", "IDLE+DRAIN", "bad DIMM")
    executor = FakeExecutor({"show node": [(0, operator)]})
    ctx = context(plans, executor, "lab", "lab")
    runner.drain(ctx, Step("drain", ("cpu01",), "", (("why", "x"),)))
    runner.resume(ctx, Step("resume", ("cpu01",), ""))
    assert not any("State=" in c for _, c in executor.calls)
    assert "its reason kept" in ctx.log.getvalue() and "stays drained" in ctx.log.getvalue()
    ours = node_line("cpu01", "IDLE+DRAIN", "cluster-plan:change: upgrade")
    executor.answers["show node"] = [(0, ours)]
    runner.resume(ctx, Step("resume", ("cpu01",), ""))
    assert ("head01", "scontrol update NodeName=cpu01 State=RESUME") in executor.calls


def test_ceph_that_cannot_answer_is_not_taken_for_no_osds(plans):
    executor = FakeExecutor({"ls-tree": [(1, "")]})
    ctx = context(plans, executor, "lab", "lab")
    with pytest.raises(runner.StepFailed, match=r"ceph osd ls-tree osd01. exited 1"):
        runner.osd_out(ctx, Step("osd-out", ("osd01",), ""))
    executor.answers["ls-tree"] = [(0, "")]  # answers, but places none of the planned OSDs
    with pytest.raises(runner.StepFailed, match="Ceph places 0 OSD"):
        runner.osd_out(ctx, Step("osd-out", ("osd01",), ""))
    executor.answers.update({"ls-tree": [(0, "4\n")], "safe-to-destroy": [(1, "")]})
    with pytest.raises(runner.StepFailed, match=r"osd\.4 of osd01 is not safe to destroy"):
        runner.osd_purge(ctx, Step("osd-purge", ("osd01",), ""))
    assert not any("purge 4" in c for _, c in executor.calls)


def test_a_purge_ends_when_ceph_is_healthy_again(plans, monkeypatch):
    """No other host's storage stage follows an OSD host's purge: the step waits for
    HEALTH_OK itself, and fails when Ceph stays unhealthy."""
    monkeypatch.setattr(runner, "POLL_S", 0.0)
    health = [(0, "HEALTH_WARN 1 osds down\n"), (0, "HEALTH_OK\n")]
    executor = FakeExecutor({"ls-tree": [(0, "4\n")], "ceph health": health})
    ctx = context(plans, executor, "lab", "lab")
    runner.osd_purge(ctx, Step("osd-purge", ("osd01",), ""))
    scripts = [c for _, c in executor.calls]
    assert scripts.index("ceph osd purge 4 --yes-i-really-mean-it") < scripts.index("ceph health")
    assert scripts.count("ceph health") == 2
    monkeypatch.setattr(runner, "OSD_EMPTY_TIMEOUT_S", 0)
    executor.answers["ceph health"] = [(0, "HEALTH_WARN 1 osds down\n")]
    with pytest.raises(runner.StepFailed, match="HEALTH_WARN"):
        runner.osd_purge(ctx, Step("osd-purge", ("osd01",), ""))


DRAIN_FIXTURES = REPO / "tests" / "kubernetes" / "fixtures" / "drain"
# whether the cluster has the node, asked once a kubectl on it failed
NODE_THERE = "--ignore-not-found --output name"
BUDGETS = (DRAIN_FIXTURES / "pdbs.json").read_text()


def recorded_pods(name: str, *gone: str) -> str:
    """`kubectl get pods -o json` of gpu01 recorded on the bundle's API server, less `gone`."""
    listed = json.loads((DRAIN_FIXTURES / name).read_text())
    listed["items"] = [i for i in listed["items"] if i["metadata"]["name"] not in gone]
    return json.dumps(listed)


def test_kubernetes_pods_are_evicted_within_the_bound_and_named_with_their_budget(plans):
    before, after = (
        recorded_pods("pods-gpu01.json", "notebook"),
        recorded_pods("pods-gpu01-after.json"),
    )
    executor = FakeExecutor({NODE_THERE: [(0, "node/gpu01\n")],
                             "get pods": [(0, before), (0, after)],
                             "get poddisruptionbudgets": [(0, BUDGETS)],
                             "kubectl drain gpu01": [(1, "")]})  # fmt: skip
    ctx = context(plans, executor, "k8s", "k8s")
    step = Step("wait-jobs", ("gpu01",), "", (("timeout_s", 5), ("force", False)))
    with pytest.raises(
        runner.StepFailed,
        match=r"drain of gpu01: after 5 s, pod\(s\) still on it: team-a/train-5xk8d evicted, "
        r"still terminating.*team-a/web-7d9f8-q4m2z held by PodDisruptionBudget team-a/web "
        r"\(0 disruption\(s\) allowed.*gpu01 stays cordoned\. Wait .* run the change again "
        r"\(it continues here\), or pass --force to delete them",
    ):
        runner.wait_jobs(ctx, step)
    drains = [c for node, c in executor.calls if "kubectl drain" in c]
    assert drains == [
        "KUBECONFIG=/etc/kubernetes/admin.conf kubectl drain gpu01 --ignore-daemonsets "
        "--delete-emptydir-data --timeout=5s --request-timeout=5s"
    ]
    assert {node for node, _ in executor.calls} == {"cp01"}
    assert not any("delete" in c.split("--")[0] for c in drains)


def test_kubernetes_force_deletes_the_pods_and_says_which_a_budget_covered(plans):
    executor = FakeExecutor({"get pods": [(0, recorded_pods("pods-gpu01.json"))],
                             "get poddisruptionbudgets": [(0, BUDGETS)],
                             "kubectl drain gpu01": [(0, "")]})  # fmt: skip
    ctx = context(plans, executor, "k8s", "k8s")
    runner.wait_jobs(ctx, Step("wait-jobs", ("gpu01",), "", (("timeout_s", 0), ("force", True))))
    assert any(c.endswith("--timeout=1s --request-timeout=1s --force --disable-eviction")
               for _, c in executor.calls)  # fmt: skip
    log = ctx.log.getvalue()
    assert "gpu01: deleted team-a/train-5xk8d, " in log and "team-b/notebook" in log
    assert (
        "gpu01: deleted despite a PodDisruptionBudget (--force): team-a/web-7d9f8-q4m2z "
        "(PodDisruptionBudget team-a/web (0 disruption(s) allowed" in log
    )
    assert "left on it (DaemonSets', mirror pods): kube-system/calico-node-x7k2p" in log


def test_a_kubernetes_bare_pod_is_not_evicted_without_force(plans):
    executor = FakeExecutor({NODE_THERE: [(0, "node/gpu01\n")],
                             "get pods": [(0, recorded_pods("pods-gpu01.json"))]})  # fmt: skip
    ctx = context(plans, executor, "k8s", "k8s")
    with pytest.raises(runner.StepFailed, match=r"team-b/notebook declare no controller.*--force"):
        runner._move_pods(ctx, "gpu01", 600, force=False)
    assert not any("kubectl drain" in c for _, c in executor.calls)


def test_the_kubernetes_drain_step_says_it_evicts_or_with_force_deletes(plans):
    def wait_step(**options: Any) -> Step:
        (replace,) = operations(plans["k8s"], plans["k8s"], replace=("gpu01",), **options)
        return next(s for s in replace.steps if s.action == "wait-jobs")

    assert wait_step().detail == (
        "evict the pods on gpu01, PodDisruptionBudgets respected, within 600 s "
        "(DaemonSets' pods stay)"
    )
    forced = wait_step(force=True, drain_timeout_s=30)
    assert (
        forced.detail == "delete the pods on gpu01 within 30 s, bare ones too (--force: no budget)"
    )
    assert dict(forced.params) == {"timeout_s": 30, "force": True}


def k8s_node(node: str, cordoned: bool = True, by: str | None = None) -> str:
    """`kubectl get node NODE -o json` (the fields that matter), cordoned or not, with our
    annotation or without."""
    annotations = {} if by is None else {"cluster-plan.io/cordoned-by": by}
    return json.dumps({"kind": "Node", "metadata": {"name": node, "annotations": annotations,
                                                    "resourceVersion": "48213"},
                       "spec": {"unschedulable": cordoned}})  # fmt: skip


def k8s_patch(node: str, record: str | None, unschedulable: bool | None) -> str:
    """The one write of a cordon or an uncordon, guarded by the resourceVersion read, as
    the control plane's shell runs it."""
    body = {"metadata": {"resourceVersion": "48213",
                         "annotations": {"cluster-plan.io/cordoned-by": record}},
            "spec": {"unschedulable": unschedulable}}  # fmt: skip
    return (f"KUBECONFIG=/etc/kubernetes/admin.conf kubectl patch node {node} --type merge "
            f"-p {shlex.quote(json.dumps(body))}")  # fmt: skip


def test_kubernetes_drain_cordons_with_the_change_s_record_and_resume_lifts_only_it(plans):
    executor = FakeExecutor({"get node": [(0, k8s_node("gpu01", cordoned=False))]})
    ctx = context(plans, executor, "k8s", "k8s")
    runner.drain(ctx, Step("drain", ("gpu01",), "", (("why", "upgrade"),)))
    changed = [c for _, c in executor.calls if "get node" not in c]
    assert changed == [k8s_patch("gpu01", "cluster-plan:change: upgrade", True)]
    assert {node for node, _ in executor.calls} == {"cp01"}  # kubectl on the control plane
    executor.answers["get node"] = [(0, k8s_node("gpu01", by="cluster-plan:change: upgrade"))]
    runner.resume(ctx, Step("resume", ("gpu01",), ""))
    assert [c for _, c in executor.calls if "get node" not in c][1:] == [
        k8s_patch("gpu01", None, None)
    ]


@pytest.mark.parametrize("by", [None, "cluster-plan:nvidia_driver: upgrade to branch 570"],
                         ids=["operator", "another-owner"])  # fmt: skip
def test_a_kubernetes_cordon_of_anyone_else_s_is_kept_and_never_lifted(plans, by):
    executor = FakeExecutor({"get node": [(0, k8s_node("gpu01", by=by))]})
    ctx = context(plans, executor, "k8s", "k8s")
    runner.drain(ctx, Step("drain", ("gpu01",), "", (("why", "upgrade"),)))
    runner.resume(ctx, Step("resume", ("gpu01",), ""))
    assert [c for _, c in executor.calls if "get node" not in c] == []
    log = ctx.log.getvalue()
    assert "gpu01 is cordoned already" in log and "gpu01 stays cordoned" in log


def test_kubectl_that_cannot_answer_stops_the_kubernetes_drain(plans):
    executor = FakeExecutor({"get node": [(1, "")]})
    ctx = context(plans, executor, "k8s", "k8s")
    with pytest.raises(runner.StepFailed, match=r"kubectl get node gpu01 -o json` exited 1"):
        runner.drain(ctx, Step("drain", ("gpu01",), "", (("why", "upgrade"),)))


def test_a_real_replacement_waits_for_another_machine_id(plans, tmp_path, monkeypatch):
    monkeypatch.setattr(runner, "POLL_S", 0.0)
    monkeypatch.setattr(runner, "PROVISION_TIMEOUT_S", 0)
    executor = FakeExecutor({"machine-id": [(0, "aaa\n")]})
    ctx = context(plans, executor, "lab", "lab")
    ctx.state_dir = tmp_path
    with pytest.raises(runner.StepFailed, match="not re-provisioned yet: cpu01"):
        runner.provision(ctx, Step("provision", ("cpu01",), ""), "replace")
    assert (tmp_path / "replace-cpu01.machine-id").read_text() == "aaa"
    executor.answers["machine-id"] = [(0, "bbb\n")]  # the reinstalled host
    runner.provision(ctx, Step("provision", ("cpu01",), ""), "replace")


def test_a_leaving_host_s_cephfs_sessions_are_evicted_and_no_other(plans):
    sessions = json.dumps(
        [
            {"id": 4563, "client_metadata": {"hostname": "cpu01"}},
            {"id": 4100, "client_metadata": {"hostname": "head01"}},
        ]
    )
    executor = FakeExecutor({"session ls": [(0, sessions)]})
    ctx = context(plans, executor, "lab", "lab")
    runner.cephfs_evict(ctx, Step("cephfs-evict", ("cpu01",), ""))
    evicted = [c for _, c in executor.calls if "client evict" in c]
    assert evicted == ["ceph tell mds.0 client evict id=4563"]


def healthy_after(sinfo: str) -> FakeExecutor:
    return FakeExecutor(
        {
            "sinfo --noheader": [(0, sinfo)],
            "sinfo -h -N": [(0, "general*\n")],
            "show node": [(0, node_line("cpu01"))],
            "srun": [(0, "cpu01\n")],
        }
    )


def test_the_health_check_reads_states_as_the_collector_does(plans, monkeypatch):
    """A node Slurm marks with a harmless flag (`mixed-`: planned for a job) is back; one
    that does not answer (`idle*`) is not."""
    monkeypatch.setattr(runner, "POLL_S", 0.0)
    executor = healthy_after("mixed-\n")
    ctx = context(plans, executor, "lab", "lab")
    ctx.check_timeout_s = 1
    runner.check(ctx, Step("check", ("cpu01",), ""))
    assert any("--partition=general --nodelist=cpu01" in c for _, c in executor.calls)
    ctx = context(plans, healthy_after("idle*\n"), "lab", "lab")
    ctx.check_timeout_s = 1
    with pytest.raises(runner.StepFailed, match=r"cpu01 back in Slurm: still in state 'idle\*'"):
        runner.check(ctx, Step("check", ("cpu01",), ""))


def test_a_kubernetes_worker_s_check_waits_for_its_kubelet_within_the_bound(plans, monkeypatch):
    monkeypatch.setattr(runner, "POLL_S", 0.0)
    ready = "-o jsonpath="
    executor = FakeExecutor({ready: [(0, "False"), (0, "False"), (0, "True")],
                             "get node": [(0, k8s_node("gpu01", cordoned=False))],
                             "nvidia-smi": [(0, "H100\nH100\n")]})  # fmt: skip
    ctx = context(plans, executor, "k8s", "k8s")
    runner.check(ctx, Step("check", ("gpu01",), ""))
    assert len([c for _, c in executor.calls if ready in c]) == 3
    assert "gpu01: healthy" in ctx.log.getvalue()
    executor.answers[ready] = [(0, "False")]
    ctx.check_timeout_s = 0
    with pytest.raises(
        runner.StepFailed, match=r"gpu01: its kubelet: still not Ready \('False'\) after 0 s"
    ):
        runner.check(ctx, Step("check", ("gpu01",), ""))


def test_a_host_that_never_joined_kubernetes_is_removed_without_a_drain(plans):
    """Its converge failed before kubeadm join (or its node was deleted): nothing to drain."""
    executor = FakeExecutor({NODE_THERE: [(0, "")],
                             "get node": [(1, 'Error from server (NotFound): nodes "gpu01"')],
                             "get pods": [(0, '{"items": []}')],
                             "get poddisruptionbudgets": [(0, '{"items": []}')],
                             "kubectl drain": [(1, 'nodes "gpu01" not found')]})  # fmt: skip
    ctx = context(plans, executor, "k8s", "k8s")
    runner.drain(ctx, Step("drain", ("gpu01",), "", (("why", "removal"),)))
    runner.wait_jobs(ctx, Step("wait-jobs", ("gpu01",), "", (("timeout_s", 5), ("force", False))))
    assert "gpu01 is not a node of the cluster" in ctx.log.getvalue()
    assert not [c for _, c in executor.calls if "kubectl patch" in c]
    # a node that is there but cannot be read still stops the step
    executor.answers[NODE_THERE] = [(0, "node/gpu01\n")]
    with pytest.raises(runner.StepFailed, match="get node gpu01 -o json` exited 1"):
        runner.drain(ctx, Step("drain", ("gpu01",), "", (("why", "removal"),)))
