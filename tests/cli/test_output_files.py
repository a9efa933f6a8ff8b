"""Commands that write one file (`graph -o`, `capacity --html`) replace only a file they wrote
before (their generator mark, or an earlier version's page), never a user's file, and never
write through a symbolic link or into a FIFO. The file is replaced in one rename."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cluster_plan.cli.app import main

ROOT = Path(__file__).resolve().parents[2]
LAB = ROOT / "inventory" / "lab" / "cluster.yml"

# command -> argv before the output path
WRITERS = {
    "graph": ["graph", str(LAB), "-o"],
    "capacity": ["capacity", str(LAB), "--html"],
}
# what an earlier version wrote, without the generator mark
LEGACY = {
    "graph": '<svg xmlns="http://www.w3.org/2000/svg"><title>lab: network topology</title></svg>',
    "capacity": "<!DOCTYPE html>\n<html><head><title>lab: capacity</title></head></html>",
}


@pytest.mark.parametrize("command", WRITERS)
def test_a_users_file_is_refused_and_kept(command, tmp_path, capsys):
    mine = tmp_path / "notes.md"
    mine.write_text("# my notes\n")
    assert main([*WRITERS[command], str(mine)]) == 2
    err = capsys.readouterr().err
    assert f"{mine}: a file that `cluster-plan {command}` did not write; left as it is" in err
    assert "Traceback" not in err
    assert mine.read_text() == "# my notes\n"


@pytest.mark.parametrize("command", WRITERS)
def test_its_own_earlier_output_is_replaced(command, tmp_path):
    out = tmp_path / "out"
    assert main([*WRITERS[command], str(out)]) == 0
    first = out.read_text()
    out.write_text(LEGACY[command])  # an earlier version's output is recognised too
    inode = out.stat().st_ino
    assert main([*WRITERS[command], str(out)]) == 0
    assert out.read_text() == first
    assert out.stat().st_ino != inode  # a new file renamed over the old one
    assert sorted(os.listdir(tmp_path)) == ["out"]  # no temporary left behind


@pytest.mark.parametrize("command", WRITERS)
def test_a_link_is_not_written_through(command, tmp_path, capsys):
    target = tmp_path / "precious.txt"
    target.write_text("precious\n")
    link = tmp_path / "out"
    link.symlink_to(target)
    assert main([*WRITERS[command], str(link)]) == 2
    assert "a symbolic link" in capsys.readouterr().err
    assert target.read_text() == "precious\n" and link.is_symlink()


@pytest.mark.parametrize("command", WRITERS)
def test_a_fifo_is_refused_not_waited_on(command, tmp_path, capsys):
    fifo = tmp_path / "out"
    os.mkfifo(fifo)  # opening it to write would wait for a reader for ever
    assert main([*WRITERS[command], str(fifo)]) == 2
    assert "a FIFO" in capsys.readouterr().err


@pytest.mark.parametrize("command", WRITERS)
def test_a_missing_folder_is_named_as_the_file_asked_for(command, tmp_path, capsys):
    out = tmp_path / "no-such-folder" / "out"
    assert main([*WRITERS[command], str(out)]) == 2
    err = capsys.readouterr().err
    assert f"{out}: cannot write it: No such file or directory" in err
