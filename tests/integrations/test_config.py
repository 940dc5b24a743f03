"""Config-driven profiling (seed 003's profile section): the mapping, the API and `mlprof run --config`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import mlprof
from mlprof.collect.run_options import RunOptions
from mlprof.errors import ConfigError
from mlprof.collect.training_config import first_recorded_step, load_profile_config

from .conftest import captures, window_steps

TRAIN_SCRIPT = Path(__file__).parents[1] / "run" / "train_script.py"
QUIET_OPTIONS = {"host_sys": [], "python_sampling": False}


def test_the_seed_keys_map_onto_mlprofs_options():
    cfg = load_profile_config({"profile": True, "profile_start_step": 5, "profile_stop_step": 8,
                               "init_start_profile": False, "profile_communication": True, "profile_memory": True,
                               "profile_options": {"level": "Level1", "export_type": ["text", "db"]}})
    assert cfg.enabled and (cfg.start_step, cfg.stop_step) == (5, 8)
    o = cfg.options
    assert first_recorded_step(o) == 5 and (o.warmup, o.active, o.repeat) == (1, 4, 1)
    assert o.record_shapes and o.profile_memory and o.level == "Level1" and o.export_type == ("text", "db")
    assert o.output == "./output/profile/rank_{id}"


def test_the_seeds_output_path_key_names_the_output_directory():
    # Seed 003 calls it output_path (default ./output/profile/rank_{id}/profiler/).
    cfg = load_profile_config({"profile": True, "output_path": "./output/profile/rank_{id}/profiler/"})
    assert cfg.options.output == "./output/profile/rank_{id}/profiler/"


def test_defaults_follow_mindformers_off_and_from_the_start():
    cfg = load_profile_config({})
    assert not cfg.enabled
    # init_start_profile (default true) records from the start: steps 1-10, no warm-up.
    assert cfg.init_start and first_recorded_step(cfg.options) == 1 and cfg.options.active == 10
    assert cfg.options.warmup == 0


def test_init_start_profile_ignores_profile_start_step():
    cfg = load_profile_config({"profile": True, "profile_start_step": 4, "profile_stop_step": 6})
    assert cfg.start_step == 1 and first_recorded_step(cfg.options) == 1 and cfg.options.active == 6


def test_a_whole_training_config_is_read_and_only_the_profile_keys_taken(tmp_path):
    path = tmp_path / "finetune.yaml"
    path.write_text("seed: 0\nrunner_config:\n  epochs: 2\nprofile: true\nprofile_start_step: 2\n"
                    "profile_stop_step: 3\ninit_start_profile: false\n")
    cfg = load_profile_config(path)
    assert cfg.enabled and first_recorded_step(cfg.options) == 2 and cfg.options.active == 2
    as_json = tmp_path / "finetune.json"
    as_json.write_text(json.dumps({"lr": 0.1, "profile": True, "profile_stop_step": 4}))
    assert load_profile_config(as_json).options.active == 4


@pytest.mark.parametrize("section, error", [
    ({"profile_stop_setp": 3}, "unknown profile key(s) profile_stop_setp"),
    ({"profile": "yes"}, "profile: expected true or false"),
    ({"profile_start_step": 0, "init_start_profile": False}, "profile_start_step: expected an integer >= 1"),
    ({"profile_start_step": 5, "profile_stop_step": 3, "init_start_profile": False}, "before profile_start_step 5"),
    ({"profile_options": {"active": 2}}, "profile_options.active: set by profile_stop_step"),
    ({"profile_options": {"lvl": 1}}, "profile_options: unknown option(s) lvl"),
    ({"profile_options": {"level": "Level9"}}, "level: 'Level9' is not one of"),
    ({"profile_options": ["level"]}, "profile_options: expected a mapping"),
    ({"profile_output_path": "out/{host}"}, "unknown placeholder {host}"),
    ({"profile_output_path": "../elsewhere"}, "climbs out"),
    ({"output_path": "out/{host}"}, "output_path: unknown placeholder {host}"),
    ({"output_path": "a/rank_{id}", "profile_output_path": "b/rank_{id}"}, "both name the output directory"),
])
def test_a_bad_key_or_value_is_named_in_one_line(section, error):
    with pytest.raises(ConfigError) as exc:
        load_profile_config(section)
    assert error in str(exc.value) and "\n" not in str(exc.value)


def test_bad_files_are_refused_with_the_reason(tmp_path):
    broken = tmp_path / "broken.yaml"
    broken.write_text("profile: [true\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_profile_config(broken)
    with pytest.raises(ConfigError, match="no such config file"):
        load_profile_config(tmp_path / "missing.yaml")
    link = tmp_path / "link.yaml"
    link.symlink_to(broken)
    with pytest.raises(ConfigError, match="symbolic link"):
        load_profile_config(link)
    listing = tmp_path / "list.json"
    listing.write_text("[1, 2]")
    with pytest.raises(ConfigError, match="expected a mapping"):
        load_profile_config(listing)


def test_integration_keywords_become_run_options_with_start_step_counted_from_one():
    from mlprof.collect.training_config import trainer_run_options

    o = trainer_run_options("prof", start_step=5, active=3)
    assert (o.skip_first, o.warmup, o.active) == (3, 1, 3) and first_recorded_step(o) == 5
    first = trainer_run_options("prof", start_step=1, active=2)
    assert (first.skip_first, first.warmup) == (0, 0)  # no step to warm up on before step 1
    assert first_recorded_step(trainer_run_options("prof")) == first_recorded_step(RunOptions())
    with pytest.raises(ConfigError, match="start_step or skip_first"):
        trainer_run_options("prof", start_step=3, skip_first=1)


def test_profile_from_config_numbers_steps_from_one_and_writes_per_rank(tmp_path, monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.setenv("RANK", "3")
    model = torch.nn.Linear(8, 8)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    config = {"profile": True, "profile_start_step": 3, "profile_stop_step": 4, "init_start_profile": False,
              "profile_output_path": str(tmp_path / "output/profile/rank_{id}"),
              "profile_options": {**QUIET_OPTIONS, "level": "Level_none"}}
    with mlprof.profile_from_config(config) as prof:
        for _ in range(6):
            loss = model(torch.randn(4, 8)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            mlprof.log_scalar("loss", loss)
            prof.step()
    (capture,) = captures(tmp_path / "output" / "profile" / "rank_3")
    assert window_steps(capture) == [[3, 4]]
    rows = [json.loads(p.read_text())["rows"] for p in sorted((capture / "scalars").glob("segment_*.json"))]
    assert [r[1] for seg in rows for r in seg] == [1, 2, 3, 4, 5, 6]  # each loss at the step it was logged in


def test_profile_false_gives_a_profiler_that_does_nothing(tmp_path):
    prof = mlprof.profile_from_config({"profile": False, "profile_output_path": str(tmp_path / "p")})
    with prof:
        prof.step()
    assert not prof.enabled and prof.capture_dir is None and not (tmp_path / "p").exists()


@pytest.fixture
def private_locks(tmp_path, monkeypatch):
    monkeypatch.setenv("MLPROF_LOCK_DIR", str(tmp_path / "locks"))


def _run(*args: str, timeout: int = 300, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mlprof", "run", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd)


@pytest.mark.slow
@pytest.mark.long  # 23 s; the per-rank layout is test_profile_from_config_numbers_steps_from_one_and_writes_per_rank's (2026-11-29)
def test_mlprof_run_with_a_config_profiles_its_steps_into_the_rank_layout(tmp_path, private_locks):
    pytest.importorskip("torch")
    config = tmp_path / "train.yaml"
    config.write_text(f"""
