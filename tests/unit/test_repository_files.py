"""What a test reads from the repository is in the repository: no file under tests/ is one git ignores.

A vendored documentation tree holds its build beside its sources (``site/``, ``_build/``), names a project's own
ignore rules often cover: the tree's test passed where the files lay on disk and failed on a clean checkout, whose
copy lacked the ignored half. Checked where the files are (a working tree with git), so it fails on the machine
that has them, before the commit that leaves them out."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from conftest import REPO


def test_no_file_a_test_reads_is_ignored_by_git() -> None:
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("not a git working tree")
    ignored = subprocess.run(
        ["git", "status", "--short", "--ignored", "--porcelain", "--", "tests/data", "tests/*.py", "seeds"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    shown = [line[3:] for line in ignored if line.startswith("!!") and "__pycache__" not in line]
    assert shown == [], f"git ignores files the tests read (a clean checkout lacks them): {shown}; fix .gitignore"
