"""Writing a rendering (relative path -> text) to a folder, shared by the renderers
(`monitoring render -o DIR`, `k8s render -o DIR`).

The folder holds a manifest of what the command wrote there (MANIFEST: the command, the plan,
each file's SHA-256). A new rendering removes only files the manifest lists, and only while
they are as written; a file edited since, or anything the manifest does not list, stops the
command before it writes or removes anything, with the paths named. A folder with no manifest
must be empty (or missing): a git checkout, a plan's own folder or a hand-written manifest are
never written over. The manifest is rewritten before the files change (listing both
renderings' hashes) and after, so a run killed half-way leaves a folder the next run still
recognises as its own. Each file is replaced through a temporary file and one rename.
"""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cluster_plan.output_files import OutputError, existing, finite_json, write_atomic
from cluster_plan.plan.input_files import InputError, read_json

MANIFEST = ".cluster-plan-files.json"
MANIFEST_VERSION = 1
MAX_MANIFEST_BYTES = 64 * 1024 * 1024
SHOWN = 5  # paths named in a refusal; the rest are counted


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass
class _Survey:
    """What the folder holds, against what the command wrote there and will write now."""

    foreign: list[str] = field(default_factory=list)  # not listed in the manifest
    edited: list[str] = field(default_factory=list)  # listed, changed since it was written
    current: dict[str, str] = field(default_factory=dict)  # listed and as written: its hash


def _read_manifest(directory: Path, command: str) -> dict[str, list[str]] | None:
    """{relative path: hashes it may have} of the folder's manifest; None when there is none."""
    path = directory / MANIFEST
    if existing(path) is None:
        return None
    try:
        data = read_json(path, MAX_MANIFEST_BYTES, "a cluster-plan manifest", follow=False)
    except InputError as exc:
        raise OutputError(directory, f"its manifest cannot be read: {exc}") from None
    files = data.get("files") if isinstance(data, dict) else None
    if (
        not isinstance(data, dict)
        or data.get("version") != MANIFEST_VERSION
        or not isinstance(files, dict)
        or not all(
            isinstance(h, list) and all(isinstance(x, str) for x in h) for h in files.values()
        )
    ):
        raise OutputError(path, "not a manifest this cluster-plan wrote; the folder is left as is")
    if data.get("command") != command:
        raise OutputError(
            directory,
            f"written by `cluster-plan {data.get('command')}`, not `cluster-plan {command}`; "
            "choose another folder",
        )
    return {str(rel): list(hashes) for rel, hashes in files.items()}


def _ancestors(paths: Any) -> set[str]:
    """Every folder (relative) that holds one of the paths."""
    return {str(parent) for p in paths for parent in Path(p).parents if str(parent) != "."}


def _survey(directory: Path, owned: dict[str, list[str]], files: dict[str, str]) -> _Survey:
    """Walk the folder without following links; sort each entry into foreign, edited or ours.
    A folder that holds none of our paths is foreign as a whole (not descended into)."""
    survey = _Survey()
    folders = _ancestors(owned) | _ancestors(files)
    stack = [""]
    while stack:
        rel_dir = stack.pop()
        with os.scandir(directory / rel_dir) as entries:
            for entry in sorted(entries, key=lambda e: e.name):
                rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
                mode = entry.stat(follow_symlinks=False).st_mode
                if rel == MANIFEST:
                    continue
                if stat.S_ISDIR(mode) and rel in folders:
                    stack.append(rel)
                elif rel not in owned:
                    survey.foreign.append(rel + ("/" if stat.S_ISDIR(mode) else ""))
                else:
                    _judge_owned(directory, rel, mode, owned[rel], files.get(rel), survey)
    return survey


def _judge_owned(
    directory: Path, rel: str, mode: int, hashes: list[str], new: str | None, survey: _Survey
) -> None:
    """A path the manifest lists: as written (or already what is to be written), or edited."""
    if not stat.S_ISREG(mode):
        survey.edited.append(rel)
        return
    now = digest((directory / rel).read_bytes())
    if now in hashes or (new is not None and now == digest(new.encode())):
        survey.current[rel] = now
    else:
        survey.edited.append(rel)


def _listed(paths: list[str]) -> str:
    more = f" and {len(paths) - SHOWN} more" if len(paths) > SHOWN else ""
    return ", ".join(paths[:SHOWN]) + more


def _refuse(directory: Path, command: str, survey: _Survey, has_manifest: bool) -> None:
    if survey.edited:
        raise OutputError(
            directory,
            f"changed since `cluster-plan {command}` wrote it: {_listed(survey.edited)}; "
            "nothing was written (move the edits elsewhere, or remove the files, and run again)",
        )
    if survey.foreign:
        what = (
            "holds files this command did not write"
            if has_manifest
            else f"not empty, and not a folder `cluster-plan {command}` wrote"
        )
        raise OutputError(
            directory,
            f"{what} ({_listed(survey.foreign)}); nothing was written or removed (choose an "
            "empty or new folder, or move those files away)",
        )


def _prepare(directory: Path) -> None:
    found = existing(directory)
    if found is None:
        directory.mkdir(parents=True)
    elif stat.S_ISLNK(found.st_mode):
        raise OutputError(directory, "a symbolic link; give the folder it points to")
    elif not stat.S_ISDIR(found.st_mode):
        raise OutputError(directory, "not a folder")


def _write_manifest(directory: Path, command: str, plan: str, files: dict[str, list[str]]) -> None:
    document = {"version": MANIFEST_VERSION, "command": command, "plan": plan,
                "files": dict(sorted(files.items()))}  # fmt: skip
    text = finite_json(document, str(directory / MANIFEST), indent=1) + "\n"
    write_atomic(directory / MANIFEST, text)


def write_tree(files: dict[str, str], directory: Path, command: str, plan: str) -> list[Path]:
    """Write the rendering under `directory`, removing the files of an earlier rendering by
    the same command that this one no longer has, so the folder is exactly this rendering
    (and its manifest). OutputError, with nothing changed, when the folder holds anything
    else. Unchanged files are not rewritten; folders emptied by a removal are removed."""
    _prepare(directory)
    owned = _read_manifest(directory, command)
    survey = _survey(directory, owned or {}, files)
    _refuse(directory, command, survey, owned is not None)
    new = {rel: digest(text.encode()) for rel, text in files.items()}
    both = {rel: sorted({*(owned or {}).get(rel, []), *([new[rel]] if rel in new else [])})
            for rel in {*(owned or {}), *new}}  # fmt: skip
    _write_manifest(directory, command, plan, both)
    written = []
    for rel, text in files.items():
        path = directory / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if survey.current.get(rel) != new[rel]:
            write_atomic(path, text)
        written.append(path)
    for rel in sorted(set(survey.current) - set(files)):
        (directory / rel).unlink()
        _remove_empty_parents(directory, Path(rel).parent)
    _write_manifest(directory, command, plan, {rel: [h] for rel, h in new.items()})
    return written


def _remove_empty_parents(directory: Path, rel: Path) -> None:
    """The folders a removal emptied, up to (not including) `directory`."""
    while str(rel) != ".":
        try:
            (directory / rel).rmdir()
        except OSError:  # not empty
            return
        rel = rel.parent
