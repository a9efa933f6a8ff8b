"""Fuzzed input never breaks the pipeline: every plan the schema admits either yields findings
or is locked and expanded, and mutated YAML (flipped bytes, cuts, deep nesting, huge scalars)
yields findings; never an exception escaping to the user.

CI runs a bounded number of examples: FUZZ_SCHEMA_EXAMPLES schema-generated plans (default 5:
drawing one from the schema takes seconds, most of the property's time) and 4 x FUZZ_EXAMPLES
mutated ones (default 100). The sweep, hundreds of each, is benchmarks/bench_fuzz.py: it prints
how many plans it checked, the time it took, the outcomes and the slowest plan
(docs/reliability.md, Fuzzed input).
"""

from __future__ import annotations

import copy
import os
import random
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_jsonschema import from_schema

from cluster_plan.plan.allocate import build_lock
from cluster_plan.plan.expand import expand
from cluster_plan.plan.findings import errors
from cluster_plan.plan.schema import plan_schema
from cluster_plan.plan.validate import validate_text

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "25"))
SCHEMA_EXAMPLES = int(os.environ.get("FUZZ_SCHEMA_EXAMPLES", "5"))
PLANS = [ROOT / "inventory/lab/cluster.yml", *sorted((ROOT / "inventory/examples").glob("*.yml"))]
SEEDS = [p.read_bytes() for p in PLANS if p.stat().st_size < 20_000]


def through_the_pipeline(text: str | bytes) -> str:
    """validate, then lock and expand a plan without errors; returns what happened."""
    result = validate_text(text, "fuzz.yml")
    for finding in result.findings:
        assert finding.render(result.doc.source_lines)  # every finding can be shown
    if not result.ok:
        return "findings"
    lock, refusals, _ = build_lock(result.plan, result.nodes)
    if errors(refusals):
        return "refused"
    expanded = expand(result.plan, result.nodes, lock)
    assert set(expanded["hosts"]) == {node.name for node in result.nodes}
    return "expanded"


@settings(
    max_examples=SCHEMA_EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(plan=from_schema(copy.deepcopy(plan_schema())))  # it edits what it is given
def test_every_plan_the_schema_admits_is_checked_or_expanded(plan: dict[str, Any]) -> None:
    assert through_the_pipeline(yaml.safe_dump(plan, sort_keys=False)) in (
        "findings",
        "refused",
        "expanded",
    )


def _mutate(data: st.DataObject, seed: bytes) -> bytes:
    kind = data.draw(st.sampled_from(["flip", "cut", "splice", "nest", "huge", "tabs"]))
    rng = random.Random(data.draw(st.integers(0, 2**32)))
    raw = bytearray(seed)
    if kind == "flip":
        for _ in range(rng.randint(1, 20)):
            raw[rng.randrange(len(raw))] = rng.randrange(256)
    elif kind == "cut":
        raw = raw[: rng.randrange(len(raw))]
    elif kind == "splice":
        at, other = rng.randrange(len(raw)), rng.randrange(len(raw))
        raw[at:at] = raw[other : other + rng.randint(1, 400)]
    elif kind == "nest":
        depth = rng.choice([50, 200, 5000])
        raw += b"\nx-deep: " + b"[" * depth + b"]" * depth + b"\n"
    elif kind == "huge":
        raw += b"\nx-huge: '" + b"a" * rng.choice([10**5, 10**6, 10**7]) + b"'\n"
    else:
        raw = raw.replace(b"  ", b"\t", rng.randint(1, 50))
    return bytes(raw)


@settings(max_examples=EXAMPLES * 4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_mutated_example_plans_give_findings_never_exceptions(data: st.DataObject) -> None:
    seed = data.draw(st.sampled_from(SEEDS))
    assert through_the_pipeline(_mutate(data, seed)) in ("findings", "refused", "expanded")
