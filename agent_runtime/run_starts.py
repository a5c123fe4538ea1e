"""A run's start from Slack: stored, and its thread posted, under the run's lock, so that
maintenance tells a start still posting (rate limits can make that take long) from one whose
process died before its thread existed."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

from agent_runtime.authorization import Actor
from agent_runtime.runs import START_FAILED, RunLifecycle
from agent_runtime.views import RunView
from store.locks import ThreadLocks
from store.models import new_id

logger = logging.getLogger(__name__)


class RunStarts:
    def __init__(self, *, runs: RunLifecycle, locks: ThreadLocks) -> None:
        self.runs = runs
        self.locks = locks

    @contextmanager
    def starting(self, *, actor: Actor, channel_id: str, text: str) -> Iterator[RunView]:
        """A run stored, its lock held while the body posts its thread (``set_thread``).
        The body must not take the run's lock (it is not re-entrant). A body that raises
        ends the run, failed, with nothing posted for it: the caller tells the requester
        (an end that cannot be recorded is left to maintenance)."""
        run_id = new_id("run")  # a fresh id: nobody else wants its lock yet
        with self.locks.hold(run_id):
            run = self.runs.start(actor=actor, channel_id=channel_id, text=text, run_id=run_id)
            try:
                yield run
            except Exception as exc:
                logger.warning("%s did not start (%s)", run_id, type(exc).__name__)
                try:
                    self.runs.abandon(run_id, START_FAILED)
                except Exception:
                    logger.exception("could not end %s; maintenance will", run_id)
                raise
