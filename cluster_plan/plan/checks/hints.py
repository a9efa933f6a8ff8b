"""Hints shared by the checks: "did you mean" and the unknown-reference finding."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Any

from cluster_plan.plan.findings import Finding


def did_you_mean(name: str, known: Iterable[Any]) -> str | None:
    names = [str(k) for k in known]
    close = difflib.get_close_matches(str(name), names, n=1)
    if close:
        return f"did you mean {close[0]!r}?"
    return "known: " + ", ".join(names) if names else None


def missing(kind: str, name: str, known: Iterable[Any], path: tuple[Any, ...]) -> Finding:
    return Finding(
        "unknown-reference", f"{kind} {name!r} is not defined", path, hint=did_you_mean(name, known)
    )
