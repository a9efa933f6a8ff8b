"""Mistakes in the plan's monitoring section: where each check starts firing and
where it stays quiet, the strict grammar of the strings that reach Alertmanager, and the
defaults a plan with a monitoring server gets."""

from __future__ import annotations

from pathlib import Path

import pytest
from plan_text import findings, replace_once

from cluster_plan.plan.defaults import with_defaults
from cluster_plan.plan.oncalendar import longest_gap_hours
from cluster_plan.plan.validate import validate_text

PLANS = Path(__file__).resolve().parents[1] / "plans"
BASE = (PLANS / "base.yml").read_text()
HEAD_ROLES = "roles: [slurm_controller, ceph_mgr]}"
SERVER = replace_once(BASE, (HEAD_ROLES, "roles: [slurm_controller, ceph_mgr, monitoring_server]}"))
SECTION = """monitoring:
  receivers:
    ops: {webhook: "https://alerts.example.org/hook"}
"""


def codes(text: str) -> list[tuple[str, str, str]]:
    return findings(text)


def with_monitoring(section: str = SECTION, plan: str = SERVER) -> str:
    return plan + section


def test_a_sound_monitoring_section_has_no_findings():
    assert codes(with_monitoring()) == []


def test_the_section_without_a_server_is_an_error():
    assert ("error", "missing-role", "$.monitoring") in codes(with_monitoring(plan=BASE))


def test_a_server_without_the_section_gets_the_defaults_and_a_warning():
    assert codes(SERVER) == [("warning", "alerts-unrouted", "$.monitoring")]
    filled = validate_text(SERVER, "plan.yml").plan
    assert filled["monitoring"]["scrape_interval_s"] == 30
    assert filled["monitoring"]["routes"] == {} and filled["monitoring"]["default_receiver"] is None


def test_a_plan_without_either_has_no_monitoring():
    assert with_defaults({"node_groups": {}})["monitoring"] is None


def test_two_monitoring_servers_are_refused():
    two = replace_once(
        BASE, ("roles: [ceph_mon, ceph_osd]}", "roles: [ceph_mon, ceph_osd, monitoring_server]}")
    )
    found = codes(two + SECTION)
    assert ("error", "monitoring-servers", "$.node_groups.stor.roles") in found


@pytest.mark.parametrize(
    ("routes", "found"),
    [
        ("{paging: {severity: critical, receiver: ops}}", []),
        (
            "{paging: {severity: critical, receiver: pager}}",
            [("error", "unknown-receiver", "$.monitoring.routes.paging.receiver")],
        ),
        (
            "{mine: {team: ghosts, receiver: ops}}",
            [("error", "unknown-team", "$.monitoring.routes.mine.team")],
        ),
        (
            "{paging: {severity: fatal, receiver: ops}}",
            [("error", "enum", "$.monitoring.routes.paging.severity")],
        ),
    ],
)
def test_routes_name_known_receivers_and_teams(routes, found):
    plan = with_monitoring(SECTION + f"  routes: {routes}\n")
    assert [f for f in codes(plan) if f[0] == "error"] == found


def test_email_needs_a_mail_relay():
    mailed = SECTION + '    admins: {email: "admins@example.org"}\n'
    assert ("error", "smtp-missing", "$.monitoring.receivers.admins.email") in codes(
        with_monitoring(mailed)
    )
    relayed = mailed + '  smtp: {host: mail.example.org, from: "alerts@example.org"}\n'
    assert codes(with_monitoring(relayed)) == []


@pytest.mark.parametrize(
    "address",
    [
        "admins",  # no domain
        "admins@localhost",  # not a dotted name
        "Admins <admins@example.org>",  # a display name
        "admins@example.org\\nBcc: all@example.org",  # a header smuggled in
        "a b@example.org",
        "admins@example.org;rm",
    ],
)
def test_email_addresses_keep_to_their_grammar(address):
    plan = with_monitoring(
        SECTION
        + f'    admins: {{email: "{address}"}}\n'
        + '  smtp: {host: mail.example.org, from: "alerts@example.org"}\n'
    )
    assert ("error", "format", "$.monitoring.receivers.admins.email") in codes(plan)


