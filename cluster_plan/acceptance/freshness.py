"""Whether an acceptance run is needed: what was tested last time, against what it would test
now.

A full `site.yml` ends with network acceptance. Measuring every pair again when nothing it
depends on changed is most of an idempotent re-run's time, so the run is skipped only when
all of these hold: the last report passed, it tested exactly what would be tested now (the
same hosts, addresses, networks, MTUs, fabric and thresholds: the *inputs* fingerprint kept in
the report), no host's network setup changed in this run (the caller says which did), and the
report is younger than a maximum age. Anything else runs it; `--when always` (the CLI's
default, and the role's: only site.yml's re-run asks for `changed`) runs it anyway.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from cluster_plan.acceptance.spec import AcceptanceSpec


def inputs_fingerprint(spec: AcceptanceSpec, phases: Sequence[str]) -> str:
    """A digest of everything the measurement and its verdict depend on (hex SHA-256)."""
    document = {"spec": dataclasses.asdict(spec), "phases": sorted(phases)}
    text = json.dumps(document, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


# Printed with every skip: an operator who suspects the network must not be left with last
# week's verdict.
FORCE_HINT = (
    "to measure now: ansible-playbook playbooks/acceptance.yml (or site.yml with "
    "-e net_acceptance_when=always), or cluster-plan acceptance without --when changed"
)


@dataclasses.dataclass(frozen=True)
class Decision:
    run: bool
    reason: str


def _age(previous: Mapping[str, Any], now: dt.datetime) -> dt.timedelta | None:
    try:
        when = dt.datetime.fromisoformat(str(previous.get("generated_at")))
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return now - when


def decide(
    previous: Mapping[str, Any] | None,
    fingerprint: str,
    *,
    now: dt.datetime,
    max_age: dt.timedelta,
    changed_hosts: Sequence[str] = (),
) -> Decision:
    """Run or skip, with the reason in words (printed by the CLI and in Ansible's output)."""
    if previous is None:
        return Decision(True, "no earlier report")
    if not previous.get("passed"):
        return Decision(True, "the last run failed")
    if previous.get("inputs") != fingerprint:
        return Decision(
            True, "what acceptance tests changed since the last run (hosts, addresses, "
            "networks, fabric or thresholds)",
        )  # fmt: skip
    if changed_hosts:
        return Decision(True, f"network setup changed on {', '.join(sorted(changed_hosts))}")
    age = _age(previous, now)
    if age is None or age > max_age or age < dt.timedelta(0):
        return Decision(True, f"the last report is older than {max_age.days} day(s)")
    return Decision(False, f"nothing it depends on changed since {previous['generated_at']}")
