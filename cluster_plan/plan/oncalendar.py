"""systemd calendar expressions (OnCalendar=), read as `systemd-analyze calendar` reads them.

Pure functions: `calendar_problem` says why systemd would refuse an expression (None when it
would accept it); `from_cron` turns a five-field cron line, the usual mistake, into the
OnCalendar expression that means the same, for the hint.
"""

from __future__ import annotations

import re

SHORTHANDS = frozenset(
    {
        "minutely",
        "hourly",
        "daily",
        "weekly",
        "monthly",
        "yearly",
        "annually",
        "quarterly",
        "semiannually",
    }
)
WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
_FULL_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_DATE = re.compile(r"^(?:(?P<year>[^-~:]+)-)?(?P<month>[^-~:]+)(?P<sep>[-~])(?P<day>[^-~:]+)$")
_TIMEZONE = re.compile(r"^[A-Za-z][A-Za-z0-9_+-]*(/[A-Za-z0-9_+-]+)*$")
_NUMBER = re.compile(r"^[0-9]+$")
_SECONDS = re.compile(r"^[0-9]+(\.[0-9]{1,6})?$")
_CRON_FIELD = re.compile(r"^[0-9*,/-]+$")


def _value_problem(text: str, low: int, high: int, what: str) -> str | None:
    pattern = _SECONDS if what == "second" else _NUMBER
    if not pattern.match(text):
        return f"{text!r} is not a {what}"
    if not low <= float(text) <= high:
        return f"{what} {text} is outside {low}..{high}"
    return None


def _item_problem(item: str, low: int, high: int, what: str) -> str | None:
    """One item of a comma list: *, a value, a range a..b, each with an optional /step."""
    base, _, step = item.partition("/")
    if "/" in item and not _NUMBER.match(step):
        return f"the step of {item!r} is not a number"
    if base == "*":
        return None
    first, dots, last = base.partition("..")
    if dots and not last:
        return f"the range {item!r} has no end"
    for value in (first, last) if dots else (first,):
        problem = _value_problem(value, low, high, what)
        if problem:
            return problem
    return None


def _component_problem(text: str, low: int, high: int, what: str) -> str | None:
    for item in text.split(","):
        problem = _item_problem(item, low, high, what)
        if problem:
            return problem
    return None


def _weekday_problem(text: str) -> str | None:
    for item in text.split(","):
        for name in item.split(".."):
            if name.lower() not in WEEKDAYS + _FULL_WEEKDAYS:
                return f"{name!r} is not a weekday (Mon, Tue, ... Sun)"
    return None


def _date_problem(text: str) -> str | None:
    match = _DATE.match(text)
    if not match:
        return f"{text!r} is not a date (YYYY-MM-DD, *-*-*, *-*-01 ...)"
    checks = [
        (match["year"], 1970, 2199, "year"),
        (match["month"], 1, 12, "month"),
        (match["day"], 1, 31, "day"),
    ]
    for value, low, high, what in checks:
        problem = value and _component_problem(value, low, high, what)
        if problem:
            return problem
    return None


def _time_problem(text: str) -> str | None:
    parts = text.split(":")
    if len(parts) not in (2, 3):
        return f"{text!r} is not a time (HH:MM or HH:MM:SS)"
    limits = [(0, 23, "hour"), (0, 59, "minute"), (0, 59, "second")]
    for value, (low, high, what) in zip(parts, limits, strict=False):
        problem = _component_problem(value, low, high, what)
        if problem:
            return problem
    return None


def _looks_like_cron(tokens: list[str]) -> bool:
    return len(tokens) == 5 and all(_CRON_FIELD.match(t) for t in tokens)


def _is_weekdays(token: str) -> bool:
    return ":" not in token and not token[0].isdigit() and token[0] != "*"


def _is_date(token: str) -> bool:
    return ":" not in token and ("-" in token or "~" in token)


def _is_time(token: str) -> bool:
    return ":" in token


def calendar_problem(expression: str) -> str | None:
    """Why systemd would refuse `expression` as OnCalendar=, None when it accepts it:
    [weekdays] [date] [time] [time zone], or one of the shorthands (daily, weekly, ...)."""
    tokens = expression.split()
    if not tokens:
        return "it is empty"
    if len(tokens) == 1 and tokens[0].lower() in SHORTHANDS:
        return None
    if _looks_like_cron(tokens):
        return "it is cron syntax, which systemd does not read"
    rest = list(tokens)
    used = False
    for applies, problem_of in (
        (_is_weekdays, _weekday_problem),
        (_is_date, _date_problem),
        (_is_time, _time_problem),
    ):
        if rest and applies(rest[0]):
            problem = problem_of(rest.pop(0))
            if problem:
                return problem
            used = True
    if rest and used and len(rest) == 1 and _TIMEZONE.match(rest[0]):
        return None
    if rest:
        return f"{rest[0]!r} is not a weekday, date, time or time zone here"
    return None if used else "it has no weekday, date or time"


