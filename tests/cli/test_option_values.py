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
