"""`cluster.time_reference`: the ntp_server hosts are the site's own time reference. The plan
option, its default, its check, and what the chrony template and the alert rule make of it."""

from __future__ import annotations

from pathlib import Path

from plan_text import findings, replace_once

from cluster_plan.plan.validate import validate_text

PLANS = Path(__file__).resolve().parents[1] / "plans"
BASE = (PLANS / "base.yml").read_text()
IDENTITY = "cluster: {name: bad, domain: bad.internal, os: debian-12}"
HEAD_ROLES = "roles: [slurm_controller, ceph_mgr]}"


def with_reference(reference: str = "{}", roles: str = HEAD_ROLES) -> str:
    return replace_once(
        BASE,
        (IDENTITY, IDENTITY[:-1] + f", time_reference: {reference}}}"),
        (HEAD_ROLES, roles),
    )


def test_a_reference_served_by_an_ntp_server_is_sound_and_gets_the_default_stratum():
    text = with_reference(roles="roles: [slurm_controller, ceph_mgr, ntp_server]}")
    assert findings(text) == []
    plan = validate_text(text, "plan.yml").plan
    assert plan["cluster"]["time_reference"] == {"stratum": 10}


def test_a_reference_without_an_ntp_server_is_refused_where_it_is_written():
    result = validate_text(with_reference("{stratum: 8}"), "plan.yml")
    (finding,) = [f for f in result.findings if f.suppressed_by is None]
    assert (finding.severity, finding.code, finding.json_path) == (
        "error", "missing-role", "$.cluster.time_reference"
    )  # fmt: skip
    assert finding.line == 4 and "ntp_server" in (finding.hint or "")


def test_the_stratum_is_chronys_range():
    cases = {
        "{stratum: 0}": ("range", "$.cluster.time_reference.stratum"),
        "{stratum: 16}": ("range", "$.cluster.time_reference.stratum"),
        "{stratum: 8.5}": ("type", "$.cluster.time_reference.stratum"),
        "{peers: true}": ("unknown-key", "$.cluster.time_reference.peers"),
    }
    for bad, (code, path) in cases.items():
        text = with_reference(bad, roles="roles: [slurm_controller, ceph_mgr, ntp_server]}")
        assert findings(text) == [("error", code, path)], bad


def test_without_it_the_plan_has_no_reference():
    plan = validate_text(BASE, "plan.yml").plan
    assert "time_reference" not in plan["cluster"]
