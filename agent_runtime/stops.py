"""Where a local run stopped, as its own ``invoke`` output tells it: no second read of the
checkpoint on a reviewer's wait, for a graph whose output can tell it.

The output holds the graph's output channels and, when the run stopped on interrupts, those
interrupts. That is the state the engine reads (``wire.STOP_KEYS`` and the pending interrupts)
only when the output channels include the keys it reads and no task is hidden from the
output (LangGraph streams nothing of a task tagged ``langsmith:hidden``, its interrupts
included). Any other graph, or an output without those keys (a run that stopped before it
wrote them), is read back from the checkpoint. The interrupts are taken as the checkpoint
keeps them (through its serializer: a tuple comes back a list, as a read would give it).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.constants import START, TAG_HIDDEN
from langgraph.pregel import Pregel
from langgraph.types import Interrupt

from agent_runtime.wire import STOP_KEYS

logger = logging.getLogger(__name__)
INTERRUPTS = "__interrupt__"
"""The key of ``invoke``'s output holding the interrupts the run stopped on."""


@dataclass(frozen=True)
class Stopped:
    """Where a run stopped (a ``ThreadStop``): its output's values and the interrupts it
    stopped on, ordered by id (the tasks that raised them may finish in any order)."""

    values: dict[str, Any]
    interrupts: tuple[Interrupt, ...]


@dataclass(frozen=True)
class OutputStops:
    """Reads where a run of one graph stopped from its output."""

    read_keys: frozenset[str]
    """The keys of ``STOP_KEYS`` the graph's state has: its output must hold them."""
    serde: SerializerProtocol
    """The graph's checkpointer's (with the types LangGraph's strict mode allows it, if on):
    what a read of the interrupts would have gone through."""

    @classmethod
    def of(cls, graph: Pregel) -> OutputStops | None:
        """For a graph whose output can tell where it stopped; ``None`` for any other."""
        if not isinstance(graph.checkpointer, BaseCheckpointSaver):
            return None  # nothing of it is read back either
        output, state = graph.output_channels, graph.stream_channels_asis
        if isinstance(output, str) or isinstance(state, str):
            return None  # one channel's value: its output at an interrupt holds nothing else
        read = frozenset(state).intersection(STOP_KEYS)
        if not read <= set(output) or _hides_tasks(graph):
            return None
        return cls(read, graph.checkpointer.serde)

    def stop(self, output: Any) -> Stopped | None:
        """Where the run that gave ``output`` stopped; ``None``: read it back."""
        if not isinstance(output, dict):
            return None
        values = dict(output)
        interrupts = values.pop(INTERRUPTS, ())
        if not self.read_keys <= values.keys() or not isinstance(interrupts, Sequence):
            return None
        if not interrupts:  # it ended
            return Stopped(values=values, interrupts=())
        try:
            kept = self.serde.loads_typed(self.serde.dumps_typed(list(interrupts)))
        except Exception:  # the run went through; only this reading of it failed
            logger.exception("could not take the interrupts from a run's output; reading them")
            return None
        ordered = sorted(kept, key=lambda i: str(getattr(i, "id", "")))
        return Stopped(values=values, interrupts=tuple(ordered))


def _hides_tasks(graph: Pregel) -> bool:
    """Whether a task of the graph may be hidden from its output (LangGraph's own start node
    is, and never waits on anyone)."""
    if TAG_HIDDEN in ((graph.config or {}).get("tags") or ()):
        return True
    return any(
        TAG_HIDDEN in (node.tags or ()) for name, node in graph.nodes.items() if name != START
    )
