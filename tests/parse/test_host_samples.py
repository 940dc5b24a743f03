"""Host samples (host_samples.json, or the sampler's .jsonl a killed job leaves) become counter rows;
older files still read, and a bad file is one line naming it, exit code 3."""

from __future__ import annotations

import json

import pytest

from mlprof.capture.records import GpuSample, HostProcess, HostSample, encode
from mlprof.cli.main import main
from mlprof.errors import CaptureError
from mlprof.parse.host_samples import read_host_counters

from .conftest import BASE_NS, make_capture

# What the sampler wrote before the records (json.dumps of a dict): the keys of the asked groups only.
OLD_SAMPLE = {"ts_ns": BASE_NS, "cpu_percent": 37.5, "cpu_percent_per_core": [50.0, 25.0], "job_cpu_percent": 98.0,
              "cpu_count": 2, "runnable_threads": 3, "job_threads": 14,
              "job_processes": [{"pid": 1, "name": "python", "cpu_percent": 98.0}],
              "top_processes": [{"pid": 77, "name": "stress", "cpu_percent": 99.0}],
              "mem_used_bytes": 3 * 2**30, "mem_available_bytes": 2**30, "job_rss_bytes": 2**29,
              "gpus": [{"index": 1, "util_percent": 97, "mem_util_percent": 40, "mem_used_bytes": 2**33,
                        "power_w": 310.5, "sm_clock_mhz": 1980}]}


def _rows(root, pid=1):
    cols = read_host_counters(root, pid)
    return {(n, s, int(p)): v for n, s, p, v in zip(cols["name"], cols["series"], cols["pid"], cols["value"])}


def test_a_sample_written_the_old_way_reads_into_counter_rows(tmp_path):
    sample = {**OLD_SAMPLE, "some_future_key": {"x": [1]}}  # unknown keys are ignored
    (tmp_path / "host_samples.json").write_text(json.dumps([sample, {"ts_ns": BASE_NS + 1}]))
    rows = _rows(tmp_path)
    assert rows[("host_cpu", "system_percent", 1)] == 37.5
    assert rows[("host_cpu_cores", "core1", 1)] == 25.0
    assert rows[("host_cpu", "cpu_count", 1)] == 2.0
    assert rows[("host_memory", "job_rss_bytes", 1)] == 2**29
    assert rows[("gpu1", "power_w", 1)] == 310.5 and rows[("gpu1", "sm_clock_mhz", 1)] == 1980
    assert rows[("host_top_processes", "stress", 77)] == 99.0
    assert rows[("host_job_processes", "python", 1)] == 98.0
    assert not any(series.startswith(("read", "recv")) for _n, series, _p in rows), "absent groups give no rows"
    assert len(read_host_counters(tmp_path, 1)["ts_ns"]) == len(rows)  # the bare second sample adds none


def test_the_record_writes_the_bytes_the_old_sampler_wrote():
    record = HostSample(ts_ns=BASE_NS, cpu_percent=37.5, cpu_percent_per_core=[50.0, 25.0], job_cpu_percent=98.0,
                        cpu_count=2, runnable_threads=3, job_threads=14,
                        job_processes=[HostProcess(pid=1, name="python", cpu_percent=98.0)],
                        top_processes=[HostProcess(pid=77, name="stress", cpu_percent=99.0)],
                        mem_used_bytes=3 * 2**30, mem_available_bytes=2**30, job_rss_bytes=2**29,
                        gpus=[GpuSample(index=1, util_percent=97, mem_util_percent=40, mem_used_bytes=2**33,
                                        power_w=310.5, sm_clock_mhz=1980)])
    assert encode(record) == json.dumps(OLD_SAMPLE, separators=(",", ":")).encode()
    assert encode(HostSample(ts_ns=5, mem_used_bytes=0)) == b'{"ts_ns":5,"mem_used_bytes":0}'


def test_values_older_writers_could_leave_still_read(tmp_path):
    # json.dumps wrote NaN as is, and a process name that is not UTF-8 as a lone surrogate escape.
    text = json.dumps([{**OLD_SAMPLE, "cpu_percent": float("nan"),
                        "top_processes": [{"pid": 77, "name": "a\udcffb", "cpu_percent": 99.0}]}])
    (tmp_path / "host_samples.json").write_text(text)
    rows = _rows(tmp_path)
    assert rows[("host_top_processes", "a\udcffb", 77)] == 99.0
    assert rows[("host_cpu", "job_percent", 1)] == 98.0


def test_a_killed_job_leaves_json_lines_whose_torn_line_is_skipped(tmp_path):
    lines = [json.dumps({"ts_ns": BASE_NS + k, "cpu_percent": float(k)}) for k in range(3)]
    lines.append(json.dumps({"ts_ns": BASE_NS + 3, "top_processes": [{"pid": 7, "name": "a\udcff"}],
                             "cpu_percent": float("nan")}))  # only the standard library reads these
    (tmp_path / "host_samples.jsonl").write_text("\n".join(lines) + '\n{"ts_ns": 17, "cpu_perc')
    cols = read_host_counters(tmp_path, 1)
    assert list(cols["value"][:3]) == [0.0, 1.0, 2.0] and list(cols["ts_ns"]) == [BASE_NS + k for k in range(4)]


def test_no_samples_no_rows(tmp_path):
    assert len(read_host_counters(tmp_path, 1)["name"]) == 0


@pytest.mark.parametrize("content, problem", [
    (b"", "unreadable host samples"),
    (b'[{"ts_ns": 1, "cpu_percent": 2', "unreadable host samples"),
    (b"\xff\xfe not text", "unreadable host samples"),
    (b'{"ts_ns": 1}', "expected a JSON list of samples"),
    (b'"samples"', "expected a JSON list of samples"),
    (b'[{"ts_ns": 1, "cpu_percent": "high"}]', "cpu_percent must be float or null, not str (at $[0].cpu_percent)"),
    (b'[{"ts_ns": 1}, {"ts_ns": 99999999999999999999}]', "$[1].ts_ns"),
    (b'[{"ts_ns": 1, "top_processes": [{"name": "x"}]}]', "`pid`"),
    (b'[{"cpu_percent": 1.0}]', "`ts_ns`"),
    (b"[" * 100_000 + b"]" * 100_000, "unreadable host samples"),
])
def test_a_bad_host_samples_file_is_one_line_naming_it(tmp_path, content, problem):
    path = tmp_path / "host_samples.json"
    path.write_bytes(content)
    with pytest.raises(CaptureError) as err:
        read_host_counters(tmp_path, 1)
    message = str(err.value)
    assert message.startswith(str(path)) and problem in message and "\n" not in message


def test_mlprof_parse_of_a_capture_with_bad_host_samples_exits_3_without_tables(tmp_path, capsys):
    capture = make_capture(tmp_path / "cap", {0: {"steps": [{"step": 1, "start_ns": BASE_NS, "end_ns": BASE_NS + 10}]}})
    (capture / "host_samples.json").write_text('{"not": "a list"}')
    assert main(["parse", str(capture), "--tables-only", "--no-progress"]) == 3
    err = capsys.readouterr().err
    assert "host_samples.json: expected a JSON list of samples" in err and "Traceback" not in err
    assert not (capture / "mlprof_output" / "tables").exists()
