"""ToolSchema against real LangChain tools: a pydantic ``@tool`` and an MCP-style dict schema."""

from __future__ import annotations

from datetime import date
from typing import Any, Literal

import pytest
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import StructuredTool, tool
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from agent_runtime.schemas import InvalidArguments, ToolSchema

UNKNOWN = "This tool has no such argument."


@tool
def publish(
    title: str,
    config: RunnableConfig,
    visibility: Literal["public", "internal"] = "public",
    notify: bool = True,
) -> str:
    """Publish a report."""
    return f"{title}|{visibility}|{notify}|{type(config).__name__}"


SEARCH_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {"type": "string"},
        "limit": {"type": "integer", "default": 10},
        "sort": {"type": "string", "enum": ["relevance", "date"], "default": "relevance"},
        "filters": {"type": "object", "default": {"lang": "en"}},
    },
    "required": ["query"],
}

RECEIVED: list[dict[str, Any]] = []


def _search(**kwargs: Any) -> str:
    RECEIVED.append(kwargs)
    return "ok"


def search_tool() -> StructuredTool:
    return StructuredTool(
        name="search", description="Search the index.", args_schema=SEARCH_SCHEMA, func=_search
    )


# --- pydantic (@tool) ---


def test_pydantic_normalize_fills_defaults_and_omits_injected_config():
    assert ToolSchema.of(publish).normalize({"title": "Q3"}) == {
        "title": "Q3",
        "visibility": "public",
        "notify": True,
    }


@pytest.mark.parametrize("given", ["yes", "true"])
def test_pydantic_normalize_coerces_like_the_tool_does(given: str):
    normalized = ToolSchema.of(publish).normalize(
        {"title": "Q3", "notify": given, "visibility": "internal"}
    )
    assert normalized == {"title": "Q3", "visibility": "internal", "notify": True}
    assert publish.invoke(normalized) == "Q3|internal|True|dict"


def test_pydantic_json_schema_has_no_config_and_is_a_copy():
    schema = ToolSchema.of(publish)
    first = schema.json_schema()
    assert set(first["properties"]) == {"title", "visibility", "notify"}
    assert first["required"] == ["title"]
    assert first["properties"]["visibility"]["enum"] == ["public", "internal"]
    first["properties"].clear()
    assert set(schema.json_schema()["properties"]) == {"title", "visibility", "notify"}
    assert set(publish.tool_call_schema.model_json_schema()["properties"]) == {
        "title",
        "visibility",
        "notify",
    }


def test_pydantic_errors_by_argument():
    schema = ToolSchema.of(publish)
    assert schema.errors({"title": "Q3"}) == {}
    found = schema.errors({"visibility": "secret", "colour": "red", "config": {}})
    assert set(found) == {"visibility", "title", "colour", "config"}
    assert found["visibility"] == "Input should be 'public' or 'internal'"
    assert found["title"] == "Field required"
    assert found["colour"] == UNKNOWN
    assert found["config"] == UNKNOWN


def test_pydantic_normalize_refuses_invalid_arguments():
    with pytest.raises(InvalidArguments) as caught:
        ToolSchema.of(publish).normalize({"title": "Q3", "notify": "perhaps"})
    assert caught.value.errors == {
        "notify": "Input should be a valid boolean, unable to interpret input"
    }
    assert isinstance(caught.value, ValueError)
    assert "notify" in str(caught.value)


class StrictArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path: str
    limits: dict[str, int] = Field(default_factory=dict)
    dry_run: bool = Field(default=False, alias="dryRun")
    due: date | None = None

    @field_validator("path")
    @classmethod
    def _absolute(cls, value: str) -> str:
        return value if value.startswith("/") else f"/{value}"


def strict_tool() -> StructuredTool:
    return StructuredTool(
        name="strict", description="Strict.", args_schema=StrictArgs, func=_search
    )


def test_pydantic_normalize_applies_the_tools_own_validators():
    """LangChain's rebuilt tool_call_schema drops validators; the tool itself does not."""
    tool_ = strict_tool()
    assert tool_.tool_call_schema.model_validate({"path": "a.md"}).path == "a.md"
    normalized = ToolSchema.of(tool_).normalize({"path": "a.md"})
    assert normalized == {"path": "/a.md", "limits": {}, "dryRun": False, "due": None}
    RECEIVED.clear()
    tool_.invoke({"name": "strict", "args": {"path": "a.md"}, "id": "c1", "type": "tool_call"})
    assert RECEIVED == [{"path": "/a.md", "limits": {}, "dry_run": False, "due": None}]


def test_pydantic_aliases_are_what_the_tool_accepts_and_values_become_json():
    """tool_call_schema advertises "dry_run", yet the tool only accepts "dryRun"."""
    tool_ = strict_tool()
    assert "dry_run" in tool_.tool_call_schema.model_json_schema()["properties"]
    with pytest.raises(ValidationError, match="dry_run"):
        tool_.invoke({"path": "/p", "dry_run": True})

    schema = ToolSchema.of(tool_)
    assert set(schema.json_schema()["properties"]) == {"path", "limits", "dryRun", "due"}
    assert schema.errors({"path": "/p", "dry_run": True}) == {"dry_run": UNKNOWN}
    normalized = schema.normalize({"path": "/p", "dryRun": "yes", "due": "2024-05-01"})
    assert normalized == {"path": "/p", "limits": {}, "dryRun": True, "due": "2024-05-01"}
    assert schema.normalize(normalized) == normalized
    RECEIVED.clear()
    tool_.invoke(normalized)
    assert [
        {"path": "/p", "limits": {}, "dry_run": True, "due": date(2024, 5, 1)},
    ] == RECEIVED


