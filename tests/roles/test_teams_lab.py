"""Teams, limits and fair share, proven on the lab after `site.yml` (docs/scheduling.md).

Uses the session's one converge (`converged_lab` of support.lab_session, the same
test_slurm_lab reads), on the session lab under $CLUSTER_PLAN_LAB_ID. Users act through
`runuser` on the controller, inside the lab node (`cluster-plan lab run`); nothing is sent
from this machine's own namespace. Every job a test starts is cancelled by it. The tests that
change the accounting database or bounce its daemons are marked `lab_changes` (they restore
what they change and run after the tests that only read the lab).
"""

from __future__ import annotations

import copy
import json
import shlex
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from lab_helpers import BIN, PLAN, ROOT, cli, on_node

# The shared session fixtures (`lab`, `converged_lab`), requested by `slurm` below.
from support.cli_output import result as command_result
from support.lab_session import Converged, converged_lab, lab  # noqa: F401
from support.playbooks import ansible_env
from test_slurm_lab import SlurmLab

from cluster_plan.teams import policy as team_policy

pytestmark = pytest.mark.lab

POLL_S = 2


@pytest.fixture
def slurm(converged_lab: Converged) -> SlurmLab:  # noqa: F811
    converged_lab.require_converged()
    return SlurmLab(converged_lab.expanded, converged_lab)


def controller(cluster: SlurmLab) -> str:
    return cluster.group("slurm_controller")[0]


def dbd_host(cluster: SlurmLab) -> str:
    return (cluster.group("slurmdbd") or cluster.group("slurm_controller"))[0]


def as_user(cluster: SlurmLab, user: str, script: str, timeout: float = 180) -> Any:
    """Run a shell script as `user` on the controller (from /tmp, which every user may read)."""
    return on_node(
        controller(cluster),
        f"cd /tmp && runuser -u {user} -- sh -c {shlex.quote(script)}",
        timeout=timeout,
    )


def sbatch_as(cluster: SlurmLab, user: str, options: str) -> str:
    result = as_user(cluster, user, f"sbatch --parsable {options}")
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout.strip().split(";")[0]


def job_state(cluster: SlurmLab, job: str) -> tuple[str, str]:
    """(state, reason) of a job squeue still lists, else ('', '')."""
    out = cluster.sh(controller(cluster), f"squeue -h -j {job} -o '%T|%r' 2>/dev/null || true")
    state, _, reason = out.strip().partition("|")
    return state, reason


def wait_for(cluster: SlurmLab, job: str, wanted: tuple[str, str | None], timeout: float = 120):
    """Poll until the job is in state wanted[0] (and reason wanted[1] when given)."""
    deadline = time.monotonic() + timeout
    while True:
        state, reason = job_state(cluster, job)
        if state == wanted[0] and wanted[1] in (None, reason):
            return state, reason
        if time.monotonic() > deadline:
            return state, reason
        time.sleep(POLL_S)


def finished(cluster: SlurmLab, job: str) -> str:
    out = cluster.sh(controller(cluster), f"sacct -n -X -P -j {job} -o State")
    return out.strip().split()[0] if out.strip() else ""


def scancel(cluster: SlurmLab, *jobs: str) -> None:
    on_node(controller(cluster), "scancel " + " ".join(jobs))


def team_with(cluster: SlurmLab, **limits: Any) -> tuple[str, str]:
    """(team, its first user) of a team with these limits in the plan."""
    for name, team in cluster.expanded["teams"].items():
        if team["users"] and all(team["limits"][k] == v for k, v in limits.items()):
            return name, team["users"][0]["name"]
    raise AssertionError(f"the lab plan has no team with users and limits {limits}")


def fair_share(cluster: SlurmLab, users: list[str]) -> dict[str, float]:
    """Each user's fair-share factor as slurmctld last computed it (sshare)."""
    out = cluster.sh(controller(cluster), "sshare -a -n -P -o User,FairShare")
    factors = {}
    for line in out.splitlines():
        user, _, factor = line.strip().partition("|")
        if user in users and factor:
            factors[user] = float(factor)
    return factors


# ---- what the converge made ----------------------------------------------------------------