def _cron_weekdays(base: str) -> str | None:
    """A cron weekday item (*, 1, 1-5; Sunday is 0 or 7) as systemd's (Mon..Fri)."""
    if base == "*":
        return "*"
    names = [WEEKDAYS[(int(v) - 1) % 7].title() for v in base.split("-") if v.isdigit()]
    return "..".join(names) if len(names) == len(base.split("-")) else None


def _cron_item(item: str, kind: str) -> str | None:
    """One cron list item as a systemd one: * and */n, a-b as a..b, values as they are."""
    base, slash, step = item.partition("/")
    if kind == "weekday":
        return None if slash else _cron_weekdays(base)
    start = "0" if kind in ("minute", "hour") else "1"
    if base == "*":
        return f"{start}/{step}" if slash else "*"
    first, _, last = base.partition("-")
    if not first.isdigit() or (last and not last.isdigit()):
        return None
    width = 2 if kind in ("minute", "hour", "day", "month") else 1
    text = first.zfill(width) + (f"..{last.zfill(width)}" if last else "")
    return text + (f"/{step}" if slash else "")


def from_cron(expression: str) -> str | None:
    """The OnCalendar expression a five-field cron line (minute hour day month weekday) means,
    None when it is not one this can translate."""
    tokens = expression.split()
    if not _looks_like_cron(tokens):
        return None
    kinds = ("minute", "hour", "day", "month", "weekday")
    fields: dict[str, str] = {}
    for token, kind in zip(tokens, kinds, strict=True):
        items = [_cron_item(item, kind) for item in token.split(",")]
        if None in items:
            return None
        fields[kind] = ",".join(str(i) for i in items)
    weekday = "" if tokens[4] == "*" else fields["weekday"] + " "
    return f"{weekday}*-{fields['month']}-{fields['day']} {fields['hour']}:{fields['minute']}:00"


# --- how far apart two runs can be (for alerts on a schedule that was missed) ---------------

_SHORTHAND_HOURS = {
    "minutely": 1 / 60,
    "hourly": 1,
    "daily": 24,
    "weekly": 7 * 24,
    "monthly": 31 * 24,
    "quarterly": 92 * 24,
    "semiannually": 184 * 24,
    "yearly": 366 * 24,
    "annually": 366 * 24,
}


def _weekday_numbers(text: str) -> set[int]:
    days: set[int] = set()
    for item in text.split(","):
        ends = [_day_number(name) for name in item.split("..")]
        days.update(range(ends[0], ends[-1] + 1) if ends[0] <= ends[-1] else ends)
    return days


def _day_number(name: str) -> int:
    lowered = name.lower()
    return WEEKDAYS.index(lowered) if lowered in WEEKDAYS else _FULL_WEEKDAYS.index(lowered)


def _weekday_gap_days(days: set[int]) -> int:
    """The longest wait, in days, from one listed weekday to the next."""
    ordered = sorted(days)
    return max((b - a) % 7 or 7 for a, b in zip(ordered, [*ordered[1:], ordered[0]], strict=True))


def _date_gap_hours(text: str) -> int:
    match = _DATE.match(text)
    if match is None or match["sep"] == "~":
        return 31 * 24
    if match["year"] not in (None, "*") or match["month"] not in ("*",):
        return 366 * 24  # some months or years only
    return 24 if match["day"] == "*" else 31 * 24


def longest_gap_hours(expression: str) -> float | None:
    """An upper bound on the hours between two consecutive elapses of an OnCalendar
    expression systemd accepts (None when it would refuse it): exact for the shorthands, a
    daily time and weekday lists, and a month or a year for specific dates. Runs within one
    day count as a day: an alert on a missed run wants the bound, not the exact gap."""
    if calendar_problem(expression) is not None:
        return None
    tokens = expression.split()
    if len(tokens) == 1 and tokens[0].lower() in _SHORTHAND_HOURS:
        return float(_SHORTHAND_HOURS[tokens[0].lower()])
    hours = 24.0
    first = tokens[0]
    if ":" not in first and not first[0].isdigit() and first[0] != "*":
        hours = 24.0 * _weekday_gap_days(_weekday_numbers(first))
        tokens = tokens[1:]
    if tokens and ":" not in tokens[0] and ("-" in tokens[0] or "~" in tokens[0]):
        hours = max(hours, _date_gap_hours(tokens[0]))
    return float(hours)
