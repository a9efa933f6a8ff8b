"""Mitogen's linear strategy, found through the installed ansible_mitogen package, with this
collection's Jinja plugins loaded in the controller before the first task.

Ansible finds strategy plugins by directory. ansible.cfg names this one, so the repository
need not know where pip put ansible_mitogen (which Python, which virtual environment).
Mitogen keeps one Python interpreter per host for the whole run and sends it each task over
that channel, instead of copying and starting a new module process per task: on the lab an
unchanged site.yml re-run falls from 226 s to 121 s (docs/scale.md). `ANSIBLE_STRATEGY=linear`
runs Ansible's own strategy instead.

Ansible templates a task's arguments in a worker it forks for that task and host, and
ansible-core's Jinja2Loader, asked for any one filter of a collection, loads every filter
module of it. The controller itself rarely templates, so each worker loaded all of this
collection's filter modules again (and the cluster_plan code they import): 10.6 % of the
py-spy samples of a full site.yml re-run on the lab (docs/scale.md). Loaded once
here, before any worker forks, they are in every worker's sys.modules already.
"""

from __future__ import annotations

import functools
import pkgutil
from importlib import import_module
from typing import Any

from ansible.plugins.loader import filter_loader, lookup_loader
from ansible.utils.display import Display
from ansible_mitogen.plugins.strategy.mitogen_linear import StrategyModule as MitogenLinear

__all__ = ["StrategyModule"]

COLLECTION = "cluster_plan.cluster"
_display = Display()


@functools.cache  # once per controller process
def load_collection_jinja_plugins() -> None:
    """Every filter module of the collection (one name asked loads them all) and every
    lookup. A failure only costs the workers the time."""
    try:
        filter_loader.get(f"{COLLECTION}.grammar")
        package = import_module(f"ansible_collections.{COLLECTION}.plugins.lookup")
        for _finder, name, is_package in pkgutil.iter_modules(package.__path__):
            if not is_package:
                lookup_loader.get(f"{COLLECTION}.{name}")
    except Exception as error:  # a speed-up must never stop a run
        _display.vvv(f"{COLLECTION}: Jinja plugins not loaded ahead of the workers: {error}")


class StrategyModule(MitogenLinear):  # type: ignore[misc]
    def run(self, iterator: Any, play_context: Any) -> Any:
        load_collection_jinja_plugins()
        return super().run(iterator, play_context)
