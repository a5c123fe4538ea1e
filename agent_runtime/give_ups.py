"""When maintenance stops trying to carry a stalled run on: a run whose next step cannot be
recorded would otherwise be tried, and logged, at every round for good, its requester never
told. Kept in memory, as this process sees the run: a restart starts counting again."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass

import httpx
import psycopg
from psycopg_pool import PoolTimeout
from sqlalchemy import exc as sa_exc

GIVE_UP_AFTER = dt.timedelta(hours=1)
MIN_TRIES = 5
_LOST = (OSError, TimeoutError, httpx.TransportError, sa_exc.TimeoutError, PoolTimeout)
"""The network, or a pool waiting for a connection."""
_LOST_STATES = ("08", "53", "57P01", "57P02", "57P03")
"""PostgreSQL: a connection lost or refused, resources exhausted, the server shutting down."""


def is_outage(error: BaseException) -> bool:
    """A failure of the database, the network or the agent's server, not of the run: it is
    neither counted nor forgotten (after an outage, the runs it held up are carried on, not
    ended). Causes count too: a runtime may raise its own error from one."""
    seen: BaseException | None = error
    for _ in range(5):
        if seen is None:
            return False
        if _outage_itself(seen):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _outage_itself(error: BaseException) -> bool:
    if isinstance(error, _LOST):
        return True
    if isinstance(error, httpx.HTTPStatusError):  # the agent's server, busy or failing
        return error.response.status_code == 429 or error.response.status_code >= 500
    if isinstance(error, sa_exc.DBAPIError):
        if error.connection_invalidated:
            return True
        return _outage_itself(error.orig) if isinstance(error.orig, BaseException) else False
    if isinstance(error, psycopg.InterfaceError):
        return True
    if isinstance(error, psycopg.OperationalError):  # a limit or a deadlock is the run's
        return error.sqlstate is None or error.sqlstate.startswith(_LOST_STATES)
    return False


@dataclass
class _Failing:
    since: dt.datetime
    last: dt.datetime
    tries: int = 0


class GiveUps:
    def __init__(self, *, clock: Callable[[], dt.datetime], every: dt.timedelta) -> None:
        """``every``: how often a stalled run put back is tried again at most; a run not
        tried for longer is forgotten (``prune``), and its next failure starts a new count
        (another stall, or tries missed)."""
        self.clock = clock
        self.every = every
        self._failing: dict[str, _Failing] = {}

    def failed(self, run_id: str, error: BaseException) -> bool:
        """Count one failed try; whether the run should end now: it failed at every try,
        at least ``MIN_TRIES`` of them, for ``GIVE_UP_AFTER``."""
        if is_outage(error):
            return False
        now = self.clock()
        failing = self._failing.setdefault(run_id, _Failing(since=now, last=now))
        failing.last, failing.tries = now, failing.tries + 1
        return failing.tries >= MIN_TRIES and now - failing.since >= GIVE_UP_AFTER

    def forget(self, run_id: str) -> None:
        """Carried on, ended, or no longer stalled: the next failure starts a new count."""
        self._failing.pop(run_id, None)

    def prune(self) -> None:
        """Forget runs not tried for longer than ``every`` (carried on or ended elsewhere,
        or maintenance stopped meanwhile): called before each round's tries."""
        now = self.clock()
        self._failing = {r: f for r, f in self._failing.items() if now - f.last <= self.every}


def gave_up_text() -> str:
    minutes = int(GIVE_UP_AFTER.total_seconds() // 60)
    return (
        f"The bot could not carry this run on for {minutes} minutes, so it ends here (the "
        "operators' logs say why). Start the request again."
    )
