"""The lock file beside a plan: where it lives, reading it, writing it atomically."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cluster_plan.plan.lockfile import lock_path_for, read_lock, render_lock, write_lock

LOCK = {
    "version": 1,
    "networks": {"mgmt": {"cidr": "10.0.0.0/24", "hosts": {"a01": "10.0.0.1"}, "released": {}}},
}


@pytest.mark.parametrize(
    ("plan", "lock"),
    [
        ("inventory/lab/cluster.yml", "inventory/lab/cluster.lock.json"),
        ("site.yaml", "site.lock.json"),
        ("/abs/dir/my.plan.yml", "/abs/dir/my.plan.lock.json"),
    ],
)
def test_lock_path_for(plan, lock):
    assert lock_path_for(plan) == Path(lock)


def test_write_then_read(tmp_path):
    path = tmp_path / "p.lock.json"
    write_lock(path, LOCK)
    assert read_lock(path) == (LOCK, None)
    assert json.loads(path.read_text()) == LOCK
    assert path.read_text() == render_lock(LOCK)
    assert render_lock(LOCK).endswith("}\n")  # one trailing newline, diff-friendly
    assert [p.name for p in tmp_path.iterdir()] == ["p.lock.json"]  # no temp file left


def test_write_replaces_and_leaves_nothing_behind_on_failure(tmp_path):
    path = tmp_path / "p.lock.json"
    write_lock(path, LOCK)
    with pytest.raises(TypeError):
        write_lock(path, {"networks": {object(): 1}})  # not serialisable
    assert read_lock(path) == (LOCK, None)  # the old lock is intact
    assert [p.name for p in tmp_path.iterdir()] == ["p.lock.json"]


@pytest.mark.parametrize(
    ("content", "code"),
    [
        (None, "lock-missing"),
        (b"", "lock-unreadable"),
        (b"{", "lock-unreadable"),
        (b"[1, 2]", "lock-unreadable"),
        (b'{"networks": {"mgmt": {"hosts": "a01"}}}', "lock-unreadable"),
        (b"\xff\xfe", "lock-unreadable"),
        # wrong types inside: refused whole, so `lock` never rewrites it and renumbers hosts
        (b'{"networks": {"mgmt": {"hosts": {}, "released": []}}}', "lock-unreadable"),
        (b'{"networks": {"mgmt": {"hosts": {}, "released": "x"}}}', "lock-unreadable"),
        (b'{"networks": {"mgmt": {"hosts": {"a01": 5}}}}', "lock-unreadable"),
        (b'{"networks": {"mgmt": {"hosts": {"a01": null}}}}', "lock-unreadable"),
        (b'{"networks": {"mgmt": {"cidr": 24, "hosts": {}}}}', "lock-unreadable"),
    ],
)
def test_read_problems(tmp_path, content, code):
    path = tmp_path / "p.lock.json"
    if content is not None:
        path.write_bytes(content)
    lock, finding = read_lock(path)
    assert lock is None
    assert finding is not None
    assert (finding.code, finding.file, finding.severity) == (code, str(path), "error")
    assert finding.hint is None or "cluster-plan lock" in finding.hint
