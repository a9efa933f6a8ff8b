"""A finding about a live host (drift, backups): on which host, which check, what the plan
(or the last converge) expects and what the host has. Printed as
`host: check subject: expected X, found Y`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cluster_plan.plan.findings import Severity


@dataclass(frozen=True)
class HostFinding:
    host: str
    check: str  # hostname, link, mtu, address, default-route, service, file, package-hold, ...
    subject: str  # what was checked: a network, a unit, a path, a package, a table
    expected: str
    found: str
    severity: Severity = "error"

    def render(self) -> str:
        what = f"{self.check} {self.subject}" if self.subject else self.check
        return f"{self.host}: {what}: expected {self.expected}, found {self.found}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "severity": self.severity,
            "host": self.host,
            "check": self.check,
            "subject": self.subject,
            "expected": self.expected,
            "found": self.found,
            "message": self.render(),
        }


def sort_key(finding: HostFinding) -> tuple[str, str, str]:
    return (finding.host, finding.check, finding.subject)
