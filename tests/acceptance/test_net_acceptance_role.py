"""roles/net_acceptance: the role's command line is one the acceptance CLI accepts (its specs,
README and lint are checked for every role by tests/roles/test_role_quality.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from cluster_plan.cli import main

ROLE = Path(__file__).resolve().parents[2] / "roles" / "net_acceptance"


def test_role_options_parse(tmp_path: Path) -> None:
    # the options the role's run.yml passes, in the form it passes them (--name=value)
    tasks = (ROLE / "tasks/run.yml").read_text()
    for option in ("--transport=", "--ssh-user=", "--ssh-args=", "--ssh-key=", "--duration=",
                   "--probes=", "--nodes=", "--output-dir=", "--when=", "--max-age-days=",
                   "--changed-hosts="):  # fmt: skip
        assert option in tasks
    code = main(["acceptance", "p.yml", "--expanded", str(tmp_path / "none.json"),
                 "--transport=ssh", "--ssh-user=root", "--ssh-args=-o 'ProxyCommand=nc %h %p'",
                 "--ssh-key=/k", "--duration=2", "--probes=300", "--nodes=a,b",
                 f"--output-dir={tmp_path}"])  # fmt: skip
    assert code == 2  # got as far as reading the (missing) expanded plan


def _acceptance_when(playbook: str) -> str:
    """net_acceptance_when as Ansible resolves it for the play that runs the role, when
    `playbook` is what ansible-playbook is given (role defaults and play vars included)."""
    import collection_loader  # noqa: F401  (the roles name modules by FQCN)
    from ansible import context
    from ansible.inventory.manager import InventoryManager
    from ansible.module_utils.common.collections import ImmutableDict
    from ansible.parsing.dataloader import DataLoader
    from ansible.playbook import Playbook
    from ansible.vars.manager import VariableManager

    context.CLIARGS = ImmutableDict(tags=[], skip_tags=[])
    loader = DataLoader()
    inventory = InventoryManager(loader=loader, sources=["localhost,"])
    variables = VariableManager(loader=loader, inventory=inventory)
    book = Playbook.load(str(ROLE.parents[1] / playbook), variable_manager=variables, loader=loader)
    (play,) = [p for p in book.get_plays() if "net_acceptance" in _roles_run(p)]
    resolved = variables.get_vars(play=play, host=inventory.get_host("localhost"))
    # the play includes the role from a task, so its defaults apply only when it runs: a value
    # the play (or the import of it) does not set is the role's default
    default = yaml.safe_load((ROLE / "defaults/main.yml").read_text())["net_acceptance_when"]
    return str(resolved.get("net_acceptance_when", default))


def _roles_run(play: Any) -> set[str]:
    """The roles a play runs: its roles: list and every include_role/import_role in its tasks,
    blocks, rescues and always sections included."""
    names = {role.get_name() for role in play.roles}
    pending = list(play.tasks)
    while pending:
        item = pending.pop()
        if hasattr(item, "block"):  # a Block: walk its three sections
            pending += [*item.block, *item.rescue, *item.always]
        elif item.action in {"include_role", "import_role", "ansible.builtin.include_role",
                             "ansible.builtin.import_role"}:  # fmt: skip
            names.add(item.args.get("name") or getattr(item, "_role_name", ""))
    return names


def test_only_the_site_re_run_is_gated() -> None:
    """The acceptance playbook run on its own always measures (a degrading cable is no plan
    change); site.yml, the whole build, measures again only when something changed."""
    assert _acceptance_when("playbooks/acceptance.yml") == "always"
    assert _acceptance_when("playbooks/site.yml") == "changed"
    assert _acceptance_when("site.yml") == "changed"
