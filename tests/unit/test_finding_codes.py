"""The catalogue of finding codes (cluster_plan.plan.finding_codes): every code the package can
emit is in it, found by reading the package's source, and every entry is one the package
emits; each has a line and a heading of the docs that exists; docs/FINDINGS.md is generated
from it. And the one severity scale of the JSON envelope."""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path

import pytest

from cluster_plan import reference_docs
from cluster_plan.plan.finding_codes import CODES
from cluster_plan.plan.findings import SEVERITIES, SEVERITY_WORDS, envelope_finding
from cluster_plan.plan.validate import validate_file

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "cluster_plan"


def _str_annotation(annotation: ast.expr | None) -> bool:
    return annotation is not None and ast.unparse(annotation) in ("str", "str | None")


def _code_parameter(fn: ast.FunctionDef) -> tuple[int | None, ast.expr | None] | None:
    """Where a function takes a finding code (a parameter `code: str`; not an exit code):
    its position among the arguments a caller passes (self left out), and its default."""
    params = fn.args.posonlyargs + fn.args.args
    bound = 1 if params and params[0].arg in ("self", "cls") else 0
    defaults = [None] * (len(params) - len(fn.args.defaults)) + list(fn.args.defaults)
    for i, param in enumerate(params):
        if param.arg == "code" and _str_annotation(param.annotation):
            return i - bound, defaults[i]
    for param, default in zip(fn.args.kwonlyargs, fn.args.kw_defaults, strict=True):
        if param.arg == "code" and _str_annotation(param.annotation):
            return None, default
    return None


def _classes(trees: dict[Path, ast.Module], found: dict[str, str]) -> dict[str, int | None]:
    """Classes that carry a code (a field or an __init__ parameter `code: str`): the code's
    position among their constructor's arguments."""
    takers: dict[str, int | None] = {}
    for path, tree in trees.items():
        for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
            fields = [s for s in cls.body if isinstance(s, ast.AnnAssign)]
            for i, field in enumerate(fields):
                if ast.unparse(field.target) == "code" and _str_annotation(field.annotation):
                    takers[cls.name] = i
            for init in (s for s in cls.body if isinstance(s, ast.FunctionDef)):
                taken = _code_parameter(init) if init.name == "__init__" else None
                if taken is not None:
                    takers[cls.name] = taken[0]
                    _literal(taken[1], found, f"{path}:{init.lineno}")
    return takers


def _literal(node: ast.expr | None, found: dict[str, str], where: str) -> bool:
    """Record a code written as a literal; False when it is not one."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        found.setdefault(node.value, where)
        return True
    return False


def _functions(
    tree: ast.Module, path: Path, found: dict[str, str]
) -> dict[ast.FunctionDef, int | None]:
    """The module's functions that take a code, with its position (their defaults recorded)."""
    taking = {}
    for fn in (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)):
        taken = _code_parameter(fn)
        if taken is not None:
            taking[fn] = taken[0]
            _literal(taken[1], found, f"{path}:{fn.lineno}")
    return taking


def _passed(call: ast.Call, takers: dict[str, int | None]) -> list[ast.expr]:
    """The codes a call hands over: a `code=` keyword, or its argument at the taker's place."""
    func = call.func
    name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
    codes = [k.value for k in call.keywords if k.arg == "code"]
    position = takers.get(name)
    if position is not None and position < len(call.args):
        codes.append(call.args[position])
    return codes


def _passed_on(code: ast.expr, call: ast.Call, taking: Iterable[ast.FunctionDef]) -> bool:
    """Another finding's or error's code (`x.code`), or a code parameter handed on (whose
    callers are read)."""
    if isinstance(code, ast.Attribute):
        return code.attr == "code"
    return (
        isinstance(code, ast.Name)
        and code.id == "code"
        and any(call in ast.walk(fn) for fn in taking)
    )


