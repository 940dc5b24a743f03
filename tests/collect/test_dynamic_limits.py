"""Dynamic profiling limits (issue 12, item 20): active is bounded, an edit
cancels a running capture, prof_dir is resolved before the containment check."""

from __future__ import annotations

import mlprof
from mlprof.collect.dynamic_config import MAX_ACTIVE_STEPS

from .test_dynamic import controller, edit_config, log_text  # noqa: F401 - fixture


def test_active_beyond_the_bound_is_cut_down_and_logged(tmp_path, controller):  # noqa: F811
    edit_config(controller.config_dir, prof_dir=str(tmp_path / "prof"), active=MAX_ACTIVE_STEPS * 50)
    controller.check_now()
    assert controller._pending[0].config.active == MAX_ACTIVE_STEPS
    assert f"more than {MAX_ACTIVE_STEPS} steps" in log_text(controller.config_dir, "monitor")


def test_active_zero_edit_cancels_the_running_capture(tmp_path, controller, trainer):  # noqa: F811
    prof_dir = tmp_path / "prof"
    edit_config(controller.config_dir, prof_dir=str(prof_dir), active=50, start_step=2)
    controller.check_now()
    for _ in range(5):
        trainer.step()
        mlprof.dynamic.step()
    assert controller._capture is not None
    edit_config(controller.config_dir, prof_dir=str(prof_dir), active=0)
    controller.check_now()
    trainer.step()
    mlprof.dynamic.step()
    assert controller._capture is None and not controller._pending
    assert "cancelled by a config edit" in log_text(controller.config_dir, "dynamic")
    for _ in range(3):
        trainer.step()
        mlprof.dynamic.step()
    assert controller._capture is None


def test_relative_prof_dir_through_a_symlink_out_of_the_working_dir_is_refused(tmp_path, controller,  # noqa: F811
                                                                                monkeypatch):
    work, outside = tmp_path / "work", tmp_path / "outside"
    work.mkdir()
    outside.mkdir()
    (work / "link").symlink_to(outside)
    monkeypatch.chdir(work)
    edit_config(controller.config_dir, prof_dir="link/prof", active=1)
    controller.check_now()
    assert not controller._pending
    assert "outside the working directory" in log_text(controller.config_dir, "monitor")
    edit_config(controller.config_dir, prof_dir="inside/prof", active=1)
    controller.check_now()
    assert controller._pending[0].config.prof_dir == str(work.resolve() / "inside" / "prof")
