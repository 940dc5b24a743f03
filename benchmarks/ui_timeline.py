"""Timeline answer times of the web dashboard on a large capture.

Writes a synthetic Kineto trace of about --events events (training steps of
nested CPU ops, runtime launches, GPU kernels on two streams, launch flows),
parses it with the real parser (``mlprof parse``), starts ``mlprof ui`` in its
own process on 127.0.0.1 and measures, over real HTTP:

* as a script: the first view (timeline meta + the whole-run window; cold, the
  timeline index is built on this first request), then zoom/pan answers at
  random zoom levels, each from sending to the last byte of the JSON answer;
* in headless Chromium (when /usr/bin/chromium exists): page open until the
  first answer is drawn, then W/A/S/D presses, timed by the browser's own
  resource timing (request start to response end).

Targets (issue 7): first view <= 2 s at 1M events, each zoom/pan answer
<= 200 ms; a 10M-event capture still opens (--events 10000000).

    .venv/bin/python benchmarks/ui_timeline.py --events 1000000
"""

from __future__ import annotations

import argparse
import json
import random
import re
import statistics
import subprocess
import sys
import tempfile
import urllib.parse
import urllib.request
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


def start_server(logdir: Path) -> tuple[subprocess.Popen, str]:
    """`mlprof ui` in its own process (the client's timing must not share its GIL)."""
    proc = subprocess.Popen([sys.executable, "-m", "mlprof", "ui", "--logdir", str(logdir), "--port", "0"],
                            stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    match = re.search(r"(http://127\.0\.0\.1:\d+)/", line)
    if not match:
        proc.kill()
        raise SystemExit(f"mlprof ui did not start: {line!r}")
    return proc, match.group(1)


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=600) as resp:
        return resp.read()


def measure(base_url: str, zooms: int) -> dict:
    """First view and zoom/pan answers as a script sees them (one connection per request)."""
    times: dict[str, list[float]] = {"first_view": [], "zoom_pan": []}
    runs = json.loads(_get(base_url + "/api/runs"))["runs"]
    run = urllib.parse.quote(runs[0]["id"])
    started = time.perf_counter()
    meta = json.loads(_get(f"{base_url}/api/timeline/meta?run={run}"))
    span = meta["span_ns"]
    first = json.loads(_get(f"{base_url}/api/timeline/window?run={run}&t0=0&t1={span}&px=1600"))
    times["first_view"].append(time.perf_counter() - started)
    rnd = random.Random(7)
    sizes = []
    for _ in range(zooms):
        width = span / (2 ** rnd.randint(1, 20))  # from half the run down to ~1e-6 of it
        t0 = rnd.uniform(0, span - width)
        started = time.perf_counter()
        body = _get(f"{base_url}/api/timeline/window?run={run}&t0={int(t0)}&t1={int(t0 + width)}&px=1600")
        times["zoom_pan"].append(time.perf_counter() - started)
        sizes.append(len(body))
    return {"slices_indexed": meta["slice_count"], "first_view_slices": len(first["slices"]["track"]),
            "times": times, "answer_bytes_median": statistics.median(sizes) if sizes else 0}


def measure_browser(base_url: str, chromium: str, presses: int = 30) -> dict:
    """The same in headless Chromium: page open to first drawn answer, then W/S/A/D answers."""
    from playwright.sync_api import sync_playwright

    args = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync"]
    runs = json.loads(_get(base_url + "/api/runs"))["runs"]
    run = urllib.parse.quote(runs[0]["id"], safe="")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=args)
        page = browser.new_page(viewport={"width": 1600, "height": 900})
        started = time.perf_counter()
        page.goto(f"{base_url}/#/run/{run}/timeline")
        page.wait_for_selector("#tl-canvas[data-answers]", timeout=120_000)
        first = time.perf_counter() - started
        page.click("#tl-canvas", position={"x": 5, "y": 5})
        keys = "wwwwwwdadasswwwwwwwddaawwwwwsssdd"
        for key in keys[:presses]:
            before = page.get_attribute("#tl-canvas", "data-answers")
            page.keyboard.press(key)
            for _ in range(400):  # bounded: 20 s
                if page.get_attribute("#tl-canvas", "data-answers") != before:
                    break
                page.wait_for_timeout(50)
        # Request to last byte, per answer, from the browser's own resource timing.
        durations = page.evaluate("""() => performance.getEntriesByType('resource')
            .filter(e => e.name.includes('/api/timeline/window')).map(e => e.responseEnd - e.startTime)""")
        browser.close()
    return {"first_view_s": first, "answers_ms": durations[1:]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--zooms", type=int, default=60, help="zoom/pan requests to time")
    ap.add_argument("--workdir", type=Path, help="keep the trace and parsed tables here (default: a temp dir)")
    ap.add_argument("--chromium", default="/usr/bin/chromium", help="browser for the in-browser timings (skipped if absent)")
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
        # A fresh server for each, so both first views are cold (index built on the first request).
        proc, base_url = start_server(work)
        try:
            result = measure(base_url, args.zooms)
        finally:
            proc.terminate()
            proc.wait(timeout=30)
        shown = None
        if Path(args.chromium).is_file():
            proc, base_url = start_server(work)
            try:
                shown = measure_browser(base_url, args.chromium)
            finally:
                proc.terminate()
                proc.wait(timeout=30)
        first = result["times"]["first_view"][0]
        zoom = sorted(result["times"]["zoom_pan"])
        p50 = statistics.median(zoom)
        p95 = zoom[int(0.95 * (len(zoom) - 1))]
        print(f"slices in the timeline index: {result['slices_indexed']:,}")
        # The targets are for a 1M-event capture; a 10M one must open.
        judged = args.events <= 1_500_000
        verdict = (lambda ok: ("OK" if ok else "MISSED")) if judged else (lambda ok: "(targets are for 1M events)")
        print(f"first view (meta + whole-run window, index built cold): {first * 1000:.0f} ms "
              f"(target <= {FIRST_VIEW_TARGET_S * 1000:.0f} ms) {verdict(first <= FIRST_VIEW_TARGET_S)}")
        print(f"zoom/pan answers ({len(zoom)}): median {p50 * 1000:.0f} ms, p95 {p95 * 1000:.0f} ms, "
              f"max {zoom[-1] * 1000:.0f} ms (target <= {ZOOM_TARGET_S * 1000:.0f} ms) "
              f"{verdict(zoom[-1] <= ZOOM_TARGET_S)}; median answer "
              f"{result['answer_bytes_median'] / 1e3:.0f} kB")
        if shown is None:
            print(f"in the browser: skipped ({args.chromium} not found)")
        else:
            answers = sorted(shown["answers_ms"])
            print(f"in headless Chromium (fresh server): page open to first timeline drawn {shown['first_view_s'] * 1000:.0f} ms "
                  f"{verdict(shown['first_view_s'] <= FIRST_VIEW_TARGET_S)}; W/A/S/D answers ({len(answers)}): "
                  f"median {statistics.median(answers):.0f} ms, max {answers[-1]:.0f} ms "
                  f"{verdict(answers[-1] <= ZOOM_TARGET_S * 1000)}" if answers else "no answers timed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
