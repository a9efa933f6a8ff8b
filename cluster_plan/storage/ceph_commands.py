"""Ceph's commands as this project asks them on a running cluster: the argv of each question
and a pure reading of each answer, and the one wait for a healthy Ceph. Storage acceptance and
the change's runner (OSDs out, emptied, purged; CephFS sessions evicted) ask through here; the
Ansible modules keep their own (plugins/module_utils/ceph_cli.py: they run on the nodes).
Standard library only: an answer is anything with `rc`, `stdout` and `stderr`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

CEPH = ("ceph", "--connect-timeout", "30")


class Answer(Protocol):
    """What a command left behind (cluster_plan.transport's Answer is one)."""

    @property
    def rc(self) -> int: ...

    @property
    def stdout(self) -> str: ...

    @property
    def stderr(self) -> str: ...


# Between two looks at Ceph's health while waiting for HEALTH_OK: one command on a monitor
HEALTH_POLL_S = 2.0


@dataclass(frozen=True)
class Health:
    """What Ceph says of its health: `status` HEALTH_OK, HEALTH_WARN or HEALTH_ERR ("" when it
    did not answer), `summary` its words, `checks` the names of the checks that fail, and the
    JSON answer itself when one was asked for."""

    status: str
    summary: str
    checks: tuple[str, ...] = ()
    document: Mapping[str, Any] | None = field(default=None, compare=False)

    @property
    def ok(self) -> bool:
        return self.status == "HEALTH_OK"

    @property
    def problem(self) -> str | None:
        """None when healthy, else what Ceph says instead (shortened)."""
        return None if self.ok else self.summary[:200] or "no answer"


def health_argv() -> list[str]:
    """`ceph health`: one line, HEALTH_OK or the status and what is wrong."""
    return ["ceph", "health"]


def health_detail_argv() -> list[str]:
    return [*CEPH, "health", "detail", "--format", "json"]


def osd_dump_argv() -> list[str]:
    return [*CEPH, "osd", "dump", "--format", "json"]


def pg_stat_argv() -> list[str]:
    return [*CEPH, "pg", "stat", "--format", "json"]


def health_of_text(text: str) -> Health:
    """`ceph health` -> its status and words."""
    summary = text.strip()
    return Health(summary.split()[0] if summary else "", summary)


def health_of_json(document: Any) -> Health:
    """`ceph health detail --format json` (parsed; None when it did not answer)."""
    data = document if isinstance(document, Mapping) else {}
    status = str(data.get("status") or "")
    checks = tuple(sorted(data.get("checks") or {}))
    return Health(status, " ".join([status, *checks]).strip(), checks, document)


def json_answer(result: Answer) -> Any:
    """A command's JSON answer; None when it failed or printed something else."""
    try:
        return json.loads(result.stdout) if result.rc == 0 else None
    except json.JSONDecodeError:
        return None


def wait_healthy(
    ask: Callable[[], Health],
    timeout_s: float,
    poll_s: float = HEALTH_POLL_S,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> Health:
    """Ask until Ceph says HEALTH_OK or `timeout_s` has passed, never sleeping past it; the
    last answer."""
    deadline = clock() + timeout_s
    health = ask()
    while not health.ok and (left := deadline - clock()) > 0:
        sleep(min(poll_s, left))
        health = ask()
    return health


def osd_counts(osd_dump: Any) -> dict[str, int]:
    """OSDs in `ceph osd dump --format json`: all of them, up, in."""
    osds = (osd_dump or {}).get("osds") or []
    return {
        "total": len(osds),
        "up": sum(1 for o in osds if o.get("up") == 1),
        "in": sum(1 for o in osds if o.get("in") == 1),
    }


def pg_counts(pg_stat: Any) -> dict[str, Any]:
    """Placement groups in `ceph pg stat --format json`: all, active+clean, by state."""
    summary = (pg_stat or {}).get("pg_summary") or {}
    states = {s["name"]: s["num"] for s in summary.get("num_pg_by_state") or []}
    return {
        "total": int(summary.get("num_pgs") or 0),
        "active_clean": int(states.get("active+clean", 0)),
        "states": states,
    }


def osd_tree_argv(host: str) -> list[str]:
    """The ids of the OSDs CRUSH places under a host, space-separated."""
    return ["ceph", "osd", "ls-tree", host]


def osd_ids(result: Answer) -> list[str] | None:
    """The ids an answer of `osd_tree_argv` names; [] when the host is in no CRUSH bucket
    (it left already); None when Ceph did not answer (that is not "no OSDs")."""
    if result.rc == 0:
        return result.stdout.split()
    if "does not exist" in result.stderr or result.rc == 2:  # ENOENT: no such bucket
        return []
    return None


def osd_argv(action: str, ids: Sequence[str]) -> list[str]:
    """`ceph osd out|safe-to-destroy|ok-to-stop IDS`."""
    return ["ceph", "osd", action, *ids]


def osd_purge_argv(osd: str) -> list[str]:
    return ["ceph", "osd", "purge", osd, "--yes-i-really-mean-it"]


def crush_remove_argv(host: str) -> list[str]:
    return ["ceph", "osd", "crush", "remove", host]


def client_sessions_argv() -> list[str]:
    """The CephFS client sessions of the first MDS rank."""
    return ["ceph", "tell", "mds.0", "session", "ls", "--format=json"]


def client_evict_argv(session: int) -> list[str]:
    return ["ceph", "tell", "mds.0", "client", "evict", f"id={session}"]


def sessions_by_host(text: str) -> dict[str, list[int]]:
    """{client host name: session ids} from an answer of `client_sessions_argv` (`ceph tell`
    may print a line before the JSON); ValueError when it holds no JSON list."""
    sessions = json.loads(text[text.find("[") :]) if "[" in text else []
    if not isinstance(sessions, list):
        raise ValueError("not a list of sessions")
    hosts: dict[str, list[int]] = {}
    for session in sessions:
        if isinstance(session, dict) and "id" in session:
            host = (session.get("client_metadata") or {}).get("hostname")
            hosts.setdefault(str(host), []).append(int(session["id"]))
    return hosts
