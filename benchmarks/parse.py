"""Benchmark of ``mlprof parse`` against the usual ways of loading a Kineto trace.

Makes (or takes, with ``--trace``) a CPU Kineto trace of at least ``--events``
events from a real CPU training loop, then measures in one run, each in its own
fresh subprocess so peak RSS is that tool's alone:

* ``mlprof parse`` to tables only, and with every export;
* Holistic Trace Analysis ``TraceAnalysis`` load (if installed);
* the TensorBoard plugin's loader (``torch-tb-profiler``, if installed);
* ``orjson.loads`` of the file (if installed).

and prints wall seconds, CPU seconds (user + system, all processes: honest
on a shared machine), events/s, peak RSS and the ratios the issues set as
targets: parse-to-tables <= 0.1x HTA, <= 0.6x orjson.loads, >= 500K events/s;
peak RSS under the parse's memory budget.

    python benchmarks/parse.py --events 1000000 --workdir /tmp/mlprof_bench

``--sweep`` measures sizes side by side (0.1M, 1M, 4M, 10M events by
default, ``--sizes`` to choose): the two smaller traces are profiled from the
training loop, the larger ones made from the 1M one by
``benchmarks/replicate_trace.py`` (its steps repeated, shifted in time).
Peers that do not finish within ``--timeout`` are reported as such. With
``--seed-trace``, every size is a real trace replicated instead (GPU traces
cannot be profiled on a CPU machine; their events are a third smaller):

    python benchmarks/parse.py --sweep --workdir /tmp/mlprof_sweep --timeout 300
    python benchmarks/parse.py --sweep --seed-trace \
        ../shared/data/traces/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz

Peers need the ``bench`` extra: ``pip install -e .[bench]``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

_MAKE_TRACE = r"""
import sys, torch
from torch import nn
target_events, out = int(sys.argv[1]), sys.argv[2]
torch.manual_seed(0)
torch.set_num_threads(1)
layers = []
for _ in range(8):
    layers += [nn.Linear(16, 16), nn.ReLU()]
model = nn.Sequential(*layers)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
data = torch.utils.data.TensorDataset(torch.randn(4096, 16), torch.randn(4096, 16))
loader = torch.utils.data.DataLoader(data, batch_size=4)
def one_step(batch):
    x, y = batch
    opt.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
# Measure events per step on a short profile, then size the real one.
with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as p:
    it = iter(loader)
    for _ in range(5):
        one_step(next(it)); p.step()
per_step = max(1, len(p.events()) // 5)
steps = target_events // per_step + 2
# A schedule makes torch record ProfilerStep#N spans (one warmup step).
with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True,
                            schedule=torch.profiler.schedule(wait=0, warmup=1, active=steps),
                            on_trace_ready=lambda prof: prof.export_chrome_trace(out)) as p:
    done = 0
    while done < steps + 1:
        for batch in loader:
            one_step(batch); p.step(); done += 1
            if done >= steps + 1:
                break
