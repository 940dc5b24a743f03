"""The option model: one field list from which every surface is derived (issue 18)."""

from __future__ import annotations

import argparse
import logging
import re
from dataclasses import fields
from pathlib import Path

import pytest

import mlprof
from mlprof.collect.dynamic_config import DynamicConfig, template
from mlprof.collect.run_options import RunOptions
from mlprof.settings.profiler_config import CollectOptions
from mlprof.settings.options import DYNAMIC, EXPERIMENTAL, PROFILE, RUN, markdown_table, options_for

DOCS = Path(__file__).resolve().parents[1] / "docs"


def _run_help() -> str:
    parser = argparse.ArgumentParser(prog="mlprof run")
    RunOptions.add_arguments(parser)
    return parser.format_help()


def _generated(doc: str, surface: str) -> str:
    text = (DOCS / doc).read_text(encoding="utf-8")
    match = re.search(rf"<!-- options:{surface} [^>]*-->\n(.*?)\n<!-- /options:{surface} -->", text, re.S)
    assert match, f"{doc} has no generated {surface} option table"
    return match.group(1)


def test_every_run_option_is_a_flag_in_mlprof_run_help():
    help_text = " ".join(_run_help().split())
    for opt in options_for(RUN):
        assert opt.flag() in help_text
        assert " ".join(opt.help.split()) in help_text


def test_every_dynamic_option_is_in_the_config_template():
    data = template()
    assert {o.key(DYNAMIC) for o in options_for(DYNAMIC)} == set(data) - {"experimental_config"}
    assert list(data["experimental_config"]) == [o.name for o in options_for(EXPERIMENTAL)]


@pytest.mark.parametrize(("doc", "surface"), [("run.md", RUN), ("collection.md", EXPERIMENTAL)])
def test_docs_option_tables_are_the_generated_ones(doc, surface):
    assert _generated(doc, surface) == markdown_table(surface)


def test_every_dynamic_key_is_in_the_dynamic_docs():
    text = (DOCS / "dynamic.md").read_text(encoding="utf-8")
    for opt in options_for(DYNAMIC):
        assert f"`{opt.key(DYNAMIC)}`" in text


def test_the_dataclasses_have_exactly_the_model_fields():
    assert [f.name for f in fields(RunOptions)] == [o.key(RUN) for o in options_for(RUN)]
    assert [f.name for f in fields(mlprof.ExperimentalConfig)] == [o.name for o in options_for(EXPERIMENTAL)]
    assert [f.name for f in fields(CollectOptions)][:-1] == [o.name for o in options_for(PROFILE)]
    assert {f.name for f in fields(DynamicConfig)} - {"experimental_config"} == {
        o.key(DYNAMIC) for o in options_for(DYNAMIC)}


@pytest.mark.parametrize("build", [
    lambda v: mlprof.ExperimentalConfig(mstx=v),
    lambda v: CollectOptions(record_shapes=v),
    lambda v: RunOptions(with_stack=v),
    lambda v: DynamicConfig(analyse=v),
])
def test_one_boolean_rule_everywhere(build):
    with pytest.raises(mlprof.MlprofError, match="expected true or false, got 'yes'"):
        build("yes")


@pytest.mark.parametrize("value", [-1, float("nan"), float("inf"), True, "1"])
def test_one_gc_detect_threshold_rule_everywhere(value):
    for build in (lambda: mlprof.ExperimentalConfig(gc_detect_threshold=value),
                  lambda: RunOptions(gc_detect_threshold=value),
                  lambda: DynamicConfig(experimental_config={"gc_detect_threshold": value})):
        with pytest.raises(mlprof.MlprofError, match="gc_detect_threshold: expected milliseconds >= 0 or None"):
            build()


def test_export_types_are_read_in_any_spelling():
    for spelling in ("text", "Text", "TEXT", mlprof.ExportType.Text, "ExportType.Text"):
        assert mlprof.ExperimentalConfig(export_type=spelling).export_type == (mlprof.ExportType.Text,)
        assert RunOptions(export_type=(spelling,)).export_type == ("text",)
    with pytest.raises(mlprof.MlprofError, match="export_type"):
        RunOptions(export_type=("csv",))


def test_run_options_reach_the_profiler_through_one_builder():
    opts = RunOptions(level="Level1", host_sys_freq=20, record_shapes=True, gc_detect_threshold=None)
    collect = opts.collect_options(host_sys=("cpu",))
    exp = collect.experimental_config
    assert (collect.record_shapes, exp.profiler_level, exp.host_sys_freq, exp.gc_detect_threshold) == (
        True, mlprof.ProfilerLevel.Level1, 20, None)
    assert exp.host_sys == (mlprof.HostSystem.CPU,)
    assert exp.python_sampling and exp.record_modules  # mlprof run's defaults


def test_dynamic_config_reaches_the_profiler_through_the_same_options():
    collect = DynamicConfig(with_flops=True, experimental_config={"profiler_level": "Level2"}).collect_options()
    assert collect.with_flops and collect.profiler_level is mlprof.ProfilerLevel.Level2
    assert collect.experimental_config.gc_detect_threshold == 1.0


def test_data_simplification_is_accepted_ignored_and_said_so(caplog):
    with caplog.at_level(logging.INFO, logger="mlprof"):
        cfg = mlprof.ExperimentalConfig(data_simplification=False)
    assert "data_simplification" not in cfg.to_dict()
    assert "ignored" in caplog.text
    assert DynamicConfig(experimental_config={"data_simplification": True}).experimental() == \
        DynamicConfig().experimental()
    with pytest.raises(mlprof.MlprofError, match="unknown key"):
        RunOptions.from_json('{"data_simplification": true}')


def test_host_sys_freq_is_an_api_option_too():
    assert mlprof.ExperimentalConfig(host_sys_freq=5).host_sys_freq == 5
    with pytest.raises(mlprof.MlprofError, match="host_sys_freq: expected 1-50 Hz"):
        mlprof.ExperimentalConfig(host_sys_freq=100)


def test_export_types_are_one_list_for_every_surface():
    """`mlprof run`, `parse` and `export` offer the option table's export types, and only settings/options.py
    spells them (export/options.py, the parse pipeline and two hand-written flags each had their own copy), as a
    list or as one type tested by its literal."""
    import ast

    from mlprof.cli.main import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    offered = {name: a.item_choices for name, p in sub.choices.items() for a in p._actions
               if "--export-type" in a.option_strings}
    assert offered == dict.fromkeys(("run", "parse", "export"), tuple(t.value for t in mlprof.ExportType))
    src = Path(mlprof.__file__).parent
    spelled = src / "settings" / "options.py"
    trees = {f.relative_to(src).as_posix(): ast.parse(f.read_text()) for f in src.rglob("*.py") if f != spelled}
    copies = sorted(name for name, tree in trees.items() for node in ast.walk(tree)
                    if isinstance(node, (ast.Tuple, ast.Set, ast.List))
                    and {getattr(e, "value", None) for e in node.elts} == {"text", "db"})
    assert copies == []
    # `"db" in options.export_types`: one type by its literal.
    tested = sorted(name for name, tree in trees.items() for node in ast.walk(tree)
                    if isinstance(node, ast.Compare) and isinstance(node.ops[0], (ast.In, ast.NotIn))
                    and isinstance(node.left, ast.Constant) and node.left.value in ("text", "db")
                    and "export_type" in ast.unparse(node.comparators[0]))
    assert tested == []
