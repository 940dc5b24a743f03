"""The typed capture records: what the writer encodes, every reader decodes, and older captures still read."""

from __future__ import annotations

import json

import pytest

from mlprof.capture import layout
from mlprof.capture.files import write_json_atomic
from mlprof.capture.records import (Manifest, Clock, GcRecord, MarkersFile, ModulesFile, RangeRecord,
                                    StepRecord, Versions, WindowEntry, WindowInfo, decode_file, read_manifest)
from mlprof.errors import CaptureError


def _old_json(data) -> bytes:
    """How captures were written before the records: json.dumps, compact."""
    return json.dumps(data, separators=(",", ":")).encode()


def test_records_encode_to_the_bytes_the_old_writer_wrote(tmp_path):
    manifest = Manifest(worker_name="h_1", host="h", pid=1, rank=0, world_size=1, local_rank=0,
                           versions=Versions(mlprof="0.1.0", torch=None, python="3.11.7"), config={"a": [1]},
                           clock=Clock(wall_ns=5, monotonic_ns=6), created_wall_ns=5,
                           windows=[WindowEntry(dir="raw/window_0000", index=0, status="complete", first_step=2,
                                                last_step=3, start_ns=1, end_ns=9)])
    old = {"schema_version": 1, "kind": "mlprof.capture", "status": "running", "worker_name": "h_1", "host": "h",
           "pid": 1, "rank": 0, "world_size": 1, "local_rank": 0,
           "versions": {"mlprof": "0.1.0", "torch": None, "python": "3.11.7"}, "config": {"a": [1]},
           "clock": {"wall_ns": 5, "monotonic_ns": 6}, "created_wall_ns": 5,
           "windows": [{"dir": "raw/window_0000", "index": 0, "status": "complete", "first_step": 2,
                        "last_step": 3, "start_ns": 1, "end_ns": 9}], "error": None, "steps_seen": None,
           "step_times": None, "job_steps": None, "last_step_end_ns": None, "stopped_early": None}
    write_json_atomic(tmp_path / "m.json", manifest)
    assert (tmp_path / "m.json").read_bytes() == _old_json(old)
    ranges = [{"id": 7, "name": "r", "start_ns": 1, "end_ns": None, "tid": 2, "end_tid": None, "stream": None,
               "device_start_ns": None, "device_end_ns": None}]
    write_json_atomic(tmp_path / "k.json", MarkersFile(marks=[], ranges=[RangeRecord(**ranges[0])]))
    assert (tmp_path / "k.json").read_bytes() == _old_json({"marks": [], "ranges": ranges})
    gc = {"start_ns": 1, "dur_ns": 2, "generation": 2, "collected": 3, "uncollectable": 0, "tid": 4}
    write_json_atomic(tmp_path / "g.json", [GcRecord(**gc)])
    assert (tmp_path / "g.json").read_bytes() == _old_json([gc])


def test_a_capture_in_the_old_shape_reads(tmp_path):
    """Keys in another order, optional keys absent, null windows, two-field modules, extra keys: all read."""
    root = tmp_path / "old_mlprof"
    (root / "raw" / "window_0000").mkdir(parents=True)
    (root / layout.INFO_FILE).write_text(json.dumps(
        {"windows": None, "status": "finished", "kind": "mlprof.capture", "pid": 3, "future_key": {"x": 1}}))
    info, raw = read_manifest(root)
    assert info.windows == [] and info.pid == 3 and info.schema_version == 1 and raw["future_key"] == {"x": 1}
    window = root / "raw" / "window_0000"
    (window / "window.json").write_text(json.dumps({"status": "complete", "index": 0}))
    assert decode_file(window / "window.json", WindowInfo).files is None
    (window / "steps.json").write_text('[{"end_ns": 3, "start_ns": 1, "step": 0}]')
    assert decode_file(window / "steps.json", list[StepRecord]) == [StepRecord(step=0, start_ns=1, end_ns=3)]
    (window / "modules.json").write_text('{"modules": [["Net", "Net"]], "calls": [[0, 1, 2, 5]]}')
    modules = decode_file(window / "modules.json", ModulesFile)
    assert modules.modules == [["Net", "Net"]] and modules.dropped == 0


@pytest.mark.parametrize("manifest, why", [
    ({"rank": "zero"}, r"profiler_info.json: invalid capture file: rank must be int or null, not str \(at \$.rank\)"),
    ({"windows": [{"end_ns": "x"}]}, r"windows\[0\].end_ns must be int or null, not str"),
    ({"clock": {"wall_ns": 2**70}}, r"clock.wall_ns is out of range"),
    ({"schema_version": 2}, "schema_version 2 is not supported"),
])
def test_a_bad_manifest_is_one_line_naming_the_file_and_field(tmp_path, manifest, why):
    (tmp_path / layout.INFO_FILE).write_text(json.dumps(manifest))
    with pytest.raises(CaptureError, match=why) as err:
        read_manifest(tmp_path)
    assert "\n" not in str(err.value)


def test_a_frame_file_name_that_is_not_utf8_is_still_written(tmp_path):
    from mlprof.capture.records import PythonSamplesFile, decode_file

    samples = PythonSamplesFile(interval_ns=1, tid=1, frames=[("/x/\udcff.py", 1, "f")], stacks=[[0]],
                                samples=[(5, 0)])
    write_json_atomic(tmp_path / "p.json", samples)
    # Valid UTF-8, the undecodable byte as U+FFFD: mlprof's own reader takes it back (an escaped lone
    # surrogate, as json.dumps writes it, made the whole window unreadable).
    assert json.loads((tmp_path / "p.json").read_text())["frames"] == [["/x/\ufffd.py", 1, "f"]]
    assert decode_file(tmp_path / "p.json", PythonSamplesFile).frames == [("/x/\ufffd.py", 1, "f")]
    # A file an older mlprof wrote that way still reads.
    (tmp_path / "old.json").write_text(json.dumps({"interval_ns": 1, "frames": [["/x/\udcff.py", 1, "f"]],
                                                   "stacks": [[0]], "samples": [[5, 0]]}))
    assert decode_file(tmp_path / "old.json", PythonSamplesFile).frames == [("/x/\ufffd.py", 1, "f")]
