"""``mlprof run [options] -- CMD ARGS...``: profile a command without editing it."""

from __future__ import annotations

import argparse
import sys
from dataclasses import fields, replace

from pathlib import Path

from mlprof.cli.common import print_json
from mlprof.errors import MlprofError
from mlprof.export import ExportOptions
from mlprof.collect.run_options import RunOptions

__all__ = ["register", "run"]


def register(sub) -> None:
    p = sub.add_parser(
        "run", help="run a command with profiling switched on, then parse",
        description="Run CMD with profiling switched on in every Python process it starts (torchrun ranks "
                    "included), sample host resources, forward signals, return CMD's exit code, then parse "
                    "the captures. The same options work by hand as MLPROF_PROFILING_OPTIONS='{json}'.",
    )
    RunOptions.add_arguments(p)
    p.add_argument("--config", type=Path, default=None, metavar="FILE",
                   help="take the options from a training config's profile section (YAML or JSON: profile, "
                        "profile_start_step, profile_stop_step, ...; docs/integrations.md); flags given here "
                        "override it (default: none)")
    p.add_argument("--environment", default="", help='extra environment for CMD, "K=V;K2=V2" (default: none)')
    p.add_argument("--no-parse", action="store_true", help="do not parse the captures afterwards (default: parse)")
    p.add_argument("--json", action="store_true", help="print a JSON summary on stdout (default: text)")
    p.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- CMD ARGS", help="the command to profile")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from mlprof.collect.runner import parse_environment, run_command

    command = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    options = RunOptions.from_namespace(args)
    off = None
    if args.config is not None:
        options, off = _with_config(args.config, options)
    result = run_command(options, command, parse_environment(args.environment), profiling_off=off,
                         trainer_steps=args.config is not None)
    if result.profiling_off:
        print(f"mlprof run: warning: profiling was off: {result.profiling_off}", file=sys.stderr)
    parsed = [] if args.no_parse else [_parse(capture, options) for capture in result.captures]
    summary = {"exit_code": result.exit_code, "output": str(result.output),
               "captures": [str(c) for c in result.captures], "parsed": parsed,
               "host_samples": str(result.samples_file) if result.samples_file else None,
               "profiling_off": result.profiling_off, "problems": result.problems}
    if args.json:
        print_json(summary)
    else:
        for entry in parsed:
            print(f"mlprof run: parsed {entry['capture']} -> {entry['output_dir']}" if entry.get("output_dir")
                  else f"mlprof run: not parsed: {entry['error']}", file=sys.stderr)
        for problem in result.problems:
            print(f"mlprof run: warning: {problem}", file=sys.stderr)
        print(f"mlprof run: command exited with {result.exit_code}; {len(result.captures)} capture(s) in "
              f"{result.output}", file=sys.stderr)
    return result.exit_code


def _with_config(path: Path, flags: RunOptions) -> tuple[RunOptions, str | None]:
    """The config's options, with the flags that differ from their defaults on top; and why profiling is off."""
    from mlprof.collect.training_config import load_profile_config

    config = load_profile_config(path)
    defaults = RunOptions()
    given = {f.name: getattr(flags, f.name) for f in fields(RunOptions)
             if getattr(flags, f.name) != getattr(defaults, f.name)}
    options = replace(config.options, **given)
    return options, None if config.enabled else f"profile is false in {config.source}"


def _parse(capture: Path, options: RunOptions) -> dict:
    """Parse one capture and write its exports; a bad capture is reported, never fatal."""
    from mlprof.export import run_exports
    from mlprof.parse import ParseOptions, parse_path

    try:
        results = parse_path(capture, ParseOptions())
        for result in results:
            run_exports(Path(result.output_dir), ExportOptions(export_types=options.export_type))
    except (MlprofError, OSError) as exc:  # a full disk after the job: reported, the job's exit code wins
        return {"capture": str(capture), "error": str(exc)}
    return {"capture": str(capture), "output_dir": str(results[0].output_dir) if results else None}
