"""NaN and infinite option values are refused (issue 12, item 16)."""

from __future__ import annotations

import pytest

from mlprof.analysis.advisor import Thresholds
from mlprof.cli.main import main
from mlprof.errors import ConfigError


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "NaN"])
def test_fail_if_slower_refuses_non_finite(tmp_path, capsys, value):
    with pytest.raises(SystemExit) as exit_:
        main(["compare", str(tmp_path), str(tmp_path), f"--fail-if-slower={value}"])
    assert exit_.value.code == 2
    assert "not a finite number" in capsys.readouterr().err


@pytest.mark.parametrize("value", ["nan", "inf"])
def test_thresholds_refuse_non_finite(value):
    with pytest.raises(ConfigError, match="finite"):
        Thresholds.from_overrides([f"slow_rank_warn_share={value}"])


@pytest.mark.parametrize("value", ["nan", "-1G", "lots", "0"])
def test_memory_budget_refuses_what_is_not_a_size(tmp_path, capsys, value):
    with pytest.raises(SystemExit) as exit_:
        main(["parse", str(tmp_path), f"--memory-budget={value}"])
    assert exit_.value.code == 2
    assert "not a size" in capsys.readouterr().err


def test_memory_budget_sizes_and_its_floor():
    from mlprof.cli.parse import _size
    from mlprof.parse import ParseOptions

    assert (_size("512M"), _size("2G"), _size("1.5GiB"), _size("100000000")) == \
           (512 * 2**20, 2 * 2**30, int(1.5 * 2**30), 100_000_000)
    with pytest.raises(ConfigError, match="at least 64 MiB"):
        ParseOptions(memory_budget_bytes=2**20)
