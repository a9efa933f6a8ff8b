"""Teams, fair share and QOS offline: the records the role hands to sacctmgr (cluster_plan/
teams/policy.py), what the slurm_accounts module runs for a given database (plugins/modules/
slurm_accounts.py) and the accounting part of slurm.conf, job_submit.lua and MariaDB's config
as rendered for the lab plan. tests/roles/test_teams_lab.py runs all of it for real."""

from __future__ import annotations

import copy
import sys
from pathlib import Path
from typing import Any

import pytest
from role_render import render

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "plugins" / "modules"))

import slurm_accounts as module

from cluster_plan.teams import policy as team_policy

CLUSTER = "lab"


def compute_hosts(expanded: dict[str, Any]) -> list[dict[str, Any]]:
    return [expanded["hosts"][h] for h in expanded["groups"]["slurm_compute"]]


def lines(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln and not ln.startswith(("#", "--"))]


# ---- the records ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "minutes"),
    [
        ("90", 90),
        ("30:00", 30),
        ("30:30", 31),  # Slurm rounds a partial minute up
        ("04:00:00", 240),
        ("1-00:00:00", 1440),
        ("7-00:00:00", 10080),
        ("2-12", 3600),
        ("2-12:30", 3630),
        ("UNLIMITED", None),
        (None, None),
    ],
)
def test_slurm_minutes(text, minutes):
    assert team_policy.slurm_minutes(text) == minutes


def test_slurm_minutes_refuses_what_is_not_a_time():
    with pytest.raises(ValueError, match="not a Slurm time"):
        team_policy.slurm_minutes("one day")


def test_parents_come_before_children_whatever_the_plan_order():
    teams = {"b": {"parent": "a"}, "c": {"parent": "b"}, "a": {}, "d": {}}
    assert team_policy.team_order(teams) == ["a", "b", "c", "d"]


def test_account_records_of_the_lab_plan(lab_expanded):
    records = {
        r["name"]: r
        for r in team_policy.slurm_account_records(lab_expanded, compute_hosts(lab_expanded))
    }
    assert list(records) == ["research", "vision", "nlp", "serving"]
    assert records["research"]["parent"] == "root"
    assert records["research"]["fairshare"] == 2
    assert records["research"]["grp_tres"] == {"gres/gpu": 2}
    assert records["research"]["grp_tres_mins"] == {"gres/gpu": 1000 * 60}
    vision = records["vision"]
    assert vision["parent"] == "research"
    assert vision["grp_tres"] == {"gres/gpu": 1}
    assert vision["max_wall"] == 1440
    assert vision["qos"] == ["general", "training"]
    assert vision["default_qos"] == "general"  # the plan's default class, when allowed
    assert records["nlp"]["qos"] == ["general", "inference", "training"]
    assert records["nlp"]["grp_tres"] == {}
    assert records["serving"]["grp_tres"] == {"gres/tpu": 2}  # accelerators: each other type
    assert records["serving"]["default_qos"] == "general"


def test_qos_records_carry_the_class_priority_and_wall_time(lab_expanded):
    qos = {q["name"]: q for q in team_policy.slurm_qos_records(lab_expanded)}
    assert qos["inference"]["priority"] == 100
    assert qos["inference"]["max_wall"] == 240
    assert qos["training"]["max_wall"] == 7 * 1440
    assert qos["general"]["max_wall"] is None  # UNLIMITED
    assert all(q["description"].startswith("cluster-plan:") for q in qos.values())


def test_users_belong_to_their_team(lab_expanded):
    assert team_policy.slurm_user_records(lab_expanded) == [
        {"name": "alice", "account": "vision"},
        {"name": "bob", "account": "nlp"},
        {"name": "carol", "account": "serving"},
    ]
    users = team_policy.team_users(lab_expanded["teams"])
    assert [(u["name"], u["uid"], u["team"]) for u in users] == [
        ("alice", 2001, "vision"),
        ("bob", 2002, "nlp"),
        ("carol", 2003, "serving"),
    ]


