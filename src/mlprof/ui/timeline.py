"""The timeline's data: tracks, and level-of-detail answers for a visible window.

On first use per open run, every slice of the merged trace (host ops, python
frames, runtime calls, device ops, steps, markers, GC pauses) is copied into
one in-memory DuckDB table ``_tl`` sorted by start, with a track id and a
nesting depth. A request names a window [t0, t1) and its width in pixels; the
answer holds

* every slice at least one bucket (``(t1 - t0) / px``) long, one row each: on
  one (track, depth) row such slices do not overlap, so there are at most
  about ``px`` of them per row;
* the shorter ones merged per row into blocks: consecutive buckets that hold
  short slices become one block with its count and busy time;
* counter samples reduced to the max per bucket;
* flow arrows only when few enough are visible to be drawn one by one.

So the answer's size depends on the pixels, not on the trace. Slices longer
than ``_LONG_QUANTILE`` of all durations are copied to a small side table so
that the main table can be range-filtered on ``start_ns`` alone (its zone maps
skip row groups outside the window).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from mlprof.capture.trace_names import GC_NAME_SQL, STEP_NAME_SQL
from mlprof.tables.store import TableStore
from mlprof.ui.labels import counter_label, device_label

__all__ = ["Track", "TimelineIndex", "build_index", "query_window", "range_stats", "search", "locate", "slowest",
           "SOURCES", "ROW_ORDER", "MAX_FLOWS", "RANGE_KINDS"]

SOURCES = ("host_ops", "runtime_calls", "device_ops", "steps", "markers", "gc_pauses")
MAX_FLOWS = 500
MAX_PX = 8_000
_LONG_QUANTILE = 0.995
# Markers and GC pauses have no id column: a slice names its row by its rank in
# this order, the same order in the index and in event_details.
ROW_ORDER = {"markers": "start_ns, end_ns NULLS FIRST, name, kind, pid, tid, range_id",
              "gc_pauses": "start_ns, dur_ns, tid, generation"}


@dataclass(frozen=True)
class Track:
    id: int
    group: str  # process (or "mlprof"), what the track list groups by
    name: str
    kind: str  # "slices" or "counter"
    max_depth: int
    unit: str | None = None  # counters: labels.UNITS or a short unit text

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class TimelineIndex:
    tracks: list[Track]
    start_ns: int | None
    end_ns: int | None
    slice_count: int
    long_threshold_ns: int
    flow_count: int
    # The captured steps (else the slices): what the timeline opens on. A host
    # sampler runs for the whole job, so counters alone may span far more.
    window_start_ns: int | None = None
    window_end_ns: int | None = None


def _names(store: TableStore) -> tuple[dict[int, str], dict[tuple[int, int], str]]:
    procs: dict[int, str] = {}
    threads: dict[tuple[int, int], str] = {}
    for pid, tid, kind, value in store.rows(
            "SELECT pid, tid, kind, value FROM threads WHERE kind IN ('process_name', 'process_labels', "
            "'thread_name') AND pid IS NOT NULL ORDER BY window_index"):
        if kind == "thread_name" and tid is not None:
            threads.setdefault((pid, tid), value.strip())
        elif kind == "process_labels" and value:
            procs[pid] = f"{procs.get(pid, '')} {value}".strip() if procs.get(pid) != value else value
        elif kind == "process_name":
            procs.setdefault(pid, value)
    return procs, threads


def _nesting_depth(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Depth of each interval (sorted by start, end descending) in its nest."""
    depth = np.zeros(len(start), dtype=np.int32)
    stack: list[int] = []
    ends = end.tolist()
    for i, s in enumerate(start.tolist()):
        while stack and stack[-1] <= s:
            stack.pop()
        depth[i] = len(stack)
        stack.append(ends[i])
    return depth


