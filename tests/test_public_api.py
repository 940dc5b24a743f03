"""The public surface of mlprof, pinned, and its promise to work without torch."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import mlprof

PUBLIC = {
    "__version__", "profile", "_KinetoProfile", "schedule", "ProfilerAction", "ProfilerActivity",
    "ProfilerLevel", "ExportType", "HostSystem", "ExperimentalConfig", "tensorboard_trace_handler",
    "supported_activities", "supported_profiler_level", "supported_export_type", "mstx", "dynamic", "MlprofError",
    "parse_path", "ParseOptions", "ParseResult", "run_exports", "ExportOptions", "TableStore",
    "advise", "op_analyse", "compare", "cluster", "Thresholds", "Finding", "AdvisorReport", "Comparison",
    "ClusterReport", "log_scalar", "profile_from_config",
}


def test_public_names_are_exactly_the_documented_ones():
    assert set(mlprof.__all__) == PUBLIC
    for name in mlprof.__all__:
        assert getattr(mlprof, name) is not None
    assert set(mlprof.mstx.__all__) == {"mark", "range_start", "range_end", "range"}
    assert set(mlprof.dynamic.__all__) == {"init", "step", "start", "shutdown"}


def test_no_public_docstring_or_doc_page_mentions_the_seed_documents():
    """The seeds are the project's source documents; users meet the tools they describe by name instead."""
    import inspect
    from pathlib import Path

    texts = {}
    for name in mlprof.__all__:
        obj = getattr(mlprof, name)
        texts[name] = inspect.getdoc(obj) or ""
        members = {**vars(obj)} if inspect.isclass(obj) or inspect.ismodule(obj) else {}
        for member, value in members.items():
            if not member.startswith("_") and (inspect.isroutine(value) or isinstance(value, property)):
                texts[f"{name}.{member}"] = inspect.getdoc(value) or ""
    root = Path(__file__).resolve().parents[1]
    for page in [root / "README.md", *sorted((root / "docs").glob("*.md"))]:
        texts[page.name] = page.read_text(encoding="utf-8")
    assert len(texts) > 50
    assert not [where for where, text in texts.items() if "seed 0" in text.lower() or "seed's" in text.lower()]


def test_import_mlprof_stays_light():
    result = subprocess.run([sys.executable, "-c", "import sys, mlprof; print(sorted(m for m in ('torch', 'duckdb', "
                             "'numpy', 'msgspec') if m in sys.modules))"], capture_output=True, text=True, timeout=60)
    assert result.stdout.strip() == "[]", result.stderr


def test_supported_queries():
    assert mlprof.ProfilerActivity.CPU in mlprof.supported_activities()
    assert [lvl.name for lvl in mlprof.supported_profiler_level()] == ["Level_none", "Level0", "Level1", "Level2"]
    assert [t.name for t in mlprof.supported_export_type()] == ["Text", "Db"]


BLOCK_TORCH = "import sys; sys.modules['torch'] = None\n"


def run_without_torch(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", BLOCK_TORCH + textwrap.dedent(code)],
                          capture_output=True, text=True, timeout=120)


def test_import_and_configuration_work_without_torch():
    result = run_without_torch(
        """
        import mlprof
        cfg = mlprof.ExperimentalConfig(profiler_level="Level1", export_type=["text", "db"], gc_detect_threshold=1)
        assert cfg.to_dict()["export_type"] == ["Text", "Db"]
        assert [s.name for s in map(mlprof.schedule(wait=1, active=1), range(3))] == ["NONE", "RECORD_AND_SAVE", "NONE"]
        mlprof.mstx.mark("fine without torch")
        with mlprof.mstx.range("fine"):
            pass
        assert mlprof.supported_activities() == [mlprof.ProfilerActivity.CPU]
        print("ok")
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"
    assert "torch" not in result.stderr


def test_building_a_profiler_without_torch_says_what_is_missing():
    result = run_without_torch(
        """
        import mlprof
        try:
            mlprof.profile()
        except mlprof.MlprofError as exc:
            print(exc)
        """
    )
    assert result.returncode == 0, result.stderr
    assert "needs torch" in result.stdout and "pip install torch==" in result.stdout


def test_import_mlprof_never_imports_the_trainer_libraries():
    result = subprocess.run([sys.executable, "-c", "import sys, mlprof, mlprof.integrations, "
                             "mlprof.collect.training_config\n"
                             "print(sorted(m for m in ('torch', 'transformers', 'lightning', 'pytorch_lightning', "
                             "'accelerate', 'yaml') if m in sys.modules))"],
                            capture_output=True, text=True, timeout=60)
    assert result.stdout.strip() == "[]", result.stderr


def test_an_integration_without_its_library_says_what_to_install():
    for module, library in (("transformers", "transformers"), ("lightning", "lightning")):
        result = subprocess.run([sys.executable, "-c", textwrap.dedent(f"""
            import sys; sys.modules[{library!r}] = None
            import mlprof
            try:
                import mlprof.integrations.{module}
            except ImportError as exc:
                print(isinstance(exc, mlprof.MlprofError), exc)
            """)], capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stderr
        assert result.stdout.startswith("True ") and f"pip install {library}" in result.stdout


def test_configs_and_scalars_work_without_torch():
    result = run_without_torch(
        """
        import mlprof
        from mlprof.collect.training_config import load_profile_config
        cfg = load_profile_config({"profile": True, "profile_start_step": 3, "profile_stop_step": 4,
                                   "init_start_profile": False})
        assert cfg.options.active == 2
        mlprof.log_scalar("loss", 1.0)
        print("ok")
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"
