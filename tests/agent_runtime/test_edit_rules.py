"""An edit must be JSON the store can keep, whichever client of the engine sent it: NaN and
infinities are refused by the engine itself, not only by the bot's modal."""

from __future__ import annotations

import pytest
from langchain_core.tools import StructuredTool

from agent_runtime.catalog import ToolCatalog
from agent_runtime.edits import EditRules
from agent_runtime.policy import load_policy
from store.models import Action

SCHEMA = {
    "type": "object",
    "properties": {"ratio": {"type": "number"}, "meta": {"type": "object"}},
}


def _rules() -> EditRules:
    tool = StructuredTool(name="tune", description="Tune.", args_schema=SCHEMA, func=lambda **_: "")
    return EditRules(db=None, catalog=ToolCatalog([tool]), policy=load_policy(None))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "edited",
    [{"ratio": float("nan")}, {"ratio": float("inf")}, {"meta": {"k": [float("-inf")]}}],
)
def test_an_edit_holding_a_number_json_cannot_hold_is_an_error_on_its_argument(edited):
    action = Action(tool_name="tune", args={"ratio": 0.5, "meta": {}})
    assert _rules().errors(action, edited).keys() == edited.keys()


def test_a_finite_edit_is_valid():
    action = Action(tool_name="tune", args={"ratio": 0.5, "meta": {}})
    assert _rules().errors(action, {"ratio": 0.25, "meta": {"k": [1]}}) == {}
