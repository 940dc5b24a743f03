"""The command line as users meet it: --version, help on every argument, typos, list options, several paths."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from mlprof import __version__
from mlprof.cli.main import build_parser, main


def _trace(path: Path, shapes: bool) -> Path:
    """A tiny CPU trace: two ProfilerStep spans, each holding one aten::mm (with or without Input Dims)."""
    events = []
    for i, start in enumerate((0, 1000)):
        events.append({"ph": "X", "name": f"ProfilerStep#{i + 1}", "cat": "user_annotation", "ts": start,
                       "dur": 900, "pid": 1, "tid": 1})
        args = {"Input Dims": [[2, 3], [3, 4]], "Input type": ["float", "float"]} if shapes else {}
        events.append({"ph": "X", "name": "aten::mm", "cat": "cpu_op", "ts": start + 100, "dur": 500,
                       "pid": 1, "tid": 1, "args": args})
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    return path


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def test_version_is_printed(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.strip() == f"mlprof {__version__}"


def test_every_argument_and_option_has_help_text():
    missing = []
    for name, sub in _subparsers(build_parser()).items():
        for action in sub._actions:
            if not isinstance(action, argparse._HelpAction) and not (action.help or "").strip():
                missing.append(f"{name} {action.option_strings or action.dest}")
    assert not missing, missing


def test_no_help_text_mentions_the_seed_documents():
    parser = build_parser()
    texts = [parser.format_help()] + [sub.format_help() for sub in _subparsers(parser).values()]
    assert not [t for t in texts if "seed" in t.lower()]


def test_ui_help_shows_logdir_as_required(capsys):
    with pytest.raises(SystemExit):
        main(["ui", "--help"])
    usage = capsys.readouterr().out.split("\n\n")[0]
    assert "mlprof ui --logdir DIR" in usage and "[--logdir" not in usage


def test_a_typo_shows_the_subcommand_usage_and_the_closest_option(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["parse", "x.json", "--outptu", "y"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: mlprof parse") and "did you mean --output?" in err


@pytest.mark.parametrize("argv, usage, guess", [
    (["op", "x.json", "--nmae", "mm"], "usage: mlprof op", "--nmae (did you mean --name?)"),  # --name then missing
    (["--verison"], "usage: mlprof [", "--verison (did you mean --version?)"),  # COMMAND then missing
    (["prase", "x.json"], "usage: mlprof [", "invalid choice: 'prase'"),
    (["parse", "x.json", "--summary-format", "jsno"], "usage: mlprof parse", "'jsno'"),
])
def test_a_typo_that_argparse_reports_otherwise_still_gets_a_guess(capsys, argv, usage, guess):
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(usage) and guess in err and "did you mean" in err, err


def test_a_missing_option_without_a_clear_typo_is_reported_as_missing(capsys):
    with pytest.raises(SystemExit):
        main(["--json"])
    assert "required: COMMAND" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["--export-type", "text,db"], ["--export-type", "text", "--export-type", "db"]])
@pytest.mark.parametrize("command", ["parse", "export", "run"])
def test_list_options_accept_a_comma_list_or_repeats(command, argv):
    args = build_parser().parse_args([command, *argv, "p"] if command != "run" else [command, *argv, "--", "p"])
    assert list(args.export_type) == ["text", "db"]


@pytest.mark.parametrize("argv", [["--threshold", "a=0.2,b=0.1"], ["--threshold", "a=0.2", "--threshold", "b=0.1"]])
@pytest.mark.parametrize("command", ["advise", "cluster"])
def test_thresholds_are_a_list_option_like_the_others(command, argv):
    assert build_parser().parse_args([command, *argv, "p"]).threshold == ["a=0.2", "b=0.1"]


def test_a_bad_item_of_a_list_option_is_refused(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["parse", "x", "--export-type", "text,sql"])
    assert exit_.value.code == 2 and "'sql'" in capsys.readouterr().err


def test_parse_takes_several_paths_and_speaks_plainly(tmp_path, capsys):
    a, b = _trace(tmp_path / "a.json", shapes=True), _trace(tmp_path / "b.json", shapes=False)
    assert main(["parse", str(a), str(b), "--tables-only", "--no-progress"]) == 0
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if line.startswith(str(tmp_path))]
    assert len(lines) == 2, out
    assert all("2 steps" in line and "window" not in line for line in lines), out
    assert "not modelled" not in out


def test_parse_lists_events_it_does_not_model_only_with_verbose(tmp_path, capsys):
    trace = tmp_path / "odd.json"
    events = [{"ph": "X", "name": "ProfilerStep#1", "cat": "user_annotation", "ts": 0, "dur": 900, "pid": 1, "tid": 1},
              {"ph": "X", "name": "odd", "cat": "strange_cat", "ts": 100, "dur": 5, "pid": 1, "tid": 1}]
    trace.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    assert main(["parse", str(trace), "--tables-only", "--no-progress"]) == 0
    assert "not modelled" not in capsys.readouterr().out
    assert main(["parse", str(trace), "--tables-only", "--no-progress", "--verbose"]) == 0
    assert "not modelled (counted): X/strange_cat x1" in capsys.readouterr().out


def test_op_says_when_shapes_were_not_recorded_and_fails_on_an_unknown_op(tmp_path, capsys):
    bare = _trace(tmp_path / "bare.json", shapes=False)
    assert main(["op", str(bare), "--name", "mm", "--no-progress"]) == 0
    captured = capsys.readouterr()
    assert "--level Level1" in captured.err and "record_shapes" in captured.err
    assert main(["op", str(bare), "--name", "no_such_op", "--no-progress"]) == 2
    assert "no op named 'no_such_op'" in capsys.readouterr().err
    shaped = _trace(tmp_path / "shaped.json", shapes=True)
    assert main(["op", str(shaped), "--name", "aten::mm", "--json", "--no-progress"]) == 0
    captured = capsys.readouterr()
    assert "Level1" not in captured.err
    assert json.loads(captured.out)["aten::mm"][0]["occurrences"] == 2