def test_mariadb_and_slurmdbd_run_on_the_planned_host(slurm: SlurmLab):
    host = dbd_host(slurm)
    assert "slurmdbd" in slurm.expanded["hosts"][host]["roles"]
    assert slurm.sh(host, "systemctl is-active mariadb slurmdbd").split() == ["active"] * 2
    clusters = slurm.sh(controller(slurm), "sacctmgr -nP show cluster format=Cluster").split()
    assert slurm.expanded["scheduler"]["slurm"]["cluster_name"] in clusters
    # MariaDB listens on the loopback address only
    listeners = slurm.sh(host, "ss -Hltnp")
    local = [ln.split()[3] for ln in listeners.splitlines() if '"mariadbd"' in ln]
    assert local == ["127.0.0.1:3306"], listeners


def test_accounts_limits_and_qos_are_the_plan(slurm: SlurmLab):
    rows = slurm.sh(
        controller(slurm),
        "sacctmgr -nP show assoc where cluster=lab "
        "format=Account,User,ParentName,Fairshare,GrpTRES,GrpTRESMins,MaxWall,QOS",
    )
    accounts = {}
    users = {}
    for line in rows.splitlines():
        account, user, parent, share, grp, mins, wall, qos = line.split("|")
        if user:
            users[user] = account
        else:
            accounts[account] = (parent, share, grp, mins, wall, set(qos.split(",")))
    hosts = [slurm.expanded["hosts"][h] for h in slurm.group("slurm_compute")]
    for record in team_policy.slurm_account_records(slurm.expanded, hosts):
        parent, share, grp, mins, wall, qos = accounts[record["name"]]
        assert parent == record["parent"], record["name"]
        assert int(share) == record["fairshare"]
        assert grp == ",".join(f"{k}={v}" for k, v in sorted(record["grp_tres"].items()))
        assert mins == ",".join(f"{k}={v}" for k, v in sorted(record["grp_tres_mins"].items()))
        assert qos == set(record["qos"])
        assert (wall == "") is (record["max_wall"] is None)
    for team, spec in slurm.expanded["teams"].items():
        for user in spec["users"]:
            assert users[user["name"]] == team
    qos = slurm.sh(controller(slurm), "sacctmgr -nP show qos format=Name,Priority,MaxWall,Flags")
    table = {ln.split("|")[0]: ln.split("|")[1:] for ln in qos.splitlines()}
    for name, spec in slurm.expanded["scheduler"]["workload_classes"].items():
        priority, wall, flags = table[name]
        assert int(priority) == spec.get("priority", 0)
        assert "DenyOnLimit" in flags
    assert table["inference"][1] == "04:00:00"


def test_team_users_exist_on_every_node_with_the_plan_uid(slurm: SlurmLab):
    users = team_policy.team_users(slurm.expanded["teams"])
    names = " ".join(u["name"] for u in users)
    for host in slurm.expanded["hosts"]:
        out = slurm.sh(host, f"getent passwd {names}")
        found = {ln.split(":")[0]: ln.split(":") for ln in out.splitlines()}
        for user in users:
            fields = found[user["name"]]
            assert (int(fields[2]), int(fields[3])) == (user["uid"], user["uid"]), host
            assert fields[4] == f"cluster-plan team {user['team']}"


def test_accounting_was_set_on_the_first_run_and_left_alone_on_the_second(slurm: SlurmLab):
    first, second = slurm.converged.require_runs()
    task = "TASK [slurm : Keep QOS, accounts and users as the plan's classes and teams say]"
    for output, verdict in ((first.result.stdout, "changed"), (second.result.stdout, "ok")):
        block = output.split(task, 1)[1].split("TASK [", 1)[0]
        assert f"{verdict}: [" in block, block[:800]
    again = second.result.stdout.split(task, 1)[1].split("TASK [", 1)[0]
    assert "changed: [" not in again


def test_the_database_password_is_private_in_use_and_never_printed(slurm: SlurmLab):
    host = dbd_host(slurm)
    secret_file = "/etc/slurm/.slurmdbd-db-password"
    password = slurm.sh(host, f"cat {secret_file}").strip()
    assert len(password) >= 20
    assert slurm.sh(host, f"stat -c '%a %U' {secret_file}").split() == ["600", "root"]
    assert slurm.sh(host, "stat -c '%a %U' /etc/slurm/slurmdbd.conf").split() == ["600", "slurm"]
    # the password is the one slurmdbd and MariaDB use (given by environment, not argv)
    check = f"MYSQL_PWD=$(cat {secret_file}) mysql -u slurm -N -e 'SELECT 1'"
    assert slurm.sh(host, check).strip() == "1"
    if not slurm.converged.outputs:
        pytest.skip("CLUSTER_PLAN_LAB_CONVERGED=1: no converge output to search")
    for output in slurm.converged.outputs:  # the first run, and the re-run with -v
        assert password not in output


