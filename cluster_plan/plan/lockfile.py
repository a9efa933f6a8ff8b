"""Reading and writing the lock file that sits beside a plan."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from cluster_plan.plan.findings import Finding
from cluster_plan.plan.input_files import InputError, open_regular, read_json

# Version 3 records the plan the lock belongs to ("plan"); 2 added racks. Older locks are
# read as they are and upgraded by the next `cluster-plan lock`; a newer one is refused.
LOCK_VERSION = 3
MAX_LOCK_BYTES = 64 * 1024 * 1024  # a 20,000-host lock is a few MB
_TEMP_SUFFIX = ".cluster-plan-tmp"  # the one temporary name `lock` ever writes or removes

# `cluster-plan lock` will not overwrite a lock it cannot read, so say how to get past it
_UNREADABLE_HINT = (
    "restore it from version control, or delete it and run `cluster-plan lock` "
    "(every host may then get a new address)"
)


def lock_path_for(plan_path: str | Path) -> Path:
    path = Path(plan_path)
    return path.with_name(f"{path.stem}.lock.json")


def _unreadable(name: str, exc: InputError) -> Finding:
    if exc.code == "file-not-found":
        return Finding(
            "lock-missing",
            "the plan has no lock file",
            (),
            hint="run `cluster-plan lock PLAN` and commit the lock file",
            file=name,
        )
    return Finding(
        "lock-unreadable",
        f"cannot read the lock file: {exc.problem}",
        (),
        file=name,
        line=exc.line,
        column=exc.column,
        hint=_UNREADABLE_HINT,
    )


def read_lock(path: Path) -> tuple[dict[str, Any] | None, Finding | None]:
    """The lock, or a finding saying why there is none to use."""
    name = str(path)
    try:
        lock = read_json(path, MAX_LOCK_BYTES, "a JSON lock file")
    except InputError as exc:
        return None, _unreadable(name, exc)
    problem = lock_shape_problem(lock)
    if problem is not None:
        return None, Finding(
            "lock-unreadable",
            f"the lock file does not have the lock's shape: {problem}",
            (),
            file=name,
            hint=_UNREADABLE_HINT,
        )
    if lock.get("version", 1) > LOCK_VERSION:
        return None, Finding(
            "lock-too-new",
            f"the lock file is version {lock['version']}; this cluster-plan knows versions "
            f"up to {LOCK_VERSION}",
            (),
            file=name,
            hint="a newer cluster-plan wrote it: upgrade cluster-plan (this one would drop "
            "what it does not know)",
        )
    return lock, None


def _string_table(table: Any) -> bool:
    return isinstance(table, dict) and all(
        isinstance(k, str) and isinstance(v, str) for k, v in table.items()
    )


def _tables_problem(where: str, section: Any, required: tuple[str, ...]) -> str | None:
    """A section of {hosts: {text: text}, released: {text: text}}, or what is wrong with it."""
    if not isinstance(section, dict):
        return f"{where} is not an object"
    for key in required:
        if key not in section:
            return f"{where} has no {key!r}"
    for key in ("hosts", "released"):
        if not _string_table(section.get(key, {})):
            return f"{where}.{key} is not an object of strings"
    return None


def lock_shape_problem(lock: Any) -> str | None:
    """What makes ``lock`` not a lock, in words, or None: version (a positive integer),
    networks -> {cidr, hosts: {host: address}, released: {address: host}}, racks -> {hosts:
    {host: rack}, released: {host: rack}}, plan -> {file, cluster}. Anything else would be
    half-read, and `cluster-plan lock` would renumber hosts, so it is refused whole."""
    if not isinstance(lock, dict):
        return "it is not a JSON object"
    version = lock.get("version", 1)
    if type(version) is not int or version < 1:
        return "'version' is not a positive integer"
    if not isinstance(lock.get("networks"), dict):
        return "it has no 'networks' object"
    for name, network in lock["networks"].items():
        problem = _tables_problem(f"networks.{name}", network, ("cidr", "hosts"))
        if problem is None and not isinstance(network["cidr"], str):
            problem = f"networks.{name}.cidr is not a string"
        if problem:
            return problem
    if "racks" in lock:
        problem = _tables_problem("racks", lock["racks"], ("hosts",))
        if problem:
            return problem
    if "plan" in lock and not _string_table(lock["plan"]):
        return "'plan' is not an object of strings"
    return None


def plan_identity(plan_path: str | Path, cluster: Any) -> dict[str, str]:
    """What a lock records of its plan: the plan file's name (c.yml and c.yaml would share
    c.lock.json) and the cluster's name (a lock copied from another cluster)."""
    return {"file": Path(plan_path).name, "cluster": str(cluster)}


