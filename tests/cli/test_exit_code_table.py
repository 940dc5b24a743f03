"""docs/cli.md's exit-code table and the codes the CLI returns are one list (issue 30, item 12)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import mlprof
from mlprof.cli import exit_codes, main as cli_main
from shared_data import REPO_ROOT


def _documented() -> set[int]:
    text = (REPO_ROOT / "docs" / "cli.md").read_text()
    table = text[text.index("## Errors and exit codes"):]
    return {int(m.group(1)) for m in re.finditer(r"^\| (\d+) \|", table, re.M)}


def test_every_exit_code_is_documented_and_every_documented_one_exists():
    defined = {getattr(exit_codes, name) for name in exit_codes.__all__ if name.startswith("EXIT_")
               and name != "EXIT_CODES"}
    assert defined == _documented()


def test_exit_codes_are_defined_only_in_exit_codes():
    # compare's 9 and 10 were its own constants, outside the table the documentation test reads.
    src = Path(mlprof.__file__).parent
    elsewhere = sorted(f"{f.relative_to(src)}: {t.id}" for f in src.rglob("*.py") if f.name != "exit_codes.py"
                       for node in ast.walk(ast.parse(f.read_text())) if isinstance(node, ast.Assign)
                       for t in node.targets if isinstance(t, ast.Name) and t.id.startswith("EXIT_"))
    assert elsewhere == []


def test_an_interrupt_while_the_commands_are_loaded_is_exit_130_and_one_line(monkeypatch, capsys):
    """Ctrl-C while the command line is built (its modules imported: a second on a slow start)."""
    def interrupted():
        raise KeyboardInterrupt

    monkeypatch.setattr(cli_main, "build_parser", interrupted)
    assert cli_main.main(["parse", "x"]) == exit_codes.EXIT_INTERRUPTED == 130
    err = capsys.readouterr().err
    assert err == "mlprof: interrupted\n"


def test_an_unreachable_dask_scheduler_is_one_line_and_exit_other(shared_traces):
    """Run in parallel with other tests (not among the quiet cluster runs): it waits out Dask's 10 s connect
    timeout and judges no timing."""
    import subprocess
    import sys

    import pytest

    pytest.importorskip("distributed")
    res = subprocess.run([sys.executable, "-m", "mlprof", "cluster", str(shared_traces / "cpu_only"), "--scheduler",
                          "tcp://127.0.0.1:9"], capture_output=True, text=True, timeout=120)
    assert res.returncode == exit_codes.EXIT_OTHER
    assert res.stderr.count("\n") == 1 and "Traceback" not in res.stderr and "cannot connect" in res.stderr
