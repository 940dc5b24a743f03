"""Reading tables stays inside the memory budget: DuckDB gets half of it and
spills past that into a directory of its own, which is gone once the store
closes; the budget is one setting for every command."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from mlprof.errors import ConfigError
from mlprof.parse import ParseOptions, parse_path
from mlprof.settings.options import parse_size
from mlprof.tables.budget import MEMORY_BUDGET_ENV, memory_budget_bytes
from mlprof.tables.store import TableStore
from tests.parse.test_streaming import _events, _write


@pytest.fixture(scope="module")
def parsed(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("budget")
    trace = _write(root / "t.json", _events(300), indent=2)
    (result,) = parse_path(trace, ParseOptions(output_dir=root / "out"))
    return Path(result.output_dir)


@pytest.mark.parametrize("text, size", [("512M", 512 * 2**20), ("2G", 2 * 2**30), ("1.5g", 3 * 2**29),
                                        ("512MiB", 512 * 2**20), ("4096", 4096), ("", None), ("lots", None),
                                        ("-1G", None), ("nanG", None), ("1e3", None), ("2048T", None)])
def test_sizes_are_read_as_the_cli_writes_them(text, size):
    assert parse_size(text) == size


def test_one_size_reader_for_the_budget_and_the_storage_limit():
    # Units read the same everywhere; only a bare number differs: bytes for a budget, megabytes for
    # storage_limit (msprof's --storage-limit), and a bad one is a ConfigError, not a crash.
    from mlprof.collect.run_options import RunOptions

    assert parse_size("1.5GiB") == RunOptions(storage_limit="1.5GiB").storage_limit_bytes == 3 * 2**29
    assert parse_size("300", bare_unit="m") == RunOptions(storage_limit=300).storage_limit_bytes == 300 * 2**20
    with pytest.raises(ConfigError, match="not a size"):
        RunOptions(storage_limit="lots")


def test_the_budget_is_the_option_else_the_environment_else_one_gib(monkeypatch):
    monkeypatch.delenv(MEMORY_BUDGET_ENV, raising=False)
    assert memory_budget_bytes() == 2**30
    monkeypatch.setenv(MEMORY_BUDGET_ENV, "256M")
    assert memory_budget_bytes() == 256 * 2**20
    assert memory_budget_bytes(2**31) == 2**31
    for bad in ("lots", "1M"):  # not a size; under the 64 MiB floor
        monkeypatch.setenv(MEMORY_BUDGET_ENV, bad)
        with pytest.raises(ConfigError, match=MEMORY_BUDGET_ENV):
            memory_budget_bytes()


def test_duckdb_holds_half_the_budget_and_spills_outside_the_working_directory(parsed, monkeypatch, tmp_path):
    monkeypatch.setenv(MEMORY_BUDGET_ENV, "64M")
    monkeypatch.chdir(tmp_path)
    with TableStore(parsed / "tables") as store:
        assert store.rows("SELECT current_setting('memory_limit')")[0][0] == "32.0 MiB"
        spill = Path(store.rows("SELECT current_setting('temp_directory')")[0][0])
        assert spill.parent.parent == Path(tempfile.gettempdir())
        # Grouping 10M rows into 4M groups does not fit 32 MiB: DuckDB spills instead of failing or growing.
        rows = store.rows("SELECT count(*), sum(n) FROM (SELECT i % 4000000 AS k, count(*) AS n "
                          "FROM range(10000000) t(i) GROUP BY k)")
        assert rows == [(4000000, 10000000)] and not store.over_budget
        assert spill.is_dir()
    assert not spill.exists() and list(tmp_path.iterdir()) == []


def test_spill_goes_to_a_private_directory_never_to_one_another_user_planted(parsed, monkeypatch, tmp_path):
    """Issue 30, item 1: the spill directory was $TMPDIR/mlprof-spill-<pid>-<n>, reused when it existed;
    DuckDB then wrote its temporary files through symlinks planted in it."""
    from mlprof.tables import store as store_module

    monkeypatch.setenv(MEMORY_BUDGET_ENV, "64M")
    shared = tmp_path / "shared_tmp"
    shared.mkdir()
    os.chmod(shared, 0o1777)  # a sticky temporary directory any user may create names in
    monkeypatch.setattr(tempfile, "tempdir", str(shared))
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    upcoming = int(repr(store_module._spill_dirs).strip("count()"))
    planted = []
    for n in range(upcoming, upcoming + 5):  # the names the next connections would take
        d = shared / f"mlprof-spill-{os.getpid()}-{n}"
        d.mkdir()
        os.chown(d, 65534, 65534)
        d.chmod(0o777)
        for i in range(8):
            for name in (f"duckdb_temp_{os.getpid()}_{i}_owner", f"duckdb_temp_storage_S32K-{i}.tmp",
                         f"duckdb_temp_block-{i}.block"):
                (d / name).symlink_to(victim)
        planted.append(d)
    with TableStore(parsed / "tables") as store:
        spill = Path(store.rows("SELECT current_setting('temp_directory')")[0][0])
        store.rows("SELECT count(*) FROM (SELECT i % 4000000 AS k, count(*) AS n FROM range(10000000) t(i) GROUP BY k)")
        assert spill.parent not in planted and spill not in planted
        st = os.lstat(spill.parent)
        assert st.st_uid == os.geteuid() and st.st_mode & 0o777 == 0o700
        assert spill.is_dir()
    assert victim.read_text() == "precious"


def test_a_query_that_cannot_spill_runs_over_the_budget_and_says_so(parsed, monkeypatch, capsys):
    monkeypatch.setenv(MEMORY_BUDGET_ENV, "64M")
    with TableStore(parsed / "tables") as store:
        # One list of 5M values (40 MB) is one value, held whole: out of DuckDB's 32 MiB.
        whole = "SELECT len(list(i)) FROM range(5000000) t(i)"
        assert store.rows(whole) == [(5000000,)] and store.over_budget
        assert store.rows(whole) == [(5000000,)]
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "32.0 MiB share of the memory budget" in err and MEMORY_BUDGET_ENV in err


def test_a_bad_budget_in_the_environment_is_one_line_and_exit_2(parsed):
    env = {**os.environ, MEMORY_BUDGET_ENV: "a lot"}
    got = subprocess.run([sys.executable, "-m", "mlprof", "advise", str(parsed)], env=env, capture_output=True,
                         text=True, timeout=120)
    assert got.returncode == 2, got.stderr
    assert got.stderr.count("\n") == 1 and MEMORY_BUDGET_ENV in got.stderr and "Traceback" not in got.stderr


def test_a_parse_holds_its_duckdb_connections_to_its_own_budget(tmp_path, monkeypatch):
    """`mlprof parse --memory-budget 128M` limits the DuckDB that writes and attributes the tables too."""
    from mlprof.tables import store as store_module

    monkeypatch.setenv(MEMORY_BUDGET_ENV, "4G")
    limits = []
    real = store_module.connect

    def spy(budget_bytes=None):
        con = real(budget_bytes)
        limits.append(con.execute("SELECT current_setting('memory_limit')").fetchall()[0][0])
        return con

    monkeypatch.setattr(store_module, "connect", spy)
    trace = _write(tmp_path / "t.json", _events(100), indent=2)
    parse_path(trace, ParseOptions(output_dir=tmp_path / "out", memory_budget_bytes=128 * 2**20))
    assert limits and set(limits) == {"64.0 MiB"}
