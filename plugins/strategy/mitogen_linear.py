"""Mitogen's linear strategy, found through the installed ansible_mitogen package.

Ansible finds strategy plugins by directory. ansible.cfg names this one, so the repository
need not know where pip put ansible_mitogen (which Python, which virtual environment).
Mitogen keeps one Python interpreter per host for the whole run and sends it each task over
that channel, instead of copying and starting a new module process per task: on the lab an
unchanged site.yml re-run falls from 226 s to 121 s (docs/scale.md). `ANSIBLE_STRATEGY=linear`
runs Ansible's own strategy instead.
"""

from ansible_mitogen.plugins.strategy.mitogen_linear import StrategyModule

__all__ = ["StrategyModule"]
