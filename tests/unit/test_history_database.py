"""acceptance.history.database: one SQLite file, relative to the plan's folder or absolute
(the schema's history_file grammar), and the two mistakes check_history_database explains."""

from __future__ import annotations

from pathlib import Path

import pytest
from plan_text import findings

from cluster_plan.plan.host_values import grammar_problem
from cluster_plan.plan.validate import validate_text

BASE = (Path(__file__).resolve().parents[1] / "plans" / "base.yml").read_text()


def history(database: str) -> list[tuple[str, str, str]]:
    return findings(BASE + f"  history: {{database: {database!r}}}\n")


@pytest.mark.parametrize(
    "database",
    ["history.sqlite", "history/lab.sqlite", "reports/lab/history.db", "/srv/h.sqlite3",
     "/var/lib/cluster-plan/history.sqlite", "/etcetera/h.db", "/development/h.sqlite",
     "a-b_c+d@e/x.y.sqlite"],
)  # fmt: skip
def test_sqlite_files_are_accepted(database):
    assert history(database) == []
    assert grammar_problem(database, "history_file") == ""


@pytest.mark.parametrize(
    "database",
    ["/dev/zero", "/dev/h.sqlite", "/proc/self/h.db", "/sys/h.db", "/etc/h.sqlite", "/etc",
     "../../etc/passwd", "../h.sqlite", "a/../h.sqlite", "./h.sqlite", ".h.sqlite",
     "a/.hidden/h.sqlite", "//h.sqlite", "a//h.sqlite", "h.sqlite/", "h.sqlite\n",
     "h .sqlite", "h.sqlite;rm", "history", "h.json", "~/h.sqlite", "C:\\h.db",
     "x" * 250 + ".sqlite"],
)  # fmt: skip
def test_other_paths_are_refused(database):
    assert ("error", "format", "$.acceptance.history.database") in history(database)
    assert grammar_problem(database, "history_file").endswith("is not a SQLite file's path")


@pytest.mark.parametrize(
    ("database", "hint"),
    [
        ("https://db.example.org/history.sqlite", "relative to the plan's folder"),
        ("sqlite:///srv/history.sqlite", "relative to the plan's folder"),
        ("/srv/history/", "/srv/history/history.sqlite"),
        ("history/", "history/history.sqlite"),
    ],
)
def test_a_url_or_a_folder_is_explained(database, hint):
    found = history(database)
    assert ("error", "history-database", "$.acceptance.history.database") in found
    (finding,) = [
        f
        for f in validate_text(BASE + f"  history: {{database: {database!r}}}\n").findings
        if f.code == "history-database"
    ]
    assert finding.hint is not None and hint in finding.hint
