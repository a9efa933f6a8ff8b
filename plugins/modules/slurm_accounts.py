#!/usr/bin/python
"""Keep Slurm's accounting database (cluster, QOS, accounts, users) as the plan describes it,
with sacctmgr: idempotent, in check mode too, touching only what it made."""

from __future__ import annotations

import re
from typing import Any

from ansible.module_utils.basic import AnsibleModule

DOCUMENTATION = r"""
module: slurm_accounts
short_description: Keep Slurm's accounts, users and QOS as the cluster plan describes them
description:
  - Reads the accounting database with C(sacctmgr show) and runs only the C(sacctmgr) commands
    that make it match; a second run changes nothing. Supports check mode (the commands it
    would run are returned).
  - Accounts it makes carry the organization I(mark) and QOS a description starting with it;
    only those are changed or removed, so accounts and QOS made by hand stay. The root account
    is never removed; only its QOS list is set, from I(root_qos).
  - An account or user that the plan no longer has is removed (users first, then accounts,
    children before parents); a changed limit is modified in place.
options:
  cluster:
    description: The cluster (ClusterName); registered when missing.
    type: str
    required: true
  qos:
    description: >-
      QOS to keep (name, priority, max_wall in minutes or null, description); null leaves
      QOS alone.
    type: list
    elements: dict
  accounts:
    description: >-
      Accounts to keep, parents first (name, parent, fairshare, description, qos, default_qos,
      grp_tres, grp_tres_mins, max_wall); null leaves accounts and users alone.
    type: list
    elements: dict
  users:
    description: User associations to keep (name, account); a user's account is its default.
    type: list
    elements: dict
  root_qos:
    description: The QOS the root account (and so root) may use; null leaves it alone.
    type: list
    elements: str
  mark:
    description: Organization of managed accounts, prefix of managed QOS descriptions.
    type: str
    default: cluster-plan
"""

QOS_FIELDS = ["Name", "Priority", "MaxWall", "Flags", "Description"]
ASSOC_FIELDS = [
    "Account",
    "User",
    "ParentName",
    "Fairshare",
    "GrpTRES",
    "GrpTRESMins",
    "MaxWall",
    "QOS",
    "DefaultQOS",
]
ACCOUNT_FIELDS = ["Account", "Descr", "Org"]
_TIME = re.compile(r"^(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?$")


# ---- reading sacctmgr's parsable output -------------------------------------------------


def parse_rows(text: str, fields: list[str]) -> list[dict[str, str]]:
    """`sacctmgr -nP show ... format=A,B` output -> one dict per line."""
    rows = []
    for line in text.splitlines():
        if not line.strip():
            continue
        values = line.split("|")
        rows.append(dict(zip(fields, values + [""] * (len(fields) - len(values)), strict=False)))
    return rows


def minutes(text: str) -> int | None:
    """What sacctmgr prints for a wall time ([D-]HH:MM:SS, MM:SS, or nothing) in minutes."""
    text = text.strip()
    if not text or text.upper() in ("UNLIMITED", "INFINITE"):
        return None
    match = _TIME.match(text)
    if not match:
        return None
    days, first, second, third = match.groups()
    if days is not None:  # D-HH:MM:SS
        return int(days) * 1440 + int(first) * 60 + int(second or 0)
    if third is not None:  # HH:MM:SS
        return int(first) * 60 + int(second)
    return int(first)  # MM:SS or minutes


def tres(text: str) -> dict[str, int]:
    """`gres/gpu=2,cpu=4` -> {"gres/gpu": 2, "cpu": 4}."""
    out = {}
    for part in filter(None, text.split(",")):
        key, _, value = part.partition("=")
        if value.lstrip("-").isdigit():
            out[key] = int(value)
    return out


def same_text(stored: str, wanted: str) -> bool:
    """sacctmgr stores descriptions (and names) in lower case."""
    return stored.strip().lower() == wanted.strip().lower()


def names(text: str) -> set[str]:
    return set(filter(None, text.split(",")))


# ---- what to run --------------------------------------------------------------------------


def _wall(value: int | None) -> str:
    return "-1" if value is None else str(value)


def qos_commands(
    current: list[dict[str, str]], wanted: list[dict[str, Any]], mark: str
) -> tuple[list[list[str]], list[list[str]]]:
    """(commands that add or change QOS, commands that remove QOS this project made)."""
    have = {row["Name"]: row for row in current}
    changes = [
        command
        for qos in wanted
        if (command := _qos_command(have.get(qos["name"]), qos)) is not None
    ]
    wanted_names = {q["name"] for q in wanted}
    removals = [
        ["delete", "qos", "where", f"name={name}"]
        for name, row in have.items()
        if name not in wanted_names and row["Description"].lower().startswith(f"{mark.lower()}:")
    ]
    return changes, removals