def emitted_codes(package: Path = PACKAGE) -> tuple[dict[str, str], list[str]]:
    """Every finding code written in the package's source -> where; and every place a code is
    passed that is neither a literal nor another code passed on (the scan cannot read it).
    The catalogue itself is left out."""
    trees = {
        p: ast.parse(p.read_text())
        for p in sorted(package.rglob("*.py"))
        if p.name != "finding_codes.py"
    }
    found: dict[str, str] = {}
    classes = _classes(trees, found)
    unread: list[str] = []
    for path, tree in trees.items():
        where = path.relative_to(package.parent)
        taking = _functions(tree, where, found)
        takers = {**classes, **{fn.name: position for fn, position in taking.items()}}
        for node in ast.walk(tree):
            if isinstance(node, ast.Dict):
                for key, value in zip(node.keys, node.values, strict=True):
                    if isinstance(key, ast.Constant) and key.value == "code":
                        _literal(value, found, f"{where}:{node.lineno}")
            elif isinstance(node, ast.Call):
                for code in _passed(node, takers):
                    if not _literal(code, found, f"{where}:{node.lineno}") and not _passed_on(
                        code, node, taking
                    ):
                        unread.append(f"{where}:{node.lineno}: {ast.unparse(code)}")
    return found, unread


def test_every_code_the_package_emits_is_in_the_catalogue_and_no_other() -> None:
    found, unread = emitted_codes()
    assert unread == [], "write these codes as literals, so that the catalogue can be checked"
    missing = {code: where for code, where in found.items() if code not in CODES}
    assert missing == {}, "add these codes to cluster_plan/plan/finding_codes.py"
    assert set(CODES) - set(found) == set(), "the package emits these codes no longer"


def test_the_scan_reads_codes_through_every_way_they_are_passed(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text(
        "from dataclasses import dataclass\n"
        "from typing import NamedTuple\n"
        "class Finding:\n    code: str\n    message: str\n"
        "class Err(Exception):\n    def __init__(self, path: str, code: str = 'dflt'):\n"
        "        self.code = code\n"
        "class Row(NamedTuple):\n    key: str\n    code: str\n"
        "def _fail(file: str, code: str) -> Finding:\n    return Finding(code, 'm')\n"
        "def _exit(code: int) -> int:\n    return code\n"
        "def f(e: Err, rows: list[Row]):\n"
        "    Finding('lit', 'm'); Finding(code='kw', message='m'); _fail('f', 'passed')\n"
        "    Err('p', 'by-init'); Row('k', 'by-field'); _fail('f', e.code); _exit(3)\n"
        "    {'code': 'in-dict'}\n"
        "    for row in rows:\n        Finding(row.code, 'm')\n"
        "    code = 'hidden'\n    return Finding(code, 'm')\n"
    )
    found, unread = emitted_codes(tmp_path)
    assert set(found) == {"lit", "kw", "passed", "dflt", "by-init", "by-field", "in-dict"}
    assert len(unread) == 1 and unread[0].endswith(": code")


def test_the_scan_sees_every_code_the_plan_corpus_gives() -> None:
    """The corpus of plans (good, bad, every section, the examples) through validate: no code
    that comes out is one the scan missed."""
    found, _ = emitted_codes()
    given = set()
    for plan in sorted((ROOT / "tests" / "plans").rglob("*.yml")) + sorted(
        (ROOT / "inventory").rglob("*.yml")
    ):
        given |= {f.code for f in validate_file(str(plan)).findings}
    assert len(given) > 100 and given <= set(found), given - set(found)


def test_each_entry_says_what_it_means_and_where_it_is_explained() -> None:
    for code, entry in CODES.items():
        assert entry.code == code
        assert entry.line and "\n" not in entry.line and len(entry.line) <= 90, code
        assert reference_docs.doc_link(entry.doc), code  # the page has the heading


def test_the_catalogue_page_is_generated_and_current() -> None:
    page = (ROOT / "docs" / "FINDINGS.md").read_text()
    assert page == reference_docs.findings_page()
    assert all(f'<a id="{code}"></a>`{code}`' in page for code in CODES)


def test_a_link_to_a_heading_that_is_gone_is_refused(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "x.md").write_text("# X\n\n## A heading\n")
    assert reference_docs.doc_link("docs/x.md#a-heading", tmp_path).endswith("(x.md#a-heading)")
    with pytest.raises(ValueError, match="no heading"):
        reference_docs.doc_link("docs/x.md#gone", tmp_path)


def test_one_severity_scale_in_the_envelope() -> None:
    fault = {"severity": "fault", "kind": "bandwidth", "message": "slow"}
    assert envelope_finding(fault) == {**fault, "severity": "error", "report_severity": "fault"}
    assert envelope_finding({"severity": "warning", "message": "x"}) == {
        "severity": "warning",
        "message": "x",
    }
    assert set(SEVERITY_WORDS.values()) <= set(SEVERITIES) == {"error", "warning"}