# ---- jobs ----------------------------------------------------------------------------------


def test_fair_share_starts_the_team_that_used_less_first(slurm: SlurmLab):
    """Two sibling teams; the heavy one uses GPUs, then both queue for the same node: the light
    team's job starts first, and sprio shows its fair-share factor is why."""
    heavy_team, heavy = "nlp", "bob"
    light_team, light = "vision", "alice"
    teams = slurm.expanded["teams"]
    assert teams[heavy_team]["parent"] == teams[light_team]["parent"]  # siblings
    ctl = controller(slurm)
    slurm.sh(ctl, f"scancel -u {heavy} && scancel -u {light}")
    reset = "cluster=lab set RawUsage=0"
    slurm.sh(ctl, f"sacctmgr -i modify account where name={heavy_team},{light_team} {reset}")
    for user, team in ((heavy, heavy_team), (light, light_team)):
        slurm.sh(ctl, f"sacctmgr -i modify user where name={user} account={team} {reset}")
    run = as_user(slurm, heavy, "srun -p training --gres=gpu:2 -t 2 sleep 30", timeout=240)
    assert run.returncode == 0, run.stdout + run.stderr
    # usage and fair share are recomputed every PriorityCalcPeriod (1 minute)
    deadline = time.monotonic() + 180
    factors = fair_share(slurm, [heavy, light])
    while not factors.get(light, 0) > factors.get(heavy, 0) and time.monotonic() < deadline:
        time.sleep(5)
        factors = fair_share(slurm, [heavy, light])
    print(f"fair-share factors after {heavy} used GPUs: {factors}")
    assert factors[light] > factors[heavy], factors

    node = sorted(slurm.group("pool_gpu"))[0]
    cpus = slurm.expanded["hosts"][node]["cpu_cores"]
    whole_node = f"-p training -w {node} -c {cpus} -t 2"
    blocker = slurm.sh(ctl, f"cd /tmp && sbatch --parsable {whole_node} --wrap 'sleep 300'")
    blocker = blocker.strip().split(";")[0]
    jobs: list[str] = [blocker]
    try:
        assert wait_for(slurm, blocker, ("RUNNING", None))[0] == "RUNNING"
        first = sbatch_as(slurm, heavy, f"{whole_node} --wrap 'sleep 20'")  # submitted first
        second = sbatch_as(slurm, light, f"{whole_node} --wrap 'sleep 20'")
        jobs += [first, second]
        factors = slurm.sh(ctl, f"sprio -h -n -j {first},{second} -o '%i %F %Y'")
        table = {ln.split()[0]: [float(x) for x in ln.split()[1:]] for ln in factors.splitlines()}
        print(f"sprio (job: fair-share and total priority): {table}")
        assert table[second][0] > table[first][0]  # fair share
        assert table[second][1] > table[first][1]  # and so priority
        scancel(slurm, blocker)
        state, _ = wait_for(slurm, second, ("RUNNING", None))
        assert state == "RUNNING"
        assert job_state(slurm, first)[0] == "PENDING"
    finally:
        scancel(slurm, *jobs)


def test_a_one_gpu_team_runs_one_gpu_job_and_the_second_waits_for_it(slurm: SlurmLab):
    _, user = team_with(slurm, gpus=1)
    jobs = [sbatch_as(slurm, user, "--gres=gpu:1 -t 2 --wrap 'sleep 15'") for _ in range(2)]
    try:
        assert wait_for(slurm, jobs[0], ("RUNNING", None))[0] == "RUNNING"
        state, reason = wait_for(slurm, jobs[1], ("PENDING", "AssocGrpGRES"), timeout=60)
        assert (state, reason) == ("PENDING", "AssocGrpGRES")
        # the lab has GPUs free: only the team's limit holds the second job back
        free = slurm.sh(controller(slurm), "sinfo -h -p training -o '%G %t'")
        print(f"training nodes while the second job waits: {free.strip()}")
        assert wait_for(slurm, jobs[1], ("RUNNING", None), timeout=120)[0] == "RUNNING"
        assert finished(slurm, jobs[0]) == "COMPLETED"
    finally:
        scancel(slurm, *jobs)


