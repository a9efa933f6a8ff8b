"""No silent skip of a lab proof: the lab's prerequisites are checked once, when collection
ends, against the tests selected.

Under CI (`CI=true`) and `make test` (`CLUSTER_PLAN_REQUIRE_LAB=1`), a selected lab test on a
machine that cannot run the lab (not root, a host tool missing) stops the run before any test
runs, with one line naming what is missing. A developer opts out explicitly, and the run says
so at its start and end: `CLUSTER_PLAN_SKIP_LAB=1` skips the lab tests, `-m 'not lab'`
deselects them. Anywhere else (a developer's plain `pytest`) the lab tests skip with the
reason, and the end of the run says how many did and why.
"""

from __future__ import annotations

import os

import pytest

from support.lab_session import missing_prerequisites

SKIP_ENV = "CLUSTER_PLAN_SKIP_LAB"
REQUIRE_ENV = "CLUSTER_PLAN_REQUIRE_LAB"
LAB_FIXTURES = frozenset({"lab", "converged_lab"})
_SKIPPED = pytest.StashKey[tuple[int, str]]()


def needs_lab(item: pytest.Item) -> bool:
    fixtures = set(getattr(item, "fixturenames", ()))
    return item.get_closest_marker("lab") is not None or bool(fixtures & LAB_FIXTURES)


def required() -> bool:
    """CI and `make test` must run every lab proof (or be told explicitly not to)."""
    return os.environ.get("CI", "").lower() == "true" or os.environ.get(REQUIRE_ENV) == "1"


def opted_out() -> bool:
    return os.environ.get(SKIP_ENV) == "1"


def deselected_by_mark(config: pytest.Config) -> bool:
    return "not lab" in (config.getoption("markexpr", "") or "")


def pytest_report_header(config: pytest.Config) -> list[str]:
    if opted_out():
        return [f"lab tests: opted out ({SKIP_ENV}=1): they are skipped, not run"]
    if deselected_by_mark(config):
        return ["lab tests: opted out (-m 'not lab'): they are deselected, not run"]
    return []


def pytest_collection_finish(session: pytest.Session) -> None:
    lab_items = [item for item in session.items if needs_lab(item)]
    if not lab_items:
        return
    if opted_out():
        reason = f"{SKIP_ENV}=1: the lab tests are opted out"
    else:
        missing = missing_prerequisites()
        if not missing:
            return
        if required():
            pytest.exit(
                f"lab prerequisites missing: {'; '.join(missing)}. {len(lab_items)} lab tests "
                f"cannot run; opt out explicitly with {SKIP_ENV}=1 or -m 'not lab'",
                returncode=pytest.ExitCode.USAGE_ERROR,
            )
        reason = f"the lab needs {'; '.join(missing)}"
    for item in lab_items:
        item.add_marker(pytest.mark.skip(reason=reason))
    session.config.stash[_SKIPPED] = (len(lab_items), reason)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    skipped = terminalreporter.config.stash.get(_SKIPPED, None)
    if skipped is not None:
        count, reason = skipped
        where = "" if opted_out() else f" (under CI or {REQUIRE_ENV}=1 this fails the run)"
        terminalreporter.write_line(f"lab tests: {count} skipped: {reason}{where}")
