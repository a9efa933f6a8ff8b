"""Plan text for the check tests: the findings a plan gets, and edits of a base plan."""

from __future__ import annotations

from cluster_plan.plan.validate import validate_text


def findings(text: str) -> list[tuple[str, str, str]]:
    """(severity, code, JSON path) of every finding not suppressed by the plan."""
    result = validate_text(text, "plan.yml")
    return [(f.severity, f.code, f.json_path) for f in result.findings if f.suppressed_by is None]


def replace_once(text: str, *pairs: tuple[str, str]) -> str:
    """`text` with each old string, which must occur exactly once, replaced by its new one."""
    for old, new in pairs:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    return text