def build_index(store: TableStore) -> TimelineIndex:
    con = store.con
    procs, thread_names = _names(store)
    tracks: list[Track] = []
    keymap: list[tuple[str, int, int, int]] = []  # (kind, a, b, track id)

    def add(group: str, name: str, kind: str = "slices", key: tuple[str, int, int] | None = None) -> int:
        tid = len(tracks)
        tracks.append(Track(tid, group, name, kind, 0))
        if key is not None:
            keymap.append((*key, tid))
        return tid

    steps_t = add("mlprof", "Steps", key=("steps", 0, 0))
    markers_t = add("mlprof", "Markers", key=("markers", 0, 0))
    gc_t = add("mlprof", "GC pauses", key=("gc", 0, 0))
    del steps_t, markers_t, gc_t
    host_threads = store.rows("SELECT DISTINCT pid, tid FROM (SELECT pid, tid FROM host_ops UNION ALL "
                              "SELECT pid, tid FROM runtime_calls) WHERE pid IS NOT NULL AND tid IS NOT NULL "
                              "ORDER BY pid, tid")
    py_threads = {tuple(r) for r in store.rows(
        "SELECT DISTINCT pid, tid FROM host_ops WHERE category = 'python_function' AND pid IS NOT NULL")}
    for pid, tid in host_threads:
        group = f"{procs.get(pid, 'process')} (pid {pid})"
        name = thread_names.get((pid, tid), f"thread {tid}")
        add(group, name, key=("host", pid, tid))
        if (pid, tid) in py_threads:
            add(group, f"{name} python", key=("python", pid, tid))
    for device, stream in store.rows("SELECT DISTINCT coalesce(device, 0), coalesce(stream, 0) FROM device_ops "
                                     "ORDER BY 1, 2"):
        name = thread_names.get((device, stream), f"stream {stream}")
        add(f"Device {device}", name, key=("device", device, stream))
    counter_keys = store.rows(
        "SELECT DISTINCT 'memory', coalesce(device_type, -1), coalesce(device_id, -1) FROM memory_events "
        "WHERE total_allocated_bytes IS NOT NULL ORDER BY 2, 3")
    counter_names = store.rows("SELECT DISTINCT name, series FROM counters ORDER BY 1, 2")
    store.temp_table("_tl_tracks", "kind VARCHAR, a BIGINT, b BIGINT, track INTEGER", keymap)
    con.execute("DROP TABLE IF EXISTS _tl")
    # src codes follow SOURCES; id is the row's id in that table. Sorted by
    # start so that DuckDB's zone maps skip row groups outside a window.
    con.execute(f"""
        CREATE TEMP TABLE _tl AS
        SELECT t.track, coalesce(h.depth, 0) AS depth, h.start_ns, h.start_ns + greatest(h.dur_ns, 0) AS end_ns,
               h.name, 0::TINYINT AS src, h.op_id AS id
        FROM host_ops h JOIN _tl_tracks t ON t.kind = 'host' AND t.a = h.pid AND t.b = h.tid
        WHERE h.category <> 'python_function' AND h.start_ns IS NOT NULL
        UNION ALL
        SELECT t.track, coalesce(h.depth + 1, 0), r.start_ns, r.start_ns + greatest(r.dur_ns, 0), r.name,
               1::TINYINT, r.call_id
        FROM runtime_calls r JOIN _tl_tracks t ON t.kind = 'host' AND t.a = r.pid AND t.b = r.tid
        LEFT JOIN host_ops h ON h.op_id = r.host_op_id
        WHERE r.start_ns IS NOT NULL
        UNION ALL
        SELECT t.track, 0, d.start_ns, d.start_ns + greatest(d.dur_ns, 0), d.name, 2::TINYINT, d.device_op_id
        FROM device_ops d JOIN _tl_tracks t ON t.kind = 'device' AND t.a = coalesce(d.device, 0)
             AND t.b = coalesce(d.stream, 0)
        WHERE d.start_ns IS NOT NULL
        UNION ALL
        SELECT (SELECT track FROM _tl_tracks WHERE kind = 'steps'), 0, start_ns, end_ns,
               {STEP_NAME_SQL}, 3::TINYINT, step FROM steps
        UNION ALL
        SELECT (SELECT track FROM _tl_tracks WHERE kind = 'markers'), 0, start_ns, coalesce(end_ns, start_ns),
               name, 4::TINYINT, row_number() OVER (ORDER BY {ROW_ORDER['markers']}) - 1
        FROM markers WHERE kind <> 'device_annotation'
        UNION ALL
        SELECT (SELECT track FROM _tl_tracks WHERE kind = 'gc'), 0, start_ns, start_ns + dur_ns,
               {GC_NAME_SQL}, 5::TINYINT,
               row_number() OVER (ORDER BY {ROW_ORDER['gc_pauses']}) - 1
        FROM gc_pauses
        ORDER BY start_ns
    """)
    if py_threads:
        _add_python_frames(store)
    _nest_markers(store)
    n = con.execute("SELECT count(*) FROM _tl").fetchone()[0]
    q = con.execute(f"SELECT quantile_disc(end_ns - start_ns, {_LONG_QUANTILE}) FROM _tl").fetchone()[0]
    long_ns = max(int(q or 0), 1)
    # The few long slices again, apart: a window query filters the short ones
    # on start alone (start >= t0 - long_ns) and scans only these in full.
    con.execute("DROP TABLE IF EXISTS _tl_long")
    con.execute(f"CREATE TEMP TABLE _tl_long AS SELECT * FROM _tl WHERE end_ns - start_ns > {long_ns} "
                "ORDER BY start_ns")
    depths = dict(con.execute("SELECT track, max(depth) FROM _tl GROUP BY track").fetchall())
    tracks = [Track(t.id, t.group, t.name, t.kind, int(depths.get(t.id, 0))) for t in tracks]
    # Drop the mlprof tracks that hold nothing.
    next_id = len(tracks)
    tracks = [t for t in tracks if t.group != "mlprof" or t.id in depths]
    _build_counters(store, tracks, next_id, counter_keys, counter_names)
    flow_count = _build_flows(store)
    lo, hi = con.execute("SELECT min(s), max(e) FROM (SELECT min(start_ns) s, max(end_ns) e FROM _tl UNION ALL "
                         "SELECT min(ts_ns), max(ts_ns) FROM _tl_counters)").fetchone()
    w0, w1 = con.execute("SELECT min(start_ns), max(end_ns) FROM steps").fetchone()
    if w0 is None:
        w0, w1 = con.execute("SELECT min(start_ns), max(end_ns) FROM _tl").fetchone()
    return TimelineIndex(tracks=tracks, start_ns=lo, end_ns=hi, slice_count=n, long_threshold_ns=long_ns,
                         flow_count=flow_count, window_start_ns=w0, window_end_ns=w1)