def test_tres_billing_and_decay(lab_expanded):
    hosts = compute_hosts(lab_expanded)
    assert team_policy.slurm_accounting_tres(hosts) == "gres/gpu,gres/tpu"
    weights = {"cpu": 1, "gpu": 8, "accelerator": 4}
    assert team_policy.slurm_billing_weights(hosts, weights) == (
        "CPU=1.0,GRES/gpu=8.0,GRES/tpu=4.0"
    )
    cpu_only = [h for h in hosts if not h["accelerators"]]
    assert team_policy.slurm_accounting_tres(cpu_only) == ""
    assert team_policy.slurm_billing_weights(cpu_only, weights) == "CPU=1.0"
    assert team_policy.slurm_decay_half_life(7) == "7-00:00"
    assert team_policy.slurm_decay_half_life(0.5) == "0-12:00"
    assert team_policy.slurm_decay_half_life(0) == "0"


# ---- what the module runs -------------------------------------------------------------------

FRESH_ASSOCS = [
    {
        "Account": "root",
        "User": "",
        "ParentName": "",
        "Fairshare": "1",
        "GrpTRES": "",
        "GrpTRESMins": "",
        "MaxWall": "",
        "QOS": "normal",
        "DefaultQOS": "",
    },
    {
        "Account": "root",
        "User": "root",
        "ParentName": "",
        "Fairshare": "1",
        "GrpTRES": "",
        "GrpTRESMins": "",
        "MaxWall": "",
        "QOS": "normal",
        "DefaultQOS": "",
    },
]
FRESH_ACCOUNTS = [{"Account": "root", "Descr": "default root account", "Org": "root"}]
FRESH_QOS = [
    {"Name": "normal", "Priority": "0", "MaxWall": "", "Flags": "", "Description": "Normal QOS"}
]