def _qos_command(row: dict[str, str] | None, qos: dict[str, Any]) -> list[str] | None:
    """The sacctmgr command that adds the QOS or brings it to the plan; None when it is."""
    settings = {
        "Priority": str(int(qos.get("priority") or 0)),
        "MaxWall": _wall(qos.get("max_wall")),
        "Description": qos["description"],
        # a job asking for more than the class allows is refused at submit, not left pending
        "Flags": "DenyOnLimit",
    }
    if row is None:
        add = {k: v for k, v in settings.items() if not (k == "MaxWall" and v == "-1")}
        return ["add", "qos", qos["name"], *(f"{k}={v}" for k, v in add.items())]
    diff = {}
    if row["Priority"] != settings["Priority"]:
        diff["Priority"] = settings["Priority"]
    if minutes(row["MaxWall"]) != qos.get("max_wall"):
        diff["MaxWall"] = settings["MaxWall"]
    if not same_text(row["Description"], settings["Description"]):
        diff["Description"] = settings["Description"]
    if "DenyOnLimit" not in names(row["Flags"]):
        diff["Flags+"] = "DenyOnLimit"
    if not diff:
        return None
    return ["modify", "qos", "where", f"name={qos['name']}", "set"] + [
        f"{k}={v}" for k, v in diff.items()
    ]


def _account_settings(account: dict[str, Any]) -> dict[str, str]:
    return {
        "Parent": account["parent"],
        "Fairshare": str(int(account["fairshare"])),
        "GrpTRES": ",".join(f"{k}={v}" for k, v in sorted(account["grp_tres"].items())),
        "GrpTRESMins": ",".join(f"{k}={v}" for k, v in sorted(account["grp_tres_mins"].items())),
        "MaxWall": _wall(account.get("max_wall")),
        "QOS": ",".join(sorted(account["qos"])),
        "DefaultQOS": account.get("default_qos") or "",
    }


def _tres_setting(have: dict[str, int], want: dict[str, int]) -> str | None:
    """The GrpTRES= value that turns ``have`` into ``want`` (-1 clears a limit), or None."""
    if have == want:
        return None
    parts = [f"{k}={v}" for k, v in sorted(want.items())]
    parts += [f"{k}=-1" for k in sorted(set(have) - set(want))]
    return ",".join(parts)


def _account_diff(row: dict[str, str], account: dict[str, Any]) -> dict[str, str]:
    settings = _account_settings(account)
    diff = {}
    if row["ParentName"] != account["parent"]:
        diff["Parent"] = account["parent"]
    if row["Fairshare"] != settings["Fairshare"]:
        diff["Fairshare"] = settings["Fairshare"]
    for key, field in (("grp_tres", "GrpTRES"), ("grp_tres_mins", "GrpTRESMins")):
        change = _tres_setting(tres(row[field]), dict(account[key]))
        if change is not None:
            diff[field] = change
    if minutes(row["MaxWall"]) != account.get("max_wall"):
        diff["MaxWall"] = settings["MaxWall"]
    if names(row["QOS"]) != set(account["qos"]):
        diff["QOS"] = settings["QOS"]
    if (account.get("default_qos") or "") != row["DefaultQOS"] and account.get("default_qos"):
        diff["DefaultQOS"] = settings["DefaultQOS"]
    return diff


def account_commands(
    cluster: str,
    assocs: list[dict[str, str]],
    accounts_meta: list[dict[str, str]],
    wanted: list[dict[str, Any]],
    root_qos: list[str] | None,
    mark: str,
) -> tuple[list[list[str]], list[list[str]]]:
    """(commands that add or change accounts, commands that remove managed accounts, children
    before parents)."""
    rows = {r["Account"]: r for r in assocs if not r["User"]}
    meta = {r["Account"]: r for r in accounts_meta}
    changes = [
        command
        for account in wanted
        if (command := _account_command(cluster, rows, meta, account, mark)) is not None
    ]
    if root_qos is not None and "root" in rows and names(rows["root"]["QOS"]) != set(root_qos):
        qos = "QOS=" + ",".join(sorted(root_qos))
        changes.append(
            ["modify", "account", "where", "name=root", f"cluster={cluster}", "set", qos]
        )
    wanted_names = {a["name"] for a in wanted}
    stale = [
        name
        for name in rows
        if name not in ("root", *wanted_names)
        and same_text(meta.get(name, {}).get("Org", ""), mark)
    ]
    depth = {name: _depth(rows, name) for name in stale}
    removals = [
        ["delete", "account", "where", f"name={name}", f"cluster={cluster}"]
        for name in sorted(stale, key=lambda n: (-depth[n], n))
    ]
    return changes, removals


def _account_command(
    cluster: str,
    rows: dict[str, dict[str, str]],
    meta: dict[str, dict[str, str]],
    account: dict[str, Any],
    mark: str,
) -> list[str] | None:
    """The sacctmgr command that adds the account or brings it to the plan; None when it is
    as planned. An account is the plan's when its organization is the mark."""
    name = account["name"]
    if name not in rows:
        values = {k: v for k, v in _account_settings(account).items() if v and v != "-1"}
        return (
            ["add", "account", name, f"Cluster={cluster}", f"Organization={mark}"]
            + [f"Description={account['description']}"]
            + [f"{k}={v}" for k, v in values.items()]
        )
    diff = _account_diff(rows[name], account)
    info = meta.get(name, {})
    described = same_text(info.get("Descr", ""), account["description"])
    if not described or not same_text(info.get("Org", ""), mark):
        diff["Description"] = account["description"]
        diff["Organization"] = mark
    if not diff:
        return None
    return ["modify", "account", "where", f"name={name}", f"cluster={cluster}", "set"] + [
        f"{k}={v}" for k, v in diff.items()
    ]


