"""torch_npu's SQLite export is read without writing a byte beside it (issue 30, item 5), on a real db.

The db of rank 0 is in WAL mode. ``file:{path}?mode=ro`` made SQLite add
``-shm``/``-wal`` files to the input folder, failed for a user who may not
write there ("attempt to write a readonly database") and on read-only media,
and took a ``#`` or ``?`` in a folder name as the end of the path.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from mlprof.parse.sqlite_input import open_read_only
from shared_data import SHARED_ASCEND
from tree_state import snapshot

RANK0 = SHARED_ASCEND / "db" / "level1" / "rank0_ascend_pt"
DB_NAME = "ascend_pytorch_profiler_0.db"
pytestmark = pytest.mark.skipif(not RANK0.is_dir(), reason="shared Ascend data not present")
# A folder name that cuts a raw URI ('#', '?') and tries to add options of its own.
HOSTILE = "run #1?mode=rwc&cache=shared"


def _read_only_copy(base: Path, folder: str = HOSTILE) -> Path:
    """The real rank folder under ``folder`` (by default a hostile name), every directory 0555 and file 0444."""
    rank = base / folder / RANK0.name
    shutil.copytree(RANK0, rank)
    for dirpath, dirnames, filenames in os.walk(base / folder, topdown=False):
        for name in filenames:
            os.chmod(Path(dirpath) / name, 0o444)
        os.chmod(dirpath, 0o555)
    return rank


def _parse(rank: Path, out: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mlprof", "parse", str(rank), "--output", str(out),
                           "--tables-only"], capture_output=True, text=True, timeout=300)


def test_a_read_only_wal_db_under_a_hostile_folder_name_parses_and_nothing_is_added(tmp_path):
    rank = _read_only_copy(tmp_path)
    before = snapshot(tmp_path)
    result = _parse(rank, tmp_path / "out")
    assert result.returncode == 0, result.stderr
    # Root writes through 0555: what matters is that nothing was added (no -shm, -wal, no empty "run " db).
    assert {k: v for k, v in snapshot(tmp_path).items() if not k.startswith("out")} == before
    assert "ascend_db" in (tmp_path / "out" / "parse_info.json").read_text()


def _mount_read_only(source: Path, target: Path) -> bool:
    """``source`` seen read-only at ``target`` (a read-only bind mount: not even root writes there)."""
    target.mkdir()
    if subprocess.run(["mount", "--bind", str(source), str(target)], capture_output=True).returncode != 0:
        return False
    if subprocess.run(["mount", "-o", "remount,bind,ro", str(target)], capture_output=True).returncode != 0:
        subprocess.run(["umount", str(target)], capture_output=True)
        return False
    return True


@pytest.mark.parametrize("folder", ["plain", HOSTILE])
def test_a_wal_db_on_read_only_media_parses(tmp_path, folder):
    """Read-only media as SQLite meets it: mode=ro failed there ("unable to open database file"; as a user who
    may not write the folder, "attempt to write a readonly database")."""
    rank = _read_only_copy(tmp_path / "disk", folder)
    media = tmp_path / "media"
    if not _mount_read_only(tmp_path / "disk", media):
        pytest.skip("cannot make a read-only bind mount here (needs CAP_SYS_ADMIN)")
    try:
        result = _parse(media / folder / rank.name, tmp_path / "out")
        assert result.returncode == 0, result.stderr
    finally:
        subprocess.run(["umount", str(media)], check=True)
    assert "ascend_db" in (tmp_path / "out" / "parse_info.json").read_text()


def test_rows_still_in_a_wal_file_are_read_from_a_private_copy(tmp_path):
    """A writer killed before its checkpoint leaves committed rows in -wal: immutable=1 would miss them."""
    folder = tmp_path / "in #x"
    folder.mkdir()
    db = folder / DB_NAME
    shutil.copyfile(RANK0 / "ASCEND_PROFILER_OUTPUT" / DB_NAME, db)
    writer = sqlite3.connect(db)
    writer.execute("PRAGMA wal_autocheckpoint = 0")
    writer.execute("INSERT INTO STRING_IDS (id, value) VALUES (987654321, 'only in the wal')")
    writer.commit()
    killed = tmp_path / "killed"
    killed.mkdir()
    for name in (DB_NAME, DB_NAME + "-wal"):  # the files as a killed writer leaves them (no -shm)
        shutil.copyfile(folder / name, killed / name)
    writer.close()
    before = snapshot(killed)
    con = open_read_only(killed / DB_NAME)
    try:
        assert con.execute("SELECT value FROM STRING_IDS WHERE id = 987654321").fetchall() == [("only in the wal",)]
        copy_dir = con.copy_dir
        assert copy_dir is not None and copy_dir.is_dir()
    finally:
        con.close()
    assert not copy_dir.exists()
    assert snapshot(killed) == before