optimizer: sgd
profile: true
profile_start_step: 4
profile_stop_step: 5
init_start_profile: false
profile_output_path: {tmp_path}/output/profile/rank_{{id}}
profile_options: {{python_sampling: false, host_sys: []}}
""")
    result = _run("--config", str(config), "--", sys.executable, str(TRAIN_SCRIPT), "8")
    assert result.returncode == 0, result.stderr
    (capture,) = captures(tmp_path / "output" / "profile" / "rank_0")
    # The config's steps, counted as a trainer counts them (the first optimizer step is step 1).
    assert window_steps(capture) == [[4, 5]]
    assert (capture / "mlprof_output" / "step_trace_time.csv").is_file()


@pytest.mark.slow
@pytest.mark.long  # a third real run of the config; the layout test stays
def test_mlprof_run_with_a_config_writes_where_the_seeds_output_path_says(tmp_path, private_locks):
    pytest.importorskip("torch")
    config = tmp_path / "train.yaml"
    config.write_text(f"""
profile: true
profile_start_step: 3
profile_stop_step: 3
init_start_profile: false
output_path: {tmp_path}/output/profile/rank_{{id}}/profiler/
profile_options: {{python_sampling: false, host_sys: []}}
""")
    result = _run("--config", str(config), "--no-parse", "--", sys.executable, str(TRAIN_SCRIPT), "5", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    (capture,) = captures(tmp_path / "output" / "profile" / "rank_0" / "profiler")
    assert window_steps(capture) == [[3]]
    assert not list((tmp_path / "output" / "profile" / "rank_0").glob("*_mlprof")), "not in the default directory"


def test_mlprof_run_with_profile_false_runs_the_job_unprofiled(tmp_path, private_locks):
    config = tmp_path / "train.json"
    config.write_text(json.dumps({"profile": False, "profile_output_path": str(tmp_path / "prof")}))
    result = _run("--config", str(config), "--", sys.executable, "-c", "raise SystemExit(4)")
    assert result.returncode == 4
    assert "profiling was off: profile is false in" in result.stderr
    assert not (tmp_path / "prof").exists()


def test_mlprof_run_with_a_bad_config_exits_2_with_one_line(tmp_path, private_locks):
    config = tmp_path / "train.yaml"
    config.write_text("profile: true\nprofile_stop_setp: 3\n")
    result = _run("--config", str(config), "--", sys.executable, "-c", "print('never runs')")
    assert result.returncode == 2
    assert "never runs" not in result.stdout
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("mlprof run: error:") and "profile_stop_setp" in line and "Traceback" not in line


def test_the_rank_layout_is_found_from_its_root(tmp_path):
    from mlprof.parse.capture_reader import find_inputs

    for rank in (0, 1):
        capture = tmp_path / "output" / "profile" / f"rank_{rank}" / f"host_{rank}_20240101000000000_mlprof"
        (capture / "raw").mkdir(parents=True)
        (capture / "profiler_info.json").write_text(json.dumps({"rank": rank, "status": "finished"}))
    (tmp_path / "output" / "profile" / "notes").mkdir()
    found = find_inputs(tmp_path / "output" / "profile")
    assert [item.manifest["rank"] for item in found] == [0, 1]