class FakeDatabase:
    """A small model of the accounting database: sacctmgr's tables as `show -nP` prints them,
    changed by the commands the module emits. Enough to see the module converge."""

    def __init__(self) -> None:
        self.qos = copy.deepcopy(FRESH_QOS)
        self.assocs = copy.deepcopy(FRESH_ASSOCS)
        self.accounts = copy.deepcopy(FRESH_ACCOUNTS)

    @staticmethod
    def _settings(words: list[str]) -> dict[str, str]:
        return dict(w.split("=", 1) for w in words if "=" in w)

    def _where(self, words: list[str]) -> dict[str, str]:
        end = words.index("set") if "set" in words else len(words)
        return self._settings(words[:end])

    def _set(self, words: list[str]) -> dict[str, str]:
        return self._settings(words[words.index("set") + 1 :]) if "set" in words else {}

    def apply(self, command: list[str]) -> None:
        verb, kind, *rest = command
        getattr(self, f"_{verb}_{kind}")(rest)

    def _add_qos(self, rest: list[str]) -> None:
        s = self._settings(rest[1:])
        wall = s.get("MaxWall")
        self.qos.append(
            {
                "Name": rest[0],
                "Priority": s["Priority"],
                "MaxWall": "" if wall is None else f"{int(wall) // 60:02d}:{int(wall) % 60:02d}:00",
                "Flags": s.get("Flags", ""),
                "Description": s["Description"],
            }
        )

    def _modify_qos(self, rest: list[str]) -> None:
        row = next(q for q in self.qos if q["Name"] == self._where(rest)["name"])
        for key, value in self._set(rest).items():
            if key == "MaxWall":
                row[key] = (
                    "" if value == "-1" else f"{int(value) // 60:02d}:{int(value) % 60:02d}:00"
                )
            elif key == "Flags+":
                row["Flags"] = ",".join(sorted({*filter(None, row["Flags"].split(",")), value}))
            else:
                row[key] = value

    def _delete_qos(self, rest: list[str]) -> None:
        self.qos = [q for q in self.qos if q["Name"] != self._where(rest)["name"]]

    @staticmethod
    def _limits(row: dict[str, str], settings: dict[str, str]) -> None:
        for key in ("GrpTRES", "GrpTRESMins"):
            if key in settings:
                have = module.tres(row[key])
                for part in settings[key].split(","):
                    name, _, value = part.partition("=")
                    if value == "-1":
                        have.pop(name, None)
                    else:
                        have[name] = int(value)
                row[key] = ",".join(f"{k}={v}" for k, v in sorted(have.items()))
        if "MaxWall" in settings:
            value = settings["MaxWall"]
            row["MaxWall"] = "" if value == "-1" else f"{int(value) // 1440}-00:00:00"
        for key, field in (("Parent", "ParentName"), ("Fairshare", "Fairshare")):
            if key in settings:
                row[field] = settings[key]
        for key in ("QOS", "DefaultQOS"):
            if key in settings:
                row[key] = settings[key]

    def _add_account(self, rest: list[str]) -> None:
        s = self._settings(rest[1:])
        row = {k: "" for k in module.ASSOC_FIELDS}
        row.update(Account=rest[0], ParentName=s.get("Parent", "root"), Fairshare="1")
        self._limits(row, s)
        self.assocs.append(row)
        # sacctmgr keeps descriptions and organizations in lower case
        self.accounts.append(
            {"Account": rest[0], "Descr": s["Description"].lower(), "Org": s["Organization"]}
        )

    def _modify_account(self, rest: list[str]) -> None:
        name, settings = self._where(rest)["name"], self._set(rest)
        self._limits(
            next(r for r in self.assocs if r["Account"] == name and not r["User"]), settings
        )
        meta = next(a for a in self.accounts if a["Account"] == name)
        meta["Descr"] = settings.get("Description", meta["Descr"]).lower()
        meta["Org"] = settings.get("Organization", meta["Org"])

    def _delete_account(self, rest: list[str]) -> None:
        name = self._where(rest)["name"]
        assert not [
            r
            for r in self.assocs
            if r["ParentName"] == name or (r["Account"] == name and r["User"])
        ]
        self.assocs = [r for r in self.assocs if r["Account"] != name]

    def _add_user(self, rest: list[str]) -> None:
        s = self._settings(rest[1:])
        row = {k: "" for k in module.ASSOC_FIELDS}
        row.update(Account=s["Account"], User=rest[0], Fairshare="1")
        self.assocs.append(row)

    def _modify_user(self, rest: list[str]) -> None:
        pass  # only the default account changes, which the model does not keep

    def _delete_user(self, rest: list[str]) -> None:
        where = self._where(rest)
        accounts = where["account"].split(",")
        self.assocs = [
            r for r in self.assocs if not (r["User"] == where["name"] and r["Account"] in accounts)
        ]

    def commands(self, plan: dict[str, Any], hosts: list[dict[str, Any]]) -> list[list[str]]:
        qos = team_policy.slurm_qos_records(plan)
        qos_changes, qos_removals = module.qos_commands(self.qos, qos, "cluster-plan")
        accounts = team_policy.slurm_account_records(plan, hosts)
        root_qos = ["normal", *(q["name"] for q in qos)]
        account_changes, account_removals = module.account_commands(
            CLUSTER, self.assocs, self.accounts, accounts, root_qos, "cluster-plan"
        )
        users = team_policy.slurm_user_records(plan)
        user_changes, user_removals = module.user_commands(
            CLUSTER, self.assocs, self.accounts, users, "cluster-plan"
        )
        return (
            qos_changes
            + account_changes
            + user_changes
            + user_removals
            + account_removals
            + qos_removals
        )

    def converge(self, plan: dict[str, Any], hosts: list[dict[str, Any]]) -> list[list[str]]:
        ran = self.commands(plan, hosts)
        for command in ran:
            self.apply(command)
        return ran


def test_parse_rows_reads_sacctmgr_parsable_output():
    text = "vision||research|1|gres/gpu=1||1-00:00:00|general,training|general\n"
    (row,) = module.parse_rows(text, module.ASSOC_FIELDS)
    assert row["Account"] == "vision" and row["User"] == ""
    assert module.tres(row["GrpTRES"]) == {"gres/gpu": 1}
    assert module.minutes(row["MaxWall"]) == 1440
    assert module.names(row["QOS"]) == {"general", "training"}
    assert module.minutes("04:00:00") == 240
    assert module.minutes("") is None


