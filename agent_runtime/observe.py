"""What the engine tells whoever watches it (the bot's metrics): resumes started and finished.

A protocol here, so the engine needs nothing of how figures are kept."""

from __future__ import annotations

import enum
import time
from collections.abc import Callable
from typing import Protocol

from agent_runtime.resume import Resumed


class ResumeOutcome(enum.StrEnum):
    CONTINUED = "continued"
    """The thread moved on (to new approvals or its result)."""
    RUN_FAILED = "run_failed"
    SKIPPED = "skipped"
    """Nothing to do: not this process's claim, or the approval had closed, or its run had
    ended (the approval is closed, unresumed, with what the evidence says ran)."""
    ERROR = "error"


class ResumeObserver(Protocol):
    def resume_started(self, request_id: str) -> None: ...

    def resume_finished(self, request_id: str, *, seconds: float, outcome: str) -> None: ...


class Unobserved:
    def resume_started(self, request_id: str) -> None:
        pass

    def resume_finished(self, request_id: str, *, seconds: float, outcome: str) -> None:
        pass


def observed(observer: ResumeObserver, request_id: str, resume: Callable[[], Resumed]) -> Resumed:
    """Run one resume, telling the observer when it starts and how it ended."""
    observer.resume_started(request_id)
    start = time.perf_counter()
    outcome = ResumeOutcome.ERROR
    try:
        resumed = resume()
        if resumed.run_failed is not None:
            outcome = ResumeOutcome.RUN_FAILED
        elif resumed.after is not None or resumed.ended is not None:
            outcome = ResumeOutcome.CONTINUED
        else:
            outcome = ResumeOutcome.SKIPPED
        return resumed
    finally:
        observer.resume_finished(
            request_id, seconds=time.perf_counter() - start, outcome=outcome.value
        )
