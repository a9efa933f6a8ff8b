"""kubectl's answers about node gpu01 recorded on the bundle's kube-apiserver 1.36.3
(tests/kubernetes/fixtures/drain/), as the drain's recorded tests and the roles' replay them."""

from __future__ import annotations

import json
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[1] / "kubernetes" / "fixtures" / "drain"
PODS = (FIXTURES / "pods-gpu01.json").read_text()
AFTER = (FIXTURES / "pods-gpu01-after.json").read_text()
BUDGETS = (FIXTURES / "pdbs.json").read_text()


def recorded(name: str) -> tuple[int, str, str]:
    """A kubectl run recorded as `rc N`, `--- stdout`, its lines, `--- stderr`, its lines."""
    head, rest = (FIXTURES / name).read_text().split("\n", 1)
    out, err = rest.removeprefix("--- stdout\n").split("--- stderr\n")
    return int(head.removeprefix("rc ")), out, err


def without(text: str, *names: str) -> str:
    """A pod list with these pods gone."""
    listed = json.loads(text)
    listed["items"] = [i for i in listed["items"] if i["metadata"]["name"] not in names]
    return json.dumps(listed)