def _add_python_frames(store: TableStore) -> None:
    """Python frames have no depth in the table: nest them per thread here."""
    got = store.sql("""
        SELECT t.track, h.start_ns, h.start_ns + greatest(h.dur_ns, 0) AS end_ns, h.op_id
        FROM host_ops h JOIN _tl_tracks t ON t.kind = 'python' AND t.a = h.pid AND t.b = h.tid
        WHERE h.category = 'python_function' AND h.start_ns IS NOT NULL
        ORDER BY t.track, h.start_ns, end_ns DESC, h.op_id""").fetchnumpy()
    track = np.asarray(got["track"])
    if not len(track):
        return
    depth = np.zeros(len(track), dtype=np.int32)
    bounds = np.flatnonzero(np.diff(track)) + 1
    for lo, hi in zip(np.r_[0, bounds], np.r_[bounds, len(track)]):
        depth[lo:hi] = _nesting_depth(np.asarray(got["start_ns"])[lo:hi], np.asarray(got["end_ns"])[lo:hi])
    store.con.register("_py_depth", {"id": np.asarray(got["op_id"]), "depth": depth, "track": track})
    store.con.execute("""CREATE OR REPLACE TEMP TABLE _tl AS SELECT * FROM _tl UNION ALL
                         SELECT p.track, p.depth, h.start_ns, h.start_ns + greatest(h.dur_ns, 0), h.name,
                                0::TINYINT, h.op_id
                         FROM _py_depth p JOIN host_ops h ON h.op_id = p.id ORDER BY start_ns""")
    store.con.unregister("_py_depth")


