"""Fixtures of the analysis tests: real CPU runs profiled once per session, and the shared GPU traces."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from mlprof.parse import ParseOptions, parse_path

from shared_data import SHARED_TRACES

HERE = Path(__file__).parent


@pytest.fixture(scope="session")
def runs(tmp_path_factory):
    """Parsed output dir of a scenario of advisor_runs.py, profiled on first use."""
    pytest.importorskip("torch")
    sys.path.insert(0, str(HERE))
    try:
        import advisor_runs
    finally:
        sys.path.remove(str(HERE))
    made: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in made:
            # seed002_fixed's steps are ~1.5 ms: over 6 of them a core lost to another process for a few ms
            # made Dropout or ReLU a dominant_module warning (2 of 10 runs with two busy loops on 2 cores).
            steps = 10 if name == "clean" else 30 if name.startswith("seed002") else 6
            made[name] = advisor_runs.capture(name, tmp_path_factory.mktemp(name), steps=steps,
                                           profile_memory=name.startswith("seed002"))
        return made[name]

    return get


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def ddp_dir(tmp_path_factory) -> Path:
    """Captures of a 2-rank gloo DDP job whose rank 1 sleeps 30 ms in every step."""
    pytest.importorskip("torch")
    out = tmp_path_factory.mktemp("ddp")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", "--master_addr=127.0.0.1",
           f"--master_port={free_port()}", str(HERE / "ddp_job.py"), str(out), "1", "0.03"]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stderr[-3000:]
    assert len(list(out.glob("*_mlprof"))) == 2
    return out


@pytest.fixture(scope="session")
def gpu_traces(tmp_path_factory) -> dict[str, Path]:
    """Parsed outputs of the shared GPU traces (copied first: parsing writes beside its input)."""
    if not SHARED_TRACES.is_dir():
        pytest.skip("shared GPU traces not available")
    root = tmp_path_factory.mktemp("gpu")
    picks = {"ns_resolution": "ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
             "nccl": "nccl_parser_config/nccl_data.json.gz",
             "rank0": "trace_filter/sampled_rank-0.json.gz",
             "rank1": "trace_filter/sampled_rank-1.json.gz",
             "amd": "amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz"}
    out = {}
    for key, rel in picks.items():
        # Named as a trace file so directory discovery (cluster) finds it.
        dst = root / key / f"{key}.pt.trace.json.gz"
        dst.parent.mkdir()
        shutil.copyfile(SHARED_TRACES / rel, dst)
        out[key] = Path(parse_path(dst, ParseOptions())[0].output_dir)
    return out
