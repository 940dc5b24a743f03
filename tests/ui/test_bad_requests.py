"""Bad requests are 400s, never 500s (issue 12, item 21)."""

from __future__ import annotations

import pytest

from mlprof.ui.server import LOOPBACK_HOSTS, create_app

from .test_api import TestClient, client  # noqa: F401 - the module's client fixture


@pytest.mark.parametrize("query", [
    "run=" + "a" * 5000,
    "run=" + "/".join(["a" * 300] * 3),
    "run={run}&t0=99999999999999999999999999&t1=1",
    "run={run}&t0=0&t1=1&px=99999999999999999999",
    "run={run}&t0=0&t1=1&tracks=1,99999999999999999999999",
])
def test_over_long_ids_and_out_of_range_times_are_400(client, run_id, query):
    response = client.get("/api/timeline/window?" + query.format(run=run_id))
    assert response.status_code == 400, response.text
    assert "error" in response.json()


def test_the_widest_valid_time_range_is_answered(client, run_id):
    response = client.get(f"/api/timeline/window?run={run_id}&t0=-4611686018427387904&t1=4611686018427387904")
    assert response.status_code == 200


def test_a_loopback_host_other_than_127_0_0_1_accepts_its_own_url(logdir):
    app = create_app(logdir, allowed_hosts=LOOPBACK_HOSTS + ("127.0.0.2",))
    with TestClient(app, base_url="http://127.0.0.2:8080") as c:
        assert c.get("/api/runs").status_code == 200
