"""Writing a rendering (relative path -> text) to a directory, shared by the renderers."""

from __future__ import annotations

from pathlib import Path


def write_tree(files: dict[str, str], directory: Path, prune: str = "*") -> list[Path]:
    """Write the files under `directory`, removing files matching `prune` of an earlier
    rendering that this one no longer has (a removed node), so the directory is exactly this
    rendering. Unchanged files are not rewritten; emptied folders are removed."""
    directory.mkdir(parents=True, exist_ok=True)
    for old in sorted(p for p in directory.rglob(prune) if p.is_file()):
        if str(old.relative_to(directory)) not in files:
            old.unlink()
    written = []
    for rel, text in files.items():
        path = directory / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
        written.append(path)
    for folder in sorted((p for p in directory.rglob("*") if p.is_dir()), reverse=True):
        if not any(folder.iterdir()):
            folder.rmdir()
    return written
