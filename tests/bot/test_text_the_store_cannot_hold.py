"""Over signed HTTP on PostgreSQL: text PostgreSQL cannot hold as given (a NUL) in a slash
command or a reviewer's reason is kept cleaned; nothing is refused, nothing lost."""

from __future__ import annotations

from bot.sandbox import people
from tests.bot.flows import DELETE, button, result_message, start_run


def test_a_nul_in_a_request_and_in_a_reason_loses_neither(serve_bot, migrated_pg_url):
    h = serve_bot(migrated_pg_url)
    root, card = start_run(h, DELETE + " \x00")
    assert root.text.endswith("\ufffd`")  # shown as it is kept
    h.driver.click(user=people.SECURITY, message=card, button=button(card, "Reject"))
    modal = h.state.wait_for(lambda: h.state.open_views(people.SECURITY))[-1]
    h.driver.submit_view(
        user=people.SECURITY, view_id=modal.id, values={"reject_reason": {"reason": "Keep\x00it"}}
    )
    result = result_message(h, root)
    assert "rejected" in result.text and "Keep\ufffdit" in result.text
    assert h.workspace.effects() == []
