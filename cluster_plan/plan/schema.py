"""JSON Schema validation of a plan, turned into located findings with hints."""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Callable
from functools import cache
from importlib import resources
from typing import Any, NamedTuple

import jsonschema
from jsonschema.exceptions import ValidationError

from cluster_plan.plan.findings import Finding, JsonPath
from cluster_plan.plan.load import PlanDocument


@cache
def _schema_text() -> str:
    # data/cluster-plan.schema.json links to schemas/, so checkouts and wheels both find it
    return resources.files("cluster_plan").joinpath("data/cluster-plan.schema.json").read_text()


def plan_schema() -> dict[str, Any]:
    """The plan's JSON Schema, a fresh copy for each caller: some tools rewrite a schema in
    place (hypothesis-jsonschema canonicalises it), which must not change what validate sees."""
    schema: dict[str, Any] = json.loads(_schema_text())
    return schema


@cache
def grammar(name: str) -> tuple[re.Pattern[str], int | None, str]:
    """A string grammar of the plan (a $defs entry: path, url, user_name, ...): its pattern,
    its longest length, and what it is in words; stated once, in the schema, for validate's
    checks and for the roles' second check where a value is written."""
    definition = plan_schema()["$defs"][name]
    what = definition.get("title") or definition.get("description", name)
    return re.compile(definition["pattern"]), definition.get("maxLength"), what


@cache
def _validator() -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(plan_schema())


def _subschema_properties(error: ValidationError) -> list[str]:
    props = error.schema.get("properties", {}) if isinstance(error.schema, dict) else {}
    return list(props)


def _leaf_errors(error: ValidationError) -> list[ValidationError]:
    """For oneOf/anyOf, report the branch that got furthest instead of 'not valid under any'."""
    if error.validator in ("oneOf", "anyOf") and error.context:
        deepest = max(len(e.absolute_path) for e in error.context)
        if deepest > len(error.absolute_path):
            return [e for e in error.context if len(e.absolute_path) == deepest]
    return [error]


# Options of Ansible's constructed inventory, allowed at the top level because the plan is
# also the inventory source; they are Jinja2 maps, so "did you mean" offers one only for a
# near miss of its own name (grups -> groups), never for an unrelated key.
_CONSTRUCTED = (
    "compose",
    "groups",
    "keyed_groups",
    "strict",
    "leading_separator",
    "use_extra_vars",
)
_CONSTRUCTED_CUTOFF = 0.85


class Described(NamedTuple):
    """A schema error as a finding: its code, message, hint, path, and whether it points at a
    key rather than a value."""

    code: str
    message: str
    hint: str | None
    path: JsonPath
    at_key: bool


def _unknown_key(key: str, known: list[str], path: JsonPath) -> Described:
    plan_keys = [k for k in known if path or k not in _CONSTRUCTED]
    close = difflib.get_close_matches(key, known, n=len(known), cutoff=0.6)
    close = [
        k
        for k in close
        if k in plan_keys or difflib.SequenceMatcher(None, key, k).ratio() >= _CONSTRUCTED_CUTOFF
    ]
    if close:
        hint: str | None = f"did you mean {close[0]!r}?"
    elif not path:
        hint = (
            "allowed keys: " + ", ".join(plan_keys) + "; `x-` keys (e.g. x-defaults) hold YAML "
            "anchors; Ansible's constructed options: " + ", ".join(_CONSTRUCTED)
        )
    else:
        hint = "allowed keys: " + ", ".join(known) if known else None
    return Described("unknown-key", f"unknown key {key!r}", hint, (*path, key), True)


def _describe_all(error: ValidationError) -> list[Described]:
    """As _describe, with one finding per unknown key: one typo must not hide the next."""
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        known = _subschema_properties(error)
        extra = [str(k) for k in error.instance if k not in known]
        if len(extra) > 1:
            return [_unknown_key(key, known, tuple(error.absolute_path)) for key in extra]
    return [_describe(error)]


def _describe(error: ValidationError) -> Described:
    """code, message, hint, path, and whether the finding points at a key."""
    path: JsonPath = tuple(error.absolute_path)
    if "propertyNames" in error.schema_path and isinstance(error.instance, str):
        return _bad_name(error, path)
    describe = _BY_VALIDATOR.get(str(error.validator))
    described = describe(error, path) if describe is not None else None
    return described or Described("schema", error.message, None, path, False)


def _bad_name(error: ValidationError, path: JsonPath) -> Described:
    name = str(error.instance)  # the caller saw a string
    described = error.schema.get("description") if isinstance(error.schema, dict) else None
    return Described(
        "name",
        f"{name!r} is not a valid name",
        described or "names start with a lower-case letter; then letters, digits, '-' or '_'",
        (*path, name),
        True,
    )


def _additional(error: ValidationError, path: JsonPath) -> Described | None:
    if not isinstance(error.instance, dict):
        return None
    known = _subschema_properties(error)
    extra = [k for k in error.instance if k not in known]
    return _unknown_key(str(extra[0]) if extra else "?", known, path)


def _required(error: ValidationError, path: JsonPath) -> Described:
    missing = str(error.message).split("'")[1] if "'" in error.message else error.message
    return Described("missing-key", f"required key {missing!r} is missing", None, path, False)


_PYTHON_TYPES = {
    "str": "string",
    "int": "integer",
    "float": "number",
    "dict": "mapping",
    "list": "list",
    "bool": "boolean",
    "NoneType": "nothing",
}


