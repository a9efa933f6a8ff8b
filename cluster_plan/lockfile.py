"""Reading and writing the lock file that sits beside a plan."""

from __future__ import annotations

import fcntl
import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from cluster_plan.findings import Finding

# `cluster-plan lock` will not overwrite a lock it cannot read, so say how to get past it
_UNREADABLE_HINT = (
    "restore it from version control, or delete it and run `cluster-plan lock` "
    "(every host may then get a new address)"
)


def lock_path_for(plan_path: str | Path) -> Path:
    path = Path(plan_path)
    return path.with_name(f"{path.stem}.lock.json")


def read_lock(path: Path) -> tuple[dict[str, Any] | None, Finding | None]:
    """The lock, or a finding saying why there is none to use."""
    name = str(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None, Finding(
            "lock-missing",
            "the plan has no lock file",
            (),
            hint="run `cluster-plan lock PLAN` and commit the lock file",
            file=name,
        )
    except (OSError, UnicodeDecodeError) as exc:
        return None, Finding("lock-unreadable", f"cannot read the lock file: {exc}", (), file=name)
    try:
        lock = json.loads(text)
    except json.JSONDecodeError as exc:
        return None, Finding(
            "lock-unreadable",
            f"the lock file is not JSON: {exc.msg}",
            (),
            file=name,
            line=exc.lineno,
            column=exc.colno,
            hint=_UNREADABLE_HINT,
        )
    if not _lock_shaped(lock):
        return None, Finding(
            "lock-unreadable",
            "the lock file does not have the lock's shape",
            (),
            file=name,
            hint=_UNREADABLE_HINT,
        )
    return lock, None


def _lock_shaped(lock: Any) -> bool:
    """networks -> {cidr, hosts: {host: address}, released: {address: host}}, all strings:
    anything else would be half-read, and `cluster-plan lock` would renumber hosts."""
    if not isinstance(lock, dict) or not isinstance(lock.get("networks"), dict):
        return False
    for network in lock["networks"].values():
        if not isinstance(network, dict) or not isinstance(network.get("cidr", ""), str):
            return False
        for key in ("hosts", "released"):
            table = network.get(key, {})
            if not isinstance(table, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in table.items()
            ):
                return False
    return True


def render_lock(lock: dict[str, Any]) -> str:
    return json.dumps(lock, indent=2) + "\n"


def _mode_for(path: Path, plan_path: Path | None) -> int:
    """The lock is committed and read by CI accounts: keep the mode it has, else take the
    plan's (without execute bits), else what the umask gives a new file."""
    for source in (path, plan_path):
        if source is not None:
            try:
                return source.stat().st_mode & 0o666
            except OSError:
                continue
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def write_lock(path: Path, lock: dict[str, Any], plan_path: Path | None = None) -> None:
    """Write atomically, so an interrupted write (even SIGKILL) never leaves half a lock."""
    mode = _mode_for(path, plan_path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(render_lock(lock))
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def remove_stale_temporaries(path: Path) -> None:
    """Temporary files a killed writer left behind (call while holding `exclusive`)."""
    for stale in path.parent.glob(f".{path.name}.*"):
        stale.unlink(missing_ok=True)


@contextmanager
def exclusive(plan_path: str | Path) -> Iterator[None]:
    """Hold an exclusive lock on the plan file while its lock file is read and rewritten, so
    two `cluster-plan lock` runs at once take turns instead of losing one's allocation."""
    try:
        handle = open(plan_path, "rb")  # noqa: SIM115 - held for the block
    except OSError:
        yield  # nothing to lock; reading the plan will report why
        return
    with handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        yield


def _host_list(hosts: list[str]) -> str:
    return ", ".join(hosts[:5]) + (f" and {len(hosts) - 5} more" if len(hosts) > 5 else "")


def _table_differences(label: str, cur: dict[str, str], new: dict[str, str]) -> list[str]:
    missing = sorted(new.keys() - cur.keys())
    extra = sorted(cur.keys() - new.keys())
    moved = sorted(h for h in new.keys() & cur.keys() if new[h] != cur[h])
    problems = []
    for words, hosts in (
        ("has no entry for", missing),
        ("still holds", extra),
        ("holds another value for", moved),
    ):
        if hosts:
            problems.append(f"{label}: the lock {words} {_host_list(hosts)}")
    return problems


def lock_differences(current: dict[str, Any], fresh: dict[str, Any]) -> list[str]:
    """What a stale lock lacks or has too much, in words (empty when the lock is current)."""
    problems = []
    cur_nets, new_nets = current.get("networks", {}), fresh.get("networks", {})
    problems += [f"network {n} is not in the lock" for n in new_nets if n not in cur_nets]
    problems += [
        f"network {n} is in the lock but not in the plan" for n in cur_nets if n not in new_nets
    ]
    for name in new_nets:
        if name not in cur_nets:
            continue
        cur, new = cur_nets[name], new_nets[name]
        if cur.get("cidr") != new["cidr"]:
            problems.append(
                f"network {name} is {new['cidr']} in the plan, {cur.get('cidr')} in the lock"
            )
        hosts = _table_differences(f"network {name}", cur.get("hosts", {}), new["hosts"])
        problems += hosts
        if cur.get("released", {}) != new["released"] and not hosts:
            problems.append(f"network {name}: the lock's freed addresses differ")
    if "racks" in fresh:
        if "racks" not in current:
            problems.append("the lock does not record racks (a lock of version 1)")
        else:
            problems += _table_differences(
                "racks", current["racks"].get("hosts", {}), fresh["racks"]["hosts"]
            )
    return problems
