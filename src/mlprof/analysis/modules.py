"""The nn.Module tree: per module path, forward calls, host time, device time and backward time.

From mlprof's module calls (``module_calls``, recorded by global forward
hooks). Device time is the time of the device work launched by host ops that
started inside the module's forward; backward time is the host time of the
autograd nodes its forward ops created (the ``backward_links`` table), so
no backward hook is needed. Self figures exclude child modules;
totals include them, so a parent's total is its self plus its children's totals.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from mlprof.tables.store import TableStore

__all__ = ["ModuleStat", "module_tree", "module_steps"]


@dataclass(frozen=True)
class ModuleStat:
    path: str
    module_type: str
    depth: int
    calls: int
    total_ns: int  # forward host time, child modules included
    self_ns: int  # forward host time outside child modules
    device_total_ns: int
    device_self_ns: int
    backward_total_ns: int
    backward_self_ns: int
    first_start_ns: int

    def to_dict(self) -> dict:
        return asdict(self)


# The innermost closed module call on the op's thread that contains ``ts``.
_INNERMOST = """
    SELECT x.key, arg_max(m.module_path, m.depth) AS path
    FROM {source} x JOIN module_calls m
      ON m.window_index = x.window_index AND m.tid = x.tid AND x.ts >= m.start_ns AND x.ts < m.end_ns
    GROUP BY x.key"""


def _self_by_path(store: TableStore, source: str, value: str) -> dict[str, int]:
    rows = store.rows(f"""
        WITH x AS ({source}), inner_most AS ({_INNERMOST.format(source='x')})
        SELECT i.path, sum(x.{value}) FROM x JOIN inner_most i USING (key) GROUP BY i.path""")
    return {path: int(total) for path, total in rows}


def module_steps(store: TableStore, step: int | None = None) -> int:
    """How many steps :func:`module_tree`'s sums are over (the steps with module calls; 1 for one step): the
    divisor of its per-step figures, the same for the CLI and the dashboard."""
    if step is not None:
        return 1
    (n,) = store.rows("SELECT count(DISTINCT (window_index, step)) FROM module_calls WHERE step IS NOT NULL")[0]
    return max(int(n), 1)


def module_tree(store: TableStore, step: int | None = None) -> list[ModuleStat]:
    """Every module path seen, in tree order (parents before children, by first call)."""
    cond = "" if step is None else "AND step = ?"
    params = [] if step is None else [step]
    calls = store.rows(f"""
        SELECT c.module_path, any_value(c.module_type), min(c.depth), count(*),
               sum(c.dur_ns), sum(c.dur_ns) - coalesce(sum(k.child_ns), 0), min(c.start_ns)
        FROM module_calls c
        LEFT JOIN (SELECT parent_call_id, sum(dur_ns) AS child_ns FROM module_calls
                   WHERE dur_ns IS NOT NULL GROUP BY parent_call_id) k ON k.parent_call_id = c.call_id
        WHERE c.dur_ns IS NOT NULL {cond.replace('step', 'c.step')}
        GROUP BY c.module_path""", params)
    if not calls:
        return []
    step_cond = "" if step is None else f"AND h.step = {int(step)}"
    device_self = _self_by_path(store, f"""
        SELECT d.device_op_id AS key, h.window_index, h.tid, h.start_ns AS ts, d.dur_ns AS value
        FROM device_ops d JOIN host_ops h ON h.op_id = d.host_op_id
        WHERE d.kind IN ('kernel', 'memcpy', 'memset') {step_cond}""", "value")
    # Each autograd node goes to the module whose forward op created it (backward_links, one definition).
    backward_self = _self_by_path(store, f"""
        SELECT h.op_id AS key, h.window_index, b.forward_tid AS tid, b.forward_start_ns AS ts, h.dur_ns AS value
        FROM backward_links b JOIN host_ops h ON h.op_id = b.op_id
        WHERE b.op_id = b.node_op_id AND b.forward_op_id IS NOT NULL {step_cond}""", "value")

    def total(self_values: dict[str, int], path: str) -> int:
        prefix = path + "."
        return sum(v for p, v in self_values.items() if p == path or p.startswith(prefix))

    out = [ModuleStat(path=path, module_type=mtype, depth=depth, calls=n, total_ns=int(tot), self_ns=int(own),
                      device_total_ns=total(device_self, path), device_self_ns=device_self.get(path, 0),
                      backward_total_ns=total(backward_self, path), backward_self_ns=backward_self.get(path, 0),
                      first_start_ns=int(first))
           for path, mtype, depth, n, tot, own, first in calls]
    first = {m.path: m.first_start_ns for m in out}

    def tree_key(path: str) -> tuple:
        # Depth-first: each ancestor's first call, then the module's own.
        parts = path.split(".")
        prefixes = [".".join(parts[:i]) for i in range(1, len(parts) + 1)]
        return tuple((first.get(p, first[path]), p) for p in prefixes)

    return sorted(out, key=lambda m: tree_key(m.path))
