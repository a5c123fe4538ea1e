"""One view of a tool's argument schema, whether pydantic model or JSON-schema dict.

``@tool`` functions carry a pydantic model class as their call schema; tools built by MCP
adapters carry a plain JSON-schema dict. Approval code needs the same three things from
either (a schema for the edit form, the arguments as the tool will see them, and errors
by argument name), so it asks this module instead of assuming ``model_validate`` exists.
"""

from __future__ import annotations

import copy
import functools
import json
import re
from collections.abc import Mapping
from typing import Any, Protocol

from jsonschema import Draft202012Validator
from jsonschema import ValidationError as SchemaValidationError
from jsonschema.protocols import Validator
from jsonschema.validators import validator_for
from langchain_core.tools import BaseTool
from pydantic import BaseModel, ValidationError, create_model

__all__ = ["InvalidArguments", "ToolSchema"]

UNKNOWN_ARGUMENT = "This tool has no such argument."
WHOLE = "(arguments)"
LOSSY = (
    "These arguments cannot be shown to reviewers exactly as the tool would receive them "
    "(a secret, an excluded or a lossy field), so they cannot be approved."
)


class InvalidArguments(ValueError):
    """Arguments the tool's schema rejects; raised so callers never run raw arguments."""

    def __init__(self, errors: Mapping[str, str]) -> None:
        self.errors: dict[str, str] = dict(errors)
        detail = "; ".join(f"{key}: {message}" for key, message in self.errors.items())
        super().__init__(f"Invalid tool arguments: {detail}")


class _Backend(Protocol):
    """What each kind of schema must answer; arguments are already known to be a dict."""

    def json_schema(self) -> dict[str, Any]: ...

    def errors(self, args: dict[str, Any]) -> dict[str, str]: ...

    def normalize(self, args: dict[str, Any]) -> dict[str, Any]: ...


class _PydanticBackend:
    """A pydantic v2 model class, as ``@tool`` functions produce. ``hidden`` names fields the
    model never sends (injected by LangChain): optional here and left out of the result."""

    def __init__(self, model: type[BaseModel], hidden: frozenset[str] = frozenset()) -> None:
        self._model = model
        self._hidden = hidden

    @property
    def hidden(self) -> frozenset[str]:
        return self._hidden

    @functools.cached_property
    def _schema(self) -> dict[str, Any]:
        # Pydantic rebuilds this on every call; built lazily since some types have no schema.
        schema = self._model.model_json_schema()
        properties = schema.get("properties", {})
        for name in self._hidden:
            properties.pop(name, None)
        schema["required"] = [r for r in schema.get("required", []) if r not in self._hidden]
        return schema

    def json_schema(self) -> dict[str, Any]:
        return copy.deepcopy(self._schema)

    def errors(self, args: dict[str, Any]) -> dict[str, str]:
        known = set(self._schema.get("properties", {}))
        found = {str(key): UNKNOWN_ARGUMENT for key in args if key not in known}
        try:
            self._model.model_validate(args)
        except ValidationError as exc:
            for error in exc.errors():
                key = str(error["loc"][0]) if error["loc"] else WHOLE
                found.setdefault(key, error["msg"])
        return found

    def normalize(self, args: dict[str, Any]) -> dict[str, Any]:
        """By alias, so the result validates again under the same schema. A value the JSON
        form cannot carry faithfully (a secret, an excluded or lossy-serialized field) is
        refused: reviewers must see, and the hash must bind, exactly what the tool gets."""
        validated = self._model.model_validate(args)
        exclude = set(self._hidden)
        dumped = validated.model_dump(mode="json", by_alias=True, exclude=exclude)
        fields = [n for n in type(validated).model_fields if n not in self._hidden]
        for name in fields:
            if isinstance(getattr(validated, name), set | frozenset):
                key = type(validated).model_fields[name].alias or name
                dumped[key] = sorted(dumped[key], key=_canonical)  # one order in every process
        try:
            again = self._model.model_validate(dumped)
        except ValidationError:
            raise InvalidArguments({WHOLE: LOSSY}) from None
        if any(getattr(again, name) != getattr(validated, name) for name in fields):
            raise InvalidArguments({WHOLE: LOSSY})
        return dumped


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


class _JsonSchemaBackend:
    """A JSON-schema dict, as MCP adapters produce; LangChain itself never checks it."""

    def __init__(self, schema: Mapping[str, Any]) -> None:
        self._schema = copy.deepcopy(dict(schema))
        cls = validator_for(self._schema, default=Draft202012Validator)
        cls.check_schema(self._schema)
        self._validator: Validator = cls(self._schema)
        properties = self._schema.get("properties")
        self._properties: dict[str, Any] | None = (
            properties if isinstance(properties, dict) else None
        )
        patterns = self._schema.get("patternProperties")
        self._patterns = [re.compile(p) for p in patterns] if isinstance(patterns, dict) else []

    def json_schema(self) -> dict[str, Any]:
        return copy.deepcopy(self._schema)

    def _known(self, key: Any) -> bool:
        if self._properties is None:
            return True  # no properties declared: the schema alone decides what is allowed
        if key in self._properties:
            return True
        return isinstance(key, str) and any(p.search(key) for p in self._patterns)

    def errors(self, args: dict[str, Any]) -> dict[str, str]:
        found = {str(key): UNKNOWN_ARGUMENT for key in args if not self._known(key)}
        for error in self._validator.iter_errors(args):
            found.setdefault(_argument_of(error), error.message)
        return found

    def normalize(self, args: dict[str, Any]) -> dict[str, Any]:
        # No coercion: the MCP server receives the JSON as sent, plus declared defaults.
        result = copy.deepcopy(args)
        for key, spec in (self._properties or {}).items():
            if key not in result and isinstance(spec, dict) and "default" in spec:
                result[key] = copy.deepcopy(spec["default"])
        return result


