"""The rendered files of every Kubernetes plan equal the golden files in golden/<plan>/.

Regenerate after an intended change with
    UPDATE_GOLDEN=1 .venv/bin/pytest tests/kubernetes/test_k8s_golden.py
and review the diff before committing it.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
import yaml
from k8s_plans import PLANS, rendered

from cluster_plan.kubernetes import files

GOLDEN = Path(__file__).resolve().parent / "golden"
UPDATE = os.environ.get("UPDATE_GOLDEN") == "1"


@pytest.mark.parametrize("plan", sorted(PLANS))
def test_rendered_files_match_golden(plan):
    produced = files(rendered(plan))
    folder = GOLDEN / plan
    if UPDATE:
        shutil.rmtree(folder, ignore_errors=True)
        for rel, text in produced.items():
            (folder / rel).parent.mkdir(parents=True, exist_ok=True)
            (folder / rel).write_text(text)
    assert folder.is_dir(), f"no golden files for {plan}; run with UPDATE_GOLDEN=1"
    recorded = {str(p.relative_to(folder)): p.read_text() for p in folder.rglob("*.yaml")}
    assert sorted(produced) == sorted(recorded)
    for rel, text in recorded.items():
        assert produced[rel] == text, rel


def test_no_golden_folder_without_a_plan():
    assert {p.name for p in GOLDEN.iterdir()} <= set(PLANS)


@pytest.mark.parametrize("plan", sorted(PLANS))
def test_object_files_hold_one_object_per_document(plan):
    for rel, text in files(rendered(plan)).items():
        if rel.startswith("objects/"):
            docs = list(yaml.safe_load_all(text))
            assert docs and all({"apiVersion", "kind", "metadata"} <= set(d) for d in docs), rel