def _type(error: ValidationError, path: JsonPath) -> Described:
    got = type(error.instance).__name__
    got = _PYTHON_TYPES.get(got, got)
    hint = (
        'quote dates and times, e.g. "2027-01-05T02:00:00"' if got in ("datetime", "date") else None
    )
    message = f"expected {error.validator_value}, got {got} ({error.instance!r})"
    return Described("type", message, hint, path, False)


def _enum(error: ValidationError, path: JsonPath) -> Described:
    choices = [str(v) for v in error.validator_value]  # type: ignore[union-attr]
    allowed = ", ".join(choices)
    close = difflib.get_close_matches(str(error.instance), choices, n=1)
    hint = f"did you mean {close[0]!r}?" if close else f"one of: {allowed}"
    return Described("enum", f"{error.instance!r} is not one of: {allowed}", hint, path, False)


def _const(error: ValidationError, path: JsonPath) -> Described:
    return Described("value", f"must be {error.validator_value!r}", None, path, False)


def _range(error: ValidationError, path: JsonPath) -> Described:
    message = f"{error.instance!r} is out of range ({error.validator} {error.validator_value})"
    return Described("range", message, None, path, False)


def _empty(error: ValidationError, path: JsonPath) -> Described:
    return Described("empty", "must not be empty", None, path, False)


def _unique(error: ValidationError, path: JsonPath) -> Described:
    return Described("duplicate-item", "list items must be unique", None, path, False)


def _one_of(error: ValidationError, path: JsonPath) -> Described | None:
    """A value that none of the branches' types admit; None when the branches differ in
    more than type (the validator's own message then)."""
    branches: list[Any] = list(error.validator_value)  # type: ignore[arg-type]
    kinds = sorted(
        {
            _KIND_NAMES.get(str(sub.get("type")), str(sub.get("type")))
            for sub in branches
            if isinstance(sub, dict) and "type" in sub
        }
    )
    if not kinds:
        return None
    desc = error.schema.get("description") if isinstance(error.schema, dict) else None
    message = f"expected {' or '.join(kinds)}, got {_kind(error.instance)}"
    return Described("type", message, desc, path, False)


_SHOWN_CHARACTERS = 60


def _grammar(error: ValidationError) -> str:
    title = error.schema.get("title") if isinstance(error.schema, dict) else None
    return str(title) if title else "valid here"


def _grammar_finding(error: ValidationError, path: JsonPath) -> Described:
    """A string outside its grammar: the message names the grammar (a host name, an absolute
    path), the hint states it in words; a huge value is shown cut, with its length."""
    desc = error.schema.get("description") if isinstance(error.schema, dict) else None
    value = str(error.instance)
    shown = repr(value) if len(value) <= _SHOWN_CHARACTERS else repr(value[:_SHOWN_CHARACTERS])
    if len(value) > _SHOWN_CHARACTERS:
        shown += f"... ({len(value)} characters)"
    if error.validator == "maxLength":
        message = f"{shown} is too long (at most {error.validator_value} characters)"
        return Described("format", message, desc, path, False)
    return Described("format", f"{shown} is not {_grammar(error)}", desc, path, False)


_KIND_NAMES = {
    "array": "a list",
    "object": "a mapping",
    "integer": "an integer",
    "string": "a string",
    "number": "a number",
    "boolean": "true or false",
}


# How each JSON Schema keyword's failure reads; a keyword not here keeps jsonschema's message.
_BY_VALIDATOR: dict[str, Callable[[ValidationError, JsonPath], Described | None]] = {
    "additionalProperties": _additional,
    "required": _required,
    "type": _type,
    "enum": _enum,
    "const": _const,
    "minimum": _range,
    "maximum": _range,
    "exclusiveMinimum": _range,
    "exclusiveMaximum": _range,
    "pattern": _grammar_finding,
    "maxLength": _grammar_finding,
    "minProperties": _empty,
    "minItems": _empty,
    "uniqueItems": _unique,
    "oneOf": _one_of,
    "anyOf": _one_of,
}


def _kind(value: object) -> str:
    return {
        "str": "a string",
        "int": "an integer",
        "float": "a number",
        "dict": "a mapping",
        "list": "a list",
        "bool": "a boolean",
        "NoneType": "nothing",
    }.get(type(value).__name__, type(value).__name__)


def schema_findings(doc: PlanDocument) -> list[Finding]:
    findings = []
    for top in _validator().iter_errors(doc.data):
        for error in _leaf_errors(top):
            for described in _describe_all(error):
                finding = Finding(
                    described.code, described.message, described.path, hint=described.hint
                )
                findings.append(doc.place(finding, key=described.at_key))
    return findings


def secret_values(data: Any) -> set[str]:
    """The strings the plan writes into fields the schema marks writeOnly (its secrets)."""
    schema = plan_schema()
    found: set[str] = set()

    def walk(node: Any, value: Any) -> None:
        secret = False
        while isinstance(node, dict) and "$ref" in node:  # writeOnly may sit beside a $ref
            secret = secret or bool(node.get("writeOnly"))
            node = schema["$defs"][node["$ref"].rsplit("/", 1)[1]]
        if not isinstance(node, dict):
            return
        if (secret or node.get("writeOnly")) and isinstance(value, str):
            found.add(value)
        if isinstance(value, dict):
            extra = node.get("additionalProperties")
            for key, item in value.items():
                walk(node.get("properties", {}).get(key, extra), item)
        elif isinstance(value, list):
            for item in value:
                walk(node.get("items"), item)

    walk(schema, data)
    return found
