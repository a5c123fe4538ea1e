"""An injection corpus through every text a requester, a reviewer or the agent controls ends
inert on every surface: cards, modals, ephemerals and thread messages. Nothing comes alive,
nothing copies the bot's own status lines with its formatting, nothing hides in the text."""

from __future__ import annotations

import json
import re

import yaml

from agent_runtime.policy import BUNDLED_POLICY
from bot.sandbox import people
from tests.bot.flows import button, open_modal, result_message, start_run
from tests.bot.formatting import all_strings, formatting, hidden_characters, outside_code

CORPUS = [
    "<!channel>",
    "<!here|here>",
    "<!everyone>",
    "<@U0BOSS>",
    "<@W0ADMIN|admin>",
    "<!subteam^S0RELMGR|@release-managers>",
    "<#C0GENERAL|general>",
    "<https://evil.example/login|Approve here>",
    "<mailto:ceo@example.com|CEO>",
    "&lt;!channel&gt;",
    "```<!channel>```",
    "*<!here>*",
    "*:white_check_mark: Approved*",
    "Sign-offs: 1 of 1",
    "\n> _approved by security_ ~pending~\n",
    "`",
    "pay\u202egnp.exe \u2066x\u2069\u200f\u200b",
]
HOSTILE = " ".join(CORPUS)
LIVE = re.compile(r"<(?:[@#!]|https?:|mailto:)")
OURS = re.compile(
    r"<@U0(?:ALICE|REL1|REL2|SEC1|MALLORY|GINA)>|<!date\^\d+\^[^|>]*\|[^>]*>|<!subteam\^S0RELMGR>"
    r"|<http://127\.0\.0\.1:\d+/archives/C0CHANGES/p\d+\|run run_[0-9a-f]+>"
    # A reviewer's direct message: where the card is, and Slack's permalink to it.
    r"|<#C0CHANGES>|<http://127\.0\.0\.1:\d+/archives/C0CHANGES/p\d+\?thread_ts=[\d.]+&cid=C0CHANGES"
    r"\|open the card>"
)


def formatted_texts(node, top=True):  # type: ignore[no-untyped-def]
    """Texts Slack formats: mrkdwn objects and messages' top-level text (not plain_text)."""
    if isinstance(node, dict):
        found = [node["text"]] if node.get("type") == "mrkdwn" else []
        return found + [t for v in node.values() for t in formatted_texts(v, False)]
    if isinstance(node, list):
        return [t for v in node for t in formatted_texts(v, False)]
    return []


def assert_inert(texts: list[str]) -> None:
    for text in texts:
        assert not LIVE.search(OURS.sub("", text)), text
        # The bot never approves anything in this run: any such status line would be a copy.
        found = formatting(text)
        assert not [f for f in found if "Approved" in f or "white_check_mark" in f], text
        assert not [f for f in found if f.startswith(("~", ">", "&gt;"))], text
        assert "Sign-offs: 1 of 1" not in outside_code(text), text


def test_hostile_text_everywhere_stays_inert(serve_bot, sqlite_url, tmp_path):
    # Without the example's recipient constraint, so the hostile call reaches every button.
    policy = yaml.safe_load(BUNDLED_POLICY.read_text())
    del policy["tools"]["send_external_message"]["constraints"]
    (tmp_path / "open.yaml").write_text(yaml.safe_dump(policy))
    h = serve_bot(sqlite_url, policy_file=tmp_path / "open.yaml")
    args = {"recipient": HOSTILE, "text": HOSTILE}
    request = f"{HOSTILE}\nsend_external_message {json.dumps(args)}\nask_user " + json.dumps(
        {"question": HOSTILE}
    )
    root, card = start_run(h, request)
    h.driver.click(user=people.REQUESTER, message=card, button=button(card, "Approve"))
    for label in ("Edit", "View full arguments"):
        open_modal(h, people.RELEASE_MANAGER, card, label)
    reject = open_modal(h, people.RELEASE_MANAGER, card, "Reject")
    h.driver.submit_view(
        user=people.RELEASE_MANAGER,
        view_id=reject.id,
        values={"reject_reason": {"reason": HOSTILE}},
    )
    respond = open_modal(h, people.REQUESTER, card, "Respond")
    h.driver.submit_view(
        user=people.REQUESTER, view_id=respond.id, values={"respond_answer": {"answer": HOSTILE}}
    )
    result_message(h, root)

    surfaces = 0
    for message in h.state.messages:
        assert_inert([message.text, *formatted_texts(message.blocks)])
        assert not hidden_characters("".join(all_strings([message.text, message.blocks])))
        surfaces += 1
    for note in h.state.ephemerals:
        assert_inert([note.text, *formatted_texts(note.blocks)])
        assert not hidden_characters("".join(all_strings([note.text, note.blocks])))
        surfaces += 1
    for view in h.state.views.values():
        assert_inert(formatted_texts(view.view))
        assert not hidden_characters("".join(all_strings(view.view)))
        surfaces += 1
    assert surfaces >= 8
    everything = json.dumps([m.blocks for m in h.state.messages])
    assert "&lt;!channel&gt;" in everything, "the hostile text is shown, escaped"
