"""Which kind of device a parsed run ran on: npu (Ascend, torch_npu import), gpu or cpu.

Read from the tables only: the Ascend importer writes ``device_type`` = "npu"
to ``metadata``; a Kineto trace with device ops is a GPU run; one without is CPU-only.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from mlprof.tables.store import TableStore

__all__ = ["RunDevice", "run_device"]


@dataclass(frozen=True)
class RunDevice:
    kind: str  # "npu", "gpu" or "cpu"
    name: str | None  # e.g. Ascend910B, NVIDIA A100-SXM4-80GB, when the trace says
    source_format: str  # ascend_text, ascend_db or kineto

    @property
    def label(self) -> str:
        return f"{self.kind.upper()} ({self.name})" if self.name else self.kind.upper()

    def to_dict(self) -> dict:
        return {**asdict(self), "label": self.label}


def run_device(store: TableStore) -> RunDevice:
    props = store.meta("deviceProperties")
    name = props[0].get("name") if isinstance(props, list) and props and isinstance(props[0], dict) else None
    fmt = store.meta("source.format") or "kineto"
    if store.meta("device_type") == "npu":
        return RunDevice("npu", name or "Ascend NPU", fmt)
    has_device = store.rows("SELECT count(*) FROM device_ops")[0][0] > 0
    return RunDevice("gpu" if has_device else "cpu", name if has_device else None, fmt)
