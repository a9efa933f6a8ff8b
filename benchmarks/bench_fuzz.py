"""Fuzzing at length: plans generated from the JSON Schema and mutated example plans through
validate + lock + expand. Prints how many ran, plans per second, the outcome of each kind, and
the slowest plan, and the wall time with generation (the CI test, tests/unit/test_fuzz.py, runs
the same properties on a few examples: FUZZ_SCHEMA_EXAMPLES, FUZZ_EXAMPLES).

    FUZZ_EXAMPLES=500 python benchmarks/bench_fuzz.py
"""

from __future__ import annotations

import copy
import os
import sys
import time
from collections import Counter
from pathlib import Path

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_jsonschema import from_schema

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "unit"))
from test_fuzz import SEEDS, _mutate, through_the_pipeline  # noqa: E402

from cluster_plan.plan.schema import plan_schema  # noqa: E402

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "300"))


def run(label: str, strategy: st.SearchStrategy, to_text) -> None:  # type: ignore[no-untyped-def]
    outcomes: Counter[str] = Counter()
    slowest = [0.0]
    spent = [0.0]

    @settings(
        max_examples=EXAMPLES, deadline=None, database=None, suppress_health_check=list(HealthCheck)
    )
    @given(strategy)
    def once(value: object) -> None:
        text = to_text(value)
        started = time.perf_counter()
        outcomes[through_the_pipeline(text)] += 1
        elapsed = time.perf_counter() - started
        spent[0] += elapsed
        slowest[0] = max(slowest[0], elapsed)

    started = time.perf_counter()
    once()
    wall = time.perf_counter() - started
    total = sum(outcomes.values())
    print(
        f"{label}: {total} plans checked in {wall:.1f} s with generation, "
        f"{total / spent[0]:.1f} plans/s through validate+lock+expand "
        f"(generation excluded), slowest {slowest[0]:.2f} s, outcomes {dict(outcomes)}"
    )


def main() -> None:
    run(
        "schema-generated",
        from_schema(copy.deepcopy(plan_schema())),  # it edits what it is given
        lambda plan: yaml.safe_dump(plan, sort_keys=False),
    )
    run(
        "mutated examples", st.data(), lambda data: _mutate(data, data.draw(st.sampled_from(SEEDS)))
    )


if __name__ == "__main__":
    main()