def _checked_model(
    tool: BaseTool, call_schema: type[BaseModel]
) -> tuple[type[BaseModel], frozenset[str]]:
    """The tool's own ``args_schema`` when it has exactly the call schema's fields.

    LangChain rebuilds ``tool_call_schema`` from bare fields, dropping the validators, aliases
    and config that the tool applies to its input through ``args_schema``; so the latter is
    what the arguments must satisfy. With injected arguments it would demand values only
    LangChain supplies, and the rebuilt call schema is the best available check.
    """
    own = getattr(tool, "args_schema", None)
    if not (isinstance(own, type) and issubclass(own, BaseModel)):
        return call_schema, frozenset()
    hidden = frozenset(own.model_fields.keys() - call_schema.model_fields.keys())
    if not hidden:
        return own, hidden
    # Injected arguments (tool call id, state) are optional here, so the tool's own validators
    # still run on what the model sent.
    optional: dict[str, Any] = {name: (Any, None) for name in hidden}
    checked = create_model(f"{own.__name__}Checked", __base__=own, **optional)
    return checked, hidden


def _argument_of(error: SchemaValidationError) -> str:
    """The top-level argument a jsonschema error is about, or WHOLE if none."""
    if error.absolute_path:
        return str(error.absolute_path[0])
    if error.validator == "required" and isinstance(error.instance, dict):
        # One error per missing name, each message starting with repr(name). Matching the
        # message (not list order) stays right when several "required" lists name the same key.
        required = error.validator_value if isinstance(error.validator_value, list) else []
        for name in required:
            if name not in error.instance and error.message.startswith(repr(name)):
                return str(name)
    return WHOLE


class ToolSchema:
    """The call schema of one tool, pydantic or JSON-schema dict."""

    def __init__(self, backend: _Backend) -> None:
        """Use ``of`` or ``from_keys``; the backend is an implementation detail."""
        self._backend = backend

    @classmethod
    def of(cls, tool: BaseTool) -> ToolSchema:
        """The schema ``tool`` checks its model-supplied arguments against.

        A tool with no schema at all accepts any object. Raises ``TypeError`` for schema
        kinds this module cannot check (pydantic v1 models), rather than accepting anything,
        and ``jsonschema.SchemaError`` for a dict that is not a valid JSON schema.
        """
        schema = getattr(tool, "tool_call_schema", None)
        if schema is None:
            schema = getattr(tool, "args_schema", None)
        if schema is None:
            return cls(_JsonSchemaBackend({"type": "object"}))
        if isinstance(schema, Mapping):
            return cls(_JsonSchemaBackend(schema))
        if isinstance(schema, type) and issubclass(schema, BaseModel):
            model, hidden = _checked_model(tool, schema)
            return cls(_PydanticBackend(model, hidden))
        msg = f"Cannot check arguments of tool {tool.name!r} against schema {schema!r}"
        raise TypeError(msg)

    @classmethod
    def from_keys(cls, args: Mapping[str, Any]) -> ToolSchema:
        """For a tool we cannot see: exactly these keys, any values, none required."""
        properties: dict[str, Any] = {str(key): {} for key in args}
        return cls(_JsonSchemaBackend({"type": "object", "properties": properties, "required": []}))

    def json_schema(self) -> dict[str, Any]:
        """A fresh JSON schema to build an edit form from; safe to mutate."""
        return self._backend.json_schema()

    def errors(self, args: Mapping[str, Any]) -> dict[str, str]:
        """Errors by argument name ("(arguments)" for the whole); empty when valid, and then
        ``normalize`` succeeds."""
        if not isinstance(args, Mapping):
            return {WHOLE: f"Arguments must be an object of named values, not {_kind(args)}."}
        found = self._backend.errors(dict(args))
        if not found:
            try:
                self._backend.normalize(dict(args))
            except InvalidArguments as exc:
                found = dict(exc.errors)
        return found

    def normalize(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """The arguments as the tool will see them, as JSON; raises ``InvalidArguments``."""
        found = self.errors(args)
        if found:
            raise InvalidArguments(found)
        return self._backend.normalize(dict(args))

    def without_injected(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """``args`` less the values LangChain injects (never sent by the model)."""
        hidden: frozenset[str] = getattr(self._backend, "hidden", frozenset())
        return {k: v for k, v in args.items() if k not in hidden}


def _kind(value: object) -> str:
    """A short name for a non-object argument payload, for error messages."""
    if value is None:
        return "null"
    return type(value).__name__