print(steps)
"""


def make_trace(target_events: int, path: Path) -> None:
    subprocess.run([sys.executable, "-c", _MAKE_TRACE, str(target_events), str(path)], check=True)


class _Top:  # replaced by a msgspec Struct on first use (keeps import cheap)
    pass


def count_events(path: Path) -> int:
    """Events of the trace, counted in a child process.

    Never in this one: a process that held a big trace passes its high-water
    RSS on to every child it starts (Linux folds the forked copy's peak into
    the exec'd child's ru_maxrss), so each peer would report this process's
    peak as its own.
    """
    code = "import sys; sys.path.insert(0, sys.argv[2]); import parse; print(parse._count_here(sys.argv[1]))"
    out = subprocess.run([sys.executable, "-c", code, str(path), str(Path(__file__).parent)],
                         check=True, capture_output=True, text=True)
    return int(out.stdout.strip())


def _count_here(path) -> int:
    import gzip

    import msgspec

    global _Top
    if not isinstance(_Top, type) or not issubclass(_Top, msgspec.Struct):
        _Top = msgspec.defstruct("_Top", [("traceEvents", list[msgspec.Raw], [])])
    data = Path(path).read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    return len(msgspec.json.decode(data, type=_Top).traceEvents)


# Each peer runs in a fresh interpreter; the file path is argv[1].
_PEERS = {
    "mlprof parse (tables only)": ["-m", "mlprof", "parse", "{trace}", "--output", "{out}/tables_only",
                                   "--tables-only", "--no-progress"],
    "mlprof parse (default)": ["-m", "mlprof", "parse", "{trace}", "--output", "{out}/default", "--no-progress"],
    "mlprof parse (all exports)": ["-m", "mlprof", "parse", "{trace}", "--output", "{out}/all",
                                   "--export-type", "text", "--export-type", "db", "--no-progress"],
    "HTA TraceAnalysis load": ["-c", textwrap.dedent("""
        import sys, os, tempfile
        from hta.trace_analysis import TraceAnalysis
        d = tempfile.mkdtemp()
        os.symlink(os.path.abspath(sys.argv[1]), os.path.join(d, os.path.basename(sys.argv[1])))
        TraceAnalysis(trace_dir=d)
        """), "{trace}"],
    "TensorBoard plugin loader": ["-c", textwrap.dedent("""
        import sys, tempfile
        from torch_tb_profiler.profiler.data import RunProfileData
        RunProfileData.parse("worker0", None, sys.argv[1], tempfile.mkdtemp())
        """), "{trace}"],
    "orjson.loads": ["-c", textwrap.dedent("""
        import sys, gzip, orjson
        data = open(sys.argv[1], 'rb').read()
        orjson.loads(gzip.decompress(data) if data[:2] == b'\\x1f\\x8b' else data)
        """), "{trace}"],
}
_NEEDS = {"HTA TraceAnalysis load": "hta", "TensorBoard plugin loader": "torch_tb_profiler",
          "orjson.loads": "orjson"}



def _installed(peer: str) -> bool:
    """Whether the module a peer needs (``_NEEDS``) imports here; peers without one always are."""
    module = _NEEDS.get(peer)
    if module is None:
        return True
    try:
        __import__(module)
    except Exception:  # noqa: BLE001 - a broken install is as good as none for a benchmark
        return False
    return True

def measure(argv: list[str], timeout_s: float) -> tuple[float, int, int, float]:
    """(wall seconds, peak RSS bytes, exit status, CPU seconds) of one child process (and its children)."""
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, *argv], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = start + timeout_s
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.perf_counter() > deadline:
            proc.kill()
            pid, status, usage = os.wait4(proc.pid, 0)
            break
        time.sleep(0.02)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode(errors="replace").strip().splitlines()
    if proc.returncode != 0 and err:
        print(f"    (exit {proc.returncode}: {err[-1][:200]})", file=sys.stderr)
    return wall, usage.ru_maxrss * 1024, proc.returncode, usage.ru_utime + usage.ru_stime


_SWEEP_PEERS = ("mlprof parse (tables only)", "mlprof parse (default)", "HTA TraceAnalysis load",
                "TensorBoard plugin loader", "orjson.loads")
# Sizes above this are made by replicating the trace profiled at this size.
_PROFILED_MAX = 1_000_000


def sweep_trace(events: int, workdir: Path, seed_trace: Path | None = None) -> Path:
    """The sweep's trace of ``events``: profiled up to 1M, replicated above; or ``seed_trace`` (a real
    trace, such as a GPU one from ../shared/data/traces) replicated to every size."""
    if seed_trace is not None:
        trace = workdir / f"{seed_trace.name.split('.')[0]}_{events}.json"
        if not trace.exists():
            seed = workdir / f"{seed_trace.name.split('.')[0]}_seed.json"
            if not seed.exists():
                data = seed_trace.read_bytes()
                seed.write_bytes(gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data)
            print(f"replicating {seed_trace.name} to >= {events:,} events ...", flush=True)
            subprocess.run([sys.executable, str(Path(__file__).with_name("replicate_trace.py")), str(seed),
                            str(trace), "--events", str(events)], check=True)
        return trace
    trace = workdir / f"cpu_{events}.pt.trace.json"
    if trace.exists():
        return trace
    if events <= _PROFILED_MAX:
        print(f"making a CPU training trace of >= {events:,} events ...", flush=True)
        make_trace(events, trace)
        return trace
    seed = sweep_trace(_PROFILED_MAX, workdir)
    print(f"replicating {seed.name} to >= {events:,} events ...", flush=True)
    subprocess.run([sys.executable, str(Path(__file__).with_name("replicate_trace.py")), str(seed), str(trace),
                    "--events", str(events)], check=True)
    return trace


def sweep(args) -> int:
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="mlprof_sweep_"))
    workdir.mkdir(parents=True, exist_ok=True)
    sizes = [int(x) for x in args.sizes.split(",") if x.strip()]
    rows = []
    print(f"{os.cpu_count()} CPUs; timeout {args.timeout:.0f} s per peer")
    header = f"{'events':>11} {'MiB':>6}  {'peer':<28} {'wall s':>8} {'cpu s':>8} {'events/s':>10} {'peak MiB':>9}"
    for events in sorted(sizes):
        trace = sweep_trace(events, workdir, args.seed_trace)
        n_events, size = count_events(trace), trace.stat().st_size
        print(header)
        for name in _SWEEP_PEERS:
            if any(s.lower() in name.lower() for s in args.skip):
                continue
            if not _installed(name):
                print(f"{n_events:>11,} {size / 2**20:>6.0f}  {name:<28} (not installed: pip install -e .[bench])")
                continue
            out = workdir / "out"
            shutil.rmtree(out, ignore_errors=True)
            wall, rss, rc, cpu = measure([p.format(trace=trace, out=out) for p in _PEERS[name]], args.timeout)
            done = rc == 0
            note = "" if done else ("  timed out" if wall >= args.timeout else f"  exit {rc}")
            rate = f"{n_events / wall:>10,.0f}" if done else f"{'-':>10}"
            print(f"{n_events:>11,} {size / 2**20:>6.0f}  {name:<28} {wall:>8.2f} {cpu:>8.2f} {rate} "
                  f"{rss / 2**20:>9.0f}{note}", flush=True)
            rows.append({"events": n_events, "file_bytes": size, "peer": name, "wall_s": round(wall, 2),
                         "cpu_s": round(cpu, 2), "peak_rss_bytes": rss, "exit": rc, "finished": done})
        mine = {r["peer"]: r for r in rows if r["events"] == n_events and r["finished"]}
        for peer in ("HTA TraceAnalysis load", "TensorBoard plugin loader", "orjson.loads"):
            if peer in mine:
                for own in ("mlprof parse (tables only)", "mlprof parse (default)"):
                    if own in mine:
                        print(f"    {own} / {peer}: time {mine[own]['wall_s'] / mine[peer]['wall_s']:.3f}x, "
                              f"cpu {mine[own]['cpu_s'] / max(mine[peer]['cpu_s'], 1e-9):.3f}x, "
                              f"peak RSS {mine[own]['peak_rss_bytes'] / mine[peer]['peak_rss_bytes']:.2f}x")
        print()
    if args.json:
        args.json.write_text(json.dumps({"sweep": rows}, indent=2))
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trace", type=Path, help="an existing Kineto trace (else one is made)")
    ap.add_argument("--events", type=int, default=1_000_000, help="events in the made trace")
    ap.add_argument("--workdir", type=Path, default=None, help="where to make the trace and outputs")
    ap.add_argument("--skip", action="append", default=[], help="peer to skip (substring), repeatable")
    ap.add_argument("--timeout", type=float, default=600, help="seconds allowed per peer")
    ap.add_argument("--repeat", type=int, default=1, help="runs per peer; the median wall time is kept")
    ap.add_argument("--json", type=Path, default=None, help="also write the results here")
    ap.add_argument("--sweep", action="store_true", help="measure several trace sizes side by side")
    ap.add_argument("--seed-trace", type=Path, default=None,
                    help="sweep: replicate this real trace (plain or gzip, e.g. a GPU one) to every size")
    ap.add_argument("--sizes", default="100000,1000000,4000000,10000000",
                    help="event counts of the sweep, comma-separated")
    args = ap.parse_args(argv)
    if args.sweep:
        return sweep(args)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="mlprof_bench_"))
    workdir.mkdir(parents=True, exist_ok=True)
    trace = args.trace
    if trace is None:
        trace = workdir / f"cpu_{args.events}.pt.trace.json"
        if not trace.exists():
            print(f"making a CPU training trace of >= {args.events:,} events in {trace} ...", flush=True)
            make_trace(args.events, trace)
    size = trace.stat().st_size
    n_events = count_events(trace)
    print(f"trace: {trace} ({size / 2**20:.0f} MiB, {n_events:,} events); {os.cpu_count()} CPUs")
    out = workdir / "out"
    shutil.rmtree(out, ignore_errors=True)
    results: dict[str, dict] = {}
    for name, template in _PEERS.items():
        if any(s.lower() in name.lower() for s in args.skip):
            continue
        if not _installed(name):
            print(f"{name:<28} skipped ({_NEEDS[name]} not installed: pip install -e .[bench])")
            continue
        cmd = [part.format(trace=trace, out=out) for part in template]
        runs = [measure(cmd, args.timeout) for _ in range(max(1, args.repeat))]
        # The median run (a shared 2-core machine is noisy); peak RSS of all runs.
        walls = sorted(r[0] for r in runs)
        wall, rss, rc = walls[len(walls) // 2], max(r[1] for r in runs), max(r[2] for r in runs)
        results[name] = {"wall_s": round(wall, 2), "peak_rss_bytes": rss, "exit": rc,
                         "all_wall_s": [round(w, 2) for w in walls]}
        spread = f"  (runs: {', '.join(f'{w:.2f}' for w in walls)})" if len(walls) > 1 else ""
        print(f"{name:<28} {wall:8.2f} s  {rss / 2**20:8.0f} MiB peak RSS"
              f"{'' if rc == 0 else f'  (exit {rc})'}{spread}", flush=True)
    tables = results.get("mlprof parse (tables only)")
    if tables:
        print("\nratios (targets: <= 0.1x HTA, <= 0.6x orjson.loads, peak RSS <= 1.5x file size):")
        for peer in ("HTA TraceAnalysis load", "TensorBoard plugin loader", "orjson.loads",
                     "mlprof parse (all exports)"):
            if peer in results and results[peer]["exit"] == 0:
                print(f"  parse-to-tables / {peer:<28} time {tables['wall_s'] / results[peer]['wall_s']:.3f}x"
                      f"  peak RSS {tables['peak_rss_bytes'] / results[peer]['peak_rss_bytes']:.2f}x")
        print(f"  parse-to-tables peak RSS / file size: {tables['peak_rss_bytes'] / size:.2f}x")
    if args.json:
        args.json.write_text(json.dumps({"trace": str(trace), "file_bytes": size, "events": n_events,
                                         "results": results}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
