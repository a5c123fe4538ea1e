"""Proposals the bot cannot record as they are: the run fails with a clear reason in its thread,
nothing becomes approvable, and the run does not stay "running" forever."""

from __future__ import annotations

from sqlalchemy import select

from bot.sandbox import people
from store.models import ApprovalRequest, Run
from tests.bot.flows import result_message


def test_a_number_json_cannot_hold_fails_the_run_clearly_on_postgresql(serve_bot, migrated_pg_url):
    h = serve_bot(migrated_pg_url)
    reply = h.driver.slash_command(
        user=people.REQUESTER,
        channel=people.CHANNEL,
        text='send_external_message {"recipient": "a@example.com", "text": "hi", "n": NaN}',
    )
    assert reply.status == 200
    root = h.state.wait_for(lambda: next(iter(h.state.top_level(people.CHANNEL)), None))
    result = result_message(h, root)
    assert "NaN or Infinity" in result.text
    with h.bot.db.transaction() as s:
        assert [r.status for r in s.scalars(select(Run))] == ["failed"]
        assert list(s.scalars(select(ApprovalRequest))) == []
