"""What the sandbox checks as Slack does: blocks and views, refused with Slack's error names."""

from __future__ import annotations

import json
import logging
from typing import Any

from slack_sdk.models.blocks import Block
from slack_sdk.models.views import View as ViewModel

logger = logging.getLogger(__name__)
MAX_BLOCKS = 50
MAX_VIEW_BLOCKS = 100
"""Modals and Home tabs take twice a message's blocks."""


class SlackApiError(Exception):
    def __init__(self, error: str) -> None:
        super().__init__(error)
        self.error = error


def validate_blocks(blocks: Any, *, limit: int = MAX_BLOCKS) -> list[dict[str, Any]]:
    if isinstance(blocks, str):
        blocks = json.loads(blocks)
    if not isinstance(blocks, list) or len(blocks) > limit:
        raise SlackApiError("invalid_blocks")
    for raw in blocks:
        try:
            block = Block.parse(raw)
            if block is None:
                raise SlackApiError("invalid_blocks")
            block.validate_json()
        except SlackApiError:
            raise
        except Exception as exc:
            logger.info("sandbox refused a block: %s", exc)
            raise SlackApiError("invalid_blocks") from exc
    return blocks


def validate_view(view: Any) -> dict[str, Any]:
    if isinstance(view, str):
        view = json.loads(view)
    try:
        ViewModel(**view).validate_json()
    except Exception as exc:
        logger.info("sandbox refused a view: %s", exc)
        raise SlackApiError("invalid_arguments") from exc
    validate_blocks(view.get("blocks", []), limit=MAX_VIEW_BLOCKS)
    if len(view.get("private_metadata", "")) > 3000:
        raise SlackApiError("invalid_arguments")
    return view
