"""Plan strings whose grammar a regular expression cannot state: SSH public keys (decoded, their
type checked against their data), systemd calendar expressions, and host names Ansible keeps
for itself. The schema already keeps each of them to one line of harmless characters."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from cluster_plan.plan.checks.base import Plan
from cluster_plan.plan.findings import Finding, JsonPath
from cluster_plan.plan.nodes import Node
from cluster_plan.plan.oncalendar import calendar_problem, from_cron
from cluster_plan.plan.schema import grammar
from cluster_plan.plan.ssh_keys import key_problem

_SHOWN = 40


def _users_keys(plan: Plan) -> Iterator[tuple[JsonPath, Any]]:
    teams = plan.get("teams")
    for team_name, team in teams.items() if isinstance(teams, dict) else ():
        users = team.get("users") if isinstance(team, dict) else None
        for i, user in enumerate(users if isinstance(users, list) else []):
            keys = user.get("ssh_keys") if isinstance(user, dict) else None
            for k, key in enumerate(keys if isinstance(keys, list) else []):
                yield ("teams", team_name, "users", i, "ssh_keys", k), key
    admins = (plan.get("access") or {}).get("admin_users")
    for i, admin in enumerate(admins if isinstance(admins, list) else []):
        keys = admin.get("ssh_keys") if isinstance(admin, dict) else None
        for k, key in enumerate(keys if isinstance(keys, list) else []):
            yield ("access", "admin_users", i, "ssh_keys", k), key


def check_ssh_keys(plan: Plan, nodes: list[Node]) -> Iterator[Finding]:
    """A key sshd would ignore locks its user out; one with a newline would add a line."""
    for path, key in _users_keys(plan):
        if not isinstance(key, str) or not grammar("ssh_key")[0].search(key):
            continue
        problem = key_problem(key)
        if problem:
            shown = key if len(key) <= _SHOWN else key[:_SHOWN] + "..."
            yield Finding(
                "ssh-key",
                f"SSH key {shown!r} would be refused by sshd: {problem}",
                path,
                hint="paste the whole line of the .pub file (e.g. ~/.ssh/id_ed25519.pub); "
                'options come first, e.g. from="10.0.0.0/8" ssh-ed25519 AAAA... user@host',
            )


def check_calendars(plan: Plan, nodes: list[Node]) -> Iterator[Finding]:
    """backups.schedule becomes OnCalendar= of a timer, which systemd skips when it cannot
    parse it: the backups would silently never run."""
    backups = plan.get("backups")
    schedule = backups.get("schedule") if isinstance(backups, dict) else None
    if not isinstance(schedule, str) or not grammar("calendar")[0].search(schedule):
        return
    problem = calendar_problem(schedule)
    if problem:
        cron = from_cron(schedule)
        yield Finding(
            "calendar",
            f"{schedule!r} is not a systemd calendar expression: {problem}",
            ("backups", "schedule"),
            hint=f"OnCalendar for that cron line: {cron!r}"
            if cron
            else "e.g. daily, '*-*-* 02:00:00' or 'Mon..Fri 02:00' "
            "(see man systemd.time; check with systemd-analyze calendar)",
        )


def check_reserved_hostnames(plan: Plan, nodes: list[Node]) -> Iterator[Finding]:
    """A node named localhost takes the tasks Ansible delegates to the controller (which keep
    the backup passphrases there)."""
    for group in sorted({node.group for node in nodes if node.name == "localhost"}):
        yield Finding(
            "hostname-invalid",
            "host name 'localhost' is Ansible's name for the controller: tasks delegated to "
            "the controller would run on this node",
            ("node_groups", group, "hostname"),
            hint="give the hosts a pattern with {n}, e.g. node{n:02d}",
        )
