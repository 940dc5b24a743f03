"""Timeline answer times of the web dashboard on a large capture.

Writes a synthetic Kineto trace of about --events events (training steps of
nested CPU ops, runtime launches, GPU kernels on two streams, launch flows,
memory samples), parses it with the real parser (``mlprof parse``), then asks
the real ASGI app (in process, through httpx) for

* the first view: timeline meta + the whole-run window (cold: the timeline
  index is built on this first request);
* zoom and pan answers at several zoom levels (warm).

Targets (issue 7): first view <= 2 s at 1M events, each zoom/pan answer
<= 200 ms; a 10M-event capture still opens (--events 10000000).

    .venv/bin/python benchmarks/ui_timeline.py --events 1000000
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FIRST_VIEW_TARGET_S = 2.0
ZOOM_TARGET_S = 0.200
_OPS = [f"aten::op_{i}" for i in range(40)]
_KERNELS = [f"void kernel_{i}<float, 4>(float*, int)" for i in range(60)]


def write_trace(path: Path, events: int, seed: int = 1) -> int:
    """A Kineto-style trace with about ``events`` events; returns the exact count."""
    rnd = random.Random(seed)
    pid, tid = 4242, 4242
    ts = 1_700_000_000_000_000.0  # µs
    n = 0
    corr = 0
    step = 0
    ops_per_step = 2_000
    with open(path, "w") as fh:
        fh.write('{"schemaVersion": 1, "deviceProperties": [], "traceEvents": [\n')
        fh.write(json.dumps({"name": "process_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": "python"}}))
        fh.write(",\n" + json.dumps({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid,
                                    "args": {"name": "thread 4242 (python)"}}))
        gpu_t = ts
        while n < events:
            step_start = ts
            out = []
            for _ in range(ops_per_step):
                name = rnd.choice(_OPS)
                corr += 1
                t0 = ts
                child = t0 + 1.0
                launch = child + 2.0
                dur_k = rnd.uniform(2.0, 30.0)
                gpu_t = max(gpu_t, launch + 5.0)
                stream = 7 if corr % 5 else 13
                out.append(f'{{"ph":"X","cat":"cpu_op","name":"{name}","pid":{pid},"tid":{tid},"ts":{t0:.3f},'
                           f'"dur":10.0,"args":{{"External id":{corr},"Input Dims":[[{corr % 7 + 1},64]],'
                           f'"Input type":["float"]}}}}')
                out.append(f'{{"ph":"X","cat":"cpu_op","name":"aten::empty","pid":{pid},"tid":{tid},'
                           f'"ts":{child:.3f},"dur":0.8,"args":{{"External id":{corr}}}}}')
                out.append(f'{{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":{pid},"tid":{tid},'
                           f'"ts":{launch:.3f},"dur":4.0,"args":{{"External id":{corr},"correlation":{corr}}}}}')
                out.append(f'{{"ph":"X","cat":"kernel","name":"{rnd.choice(_KERNELS)}","pid":0,"tid":{stream},'
                           f'"ts":{gpu_t:.3f},"dur":{dur_k:.3f},"args":{{"External id":{corr},"correlation":{corr},'
                           f'"device":0,"stream":{stream},"grid":[128,1,1],"block":[256,1,1]}}}}')
                out.append(f'{{"ph":"s","id":{corr},"pid":{pid},"tid":{tid},"ts":{launch:.3f},"cat":"ac2g",'
                           f'"name":"ac2g"}}')
                out.append(f'{{"ph":"f","id":{corr},"pid":0,"tid":{stream},"ts":{gpu_t:.3f},"cat":"ac2g",'
                           f'"name":"ac2g","bp":"e"}}')
                gpu_t += dur_k
                ts += 12.0
                n += 6
            out.append(f'{{"ph":"X","cat":"user_annotation","name":"ProfilerStep#{step}","pid":{pid},"tid":{tid},'
                       f'"ts":{step_start - 0.5:.3f},"dur":{ts - step_start + 1.0:.3f},"args":{{}}}}')
            n += 1
            fh.write(",\n" + ",\n".join(out))
            ts += 50.0
            step += 1
        fh.write("\n]}\n")
    return n


async def measure(logdir: Path, zooms: int) -> dict:
    import httpx

    from mlprof.ui.server import create_app

    app = create_app(logdir)
    times: dict[str, list[float]] = {"first_view": [], "zoom_pan": []}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1",
                                 timeout=600) as client:
        runs = (await client.get("/api/runs")).json()["runs"]
        run = runs[0]["id"]
        started = time.perf_counter()
        meta = (await client.get("/api/timeline/meta", params={"run": run})).json()
        span = meta["span_ns"]
        first = await client.get("/api/timeline/window", params={"run": run, "t0": 0, "t1": span, "px": 1600})
        times["first_view"].append(time.perf_counter() - started)
        assert first.status_code == 200, first.text
        first_slices = len(first.json()["slices"]["track"])
        rnd = random.Random(7)
        sizes = []
        for i in range(zooms):
            width = span / (2 ** rnd.randint(1, 20))  # from half the run down to ~1e-6 of it
            t0 = rnd.uniform(0, span - width)
            started = time.perf_counter()
            answer = await client.get("/api/timeline/window",
                                      params={"run": run, "t0": int(t0), "t1": int(t0 + width), "px": 1600})
            times["zoom_pan"].append(time.perf_counter() - started)
            assert answer.status_code == 200, answer.text
            sizes.append(len(answer.content))
    return {"slices_indexed": meta["slice_count"], "first_view_slices": first_slices, "times": times,
            "answer_bytes_median": statistics.median(sizes) if sizes else 0}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--zooms", type=int, default=60, help="zoom/pan requests to time")
    ap.add_argument("--workdir", type=Path, help="keep the trace and parsed tables here (default: a temp dir)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="mlprof_ui_bench_") as tmp:
        work = args.workdir or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        trace = work / "big.pt.trace.json"
        out = work / "big_mlprof_output"
        if not (out / "tables").is_dir():
            started = time.perf_counter()
            count = write_trace(trace, args.events)
            print(f"wrote {count:,} events ({trace.stat().st_size / 1e6:.0f} MB) in {time.perf_counter() - started:.1f} s")
            started = time.perf_counter()
            subprocess.run([sys.executable, "-m", "mlprof", "parse", str(trace)], check=True)
            print(f"mlprof parse: {time.perf_counter() - started:.1f} s")
            trace.unlink()
        result = asyncio.run(measure(work, args.zooms))
        first = result["times"]["first_view"][0]
        zoom = sorted(result["times"]["zoom_pan"])
        p50 = statistics.median(zoom)
        p95 = zoom[int(0.95 * (len(zoom) - 1))]
        print(f"slices in the timeline index: {result['slices_indexed']:,}")
        print(f"first view (meta + whole-run window, index built cold): {first * 1000:.0f} ms "
              f"(target <= {FIRST_VIEW_TARGET_S * 1000:.0f} ms) {'OK' if first <= FIRST_VIEW_TARGET_S else 'MISSED'}")
        print(f"zoom/pan answers ({len(zoom)}): median {p50 * 1000:.0f} ms, p95 {p95 * 1000:.0f} ms, "
              f"max {zoom[-1] * 1000:.0f} ms (target <= {ZOOM_TARGET_S * 1000:.0f} ms) "
              f"{'OK' if zoom[-1] <= ZOOM_TARGET_S else 'MISSED'}; median answer "
              f"{result['answer_bytes_median'] / 1e3:.0f} kB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
