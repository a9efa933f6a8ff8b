"""Where `change` finds the stage playbooks it runs, and their order.

A checkout of this repository has them in `playbooks/` beside the package; an installed
package has none of its own, and runs those of the installed Ansible collection
`cluster_plan.cluster`, by name (`ansible-playbook cluster_plan.cluster.common`); `--playbooks
DIR` names a folder of them. The stages and their order are read from that folder's
`site.yml` (its `import_playbook` entries, followed through a site.yml that only imports), so
a stage added there is converged by `change` too.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from cluster_plan.plan.input_files import InputError, read_text

COLLECTION = ("cluster_plan", "cluster")
FQCN = ".".join(COLLECTION)
# The package's own folder in a checkout: cluster_plan/day2/change -> the repository.
CHECKOUT = Path(__file__).resolve().parents[3]
SITE_LIMIT = 1 << 20
IMPORT_KEYS = ("ansible.builtin.import_playbook", "import_playbook")


class PlaybooksError(Exception):
    """No stage playbooks to run, or a site.yml that does not say which."""


@dataclass(frozen=True)
class Playbooks:
    """The stage playbooks of one source: `folder` holds site.yml and the stages; `cwd` is
    where ansible-playbook runs (a checkout's root, for its ansible.cfg); a collection's are
    named by their full name."""

    folder: Path
    stages: tuple[str, ...]  # stage names in site.yml's order: ("common", "gpu", ...)
    cwd: Path
    collection: bool = False

    def argument(self, stage: str) -> str:
        """What ansible-playbook is given to run a stage."""
        if self.collection:
            return f"{FQCN}.{stage}"
        return str(self.folder / f"{stage}.yml")

    def describe(self) -> str:
        return f"the collection {FQCN} ({self.folder})" if self.collection else str(self.folder)


def _imports(site: Path) -> list[str]:
    """The playbooks site.yml imports, in order; PlaybooksError naming it otherwise."""
    try:
        plays = yaml.safe_load(read_text(site, SITE_LIMIT))
    except InputError as exc:
        raise PlaybooksError(str(exc)) from None
    except yaml.YAMLError as exc:
        raise PlaybooksError(f"{site}: not YAML: {exc}") from None
    if not isinstance(plays, list):
        raise PlaybooksError(f"{site}: not a playbook (a list of plays)")
    targets = []
    for number, play in enumerate(plays, 1):
        target = _import_of(play)
        if target is None:
            raise PlaybooksError(
                f"{site}: play {number} is not an import_playbook entry: `change` reads its "
                "stages from a site.yml that only imports them"
            )
        targets.append(target)
    return targets


def _import_of(play: Any) -> str | None:
    if not isinstance(play, dict):
        return None
    target = next((play[k] for k in IMPORT_KEYS if k in play), None)
    return target if isinstance(target, str) and target.strip() else None


def stages_of(site: Path, depth: int = 0) -> tuple[str, ...]:
    """The stages `site` runs, in order, as names relative to its folder without `.yml`. An
    imported site.yml that itself only imports (the root one) is followed."""
    stages: list[str] = []
    for target in _imports(site):
        path = (site.parent / target).resolve()
        if not path.is_file():
            raise PlaybooksError(f"{site}: imports {target}, which is not there")
        if path.name == "site.yml" and depth < 4:
            stages += stages_of(path, depth + 1)
            continue
        if path.parent != site.parent.resolve() or path.suffix != ".yml":
            raise PlaybooksError(
                f"{site}: imports {target}: a stage is a .yml file beside site.yml"
            )
        stages.append(path.stem)
    if not stages:
        raise PlaybooksError(f"{site}: imports no stage")
    return tuple(stages)


def _from_folder(folder: Path, cwd: Path, collection: bool = False) -> Playbooks:
    return Playbooks(folder, stages_of(folder / "site.yml"), cwd, collection)


def _checkout(root: Path) -> Playbooks | None:
    """The repository around the package, when it is one (a pip install has none)."""
    if (root / "galaxy.yml").is_file() and (root / "playbooks" / "site.yml").is_file():
        return _from_folder(root / "playbooks", root)
    return None


def collection_paths() -> list[Path]:
    """Where Ansible looks for collections: its configured paths (ansible.cfg of the
    current folder, ANSIBLE_COLLECTIONS_PATH), then Python's import path."""
    from ansible import constants

    configured = [Path(p).expanduser() for p in constants.COLLECTIONS_PATHS]
    return configured + [Path(p) for p in sys.path if p]


def _installed(paths: list[Path]) -> Playbooks | None:
    for base in paths:
        # a collections path holds ansible_collections/; one may also name that folder itself
        for folder in (
            base.joinpath("ansible_collections", *COLLECTION, "playbooks"),
            base.joinpath(*COLLECTION, "playbooks"),
        ):
            if folder.joinpath("site.yml").is_file():
                return _from_folder(folder, Path.cwd(), collection=True)
    return None


def locate(explicit: Path | None, root: Path = CHECKOUT) -> Playbooks:
    """The stage playbooks: `--playbooks DIR`, else the checkout the package runs from, else
    the installed collection; PlaybooksError saying where it looked."""
    if explicit is not None:
        if not (explicit / "site.yml").is_file():
            raise PlaybooksError(
                f"{explicit}: no site.yml: --playbooks names the folder of the stage "
                "playbooks (a checkout's playbooks/, or the collection's)"
            )
        above = explicit.resolve().parent
        return _from_folder(explicit, above if (above / "ansible.cfg").is_file() else Path.cwd())
    found = _checkout(root) or _installed(collection_paths())
    if found is None:
        raise PlaybooksError(
            f"no stage playbooks: the package is not in a checkout of cluster-plan and the "
            f"collection {FQCN} is not installed where Ansible looks "
            f"({os.pathsep.join(str(p) for p in collection_paths()[:3])}, ...): install it "
            "(`ansible-galaxy collection install`, README.md) or pass --playbooks DIR"
        )
    return found
