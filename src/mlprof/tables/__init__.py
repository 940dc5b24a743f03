"""The parsed tables: schemas (schema.py) and their Parquet store (store.py)."""

from mlprof.tables.schema import TABLES, Column, TableSchema
from mlprof.tables.store import TableStore, write_tables

__all__ = ["TABLES", "Column", "TableSchema", "TableStore", "write_tables"]
