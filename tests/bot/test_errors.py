"""The one mapping from errors to what a Slack user reads."""

from __future__ import annotations

import logging

import pytest

from bot.errors import AUDIT_UNWRITABLE, UNEXPECTED, user_message
from store.audit_chain import AuditChainError, AuditRollbackError


@pytest.mark.parametrize("error", [AuditChainError, AuditRollbackError])
def test_an_unwritable_audit_log_is_told_plainly_and_logged(
    error: type[Exception], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR, logger="bot.errors"):
        told = user_message(error("audit log: the head does not match AUDIT_KEY"))
    assert told == AUDIT_UNWRITABLE != UNEXPECTED
    assert "an operator must check it" in told.lower()
    assert "the head does not match AUDIT_KEY" in caplog.text  # details for the operator only
