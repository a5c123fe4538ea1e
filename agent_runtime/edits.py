"""What an edit must satisfy: the tool's argument schema, then the policy's constraints."""

from __future__ import annotations

import json
from typing import Any

from agent_runtime.catalog import ToolCatalog
from agent_runtime.constraints import violations
from agent_runtime.policy import Policy
from agent_runtime.schemas import InvalidArguments
from store.db import Database
from store.models import Action
from store.repositories import ApprovalRepository


class EditRules:
    def __init__(self, *, db: Database, catalog: ToolCatalog, policy: Policy) -> None:
        self.db = db
        self.catalog = catalog
        self.policy = policy

    def form(self, action_id: str) -> tuple[dict[str, Any], dict[str, Any]] | None:
        """The JSON schema an edit must satisfy and the arguments it starts from."""
        with self.db.transaction() as s:
            action = ApprovalRepository(s).get_action(action_id)
            if action is None:
                return None
            current = dict(action.edited_args if action.edited_args is not None else action.args)
        return self.catalog.schema(action.tool_name, current).json_schema(), current

    def errors_for(self, action_id: str, edited: dict[str, Any]) -> dict[str, str]:
        """Errors by argument for an edit of a stored action; empty if valid (or unknown)."""
        with self.db.transaction() as s:
            action = ApprovalRepository(s).get_action(action_id)
            return self.errors(action, edited) if action is not None else {}

    def errors(self, action: Action, edited: dict[str, Any]) -> dict[str, str]:
        """Locked arguments are compared with the call as first proposed."""
        unstorable = {name: why for name, value in edited.items() if (why := _not_json(value))}
        if unstorable:  # whoever sent it: the store keeps JSON, and no bound holds for NaN
            return unstorable
        errors = self.catalog.errors(action.tool_name, edited)
        if errors:
            return errors
        try:
            normalized = self.catalog.normalize(action.tool_name, edited)
        except InvalidArguments as exc:
            return dict(exc.errors)
        rule = self.policy.rule_for(action.tool_name)
        return violations(rule.constraints, normalized, original=action.args)

    def normalized(self, action: Action, edited: dict[str, Any]) -> dict[str, Any]:
        """An edit as the tool will see it (stored that way); ``errors`` proved it valid."""
        return self.catalog.normalize(action.tool_name, edited)


def _not_json(value: Any) -> str | None:
    """Why ``value`` is not JSON the store can keep, or None."""
    try:
        json.dumps(value, allow_nan=False)
    except ValueError:
        return "holds a number JSON cannot hold (NaN or infinity)"
    except TypeError:
        return "is not JSON"
    return None