@pytest.fixture
def outsider(slurm: SlurmLab) -> Iterator[str]:
    """A local account on the controller that is in no team of the plan."""
    ctl = controller(slurm)
    on_node(ctl, "userdel outsider 2>/dev/null; true")
    slurm.sh(ctl, "useradd -u 3999 -M -s /bin/sh outsider")
    try:
        yield "outsider"
    finally:
        on_node(ctl, "userdel outsider")


def test_a_user_in_no_team_cannot_submit(slurm: SlurmLab, outsider: str):
    result = as_user(slurm, outsider, "sbatch -t 1 --wrap true")
    assert result.returncode != 0
    assert "uid 3999 is in no team of the cluster plan" in result.stdout + result.stderr
    # and Slurm knows no association for them: it would refuse them without the plan's script
    rows = slurm.sh(controller(slurm), f"sacctmgr -nP show assoc where user={outsider}")
    assert rows.strip() == ""


def test_a_class_the_team_may_not_use_is_refused_naming_the_rule(slurm: SlurmLab):
    team = next(t for t, s in slurm.expanded["teams"].items() if "inference" not in s["classes"])
    user = slurm.expanded["teams"][team]["users"][0]["name"]
    for options in ("--comment=class:inference", "-p inference"):
        result = as_user(slurm, user, f"sbatch -t 1 {options} --wrap true")
        assert result.returncode != 0, options
        assert f"team '{team}' may not use workload class 'inference'" in result.stderr
        assert f"teams.{team}.classes" in result.stderr
    # a team that may: its job runs in the class's QOS
    allowed = next(
        t for t, s in slurm.expanded["teams"].items() if s["classes"] == ["inference", "general"]
    )
    other = slurm.expanded["teams"][allowed]["users"][0]["name"]
    result = as_user(
        slurm, other, "srun -t 1 --comment=class:inference sh -c 'echo $SLURM_JOB_QOS'"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "inference"


def test_sacct_shows_each_jobs_account_and_usage_per_team_is_reported(slurm: SlurmLab):
    teams = slurm.expanded["teams"]
    team_of = {u["name"]: t for t, s in teams.items() for u in s["users"]}
    ctl = controller(slurm)
    for user in team_of:
        as_user(slurm, user, "srun -t 1 true")
    # slurmctld hands finished jobs to slurmdbd on its own schedule: wait for the records.
    seen: dict[str, str] = {}
    for _ in range(30):
        rows = slurm.sh(ctl, "sacct -a -X -n -P -S today -o JobID,User,Account")
        seen = {}
        for line in rows.splitlines():
            _, user, account = line.split("|")
            if user in team_of:
                assert account == team_of[user], line
                seen[user] = account
        if set(seen) == set(team_of):
            break
        time.sleep(2)
    assert set(seen) == set(team_of)

    result = cli("usage", str(PLAN), "--transport", "lab", "--format", "json", timeout=120)
    assert result.returncode == 0, result.stderr
    report = command_result(result.stdout)
    assert set(report["teams"]) == set(teams)
    for team, spec in teams.items():
        if spec["users"]:
            assert report["teams"][team]["jobs"] >= 1, team
    assert report["teams"]["nlp"]["gpu_hours"] > 0  # the fair-share test's GPU job
    research = report["teams"]["research"]
    children = sum(
        report["teams"][t]["gpu_hours"] for t, s in teams.items() if s["parent"] == "research"
    )
    assert research["gpu_hours_with_children"] == pytest.approx(children, abs=0.01)
    text = cli("usage", str(PLAN), "--transport", "lab", timeout=120)
    print(text.stdout)


# ---- the module against the real database ---------------------------------------------------

PLAYBOOK = """
- name: Accounts from a changed plan
  hosts: "{{ target }}"
  gather_facts: false
  tasks:
    - name: Keep the accounting database as given
      cluster_plan.cluster.slurm_accounts:
        cluster: "{{ cluster }}"
        qos: "{{ qos }}"
        accounts: "{{ accounts }}"
        users: "{{ users }}"
        root_qos: "{{ root_qos }}"
      register: accounts_result
    - name: Hand the result to the test
      ansible.builtin.copy:
        content: "{{ accounts_result | to_json }}"
        dest: "{{ result_file }}"
        mode: "0600"
      delegate_to: localhost
      check_mode: false
"""


def apply_records(cluster: SlurmLab, plan: dict[str, Any], tmp: Path, *extra: str) -> dict:
    hosts = [plan["hosts"][h] for h in plan["groups"]["slurm_compute"]]
    qos = team_policy.slurm_qos_records(plan)
    variables = {
        "target": controller(cluster),
        "cluster": plan["scheduler"]["slurm"]["cluster_name"],
        "qos": qos,
        "accounts": team_policy.slurm_account_records(plan, hosts),
        "users": team_policy.slurm_user_records(plan),
        "root_qos": ["normal", *(q["name"] for q in qos)],
        "result_file": str(tmp / "result.json"),
    }
    (tmp / "vars.json").write_text(json.dumps(variables))
    (tmp / "accounts.yml").write_text(PLAYBOOK)
    result = subprocess.run(
        [str(BIN / "ansible-playbook"), "-i", str(PLAN), "-e", f"@{tmp / 'vars.json'}", *extra,
         str(tmp / "accounts.yml")],
        cwd=ROOT, env=ansible_env(), capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    return dict(json.loads((tmp / "result.json").read_text()))


def associations(cluster: SlurmLab) -> list[tuple[str, str, str]]:
    out = cluster.sh(
        controller(cluster), "sacctmgr -nP show assoc where cluster=lab format=Account,User,GrpTRES"
    )
    return sorted(tuple(ln.split("|")) for ln in out.splitlines())  # type: ignore[misc]


@pytest.mark.lab_changes
def test_the_module_updates_in_place_removes_and_adds_then_changes_nothing(
    slurm: SlurmLab, tmp_path: Path
):
    before = associations(slurm)
    changed = copy.deepcopy(slurm.expanded)
    changed["teams"]["vision"]["limits"]["gpus"] = 2
    gone = changed["teams"]["serving"]["users"].pop()["name"]
    changed["teams"]["nlp"]["users"].append({"name": "dora", "uid": 2099, "ssh_keys": []})
    on_node(controller(slurm), f"scancel -u {gone}")
    try:
        dry = apply_records(slurm, changed, tmp_path, "--check")
        assert dry["changed"] and associations(slurm) == before  # check mode touches nothing
        result = apply_records(slurm, changed, tmp_path)
        assert result["changed"], result
        after = associations(slurm)
        vision = [row for row in after if row[0] == "vision" and not row[1]]
        assert vision == [("vision", "", "gres/gpu=2")]  # updated, not duplicated
        assert not [row for row in after if row[1] == gone]
        assert ("nlp", "dora", "") in after
        assert apply_records(slurm, changed, tmp_path)["changed"] is False
    finally:
        restored = apply_records(slurm, slurm.expanded, tmp_path)
    assert restored["changed"]
    assert associations(slurm) == before
    assert apply_records(slurm, slurm.expanded, tmp_path)["changed"] is False


# ---- restarts (last: they bounce the accounting daemons) -----------------------------------


@pytest.mark.lab_changes
def test_slurmdbd_and_mariadb_restart_cleanly_and_accounting_continues(slurm: SlurmLab):
    host, ctl = dbd_host(slurm), controller(slurm)
    for service in ("mariadb", "slurmdbd"):
        slurm.sh(host, f"systemctl restart {service}")
        assert slurm.sh(host, f"systemctl is-active {service}").strip() == "active"
    deadline = time.monotonic() + 60
    while on_node(ctl, "sacctmgr -nP show cluster format=Cluster").returncode != 0:
        assert time.monotonic() < deadline, "sacctmgr does not reach slurmdbd after restarts"
        time.sleep(POLL_S)
    errors = slurm.sh(
        host, "journalctl -u slurmdbd -u mariadb -p err --since '-2min' -o cat || true"
    )
    assert "fatal" not in errors.lower(), errors
    _, user = team_with(slurm, gpus=1)
    out = as_user(slurm, user, "srun -t 1 sh -c 'echo $SLURM_JOB_ID'")
    assert out.returncode == 0, out.stderr
    job = out.stdout.strip().splitlines()[-1]
    deadline = time.monotonic() + 60
    while (account := slurm.sh(ctl, f"sacct -n -X -P -j {job} -o Account").strip()) == "":
        assert time.monotonic() < deadline, f"job {job} never reached the accounting database"
        time.sleep(POLL_S)
    assert account == team_with(slurm, gpus=1)[0]
