"""Op and call names are matched in one place (mlprof.tables.names): no other module spells a pattern for
collectives (and their kinds: allreduce, reduce_scatter, ...), data loading, the optimizer, backward nodes, kernel launches, synchronising calls,
step spans (ProfilerStep#N) or module frames (nn.Module:).

Five spellings of "host communication op" had drifted apart (an ``hccl:`` op was communication for the
cluster analysis and not for the phases); this scan keeps a sixth from appearing. It reads the string
constants that code matches names with: arguments of startswith/endswith/removeprefix/re.compile/match/search, operands
of ``in``/``==``, SQL text with LIKE / regexp_matches / IN (...), and regex alternations."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import mlprof

SRC = Path(mlprof.__file__).parent

NAME_WORDS = re.compile(r"ProfilerStep#|nn\.Module:|"
                        r"DataLoader|gloo|nccl|hccl|c10d|record_param_comms|Optimizer\.|evaluate_function|"
                        r"Synchronize|LaunchKernel|cuLaunch|hipLaunch|"
                        # collective kinds (tables.names.collective_kind): three spellings had drifted apart
                        r"all_?\??reduce|all_?\??gather|reduce_?\??scatter|all_?\??to_?\??all", re.I)
# The one definition; the collector (hooks on torch's own classes and modules, environment variable
# prefixes); the Ascend readers, whose "HCCL" is a process name and table of the vendor's file format.
ALLOWED = ("tables/names.py", "collect/", "parse/ascend")
_SQL = re.compile(r"LIKE\s+'|regexp_matches|\bIN\s*\(", re.I)


def _matching_constants(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            called = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
            if called in ("startswith", "endswith", "removeprefix", "removesuffix", "compile", "match", "search",
                          "fullmatch"):
                for arg in node.args:
                    yield from (c for c in ast.walk(arg) if isinstance(c, ast.Constant))
        elif isinstance(node, ast.Compare) and any(isinstance(o, (ast.In, ast.NotIn, ast.Eq, ast.NotEq))
                                                   for o in node.ops):
            yield from (c for c in (node.left, *node.comparators) if isinstance(c, ast.Constant))
        elif isinstance(node, ast.JoinedStr):
            if _SQL.search("".join(v.value for v in node.values if isinstance(v, ast.Constant))):
                yield from (v for v in node.values if isinstance(v, ast.Constant))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and (
                _SQL.search(node.value) or "|" in node.value):
            yield node


def name_patterns_outside_names_module(src: Path) -> list[str]:
    found = []
    for f in sorted(src.rglob("*.py")):
        rel = f.relative_to(src).as_posix()
        if rel.startswith(ALLOWED):
            continue
        for c in _matching_constants(ast.parse(f.read_text())):
            if isinstance(c.value, str) and NAME_WORDS.search(c.value):
                found.append(f"{rel}:{c.lineno}: {c.value.strip()[:80]!r}")
    return sorted(set(found))


def test_names_of_ops_and_calls_are_matched_only_in_tables_names():
    assert name_patterns_outside_names_module(SRC) == []


def test_the_scan_finds_a_pattern_spelled_again(tmp_path):
    # The forms the drifted copies had: a regex, a SQL LIKE, a startswith and a substring test.
    (tmp_path / "rules.py").write_text(
        'import re\nA = re.compile(r"^(gloo|nccl):")\nB = "name LIKE \'enumerate(DataLoader)%\'"\n'
        'def f(name, t):\n    return name.startswith("Optimizer.") or "cudaDeviceSynchronize" in name\n')
    assert [line.split(":")[1] for line in name_patterns_outside_names_module(tmp_path)] == ["2", "3", "5", "5"]
