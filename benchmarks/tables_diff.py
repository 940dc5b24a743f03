"""Compare two directories of parsed tables row for row, order included.

    python benchmarks/tables_diff.py A/tables B/tables

Prints one line per table that differs (missing, other columns, other rows) and a summary;
exits 1 when any differs, 2 when a directory holds no tables. Used to check that two ways of building the tables (whole and in
stretches, before and after a change) give the very same tables.
"""

from __future__ import annotations

import sys
from pathlib import Path

import duckdb


def differing_tables(a: Path, b: Path) -> list[str]:
    con = duckdb.connect()
    out = [f"{g.name}: missing in {a}" for g in sorted(b.glob("*.parquet")) if not (a / g.name).exists()]
    for f in sorted(a.glob("*.parquet")):
        g = b / f.name
        if not g.exists():
            out.append(f"{f.name}: missing in {b}")
            continue
        cols = [r[0] for r in con.execute(f"DESCRIBE SELECT * FROM read_parquet('{f}')").fetchall()]
        if cols != [r[0] for r in con.execute(f"DESCRIBE SELECT * FROM read_parquet('{g}')").fetchall()]:
            out.append(f"{f.name}: other columns")
            continue
        rows = [con.execute(f"SELECT count(*) FROM read_parquet('{p}')").fetchall()[0][0] for p in (f, g)]
        unequal = " OR ".join(f'x."{c}" IS DISTINCT FROM y."{c}"' for c in cols)
        diff = con.execute(f"""SELECT count(*) FROM read_parquet('{f}', file_row_number=true) x
            FULL JOIN read_parquet('{g}', file_row_number=true) y USING (file_row_number)
            WHERE {unequal}""").fetchall()[0][0]
        if rows[0] != rows[1] or diff:
            out.append(f"{f.name}: {rows[0]} and {rows[1]} rows, {diff} differ")
    return out


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    a, b = Path(args[0]), Path(args[1])
    empty = [p for p in (a, b) if not any(p.glob("*.parquet"))]
    if empty:  # a parse's directory, not its tables/, or a wrong path: nothing would "differ"
        print(f"{empty[0]}: no table files here (give the tables/ directory of a parse)", file=sys.stderr)
        return 2
    bad = differing_tables(a, b)
    for line in bad:
        print(line)
    tables = {p.name for p in a.glob("*.parquet")} | {p.name for p in b.glob("*.parquet")}
    print(f"{a} vs {b}: {len(tables)} tables, {len(bad)} differ")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