def _nest_markers(store: TableStore) -> None:
    """mstx ranges nest and overlap: give each a depth so none hides another."""
    got = store.sql("SELECT id, start_ns, end_ns FROM _tl WHERE src = 4 ORDER BY start_ns, end_ns DESC, id"
                    ).fetchnumpy()
    if not len(got["id"]):
        return
    depth = _nesting_depth(np.asarray(got["start_ns"]), np.asarray(got["end_ns"]))
    store.con.register("_mk_depth", {"id": np.asarray(got["id"]), "depth": depth})
    store.con.execute("UPDATE _tl SET depth = m.depth FROM _mk_depth m WHERE _tl.src = 4 AND _tl.id = m.id")
    store.con.unregister("_mk_depth")


def _build_counters(store: TableStore, tracks: list[Track], next_id: int, memory_keys, counter_names) -> None:
    con = store.con
    con.execute("DROP TABLE IF EXISTS _tl_counters")
    con.execute("CREATE TEMP TABLE _tl_counters (track INTEGER, ts_ns BIGINT, value DOUBLE)")
    for _, dtype, did in memory_keys:
        tid, next_id = next_id, next_id + 1
        tracks.append(Track(tid, "Memory", f"allocated ({device_label(dtype, did)})", "counter", 0, "bytes"))
        con.execute("""INSERT INTO _tl_counters SELECT ?, ts_ns, total_allocated_bytes FROM memory_events
                       WHERE coalesce(device_type, -1) = ? AND coalesce(device_id, -1) = ?
                         AND total_allocated_bytes IS NOT NULL""", [tid, dtype, did])
    for name, series in counter_names:
        tid, next_id = next_id, next_id + 1
        label, unit = counter_label(name, series)
        tracks.append(Track(tid, "Counters", label, "counter", 0, unit))
        con.execute("INSERT INTO _tl_counters SELECT ?, ts_ns, value FROM counters WHERE name IS NOT DISTINCT FROM ? "
                    "AND series IS NOT DISTINCT FROM ?", [tid, name, series])
    con.execute("CREATE OR REPLACE TEMP TABLE _tl_counters AS SELECT * FROM _tl_counters ORDER BY ts_ns")


def _build_flows(store: TableStore) -> int:
    """Arrows: launch (runtime call) -> device op, and the trace's other flows."""
    con = store.con
    con.execute("DROP TABLE IF EXISTS _tl_flows")
    con.execute("""
        CREATE TEMP TABLE _tl_flows AS
        WITH launch AS (
            SELECT a.track AS from_track, a.depth AS from_depth, a.start_ns AS from_ns,
                   b.track AS to_track, b.depth AS to_depth, b.start_ns AS to_ns, 'ac2g' AS category
            FROM runtime_calls r JOIN device_ops d
              ON r.window_index = d.window_index AND r.correlation = d.correlation
            JOIN _tl a ON a.src = 1 AND a.id = r.call_id
            JOIN _tl b ON b.src = 2 AND b.id = d.device_op_id),
        other AS (
            -- A flow binds to the slice starting at its time on its track (the deepest if several).
            SELECT s.track AS from_track,
                   coalesce((SELECT max(x.depth) FROM _tl x WHERE x.track = s.track AND x.start_ns = f.start_ns), 0)
                       AS from_depth, f.start_ns AS from_ns,
                   e.track AS to_track,
                   coalesce((SELECT max(x.depth) FROM _tl x WHERE x.track = e.track AND x.start_ns = f.end_ns), 0)
                       AS to_depth, f.end_ns AS to_ns, f.category
            FROM flows f
            JOIN _tl_tracks s ON s.kind IN ('host', 'device') AND s.a = f.start_pid AND s.b = f.start_tid
            JOIN _tl_tracks e ON e.kind IN ('host', 'device') AND e.a = f.end_pid AND e.b = f.end_tid
            WHERE f.category <> 'ac2g')
        SELECT * FROM launch UNION ALL SELECT * FROM other
        ORDER BY from_ns, to_ns, from_track, to_track, from_depth, to_depth, category""")
    return con.execute("SELECT count(*) FROM _tl_flows").fetchone()[0]


