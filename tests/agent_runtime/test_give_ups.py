"""Which failures count toward giving up on a stalled run: the run's own, not an outage of the
database, the network or the agent's server."""

from __future__ import annotations

import httpx
import psycopg
import pytest
from psycopg import errors as pg
from psycopg_pool import PoolTimeout
from sqlalchemy import exc as sa_exc

from agent_runtime.give_ups import is_outage


def _status(code: int) -> httpx.HTTPStatusError:
    request = httpx.Request("GET", "http://agent-server/threads/t/state")
    return httpx.HTTPStatusError("failed", request=request, response=httpx.Response(code))


def _wrapped(orig: Exception) -> sa_exc.DBAPIError:
    return sa_exc.OperationalError("SELECT 1", {}, orig)


def _caused_by(cause: Exception) -> Exception:
    try:
        raise RuntimeError("the agent's state could not be read") from cause
    except RuntimeError as error:
        return error


@pytest.mark.parametrize(
    ("error", "outage"),
    [
        (httpx.ConnectError("connection refused"), True),
        (_status(503), True),
        (_status(429), True),
        (_status(404), False),
        (_wrapped(psycopg.OperationalError("connection refused")), True),
        (_wrapped(pg.AdminShutdown("terminating connection")), True),
        (_wrapped(pg.ProgramLimitExceeded("statement too complex")), False),
        (_wrapped(pg.DeadlockDetected("deadlock detected")), False),
        (pg.QueryCanceled("statement timeout"), False),
        (psycopg.InterfaceError("the connection is closed"), True),
        (sa_exc.TimeoutError("QueuePool limit reached"), True),
        (PoolTimeout("couldn't get a connection"), True),
        (ConnectionResetError("reset by peer"), True),
        (_caused_by(httpx.ReadTimeout("timed out")), True),
        (ValueError("the checkpoint cannot be loaded"), False),
        (_caused_by(ValueError("bad")), False),
    ],
)
def test_an_outage_is_told_from_the_runs_own_failure(error: Exception, outage: bool) -> None:
    assert is_outage(error) is outage
