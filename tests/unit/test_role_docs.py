"""cluster_plan.ansible.role_docs: the variable table generated from a role's argument specs, a
hand-written head kept, and --check telling a stale README."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from cluster_plan.ansible import role_docs


def test_role_docs_generates_and_detects_stale(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    role = tmp_path / "demo"
    (role / "meta").mkdir(parents=True)
    spec: dict[str, Any] = {
        "argument_specs": {
            "main": {
                "short_description": "Demo role.",
                "options": {
                    "demo_port": {"type": "int", "default": 80, "description": "Port | tcp."},
                    "demo_users": {
                        "type": "list",
                        "elements": "dict",
                        "default": [],
                        "description": ["Users", "to add."],
                        "options": {
                            "name": {"type": "str", "required": True, "description": "Login."}
                        },
                    },
                },
            }
        }
    }
    (role / "meta/argument_specs.yml").write_text(yaml.safe_dump(spec))
    assert role_docs.main([str(role), "--check"]) == 1
    assert "not current" in capsys.readouterr().err
    assert role_docs.main([str(role)]) == 0
    text = (role / "README.md").read_text()
    assert "| `demo_port` | int | `80` | Port \\| tcp. |" in text
    assert "| `demo_users` | list of dict | `[]` | Users to add. |" in text
    assert "| `demo_users.name` | str | *required* | Login. |" in text
    (role / "README.md").write_text("# Demo\n\nHand-written.\n\n" + text.split("## Variables")[1])
    role_docs.main([str(role)])
    assert (role / "README.md").read_text().startswith("# Demo\n\nHand-written.")
    assert role_docs.main([str(role), "--check"]) == 0
    spec["argument_specs"]["main"]["options"]["demo_port"]["default"] = 8080
    (role / "meta/argument_specs.yml").write_text(yaml.safe_dump(spec))
    assert role_docs.stale_readmes([role]) == [role / "README.md"]