def _overlapping(index: TimelineIndex, t0_ns: int, t1_ns: int, track_cond: str = "") -> str:
    """The slices that overlap [t0, t1), as SQL: the short ones read by start alone (they start at most
    long_threshold before t0 if they reach into the window), the few long ones apart."""
    # end >= t0 (not >): an instant (marker, zero-length slice) at t0 is in the window.
    return (f"SELECT * FROM _tl WHERE start_ns < {t1_ns} AND start_ns >= {t0_ns - index.long_threshold_ns} "
            f"AND end_ns >= {t0_ns} AND end_ns - start_ns <= {index.long_threshold_ns}{track_cond} "
            f"UNION ALL SELECT * FROM _tl_long WHERE start_ns < {t1_ns} AND end_ns >= {t0_ns}{track_cond}")


def query_window(store: TableStore, index: TimelineIndex, t0_ns: int, t1_ns: int, width_px: int,
                 tracks: list[int] | None = None) -> dict:
    """Slices, merged blocks, counters and flows of [t0, t1) at ``width_px`` pixels."""
    width_px = max(1, min(int(width_px), MAX_PX))
    t0_ns, t1_ns = int(t0_ns), int(max(t1_ns, t0_ns + 1))
    bucket = max(1, (t1_ns - t0_ns) // width_px)
    con = store.con
    track_cond = ""
    if tracks is not None:
        track_cond = f" AND track IN ({', '.join(str(int(t)) for t in tracks) or '-1'})"
    rows = con.execute(f"""
        WITH v AS ({_overlapping(index, t0_ns, t1_ns, track_cond)}),
        big AS (SELECT track, depth, start_ns, end_ns, name, 1::BIGINT AS n, end_ns - start_ns AS busy_ns, src, id
                FROM v WHERE end_ns - start_ns >= {bucket}),
        -- Short slices: first one row per (track, depth, bucket), then runs of
        -- consecutive buckets become one block (the window function only sees
        -- at most px rows per track row, whatever the size of the trace). A block
        -- is named after its longest slice; of equally long ones the last by name,
        -- not whichever the threads met first.
        per_bucket AS (SELECT track, depth, (start_ns - {t0_ns}) // {bucket} AS b, min(start_ns) AS start_ns,
                              max(end_ns) AS end_ns, arg_max(name, (end_ns - start_ns, name)) AS name,
                              max(end_ns - start_ns) AS longest_ns, count(*) AS n, sum(end_ns - start_ns) AS busy_ns,
                              any_value(src) AS src, any_value(id) AS id
                       FROM v WHERE end_ns - start_ns < {bucket} GROUP BY track, depth, b),
        runs AS (SELECT *, b - row_number() OVER (PARTITION BY track, depth ORDER BY b) AS island FROM per_bucket),
        merged AS (SELECT track, depth, min(start_ns) AS start_ns, max(end_ns) AS end_ns,
                          arg_max(name, (longest_ns, name)) AS name, sum(n)::BIGINT AS n,
                          sum(busy_ns)::BIGINT AS busy_ns,
                          CASE WHEN sum(n) = 1 THEN any_value(src) END AS src,
                          CASE WHEN sum(n) = 1 THEN any_value(id) END AS id
                   FROM runs GROUP BY track, depth, island)
        SELECT * FROM big UNION ALL
        SELECT m.track, m.depth, m.start_ns, m.end_ns, m.name, m.n, m.busy_ns, m.src, m.id FROM merged m
        -- The merged blocks come from a hash aggregate: without an order the page drew (and its CSV
        -- listed) them differently on each request, and overlapping slices won the click by chance.
        ORDER BY track, depth, start_ns, end_ns, name, src, id
        """).fetchnumpy()
    names_arr = rows["name"]
    names, name_idx = np.unique(np.asarray(names_arr, dtype=object).astype(str), return_inverse=True) \
        if len(names_arr) else (np.array([], dtype=object), np.array([], dtype=np.int64))
    src = rows["src"]
    ident = rows["id"]
    slices = {
        "track": np.asarray(rows["track"]).tolist(),
        "depth": np.asarray(rows["depth"]).tolist(),
        "start": (np.asarray(rows["start_ns"]) - t0_ns).tolist(),
        "dur": (np.asarray(rows["end_ns"]) - np.asarray(rows["start_ns"])).tolist(),
        "name": name_idx.reshape(-1).tolist(),
        "count": np.asarray(rows["n"]).tolist(),
        "busy": np.asarray(rows["busy_ns"]).tolist(),
        "src": [None if m else int(v) for v, m in zip(np.ma.getdata(src).tolist(), np.ma.getmaskarray(src))],
        "id": [None if m else int(v) for v, m in zip(np.ma.getdata(ident).tolist(), np.ma.getmaskarray(ident))],
    }
    counters = con.execute(f"""
        SELECT track, min(ts_ns) AS ts_ns, max(value) AS value FROM _tl_counters
        WHERE ts_ns >= {t0_ns - bucket} AND ts_ns < {t1_ns + bucket}{track_cond}
        GROUP BY track, (ts_ns - {t0_ns}) // {bucket} ORDER BY track, ts_ns""").fetchnumpy()
    # The last sample before the window gives the value at its left edge (the larger of two at one ns).
    before = con.execute(f"""SELECT track, arg_max(value, (ts_ns, value)) FROM _tl_counters
                             WHERE ts_ns < {t0_ns - bucket}{track_cond} GROUP BY track ORDER BY track""").fetchall()
    flows_n = con.execute(f"""SELECT count(*) FROM (SELECT 1 FROM _tl_flows
        WHERE least(from_ns, to_ns) < {t1_ns} AND greatest(from_ns, to_ns) >= {t0_ns} LIMIT {MAX_FLOWS + 1})"""
                          ).fetchone()[0]
    flows = None
    if flows_n <= MAX_FLOWS:
        f = con.execute(f"""SELECT from_track, from_depth, from_ns - {t0_ns}, to_track, to_depth, to_ns - {t0_ns},
                                   category FROM _tl_flows
                            WHERE least(from_ns, to_ns) < {t1_ns} AND greatest(from_ns, to_ns) >= {t0_ns}""").fetchall()
        flows = [list(r) for r in f]
    return {
        "t0_ns": t0_ns, "t1_ns": t1_ns, "bucket_ns": bucket,
        "names": names.tolist(), "slices": slices,
        "counters": {"track": np.asarray(counters["track"]).tolist(),
                     "ts": (np.asarray(counters["ts_ns"]) - t0_ns).tolist(),
                     "value": np.asarray(counters["value"]).tolist(),
                     "before": [list(r) for r in before]},
        "flows": flows, "flows_hidden": None if flows is not None else f"more than {MAX_FLOWS} arrows; zoom in",
    }


# What a slice is, by its source (SOURCES) and its track (python frames are host_ops rows on a python track).
RANGE_KINDS = {"python": "Python function", 0: "host op", 1: "runtime call", 2: "device op", 3: "step", 4: "marker",
               5: "GC pause"}


def range_stats(store: TableStore, index: TimelineIndex, t0_ns: int, t1_ns: int, limit: int = 50) -> dict:
    """What a selected time range [t0, t1) holds, per name and kind: slices, their time inside the range
    (each clipped to it), the longest; the kinds' totals. Exact, whatever the zoom (the window answer merges)."""
    t0_ns, t1_ns = int(t0_ns), int(max(t1_ns, t0_ns + 1))
    kind_sql = "CASE WHEN k.kind = 'python' THEN 'python' ELSE v.src::VARCHAR END"
    inside = (f"SELECT v.name, {kind_sql} AS kind, least(v.end_ns, {t1_ns}) - greatest(v.start_ns, {t0_ns}) AS in_ns, "
              f"v.end_ns - v.start_ns AS dur_ns FROM ({_overlapping(index, t0_ns, t1_ns)}) v "
              "LEFT JOIN _tl_tracks k ON k.track = v.track")
    rows = store.dicts(f"""SELECT name, kind, count(*) AS count, sum(in_ns)::BIGINT AS in_range_ns,
                                  max(dur_ns)::BIGINT AS longest_ns
                           FROM ({inside}) GROUP BY name, kind
                           ORDER BY in_range_ns DESC, count DESC, name, kind LIMIT {int(limit)}""")
    kinds = store.dicts(f"""SELECT kind, count(*) AS count, count(DISTINCT name) AS names,
                                   sum(in_ns)::BIGINT AS in_range_ns
                            FROM ({inside}) GROUP BY kind ORDER BY in_range_ns DESC, kind""")
    for row in rows + kinds:
        row["kind"] = RANGE_KINDS.get(row["kind"] if row["kind"] == "python" else int(row["kind"]), row["kind"])
    return {"t0_ns": t0_ns, "t1_ns": t1_ns, "span_ns": t1_ns - t0_ns, "rows": rows, "kinds": kinds,
            "names": sum(k["names"] for k in kinds), "truncated": sum(k["names"] for k in kinds) > len(rows)}


def search(store: TableStore, text: str, limit: int = 1000) -> dict:
    """Slices whose name contains ``text`` (case-insensitive): names with counts, and the first hits."""
    pattern = "%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
    both = "_tl"
    total = store.con.execute(f"SELECT count(*) FROM {both} WHERE name ILIKE ? ESCAPE '\\'", [pattern]).fetchone()[0]
    names = store.dicts(f"SELECT name, count(*) AS count, sum(end_ns - start_ns) AS total_ns FROM {both} "
                        "WHERE name ILIKE ? ESCAPE '\\' GROUP BY name ORDER BY count DESC, name LIMIT 50", [pattern])
    hits = store.dicts(f"SELECT track, depth, start_ns, end_ns, name, src, id FROM {both} "
                       f"WHERE name ILIKE ? ESCAPE '\\' ORDER BY start_ns, track, depth, src, id LIMIT {int(limit)}",
                       [pattern])
    return {"total": total, "names": names, "hits": hits, "truncated": total > len(hits)}


def locate(store: TableStore, src: int, row_id: int) -> dict | None:
    """Where one slice is drawn: its track, depth, start and end (absolute ns), and name."""
    rows = store.dicts("SELECT track, depth, start_ns, end_ns, name, src, id FROM _tl WHERE src = ? AND id = ? "
                       "LIMIT 1", [src, row_id])
    return rows[0] if rows else None


def slowest(store: TableStore, name: str, lo_ns: int | None = None, hi_ns: int | None = None) -> dict | None:
    """The longest slice named ``name`` (starting in [lo, hi) when given): where an advisor's op evidence points."""
    cond, params = "", [name]
    if lo_ns is not None and hi_ns is not None:
        cond, params = " AND start_ns >= ? AND start_ns < ?", [name, lo_ns, hi_ns]
    rows = store.dicts(f"SELECT track, depth, start_ns, end_ns, name, src, id FROM _tl WHERE name = ?{cond} "
                       "AND src IS NOT NULL ORDER BY end_ns - start_ns DESC, start_ns, src, id LIMIT 1", params)
    return rows[0] if rows else None
