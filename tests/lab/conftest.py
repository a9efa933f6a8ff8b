"""Lab fixtures: the session-wide `lab` lives in support.lab_session so that any
test directory can use it (see that module)."""

from support.lab_session import lab

__all__ = ["lab"]
