"""Hostile or corrupt traces are bad input: TraceFormatError (exit 4) naming the
file and the JSON path, never an internal error."""

from __future__ import annotations

import pytest

from mlprof.errors import TraceFormatError
from mlprof.parse import ParseOptions, parse_path

_EV = '{"ph":"X","cat":"cpu_op","name":"a","pid":1,"tid":1,"ts":1,"dur":2%s}'


@pytest.mark.parametrize("text, where", [
    (b'{"traceEvents":' + b"[" * 5000 + b"]" * 5000 + b"}", "nested too deep"),
    (('{"traceEvents":[%s]}' % (_EV % ',"args":{"External id":123456789012345678901234567890}')).encode(),
     "$.traceEvents[0].args.External id: integer"),
    (('{"traceEvents":[%s,%s]}' % (_EV % "", (_EV % ',"args":{"correlation":18446744073709551616}').replace("cpu_op", "cuda_runtime"))).encode(),
     "$.traceEvents[1].args.correlation"),
    (('{"traceEvents":[%s]}' % (_EV % "").replace('"a"', '"a\xff"')).encode("latin-1"),
     "$.traceEvents[0]: invalid UTF-8"),
    (b'{"traceEvents":[{"ph":"X","cat":"cpu_op","name":"a","pid":1,"tid":1,"ts":1}]}',
     "$.traceEvents[0].dur: missing"),
    (b'{"traceEvents":[{"ph":"X","cat":"cpu_op","name":"a","pid":99999999999999999999,"tid":1,"ts":1,"dur":1}]}',
     "$.traceEvents[0].pid"),
    (b'{"traceEvents":[{"ph":"X","cat":"cpu_op","name":"a","pid":1,"tid":1,"ts":1e300,"dur":1}]}',
     "$.traceEvents[0].ts"),
    (b'{"traceEvents":[{"ph":"X","cat":"cpu_op","name":"a","pid":1,"tid":1,"ts":1682725898242253.5,"dur":1e30}]}',
     "out of range"),
])
def test_hostile_values_are_bad_input_with_their_json_path(tmp_path, text, where):
    path = tmp_path / "t.pt.trace.json"
    path.write_bytes(text)
    with pytest.raises(TraceFormatError) as err:
        parse_path(path, ParseOptions(output_dir=tmp_path / "out"))
    assert str(path) in str(err.value) and where in str(err.value)
    assert "\n" not in str(err.value)
    assert not (tmp_path / "out" / "tables").exists()
