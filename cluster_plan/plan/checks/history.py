"""The acceptance history's database: what a refused value was meant to be.

The schema's `history_file` grammar says which paths may name the history (one SQLite file,
relative to the plan's folder or absolute, no '..', never under a system folder); a pattern
only says no. Two mistakes a new user makes are told apart here, with what to write instead:
a database server's URL (the history is a file the controller opens) and a folder.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from cluster_plan.plan.checks.base import Plan
from cluster_plan.plan.findings import Finding
from cluster_plan.plan.nodes import Node

_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_PATH = ("acceptance", "history", "database")


def check_history_database(plan: Plan, nodes: list[Node]) -> Iterator[Finding]:
    del nodes
    history: Any = (plan.get("acceptance") or {}).get("history")
    value = history.get("database") if isinstance(history, dict) else None
    if not isinstance(value, str):
        return
    if _URL.match(value):
        yield Finding(
            "history-database",
            "the acceptance history is given as a URL; it is a SQLite file that "
            "`cluster-plan acceptance` opens on the controller",
            _PATH,
            hint="name a SQLite file: relative to the plan's folder (history/lab.sqlite) or "
            "absolute (/var/lib/cluster-plan/history.sqlite), or leave the key out for "
            "history.sqlite beside the reports",
        )
    elif value.endswith("/"):
        yield Finding(
            "history-database",
            f"{value!r} names a folder; the acceptance history is one SQLite file",
            _PATH,
            hint=f"name the file in it: {value.rstrip('/')}/history.sqlite",
        )
