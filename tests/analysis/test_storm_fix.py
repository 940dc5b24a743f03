"""op_storm's fix follows the storm's own evidence (issue 34): the phase its time sits in.

The demo's CNN loads its batches in the training process; default_collate stacks each sample with
hundreds of tiny `aten::as_strided` calls, so op_storm fired with most of its time in data loading, and
advised "model(x) on the batch instead of model(x[i:i+1])", a fix for a loop around the model. Two real
CPU runs under `mlprof run`: tiny per-sample ops in a dataset's __getitem__ (data loading), and a
per-sample loop around the model (forward). Which phase holds the storm is structural; that the storm is
found at all rests on its ops being tiny, a timing, hence QUIET_FILES.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from mlprof.analysis.advisor.rules_storm import storm_fix

MODEL_LOOP_FIX = "model(x) on the batch instead of model(x[i:i+1])"


def test_the_phase_holding_the_storm_picks_the_fix():
    where, fix = storm_fix({"data_loading": 6_700_000, "optimizer": 900_000, "forward": 200_000}, framework=False)
    assert where == " in data loading" and "DataLoader(num_workers=N" in fix and MODEL_LOOP_FIX not in fix
    where, fix = storm_fix({"forward": 5_000_000, "data_loading": 1_000_000}, framework=False)
    assert where == "" and MODEL_LOOP_FIX in fix
    where, fix = storm_fix({"optimizer": 3_000_000, "forward": 1_000_000}, framework=True)
    assert where == " in the optimizer step" and "foreach=True" in fix
    assert "torch.compile the model" in storm_fix({"forward": 1}, framework=True)[1]
    assert storm_fix({}, framework=False)[0] == ""


HEAD = """\
import torch
from torch import nn
from torch.nn import functional as F
torch.manual_seed(0)
torch.set_num_threads(1)
model = nn.Sequential(nn.Linear(32, 16), nn.ReLU(), nn.Linear(16, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
"""

DATA_LOADING = HEAD + textwrap.dedent("""\
    class Rows(torch.utils.data.Dataset):
        def __len__(self):
            return 10_000
        def __getitem__(self, i):
            x = torch.zeros(32)
            for j in range(32):          # one tiny op per feature: the storm, in data loading
                x[j] = (i * j) % 7
            return x, i % 4
    loader = torch.utils.data.DataLoader(Rows(), batch_size=8, num_workers=0)
    for step, (x, y) in enumerate(loader):
        if step == 40:
            break
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    """)

MODEL_LOOP = HEAD + textwrap.dedent("""\
    for step in range(40):
        x, y = torch.randn(64, 32), torch.randint(0, 4, (64,))
        out = [model(x[i:i + 1]) for i in range(64)]   # a per-sample loop around the model: the storm
        loss = F.cross_entropy(torch.cat(out), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    """)


def _op_storm(tmp_path: Path, name: str, script: str) -> dict:
    path = tmp_path / f"{name}.py"
    path.write_text(script)
    out = tmp_path / name
    env = {**os.environ, "MLPROF_LOCK_DIR": str(tmp_path / "locks")}
    done = subprocess.run([sys.executable, "-m", "mlprof", "run", "--output", str(out), "--skip-first", "3",
                           "--active", "10", "--", sys.executable, str(path)],
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    advice = subprocess.run([sys.executable, "-m", "mlprof", "advise", str(out), "--json", "--no-write"],
                            env=env, capture_output=True, text=True, timeout=300)
    assert advice.returncode == 0, advice.stderr[-2000:]
    entries = json.loads(advice.stdout)
    entries = entries if isinstance(entries, list) else [entries]
    (storm,) = [f for e in entries for f in e["findings"] if f["id"] == "op_storm"]
    return storm


@pytest.mark.slow
def test_a_storm_in_data_loading_is_told_to_leave_the_step_and_a_model_loop_to_vectorise(tmp_path):
    pytest.importorskip("torch")
    loading = _op_storm(tmp_path, "loading", DATA_LOADING)
    phases = loading["evidence"]["metrics"]["storm_ns_by_phase"]
    assert phases.get("data_loading", 0) >= 0.5 * sum(phases.values()), phases
    assert "in data loading" in loading["title"]
    assert "DataLoader(num_workers=N" in loading["fix"] and MODEL_LOOP_FIX not in loading["fix"]

    looping = _op_storm(tmp_path, "looping", MODEL_LOOP)
    phases = looping["evidence"]["metrics"]["storm_ns_by_phase"]
    assert phases.get("data_loading", 0) < 0.5 * sum(phases.values()), phases
    assert MODEL_LOOP_FIX in looping["fix"] and "DataLoader(num_workers" not in looping["fix"]