def test_pydantic_unknown_keys_whatever_the_extra_setting_and_first_error_wins():
    schema = ToolSchema.of(strict_tool())
    assert schema.errors({"path": "p", "colour": "red"}) == {"colour": UNKNOWN}
    # Two errors under "limits" (one per entry): the first is kept.
    assert schema.errors({"path": "p", "limits": {"a": "x", "b": []}}) == {
        "limits": "Input should be a valid integer, unable to parse string as an integer"
    }


def test_non_object_arguments_are_one_error():
    assert ToolSchema.of(publish).errors(["Q3"]) == {  # type: ignore[arg-type]
        "(arguments)": "Arguments must be an object of named values, not list."
    }
    assert list(ToolSchema.of(search_tool()).errors(None)) == ["(arguments)"]  # type: ignore[arg-type]


# --- JSON-schema dict (MCP adapters) ---


def test_langchain_hands_dict_schema_tools_raw_arguments():
    """Why normalize matters: LangChain neither validates nor fills defaults for dicts."""
    tool_ = search_tool()
    assert isinstance(tool_.tool_call_schema, dict)
    RECEIVED.clear()
    call = {"name": "search", "args": {"limit": "many", "x": 1}, "id": "c1", "type": "tool_call"}
    assert tool_.invoke(call).content == "ok"
    assert RECEIVED == [{"limit": "many", "x": 1}]


def test_dict_normalize_fills_defaults_without_coercion():
    schema = ToolSchema.of(search_tool())
    assert schema.normalize({"query": "q"}) == {
        "query": "q",
        "limit": 10,
        "sort": "relevance",
        "filters": {"lang": "en"},
    }
    assert schema.normalize({"query": "q", "limit": 3, "sort": "date", "filters": {}}) == {
        "query": "q",
        "limit": 3,
        "sort": "date",
        "filters": {},
    }


def test_dict_normalize_does_not_share_defaults_or_input():
    schema = ToolSchema.of(search_tool())
    given = {"query": "q", "filters": {"lang": "de"}}
    first = schema.normalize({"query": "q"})
    first["filters"]["lang"] = "fr"
    assert schema.normalize({"query": "q"})["filters"] == {"lang": "en"}
    assert SEARCH_SCHEMA["properties"]["filters"]["default"] == {"lang": "en"}
    schema.normalize(given)["filters"]["lang"] = "fr"
    assert given == {"query": "q", "filters": {"lang": "de"}}


def test_dict_errors_by_argument():
    schema = ToolSchema.of(search_tool())
    assert schema.errors({"query": "q", "limit": 5}) == {}
    assert schema.errors({"limit": 5}) == {"query": "'query' is a required property"}
    assert schema.errors({"query": "q", "limit": "5"}) == {"limit": "'5' is not of type 'integer'"}
    assert schema.errors({"query": "q", "sort": "random"}) == {
        "sort": "'random' is not one of ['relevance', 'date']"
    }
    assert schema.errors({"query": "q", "page": 2}) == {"page": UNKNOWN}


def test_dict_errors_keep_first_error_per_argument_and_name_each_missing_one():
    schema = ToolSchema.of(
        StructuredTool(
            name="pair",
            description="Two required.",
            args_schema={
                "type": "object",
                "properties": {
                    "a": {"type": "string"},
                    "b": {"type": "string", "minLength": 3},
                    "nested": {
                        "type": "object",
                        "properties": {"n": {"type": "integer"}, "m": {"type": "string"}},
                    },
                },
                "required": ["a", "b"],
            },
            func=_search,
        )
    )
    assert schema.errors({}) == {
        "a": "'a' is a required property",
        "b": "'b' is a required property",
    }
    found = schema.errors({"a": "x", "b": 7, "nested": {"n": "1", "m": []}})
    assert found == {
        "b": "7 is not of type 'string'",
        "nested": "'1' is not of type 'integer'",
    }


def test_dict_required_errors_name_the_missing_argument_even_when_repeated():
    schema = ToolSchema.of(
        StructuredTool(
            name="both",
            description="Required twice over.",
            args_schema={
                "type": "object",
                "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
                "allOf": [{"required": ["a"]}, {"required": ["b", "a"]}],
            },
            func=_search,
        )
    )
    assert schema.errors({}) == {
        "a": "'a' is a required property",
        "b": "'b' is a required property",
    }


def test_dict_normalize_refuses_invalid_arguments():
    with pytest.raises(InvalidArguments) as caught:
        ToolSchema.of(search_tool()).normalize({"limit": "5", "page": 2})
    assert caught.value.errors == {
        "query": "'query' is a required property",
        "limit": "'5' is not of type 'integer'",
        "page": UNKNOWN,
    }