def test_a_fresh_database_gets_everything_and_a_second_run_nothing(lab_expanded):
    hosts = compute_hosts(lab_expanded)
    assert "GPUs" in lab_expanded["teams"]["research"]["description"]  # stored in lower case
    db = FakeDatabase()
    first = db.converge(lab_expanded, hosts)
    added = [" ".join(c[:3]) for c in first if c[0] == "add"]
    assert added == [
        "add qos training",
        "add qos inference",
        "add qos general",
        "add account research",
        "add account vision",
        "add account nlp",
        "add account serving",
        "add user alice",
        "add user bob",
        "add user carol",
    ]
    vision = next(c for c in first if c[:3] == ["add", "account", "vision"])
    assert "GrpTRES=gres/gpu=1" in vision and "Parent=research" in vision
    assert "QOS=general,training" in vision and "MaxWall=1440" in vision
    assert next(c for c in first if c[0] == "modify")[:6] == [
        "modify",
        "account",
        "where",
        "name=root",
        "cluster=lab",
        "set",
    ]
    assert db.commands(lab_expanded, hosts) == []


def test_a_changed_limit_is_modified_in_place_and_a_removed_one_cleared(lab_expanded):
    hosts = compute_hosts(lab_expanded)
    db = FakeDatabase()
    db.converge(lab_expanded, hosts)
    lab_expanded["teams"]["vision"]["limits"]["gpus"] = 2
    lab_expanded["teams"]["research"]["limits"]["gpu_hours"] = None
    ran = db.converge(lab_expanded, hosts)
    assert ran == [
        [
            "modify",
            "account",
            "where",
            "name=research",
            "cluster=lab",
            "set",
            "GrpTRESMins=gres/gpu=-1",
        ],
        ["modify", "account", "where", "name=vision", "cluster=lab", "set", "GrpTRES=gres/gpu=2"],
    ]
    assert db.commands(lab_expanded, hosts) == []


def test_a_removed_user_and_team_are_removed_users_first(lab_expanded):
    hosts = compute_hosts(lab_expanded)
    db = FakeDatabase()
    db.converge(lab_expanded, hosts)
    del lab_expanded["teams"]["serving"]
    lab_expanded["teams"]["nlp"]["users"] = []
    ran = db.converge(lab_expanded, hosts)
    assert ran == [
        ["delete", "user", "where", "name=bob", "account=nlp", "cluster=lab"],
        ["delete", "user", "where", "name=carol", "account=serving", "cluster=lab"],
        ["delete", "account", "where", "name=serving", "cluster=lab"],
    ]
    assert db.commands(lab_expanded, hosts) == []


def test_a_user_who_changes_team_is_moved(lab_expanded):
    hosts = compute_hosts(lab_expanded)
    db = FakeDatabase()
    db.converge(lab_expanded, hosts)
    bob = lab_expanded["teams"]["nlp"]["users"].pop()
    lab_expanded["teams"]["vision"]["users"].append(bob)
    ran = db.converge(lab_expanded, hosts)
    assert ran == [
        ["add", "user", "bob", "Account=vision", "DefaultAccount=vision", "cluster=lab"],
        ["modify", "user", "where", "name=bob", "cluster=lab", "set", "DefaultAccount=vision"],
        ["delete", "user", "where", "name=bob", "account=nlp", "cluster=lab"],
    ]


