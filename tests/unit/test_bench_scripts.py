"""bench/ stays a small set of scripts, one per concept (issue 51: it had grown to 27 entry scripts and 30 one-off
experiments). A new measurement of a concept is a subcommand of its script; a one-off experiment is a page in
docs/decisions/, not a script. Each script is listed in bench/README.md, with each of its subcommands."""

from __future__ import annotations

import ast
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"

#: The most entry scripts bench/ may hold (modules named ``_*.py`` are helpers, not entry scripts).
MAX_ENTRY_SCRIPTS = 16


def _entry_scripts() -> list[Path]:
    return sorted(path for path in BENCH.glob("*.py") if not path.name.startswith("_"))


def _subcommands(path: Path) -> list[str]:
    """The keys of a script's ``COMMANDS`` table (``_subcommands.run``'s), if it has one."""
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "COMMANDS" for t in node.targets):
            assert isinstance(node.value, ast.Dict)
            return [key.value for key in node.value.keys if isinstance(key, ast.Constant)]
    return []


def test_bench_holds_at_most_the_cap_of_entry_scripts() -> None:
    scripts = [path.name for path in _entry_scripts()]
    assert len(scripts) <= MAX_ENTRY_SCRIPTS, (
        f"bench/ holds {len(scripts)} entry scripts (at most {MAX_ENTRY_SCRIPTS}): make the new measurement a "
        f"subcommand of the script of its concept, or a page in docs/decisions/: {scripts}"
    )


def test_no_experiments_folder_of_scripts() -> None:
    assert not list(BENCH.glob("experiments/*.py")), "a one-off experiment is a page in docs/decisions/, not a script"


def test_every_script_and_subcommand_is_in_the_readme() -> None:
    readme = (BENCH / "README.md").read_text(encoding="utf-8")
    missing = [path.name for path in _entry_scripts() if f"`{path.name}`" not in readme]
    missing += [
        f"{path.name} {name}"
        for path in _entry_scripts()
        for name in _subcommands(path)
        if f"`{name}`" not in readme and f"{path.name} {name}" not in readme
    ]
    assert not missing, f"bench/README.md does not list: {missing}"
