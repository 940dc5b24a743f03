"""Real runs for the browser tests: a CPU capture, a GPU trace and a 2-rank gloo job, in one logdir.

* ``cpu``: the bundled CNN example under ``mlprof run`` (host sampler, Python sampler, module hooks,
  memory): every CPU page has data, and the host sampler spans far more than the captured steps;
* ``gpu``: the shared real GPU trace (ns_resolution_trace, a V100 training job), copied and parsed;
* ``ddp``: two gloo ranks of ddp_train.py under ``mlprof run`` with torchrun.

Made once per test session (about 30 s on 2 cores); torch is needed for the captures.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

from mlprof.parse import parse_path

from shared_data import REPO_ROOT, SHARED_TRACES

HERE = Path(__file__).parent
GPU_TRACE = "ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _mlprof_run(out: Path, *cmd: str, extra: tuple[str, ...] = ()) -> None:
    # A lock dir of its own: another mlprof run on this machine (a parallel test) must not refuse this one.
    env = {**os.environ, "MLPROF_LOCK_DIR": str(out.parent / f".locks_{out.name}")}
    r = subprocess.run([sys.executable, "-m", "mlprof", "run", "--output", str(out), *extra, "--", *cmd],
                       capture_output=True, text=True, timeout=300, env=env)
    if r.returncode != 0:
        raise RuntimeError(f"mlprof run failed: {r.stderr[-3000:]}")


def make_real_logdir(root: Path) -> dict[str, str]:
    """Fill ``root``; return run ids by kind ("cpu", "gpu", "ddp0", "ddp1")."""
    ids = {}
    _mlprof_run(root / "cpu", sys.executable, str(REPO_ROOT / "examples" / "cnn_train.py"), "--steps", "10",
                "--no-profile", extra=("--profile-memory", "--record-shapes", "--host-sys", "cpu,mem,disk,network"))
    (capture,) = (root / "cpu").glob("*_mlprof")
    ids["cpu"] = f"cpu/{capture.name}/mlprof_output"
    if (SHARED_TRACES / GPU_TRACE).is_file():
        (root / "gpu").mkdir()
        trace = root / "gpu" / Path(GPU_TRACE).name
        shutil.copyfile(SHARED_TRACES / GPU_TRACE, trace)
        out = parse_path(trace)[0].output_dir
        ids["gpu"] = Path(out).relative_to(root).as_posix()
    _mlprof_run(root / "ddp", sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2",
                f"--master_port={_free_port()}", str(HERE / "ddp_train.py"), extra=("--record-shapes",))
    captures = sorted((root / "ddp").glob("*_mlprof"))
    assert len(captures) == 2, captures
    for capture in captures:
        rank = json.loads((capture / "profiler_info.json").read_text())["rank"]
        ids[f"ddp{rank}"] = f"ddp/{capture.name}/mlprof_output"
    return ids
