"""roles/net_acceptance: the role's command line is one the acceptance CLI accepts (its specs,
README and lint are checked for every role by tests/roles/test_role_quality.py)."""

from __future__ import annotations

from pathlib import Path

from cluster_plan.cli import main

ROLE = Path(__file__).resolve().parents[2] / "roles" / "net_acceptance"


def test_role_options_parse(tmp_path: Path) -> None:
    # the options the role's run.yml passes, in the form it passes them (--name=value)
    tasks = (ROLE / "tasks/run.yml").read_text()
    for option in ("--transport=", "--ssh-user=", "--ssh-args=", "--ssh-key=", "--duration=",
                   "--probes=", "--nodes=", "--output-dir="):  # fmt: skip
        assert option in tasks
    code = main(["acceptance", "p.yml", "--expanded", str(tmp_path / "none.json"),
                 "--transport=ssh", "--ssh-user=root", "--ssh-args=-o 'ProxyCommand=nc %h %p'",
                 "--ssh-key=/k", "--duration=2", "--probes=300", "--nodes=a,b",
                 f"--output-dir={tmp_path}"])  # fmt: skip
    assert code == 2  # got as far as reading the (missing) expanded plan