def test_what_the_project_did_not_make_is_left_alone(lab_expanded):
    hosts = compute_hosts(lab_expanded)
    db = FakeDatabase()
    db.converge(lab_expanded, hosts)
    db.qos.append(
        {"Name": "debug", "Priority": "5", "MaxWall": "", "Flags": "", "Description": "by hand"}
    )
    db.accounts.append({"Account": "physics", "Descr": "by hand", "Org": "physics"})
    row = {k: "" for k in module.ASSOC_FIELDS}
    db.assocs.append({**row, "Account": "physics", "ParentName": "root", "Fairshare": "1"})
    db.assocs.append({**row, "Account": "physics", "User": "dora", "Fairshare": "1"})
    assert db.commands(lab_expanded, hosts) == []
    # a class the plan drops: its QOS goes, since the project made it
    del lab_expanded["scheduler"]["workload_classes"]["inference"]
    for team in lab_expanded["teams"].values():
        team["classes"] = [c for c in team["classes"] if c != "inference"]
    ran = db.converge(lab_expanded, hosts)
    assert ["delete", "qos", "where", "name=inference"] in ran
    assert not [c for c in ran if "debug" in " ".join(c) or "physics" in " ".join(c)]


def test_a_class_change_updates_its_qos(lab_expanded):
    hosts = compute_hosts(lab_expanded)
    db = FakeDatabase()
    db.converge(lab_expanded, hosts)
    lab_expanded["scheduler"]["workload_classes"]["inference"]["priority"] = 50
    lab_expanded["scheduler"]["workload_classes"]["inference"]["max_time"] = "UNLIMITED"
    ran = db.converge(lab_expanded, hosts)
    assert ran == [["modify", "qos", "where", "name=inference", "set", "Priority=50", "MaxWall=-1"]]


# ---- the rendered configuration -------------------------------------------------------------


def test_slurm_conf_enforces_and_prioritises_with_teams(lab_expanded):
    body = lines(render("slurm", "slurm.conf.j2", lab_expanded, "head01"))
    for setting in (
        "AccountingStorageTRES=gres/gpu,gres/tpu",
        "AccountingStorageEnforce=associations,limits,qos,safe",
        "PriorityType=priority/multifactor",
        "PriorityDecayHalfLife=7-00:00",
        "PriorityUsageResetPeriod=MONTHLY",
        "PriorityWeightFairshare=10000",
    ):
        assert setting in body, setting
    partitions = {ln.split()[0]: ln for ln in body if ln.startswith("PartitionName=")}
    assert (
        "TRESBillingWeights=CPU=1.0,GRES/gpu=8.0,GRES/tpu=4.0"
        in partitions["PartitionName=training"]
    )
    assert "TRESBillingWeights" not in partitions["PartitionName=all"]


def test_without_teams_accounting_records_but_enforces_nothing(lab_expanded):
    lab_expanded["teams"] = {}
    body = lines(render("slurm", "slurm.conf.j2", lab_expanded, "head01"))
    assert "AccountingStorageType=accounting_storage/slurmdbd" in body
    assert not [ln for ln in body if ln.startswith("AccountingStorageEnforce")]
    lua = render("slurm", "job_submit.lua.j2", lab_expanded, "head01")
    assert "  enforce = false," in lua


def test_job_submit_knows_the_teams_and_the_class_qos(lab_expanded):
    lua = render("slurm", "job_submit.lua.j2", lab_expanded, "head01")
    assert "  enforce = true," in lua
    assert '[2001] = {name = "alice", team = "vision"},' in lua
    assert '["vision"] = {["general"] = true, ["training"] = true},' in lua
    assert '  ["inference"] = "inference",' in lua
    lab_expanded["scheduler"]["slurm"]["accounting"] = False
    lua = render("slurm", "job_submit.lua.j2", lab_expanded, "head01")
    assert "  enforce = false," in lua
    assert '  ["inference"] = "inference",' not in lua  # no QOS without accounting


@pytest.mark.parametrize(("memory_gb", "pool_mb"), [(1, 32), (4, 64), (64, 1024), (2048, 1024)])
def test_mariadb_buffer_pool_follows_the_host_memory(lab_expanded, memory_gb, pool_mb):
    lab_expanded["hosts"]["head01"]["memory_gb"] = memory_gb
    text = render("slurm", "mariadb-slurmdbd.cnf.j2", lab_expanded, "head01")
    assert f"innodb_buffer_pool_size = {pool_mb}M" in text.splitlines()
