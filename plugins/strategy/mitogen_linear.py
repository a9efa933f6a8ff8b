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

Where Mitogen cannot be imported (not installed, or refused by a newer ansible-core), the
plugin is Ansible's own linear strategy and says so once: the run goes on, slower. The
session lab's check-mode run uses Ansible's linear strategy on every stage, so the roles stay
proven without Mitogen.

ansible-core 2.19 prints a deprecation warning for any strategy outside ansible.builtin: it
gives them no compatibility guarantee. The fallback above is this project's answer to that.
So this module drops exactly that one message, and shows it at -vvv instead. Every other
deprecation still prints, and if ansible-core rewords the message, it prints again.
"""

from __future__ import annotations

import functools
import pkgutil
from importlib import import_module
from typing import Any

from ansible.plugins.loader import filter_loader, lookup_loader
from ansible.utils.display import Display

try:
    from ansible_mitogen.plugins.strategy.mitogen_linear import StrategyModule as Base

    WHY_NOT_MITOGEN = ""
except Exception as error:  # not installed, or this ansible-core refused by Mitogen
    from ansible.plugins.strategy.linear import StrategyModule as Base

    WHY_NOT_MITOGEN = f"{type(error).__name__}: {error}"

__all__ = ["StrategyModule"]

COLLECTION = "cluster_plan.cluster"
THIRD_PARTY_STRATEGY = "Use of strategy plugins not included in ansible.builtin are deprecated"
_display = Display()


def _without_the_strategy_notice(deprecated: Any) -> Any:
    @functools.wraps(deprecated)
    def wrapper(self: Display, msg: str, *args: Any, **kwargs: Any) -> None:
        if isinstance(msg, str) and msg.startswith(THIRD_PARTY_STRATEGY):
            self.vvv(f"{COLLECTION}: ansible-core says: {msg}")
            return
        deprecated(self, msg, *args, **kwargs)

    wrapper.cluster_plan_filtered = True  # type: ignore[attr-defined]
    return wrapper


if not getattr(Display.deprecated, "cluster_plan_filtered", False):  # loaded once per process
    Display.deprecated = _without_the_strategy_notice(Display.deprecated)  # type: ignore[method-assign]


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


@functools.cache  # once per controller process
def say_why_not_mitogen() -> None:
    if WHY_NOT_MITOGEN:
        _display.warning(
            f"{COLLECTION}: Mitogen is not usable here ({WHY_NOT_MITOGEN}); this run uses "
            "Ansible's own linear strategy, slower (docs/scale.md)"
        )


class StrategyModule(Base):  # type: ignore[misc]
    def run(self, iterator: Any, play_context: Any) -> Any:
        say_why_not_mitogen()
        load_collection_jinja_plugins()
        return super().run(iterator, play_context)
