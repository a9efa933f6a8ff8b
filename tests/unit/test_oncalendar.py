"""systemd calendar expressions, checked as `systemd-analyze calendar` would, and cron lines
turned into the OnCalendar expression that means the same."""

from __future__ import annotations

import pytest

from cluster_plan.plan.oncalendar import calendar_problem, from_cron


@pytest.mark.parametrize(
    "expression",
    [
        "daily",
        "hourly",
        "weekly",
        "minutely",
        "monthly",
        "quarterly",
        "semiannually",
        "yearly",
        "*-*-* 02:00:00",
        "*-*-* 02:00",
        "Mon..Fri 02:00",
        "Mon,Wed,Fri *-*-* 03:30:00",
        "Saturday *-*-1..7 18:00:00",
        "2027-01-05 02:00",
        "*-*-01 00:00:00",
        "*-02~03",
        "*:0/15",
        "*-*-* 02:00:00 UTC",
        "Mon..Fri *-*-* 02:00 Europe/Berlin",
        "*-*-* 02:00:00.5",
        "*-*-* 0,12:00",
        "Sun 04:00",
    ],
)
def test_expressions_systemd_accepts(expression: str) -> None:
    assert calendar_problem(expression) is None


@pytest.mark.parametrize(
    ("expression", "says"),
    [
        ("0 2 * * *", "cron syntax"),
        ("*/15 * * * 1-5", "cron syntax"),
        ("", "empty"),
        ("*-*-* 25:00:00", "hour 25 is outside 0..23"),
        ("*-*-* 02:60", "minute 60"),
        ("Mon..Fri 02:00:61", "second 61"),
        ("*-13-01", "month 13"),
        ("*-*-32", "day 32"),
        ("Funday 02:00", "'Funday' is not a weekday"),
        ("2 AM", "'2' is not a weekday, date, time"),
        ("daily 02:00", "'daily' is not a weekday"),
        ("*-*-* 02:00 UTC extra", "'UTC' is not"),
        ("*-*-* 1..:00", "has no end"),
        ("*-*-* 02/x:00", "step"),
        ("02:00:00:00", "not a time"),
        ("*-*-*-* 02:00", "not a date"),
    ],
)
def test_what_systemd_refuses_is_named(expression: str, says: str) -> None:
    problem = calendar_problem(expression)
    assert problem is not None
    assert says in problem


@pytest.mark.parametrize(
    ("cron", "calendar"),
    [
        ("0 2 * * *", "*-*-* 02:00:00"),
        ("30 4 1 * *", "*-*-01 04:30:00"),
        ("*/15 * * * 1-5", "Mon..Fri *-*-* *:0/15:00"),
        ("0 3 * * 0", "Sun *-*-* 03:00:00"),
        ("0 3 * * 7", "Sun *-*-* 03:00:00"),
        ("0 0,12 * 1-6 *", "*-01..06-* 00,12:00:00"),
    ],
)
def test_cron_lines_become_their_oncalendar_equivalent(cron: str, calendar: str) -> None:
    assert from_cron(cron) == calendar
    assert calendar_problem(calendar) is None


@pytest.mark.parametrize("line", ["daily", "0 2 * * MON", "0 2 * * 1/2", "0 2 * *"])
def test_what_is_not_a_translatable_cron_line_gives_none(line: str) -> None:
    assert from_cron(line) is None