def _depth(rows: dict[str, dict[str, str]], name: str) -> int:
    depth, seen = 0, {name}
    while (parent := rows.get(name, {}).get("ParentName")) and parent not in seen:
        depth, name = depth + 1, parent
        seen.add(parent)
    return depth


def user_commands(
    cluster: str,
    assocs: list[dict[str, str]],
    accounts_meta: list[dict[str, str]],
    wanted: list[dict[str, Any]],
    mark: str,
) -> tuple[list[list[str]], list[list[str]]]:
    """(commands that add or move users, commands that remove users from managed accounts)."""
    managed = {r["Account"] for r in accounts_meta if same_text(r["Org"], mark)}
    wanted_accounts = {u["account"] for u in wanted}
    have: dict[str, set[str]] = {}
    for row in assocs:
        if row["User"] and (row["Account"] in managed or row["Account"] in wanted_accounts):
            have.setdefault(row["User"], set()).add(row["Account"])
    where = [f"cluster={cluster}"]
    changes: list[list[str]] = []
    removals: list[list[str]] = []
    for user in wanted:
        name, account = user["name"], user["account"]
        current = have.pop(name, set())
        if account not in current:
            default = f"DefaultAccount={account}"
            changes.append(["add", "user", name, f"Account={account}", default, *where])
            if current:  # moved from another team: the new account becomes the default first
                changes.append(["modify", "user", "where", f"name={name}", *where, "set", default])
        for old in sorted(current - {account}):
            removals.append(["delete", "user", "where", f"name={name}", f"account={old}", *where])
    for name, accounts in sorted(have.items()):
        listed = "account=" + ",".join(sorted(accounts))
        removals.append(["delete", "user", "where", f"name={name}", listed, *where])
    return changes, removals


# ---- the module ---------------------------------------------------------------------------


class Sacctmgr:
    def __init__(self, module: AnsibleModule) -> None:
        self.module = module
        self.binary = module.get_bin_path("sacctmgr", required=True)

    def show(self, what: list[str], fields: list[str]) -> list[dict[str, str]]:
        argv = [self.binary, "-nP", "show", *what, "format=" + ",".join(fields)]
        rc, out, err = self.module.run_command(argv)
        if rc != 0:
            self.module.fail_json(msg=f"{' '.join(argv)} failed: {(err or out).strip()}")
        return parse_rows(out, fields)

    def run(self, args: list[str]) -> None:
        rc, out, err = self.module.run_command([self.binary, "-i", *args])
        if rc != 0:
            self.module.fail_json(msg=f"sacctmgr {' '.join(args)} failed: {(err or out).strip()}")


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "cluster": {"type": "str", "required": True},
            "qos": {"type": "list", "elements": "dict"},
            "accounts": {"type": "list", "elements": "dict"},
            "users": {"type": "list", "elements": "dict"},
            "root_qos": {"type": "list", "elements": "str"},
            "mark": {"type": "str", "default": "cluster-plan"},
        },
        supports_check_mode=True,
    )
    params = module.params
    cluster, mark = params["cluster"], params["mark"]
    db = Sacctmgr(module)
    commands: list[list[str]] = []
    if not db.show(["cluster", cluster], ["Cluster"]):
        commands.append(["add", "cluster", cluster])
    qos_changes: list[list[str]] = []
    qos_removals: list[list[str]] = []
    if params["qos"] is not None:
        current = db.show(["qos"], QOS_FIELDS)
        qos_changes, qos_removals = qos_commands(current, params["qos"], mark)
    account_changes: list[list[str]] = []
    account_removals: list[list[str]] = []
    user_changes: list[list[str]] = []
    user_removals: list[list[str]] = []
    if params["accounts"] is not None or params["root_qos"] is not None:
        assocs = db.show(["association", "where", f"cluster={cluster}"], ASSOC_FIELDS)
        meta = db.show(["account"], ACCOUNT_FIELDS)
        account_changes, account_removals = account_commands(
            cluster,
            assocs,
            meta,
            params["accounts"] or [],
            params["root_qos"],
            mark,
        )
        if params["accounts"] is not None:
            user_changes, user_removals = user_commands(
                cluster, assocs, meta, params["users"] or [], mark
            )
    commands += qos_changes + account_changes + user_changes
    commands += user_removals + account_removals + qos_removals
    if not module.check_mode:
        for args in commands:
            db.run(args)
    module.exit_json(changed=bool(commands), commands=[" ".join(c) for c in commands])


if __name__ == "__main__":
    main()
