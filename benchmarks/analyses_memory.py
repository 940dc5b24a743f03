"""Peak memory and time of every analysis and of the dashboard on one large run.

Issue 16 asks that the dashboard and every analysis work on a 4M-event
capture within the parse's memory budget (1 GiB by default), the timeline
index included. This parses a trace (tables only), then runs each command
that reads the tables in its own process and samples the proportional set
size (PSS) of its whole process tree every 50 ms (forked workers share
pages with their parent; RSS summed over them counts those pages twice):

* ``query``, ``advise``, ``op`` (the most frequent op), ``modules``,
  ``callsites``, ``compare`` (the run with itself), ``export`` (text and db);
* ``mlprof ui``: one server, asked for every page's data over HTTP: runs,
  features, overview, advisor, every dataset, the timeline (meta, which
  builds its index, the whole run and 20 zoom windows, a search); each
  row shows the server's peak up to that request.

    python benchmarks/analyses_memory.py TRACE [--workdir DIR] [--budget 1G]

TRACE may also be the output directory of a parse (its analyses only).

Make a 4M-event trace with ``benchmarks/parse.py --sweep --sizes 4000000``
(or ``benchmarks/replicate_trace.py``).
"""

from __future__ import annotations

import argparse
import json
import random
import re
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import psutil

_MLPROF = [sys.executable, "-m", "mlprof"]


class TreeSampler:
    """Peak PSS of a process and its descendants, sampled in a thread every ``interval_s``; ``rss=True``
    sums RSS instead: reading PSS (smaps) of a tree of spawned workers every 50 ms slowed a 64-rank
    `mlprof cluster` from 19 s to 52 s, and spawned (not forked) workers share little beyond libraries."""

    def __init__(self, pid: int, rss: bool = False, interval_s: float = 0.05) -> None:
        self.rss = rss
        self.interval_s = interval_s
        self.proc = psutil.Process(pid)
        self.peak_bytes = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                procs = [self.proc] + self.proc.children(recursive=True)
                total = 0
                for p in procs:
                    try:
                        total += p.memory_info().rss if self.rss else p.memory_full_info().pss
                    except psutil.Error:
                        pass
                self.peak_bytes = max(self.peak_bytes, total)
            except psutil.Error:
                return
            self._stop.wait(self.interval_s)

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return self.peak_bytes


def run_command(label: str, args: list[str]) -> dict:
    started = time.perf_counter()
    proc = subprocess.Popen(_MLPROF + args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    sampler = TreeSampler(proc.pid)
    _, err = proc.communicate()
    peak = sampler.stop()
    row = {"what": label, "wall_s": round(time.perf_counter() - started, 2), "peak_pss_bytes": peak,
           "exit": proc.returncode}
    if proc.returncode:
        row["error"] = err.strip().splitlines()[-1] if err.strip() else ""
    return row


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=900) as resp:
        return resp.read()