def test_dict_json_schema_is_the_call_schema_copied():
    tool_ = search_tool()
    schema = ToolSchema.of(tool_)
    got = schema.json_schema()
    # tool_call_schema is the args_schema dict plus the tool's description.
    assert got == {**SEARCH_SCHEMA, "description": "Search the index."}
    got["properties"].clear()
    assert schema.json_schema()["properties"].keys() == SEARCH_SCHEMA["properties"].keys()


def test_dict_schema_honours_declared_schema_dialect():
    schema = ToolSchema.of(
        StructuredTool(
            name="old",
            description="Draft 4 exclusiveMaximum is a boolean.",
            args_schema={
                "$schema": "http://json-schema.org/draft-04/schema#",
                "type": "object",
                "properties": {"n": {"type": "integer", "maximum": 5, "exclusiveMaximum": True}},
            },
            func=_search,
        )
    )
    assert schema.errors({"n": 4}) == {}
    assert schema.errors({"n": 5}) == {"n": "5 is greater than or equal to the maximum of 5"}


def test_dict_schema_without_properties_accepts_any_keys():
    schema = ToolSchema.of(
        StructuredTool(
            name="free",
            description="Anything goes.",
            args_schema={"type": "object"},
            func=_search,
        )
    )
    assert schema.errors({"whatever": [1, 2]}) == {}
    assert schema.normalize({"whatever": [1, 2]}) == {"whatever": [1, 2]}


def test_dict_schema_pattern_properties_are_known_arguments():
    schema = ToolSchema.of(
        StructuredTool(
            name="headers",
            description="Headers by pattern.",
            args_schema={
                "type": "object",
                "properties": {"url": {"type": "string"}},
                "patternProperties": {"^x-": {"type": "string"}},
            },
            func=_search,
        )
    )
    assert schema.errors({"url": "u", "x-trace": "t"}) == {}
    assert schema.errors({"url": "u", "x-trace": 1, "y-trace": "t"}) == {
        "x-trace": "1 is not of type 'string'",
        "y-trace": UNKNOWN,
    }


# --- tools we cannot see ---


def test_from_keys_accepts_those_keys_with_any_values():
    schema = ToolSchema.from_keys({"path": "a.md", "count": 3})
    assert schema.json_schema() == {
        "type": "object",
        "properties": {"path": {}, "count": {}},
        "required": [],
    }
    assert schema.errors({"path": 7, "count": None}) == {}
    assert schema.errors({}) == {}
    assert schema.errors({"path": "a.md", "extra": 1}) == {"extra": UNKNOWN}
    assert schema.normalize({"count": "3"}) == {"count": "3"}
    with pytest.raises(InvalidArguments):
        schema.normalize({"extra": 1})


def test_tool_without_schema_accepts_any_object():
    class Bare:
        name = "bare"
        tool_call_schema = None
        args_schema = None

    schema = ToolSchema.of(Bare())  # type: ignore[arg-type]
    assert schema.errors({"anything": {"at": "all"}}) == {}
    assert schema.normalize({"anything": 1}) == {"anything": 1}
    assert schema.json_schema() == {"type": "object"}
    assert schema.errors("text") == {  # type: ignore[arg-type]
        "(arguments)": "Arguments must be an object of named values, not str."
    }


def test_arguments_the_json_form_cannot_carry_are_refused_not_masked():
    from pydantic import BaseModel, Field, SecretStr

    from agent_runtime.schemas import LOSSY

    class Hook(BaseModel):
        url: SecretStr
        memo: str = Field(default="", exclude=True)

    def set_hook(url: SecretStr, memo: str = "") -> str:
        return "ok"

    tool = StructuredTool.from_function(
        set_hook, name="set_hook", description="Set a hook.", args_schema=Hook
    )
    with pytest.raises(InvalidArguments) as err:
        ToolSchema.of(tool).normalize({"url": "https://a.example/x"})
    assert err.value.errors == {"(arguments)": LOSSY}


def test_sets_normalize_to_one_order():
    @tool
    def invite(emails: set[str]) -> str:
        """Invite people."""
        return "ok"

    normalized = ToolSchema.of(invite).normalize({"emails": ["c@x.io", "a@x.io", "b@x.io"]})
    assert normalized == {"emails": ["a@x.io", "b@x.io", "c@x.io"]}


def test_validators_still_run_when_the_tool_has_injected_arguments():
    from typing import Annotated

    from langchain_core.tools import InjectedToolCallId
    from pydantic import BaseModel, field_validator

    class Args(BaseModel):
        channel: str
        call_id: Annotated[str, InjectedToolCallId]

        @field_validator("channel")
        @classmethod
        def lower(cls, value: str) -> str:
            return value.lower()

    def publish(channel: str, call_id: str) -> str:
        return channel

    tool = StructuredTool.from_function(
        publish, name="publish", description="Publish.", args_schema=Args
    )
    schema = ToolSchema.of(tool)
    assert schema.normalize({"channel": "PUBLIC"}) == {"channel": "public"}
    assert "call_id" not in schema.json_schema()["properties"]
