"""The plan's teams: defaults, and the checks at their edges (the bad-plan corpus has one plan
per check, tests/plans/bad/team-*.yml, made from tests/plans/base-teams.yml)."""

from __future__ import annotations

from pathlib import Path

import pytest
from plan_text import findings, replace_once

from cluster_plan.plan.validate import validate_text

BASE = (Path(__file__).resolve().parents[1] / "plans" / "base-teams.yml").read_text()


def edit(*pairs: tuple[str, str], text: str = BASE) -> str:
    return replace_once(text, *pairs)


def test_the_teams_base_plan_is_sound():
    assert findings(BASE) == []


def test_a_team_naming_no_classes_may_use_every_class():
    result = validate_text(BASE, "plan.yml")
    teams = result.plan["teams"]
    assert teams["nlp"]["classes"] == ["training", "general"]
    assert teams["vision"]["classes"] == ["training", "general"]
    assert teams["nlp"]["limits"] == {
        "gpus": None,
        "accelerators": None,
        "gpu_hours": None,
        "max_time": None,
    }
    assert teams["nlp"]["fairshare"] == 1
    assert teams["nlp"]["users"][0]["ssh_keys"] == []


@pytest.mark.parametrize(
    ("max_time", "ok"),
    [("1-00:00:00", True), ("90", True), ("04:00:00", True), ("UNLIMITED", True),
     ("2-12", True), ("one day", False), ("1d", False), ("", False)],
)  # fmt: skip
def test_max_time_is_a_slurm_time(max_time, ok):
    text = edit(('max_time: "1-00:00:00"', f'max_time: "{max_time}"'))
    bad = ("error", "time-format", "$.teams.vision.limits.max_time")
    assert (bad not in findings(text)) is ok


def test_a_longer_cycle_is_one_finding():
    text = edit(
        ("  research: {fairshare: 2, limits: {gpus: 4}}",
         "  research: {parent: vision, fairshare: 2, limits: {gpus: 4}}"),
    )  # fmt: skip
    cycles = [f for f in findings(text) if f[1] == "team-cycle"]
    assert cycles == [("error", "team-cycle", "$.teams.research.parent")]


def test_a_team_user_may_not_be_an_admin_too():
    text = BASE + "access:\n  admin_users:\n    - {name: bob}\n"
    assert ("error", "duplicate-user", "$.teams.nlp.users[0].name") in findings(text)


def test_gpu_hours_beyond_what_a_period_holds_warn():
    # 4 GPUs x 744 hours (a 31-day month) = 2976 GPU-hours
    fits = edit(("gpu_hours: 100", "gpu_hours: 2976"))
    over = edit(("gpu_hours: 100", "gpu_hours: 2977"))
    warning = ("warning", "limit-exceeds-capacity", "$.teams.vision.limits.gpu_hours")
    assert warning not in findings(fits)
    assert warning in findings(over)


def test_a_parent_team_without_users_is_fine_a_leaf_is_not():
    assert not [f for f in findings(BASE) if f[1] == "team-without-users"]
    text = edit(("    users:\n      - {name: bob, uid: 2002}\n", ""))
    assert findings(text) == [("warning", "team-without-users", "$.teams.nlp")]


def test_a_kubernetes_plan_needs_no_slurm_accounting_for_teams():
    text = edit(
        ("type: slurm\n  slurm: {accounting: true}", "type: kubernetes"),
        ("roles: [slurm_controller, slurmdbd, ceph_mgr]", "roles: [k8s_control_plane, ceph_mgr]"),
    )
    text = text.replace("roles: [slurm_compute]", "roles: [k8s_worker]")
    found = findings(text)
    assert not [f for f in found if f[1] == "teams-without-accounting"]
    # but Kubernetes has no GPU-hour budget to give the team
    assert ("warning", "not-enforced", "$.teams.vision.limits.gpu_hours") in found