def dashboard(logdir: Path, top_op: str) -> list[dict]:
    """One ``mlprof ui``: each page's requests timed; the server's peak PSS over all of them."""
    proc = subprocess.Popen(_MLPROF + ["ui", "--logdir", str(logdir), "--port", "0"], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    sampler = TreeSampler(proc.pid)
    rows = []
    try:
        match = re.search(r"(http://127\.0\.0\.1:\d+)/", proc.stdout.readline())
        if not match:
            raise SystemExit("mlprof ui did not start")
        base = match.group(1)
        run = urllib.parse.quote(json.loads(_get(base + "/api/runs"))["runs"][0]["id"])

        def timed(label: str, paths: list[str]) -> None:
            started = time.perf_counter()
            refused = []
            for path in paths:
                try:
                    _get(base + path)
                except urllib.error.HTTPError as exc:  # a page this run has no data for says so with a 4xx
                    if exc.code >= 500:
                        raise
                    refused.append(f"{path.split('?')[0]}: {exc.code} {json.loads(exc.read()).get('error', '')}"[:120])
            rows.append({"what": f"ui: {label}", "wall_s": round(time.perf_counter() - started, 2),
                         "peak_pss_bytes": sampler.peak_bytes, "exit": 0, "refused": refused})

        timed("runs, features, overview", [f"/api/features?run={run}", f"/api/overview?run={run}"])
        timed("advisor", [f"/api/advisor?run={run}"])
        names = json.loads(_get(base + "/api/features"))["datasets"]
        op = urllib.parse.quote(top_op)
        timed(f"{len(names)} datasets", [f"/api/data/{name}?run={run}&name={op}" for name in names])
        started = time.perf_counter()
        meta = json.loads(_get(f"{base}/api/timeline/meta?run={run}"))
        rows.append({"what": f"ui: timeline index ({meta['slice_count']:,} slices)",
                     "wall_s": round(time.perf_counter() - started, 2), "peak_pss_bytes": sampler.peak_bytes,
                     "exit": 0})
        span = meta["span_ns"]
        rnd = random.Random(7)
        windows = [f"/api/timeline/window?run={run}&t0=0&t1={span}&px=1600"]
        for _ in range(20):
            width = span / 2 ** rnd.randint(1, 20)
            t0 = rnd.uniform(0, span - width)
            windows.append(f"/api/timeline/window?run={run}&t0={int(t0)}&t1={int(t0 + width)}&px=1600")
        timed("timeline whole run + 20 zooms", windows)
        timed("timeline search", [f"/api/timeline/search?run={run}&q=aten"])
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        peak = sampler.stop()
    rows.append({"what": "ui: server, all of the above", "wall_s": None, "peak_pss_bytes": peak, "exit": 0})
    return rows


def _size(text: str) -> int:
    units = {"K": 2**10, "M": 2**20, "G": 2**30}
    return int(float(text[:-1]) * units[text[-1].upper()]) if text[-1].upper() in units else int(text)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("trace", type=Path)
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--budget", default="1G", help="the memory budget the rows are judged against")
    args = ap.parse_args()
    budget = _size(args.budget)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="mlprof_analyses_"))
    if (args.trace / "tables").is_dir():  # a parsed run: measure the analyses only
        out, rows = args.trace, []
    else:
        out = workdir / "run"
        rows = [run_command("parse --tables-only", ["parse", str(args.trace), "--tables-only", "--output", str(out),
                                                    "--memory-budget", args.budget])]
    import duckdb  # the most frequent op, for `mlprof op`

    top_op = duckdb.sql(f"SELECT name FROM read_parquet('{out}/tables/host_ops.parquet') GROUP BY name "
                        "ORDER BY count(*) DESC LIMIT 1").fetchall()[0][0]
    for label, cmd in [
        ("query", ["query", str(out)]),
        ("advise", ["advise", str(out)]),
        (f"op --name {top_op}", ["op", str(out), "--name", top_op]),
        ("modules", ["modules", str(out)]),
        ("callsites", ["callsites", str(out)]),
        ("compare (itself)", ["compare", str(out), str(out)]),
        ("export (text)", ["export", str(out), "--output", str(workdir / "export_text")]),
        ("export --export-type db",
         ["export", str(out), "--export-type", "db", "--output", str(workdir / "export_db")]),
    ]:
        rows.append(run_command(label, cmd))
    rows += dashboard(out.parent, top_op)
    print(f"{'what':48s} {'wall s':>8s} {'peak PSS':>10s}  within {args.budget}")
    for row in rows:
        wall = f"{row['wall_s']:.2f}" if row["wall_s"] is not None else "-"
        fits = "yes" if row["peak_pss_bytes"] <= budget else "NO"
        note = f"  (exit {row['exit']}: {row.get('error', '')})" if row["exit"] else ""
        print(f"{row['what']:48s} {wall:>8s} {row['peak_pss_bytes'] / 2**20:8.0f} MiB  {fits}{note}")
        for why in row.get("refused", []):
            print(f"    no data: {why}")
    return 0 if all(r["peak_pss_bytes"] <= budget and not r["exit"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