def identity_problem(
    lock: dict[str, Any], lock_path: Path, plan_path: str | Path, cluster: Any
) -> Finding | None:
    """A finding when the lock was written for another plan. A plan renamed together with its
    lock keeps it (the file the lock names is gone, and the next `lock` records the new
    name); a plan beside the file the lock names does not. A lock older than version 3 names
    no plan, and is taken as this plan's."""
    recorded = lock.get("plan")
    if not recorded:
        return None
    mine = plan_identity(plan_path, cluster)
    if recorded.get("cluster", mine["cluster"]) != mine["cluster"]:
        return Finding(
            "lock-foreign",
            f"the lock file was written for cluster {recorded['cluster']!r}, and this plan is "
            f"cluster {mine['cluster']!r}",
            (),
            file=str(lock_path),
            hint="restore this plan's own lock from version control; if you renamed the "
            f'cluster on purpose, set "cluster" under "plan" in the lock to {mine["cluster"]!r}',
        )
    owner = lock_path.with_name(recorded.get("file", mine["file"]))
    if owner.name != mine["file"] and owner.exists() and not _same_file(owner, plan_path):
        return Finding(
            "lock-foreign",
            f"the lock file belongs to the plan {owner}, whose lock has the same name",
            (),
            file=str(lock_path),
            hint=f"a plan's lock is <plan name>.lock.json: rename {Path(plan_path).name} or "
            f"{owner.name} so that each plan has a lock of its own",
        )
    return None


def _same_file(a: Path, b: str | Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def render_lock(lock: dict[str, Any]) -> str:
    return json.dumps(lock, indent=2, allow_nan=False) + "\n"


def _mode_for(plan_path: Path | None) -> int:
    """A new lock is committed and read by CI accounts: it takes the plan's mode (without
    execute bits), else what the umask gives a new file."""
    if plan_path is not None:
        with contextlib.suppress(OSError):
            return plan_path.stat().st_mode & 0o666
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def _temporary_for(target: Path) -> Path:
    return target.with_name(f".{target.name}{_TEMP_SUFFIX}")


def _keep_owner(fd: int, old: os.stat_result | None) -> None:
    """The rewritten lock keeps the owner and group it had (root running `lock` in a user's
    checkout must not take the file); where that is not permitted, the writer's stay."""
    if old is not None:
        with contextlib.suppress(PermissionError):
            os.fchown(fd, old.st_uid, old.st_gid)


def write_lock(path: Path, lock: dict[str, Any], plan_path: Path | None = None) -> None:
    """Write atomically, so an interrupted write (even SIGKILL) never leaves half a lock.
    A symlinked lock is written through to its target, which keeps its owner, group and
    mode; the only other file touched is the lock's own temporary, beside the target."""
    target = Path(os.path.realpath(path))
    try:
        old: os.stat_result | None = target.stat()
    except OSError:
        old = None
    mode = stat.S_IMODE(old.st_mode) if old else _mode_for(plan_path)
    tmp = _temporary_for(target)
    tmp.unlink(missing_ok=True)  # a killed writer's: the name is this module's own
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(tmp, flags, 0o600)
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(render_lock(lock))
            handle.flush()
            _keep_owner(handle.fileno(), old)
            os.fchmod(handle.fileno(), mode)
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def remove_stale_temporaries(path: Path) -> None:
    """The temporary a killed writer left behind (call while holding `exclusive`): the lock's
    own temporary name only, never a user's file that starts like it (a swap file, a backup)."""
    _temporary_for(Path(os.path.realpath(path))).unlink(missing_ok=True)


@contextmanager
def exclusive(plan_path: str | Path) -> Iterator[None]:
    """Hold an exclusive lock on the plan file while its lock file is read and rewritten, so
    two `cluster-plan lock` runs at once take turns instead of losing one's allocation."""
    with contextlib.ExitStack() as stack:
        try:  # a FIFO given as the plan must not block here
            handle = stack.enter_context(open_regular(plan_path))
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        except InputError:
            pass  # nothing to lock; reading the plan will report why
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
