"""A reservation whose window does not fit Python's calendar (the years 1 to 9999) is a finding
on the reservation, never an OverflowError out of validate."""

from __future__ import annotations

from pathlib import Path

import pytest

from cluster_plan.plan.findings import errors
from cluster_plan.plan.validate import validate_text

BASE = (Path(__file__).resolve().parent / "base.yml").read_text()
RESERVATION = '{start: "2027-01-05T02:00:00", duration_minutes: 120,'


@pytest.mark.parametrize(
    "reservation",
    [
        '{start: "9999-12-31T23:00:00", duration_minutes: 120,',
        '{start: "9999-12-31T23:59:00+00:00", duration_minutes: 1,',
        '{start: "2027-01-05T02:00:00", duration_minutes: 99999999999999,',
        '{start: "0001-01-01T00:00:00+14:00", duration_minutes: 120,',
    ],
)
def test_a_window_off_the_calendar_is_a_range_finding(reservation: str) -> None:
    assert BASE.count(RESERVATION) == 1
    result = validate_text(BASE.replace(RESERVATION, reservation), "plan.yml")
    (finding,) = errors(result.findings)
    assert finding.code == "range"
    assert finding.json_path == "$.scheduler.reservations.maint.duration_minutes"
    assert "years 1 to 9999" in finding.message
    assert (finding.file, finding.line) == ("plan.yml", 38)


def test_the_base_reservation_is_fine() -> None:
    assert errors(validate_text(BASE, "plan.yml").findings) == []
