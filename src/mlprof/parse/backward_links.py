"""Backward charged to its forward cause: the ``backward_links`` table.

Every autograd node the engine runs (``autograd::engine::evaluate_function:
AddmmBackward0``) carries the sequence number of the forward op that created
it. Torch records the autograd counter's current value on every op, so ops
that create no node share the number with the next one that does: the
creator is the last forward op with that number that started before the node
ran. The ops run inside a node (its matmuls, and the ``aten::add_`` that
accumulates a gradient into the input of the next node) belong to the node.

This is the one definition of the link; the module tree, the advisor's rules
and the docs read it from the table (docs/attribution.md). It is written when
the tables are built, after the windows of a capture are combined, so a node
is linked whichever window part its forward op was parsed in.
"""

from __future__ import annotations

from pathlib import Path

from mlprof.tables.names import backward_node_sql
from mlprof.tables.schema import TABLES
from mlprof.tables.store import PARQUET_OPTIONS, TableStore

__all__ = ["BACKWARD_LINKS_TABLE", "NODE_NAME_SQL", "write_backward_links"]

BACKWARD_LINKS_TABLE = "backward_links"

# The engine's record of one node (torch's autograd engine names it so on every thread it runs on).
NODE_NAME_SQL = backward_node_sql()

# Ops that can have created a node: framework ops outside the backward (the nodes themselves, and the
# ops torch records inside them, carry the numbers of the forward ops they answer).
_FORWARD_SQL = ("category = 'cpu_op' AND name NOT LIKE 'autograd::%' AND name NOT ILIKE '%backward%' "
                "AND sequence_number IS NOT NULL AND sequence_number >= 0")

_LINKS_SQL = f"""
    WITH nodes AS (
        SELECT window_index, op_id, tid, start_ns, start_ns + dur_ns AS end_ns, sequence_number FROM host_ops
        WHERE {NODE_NAME_SQL} AND category = 'cpu_op' AND sequence_number IS NOT NULL AND sequence_number >= 0),
    fwd AS (SELECT window_index, sequence_number, op_id, tid, start_ns FROM host_ops WHERE {_FORWARD_SQL}),
    linked AS (
        SELECT n.window_index, n.op_id, n.tid, n.start_ns, n.end_ns,
               f.op_id AS forward_op_id, f.tid AS forward_tid, f.start_ns AS forward_start_ns
        FROM nodes n ASOF LEFT JOIN fwd f
          ON f.window_index = n.window_index AND f.sequence_number = n.sequence_number AND f.start_ns < n.start_ns),
    inside AS (
        -- The innermost node around each op of its thread: the latest to start at or before it.
        SELECT h.window_index, h.op_id, l.op_id AS node_op_id, l.forward_op_id, l.forward_tid,
               l.forward_start_ns
        FROM (SELECT window_index, op_id, tid, start_ns FROM host_ops
              WHERE category = 'cpu_op' AND tid IS NOT NULL AND start_ns IS NOT NULL) h
        ASOF JOIN linked l ON l.window_index = h.window_index AND l.tid = h.tid AND h.start_ns >= l.start_ns
        WHERE h.start_ns < l.end_ns)
    SELECT window_index, op_id, node_op_id, forward_op_id, forward_tid, forward_start_ns FROM inside
    ORDER BY window_index, op_id"""


def write_backward_links(store: TableStore, tables_dir: Path) -> None:
    """The ``backward_links`` table straight from the store's query into its file: a million host ops'
    links held as numpy columns and written again took 90 MB more at the parse's peak."""
    schema = TABLES[BACKWARD_LINKS_TABLE]
    select = ", ".join(f'CAST("{c.name}" AS {c.sql_type}) AS "{c.name}"' for c in schema.columns)
    target = str(Path(tables_dir) / f"{BACKWARD_LINKS_TABLE}.parquet").replace("'", "''")
    store.sql(f"COPY (SELECT {select} FROM ({_LINKS_SQL})) TO '{target}' ({PARQUET_OPTIONS})")