@pytest.mark.parametrize(
    "url",
    [
        "ftp://alerts.example.org/hook",
        "https://alerts.example.org/hook?token=x",
        "https://u:p@alerts.example.org/",
        "https://alerts.example.org/\\nx",
    ],
)
def test_webhooks_keep_to_the_url_grammar(url):
    plan = with_monitoring(f'monitoring:\n  receivers:\n    ops: {{webhook: "{url}"}}\n')
    assert ("error", "format", "$.monitoring.receivers.ops.webhook") in codes(plan)


def test_a_receiver_must_say_where_and_the_default_must_exist():
    empty = with_monitoring(SECTION + "    nowhere: {}\n")
    assert ("error", "empty", "$.monitoring.receivers.nowhere") in codes(empty)
    unknown = with_monitoring(SECTION + "  default_receiver: pager\n")
    assert ("error", "unknown-receiver", "$.monitoring.default_receiver") in codes(unknown)


@pytest.mark.parametrize(
    ("setting", "found"),
    [
        (
            "scrape_interval_s: 60, evaluation_interval_s: 30",
            [("warning", "evaluation-faster-than-scrape")],
        ),
        ("scrape_interval_s: 30, evaluation_interval_s: 30", []),
        ("scrape_interval_s: 2", [("error", "range")]),
        ("ceph_pool_full_pct: 0", [("error", "range")]),
        ("ceph_pool_full_pct: 101", [("error", "range")]),
        ("retention_days: 0", [("error", "range")]),
    ],
)
def test_intervals_and_thresholds_have_sensible_bounds(setting, found):
    plan = with_monitoring(SECTION + "  " + setting.replace(", ", "\n  ") + "\n")
    got = [
        (s, c) for s, c, p in codes(plan) if p.startswith("$.monitoring.") and p != "$.monitoring"
    ]
    assert got == found


@pytest.mark.parametrize(
    ("timing", "found"),
    [
        ("{group_interval_s: 600, repeat_interval_minutes: 5}",
         [("warning", "repeat-before-group-interval")]),
        ("{group_interval_s: 600, repeat_interval_minutes: 10}", []),
        ("{group_wait_s: 0}", []),  # send at once
        ("{group_wait_s: -1}", [("error", "range")]),
        ("{group_interval_s: 0}", [("error", "range")]),
        ("{repeat_interval_minutes: 10.5}", [("error", "type")]),
        ("{repeat_interval_minutes: soon}", [("error", "type")]),
        ("{group_interval_s: true}", [("error", "type")]),
        ("{group_wait: 30}", [("error", "unknown-key")]),
        ("soon", [("error", "type")]),
    ],
)  # fmt: skip
def test_notification_timing_has_bounds_and_a_repeat_no_shorter_than_the_interval(timing, found):
    plan = with_monitoring(SECTION + f"  notifications: {timing}\n")
    got = [(s, c) for s, c, p in codes(plan) if p.startswith("$.monitoring.notifications")]
    assert got == found


def test_notification_timing_defaults_to_alertmanager_s_own():
    plan = with_defaults({"monitoring": {}})
    assert plan["monitoring"]["notifications"] == {
        "group_wait_s": 30, "group_interval_s": 300, "repeat_interval_minutes": 240,
    }  # fmt: skip


@pytest.mark.parametrize(
    ("schedule", "hours"),
    [
        ("daily", 24),
        ("*-*-* 02:00:00", 24),
        ("Mon..Fri 02:00", 72),  # Friday to Monday
        ("Sun 03:00", 168),
        ("Mon,Thu *-*-* 01:00", 96),  # Thursday to Monday
        ("*-*-01 02:00", 744),  # the first of each month: a month at most
        ("hourly", 1),
        ("0 2 * * *", None),  # cron: systemd refuses it (validate says so)
    ],
)
def test_the_longest_gap_of_a_backup_schedule(schedule, hours):
    assert longest_gap_hours(schedule) == hours


def test_the_backup_age_that_alerts_follows_the_schedule_unless_set():
    plan = {
        "node_groups": {"h": {"roles": ["monitoring_server"]}},
        "backups": {"schedule": "Mon..Fri 02:00"},
    }
    assert with_defaults(plan)["monitoring"]["backup_max_age_hours"] == 74
    plan["monitoring"] = {"backup_max_age_hours": 30}
    assert with_defaults(plan)["monitoring"]["backup_max_age_hours"] == 30
    assert with_defaults({"monitoring": {}})["monitoring"]["backup_max_age_hours"] is None
