"""Names and numbers of the accounts a plan makes: logins and UIDs that are not already the
system's, team names that are not the scheduler's own, and an Ansible login that exists
before the plan's roles run."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from cluster_plan.plan.checks.base import Plan
from cluster_plan.plan.findings import Finding
from cluster_plan.plan.nodes import Node

# Accounts the OS (Debian's base-passwd, Red Hat's setup, systemd) and this project's roles
# create: a plan user of that name would take it over.
SYSTEM_USERS = frozenset(
    {
        "root", "daemon", "bin", "sys", "sync", "games", "man", "lp", "mail", "news", "uucp",
        "proxy", "www-data", "backup", "list", "irc", "gnats", "nobody", "nfsnobody", "_apt",
        "adm", "halt", "shutdown", "operator", "ftp", "dbus", "messagebus", "polkitd", "tss",
        "sshd", "chrony", "_chrony", "rpc", "rpcuser", "statd", "systemd-network",
        "systemd-resolve", "systemd-timesync", "systemd-journal", "systemd-coredump",
        "slurm", "munge", "mysql", "ceph", "borg", "nvidia-persistenced",
    }
)  # fmt: skip
# Namespaces every Kubernetes cluster has; a team's namespace of that name would put the
# team's quota and policies on the system's own pods.
KUBERNETES_NAMESPACES = frozenset({"default", "kube-system", "kube-public", "kube-node-lease"})
SLURM_ROOT_ACCOUNT = "root"  # the top of Slurm's association tree
NOBODY_UIDS = {65534: "nobody's (NFS maps squashed users to it)", 65535: "(uid_t) -1 in 16 bits"}
INSTALLER_UID = 1000  # the first user an installer or cloud image creates (debian, ubuntu)
RESERVED_UIDS = range(60000, 65534)  # Debian's 60000-64999, systemd's dynamic 61184-65519


def check_accounts(plan: Plan, nodes: list[Node]) -> Iterator[Finding]:
    access = plan.get("access") or {}
    admins = [u for u in access.get("admin_users") or [] if isinstance(u, dict)]
    for i, user in enumerate(admins):
        yield from _system_name(user.get("name"), ("access", "admin_users", i, "name"), "admin")
    team_users: dict[str, tuple[Any, ...]] = {}
    for team, spec in (plan.get("teams") or {}).items():
        yield from _team_name(plan, str(team))
        for i, user in enumerate((spec or {}).get("users") or []):
            if not isinstance(user, dict):
                continue
            path = ("teams", team, "users", i)
            team_users.setdefault(str(user.get("name")), path)
            yield from _uid(user.get("uid"), (*path, "uid"))
    managed = {str(u.get("name")) for u in admins} - SYSTEM_USERS  # those: reserved-user
    yield from _ansible_user(access, managed, team_users)


def _system_name(name: Any, path: tuple[Any, ...], what: str) -> Iterator[Finding]:
    if name in SYSTEM_USERS:
        yield Finding(
            "reserved-user",
            f"{what} user {name} is a system account of the nodes: the plan would take it over",
            path,
            hint="give the person a login of their own",
        )


def _team_name(plan: Plan, team: str) -> Iterator[Finding]:
    kind = (plan.get("scheduler") or {}).get("type")
    path = ("teams", team)
    if kind == "slurm" and team == SLURM_ROOT_ACCOUNT:
        yield Finding(
            "reserved-team",
            "team root would be Slurm's root account, the top of every association: its "
            "limits and share would apply to the whole cluster",
            path,
            hint="name the team after the people in it",
        )
    elif kind == "kubernetes" and (team in KUBERNETES_NAMESPACES or team.startswith("kube-")):
        yield Finding(
            "reserved-team",
            f"team {team} would be the Kubernetes namespace {team}, which the cluster "
            "itself uses: its quota and policies would apply to the system's pods",
            path,
            hint="name the team after the people in it (kube- names are Kubernetes' own)",
        )


def _uid(uid: Any, path: tuple[Any, ...]) -> Iterator[Finding]:
    if not isinstance(uid, int) or isinstance(uid, bool):
        return
    if uid in NOBODY_UIDS:
        yield Finding(
            "reserved-uid",
            f"UID {uid} is {NOBODY_UIDS[uid]}: files of that user would be everyone's",
            path,
            hint="pick a UID from 2000 up",
        )
    elif uid in RESERVED_UIDS:
        yield Finding(
            "reserved-uid",
            f"UID {uid} is in the range the OS keeps for itself (Debian 60000-64999, "
            "systemd's dynamic users 61184-65519)",
            path,
            severity="warning",
            hint="pick a UID from 2000 up",
        )
    elif uid == INSTALLER_UID:
        yield Finding(
            "reserved-uid",
            "UID 1000 is the first user an installer or cloud image creates (debian, "
            "ubuntu): the group and user cannot be made where it exists",
            path,
            severity="warning",
            hint="pick a UID from 2000 up, or suppress with a reason if no node has a first user",
        )


def _ansible_user(
    access: dict[str, Any], admins: set[str], team_users: dict[str, tuple[Any, ...]]
) -> Iterator[Finding]:
    """Ansible logs in before any role runs: a login the plan creates does not exist yet."""
    login = access.get("ansible_user")
    path = ("access", "ansible_user")
    if login in team_users:
        yield Finding(
            "ansible-user",
            f"ansible_user {login} is a team user the plan creates: a fresh node has no such "
            "login, and a team user has no sudo to run the roles with",
            path,
            hint="connect as root or as the image's admin account",
        )
    elif login in admins:
        yield Finding(
            "ansible-user",
            f"ansible_user {login} is an admin user the plan manages: its authorized_keys "
            "becomes the plan's ssh_keys (without the key Ansible logs in with, the run locks "
            "itself out), and a fresh node has no such login before the first run",
            path,
            severity="warning",
            hint="connect as root or as the image's own admin account, or suppress with a "
            "reason when the image has the account and ssh_keys hold Ansible's key",
        )
