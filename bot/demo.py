"""``approval-bot demo``: the whole product offline, printed as Slack would show it.

The bot serves real HTTP with real signatures, the local Slack sandbox plays Slack's Web API and
its users, SQLite is the store and checkpointer, and the offline model plays the agent.
"""

from __future__ import annotations

import json
import secrets
import sys
import tempfile
from pathlib import Path
from typing import TextIO

from bot.app import Bot, build_bot
from bot.http_server import make_server
from bot.ids import ActionId
from bot.sandbox import people
from bot.sandbox.driver import SlackDriver, buttons
from bot.sandbox.render import indent, render_message, render_view
from bot.sandbox.server import SANDBOX_TOKEN, SlackSandbox
from bot.sandbox.state import Message
from bot.settings import load_settings
from store.repositories import AuditRepository

DEMO_REQUEST = "\n".join(
    [
        'send_external_message {"recipient": "partner@example.com", "text": "The release is out."}',
        'delete_project_file {"path": "notes/old.txt"}',
    ]
)


class Demo:
    def __init__(self, folder: Path, out: TextIO) -> None:
        self.out = out
        self.sandbox = SlackSandbox(users=people.USERS, usergroups=people.USERGROUPS).start()
        secret = secrets.token_hex(16)
        settings = load_settings(
            slack_bot_token=SANDBOX_TOKEN,
            slack_signing_secret=secret,
            slack_app_token=None,
            slack_api_url=self.sandbox.api_url,
            database_url=f"sqlite:///{folder / 'demo.db'}",
            workspace_dir=folder / "workspace",
            policy_file=None,
            audit_key=secrets.token_urlsafe(32),  # a keyed audit chain, as in production
        )
        self.bot: Bot = build_bot(settings)
        self.server = make_server(self.bot, host="127.0.0.1", port=0).start()
        self.driver = SlackDriver(
            sandbox=self.sandbox,
            bot_url=f"http://127.0.0.1:{self.server.port}",
            signing_secret=secret,
        )
        self.state = self.sandbox.state

    def say(self, text: str) -> None:
        print(text, file=self.out)

    def show(self, who: str, message: Message) -> None:
        self.say(f"\n[{who}]\n" + indent(render_message(message, self.state.users), "  "))

    def card(self, root: Message) -> Message:
        return self.state.wait_for(
            lambda: next(
                (
                    m
                    for m in self.state.thread(people.CHANNEL, root.ts)
                    if buttons(m) or "Approval" in m.text or "Decided" in m.text
                ),
                None,
            )
        )

    def show_pings(self, root: Message) -> None:
        """The reviewers the policy names hear of the card: release managers by a mention in
        the thread, security (``notify: dm``) by a direct message linking to it."""
        ping = self.state.wait_for(
            lambda: next(
                (m for m in self.state.thread(people.CHANNEL, root.ts) if "needs your" in m.text),
                None,
            )
        )
        self.show("approval-bot, in the thread (pinging the reviewers)", ping)
        dm = self.state.wait_for(lambda: next(iter(self.state.dm_with(people.SECURITY)), None))
        self.show(f"approval-bot, direct message to @{self.state.users[people.SECURITY]}", dm)

    def run(self) -> int:
        users = self.state.users
        self.say(f"#changes  @{users[people.REQUESTER]}: /agent (two actions)")
        for line in DEMO_REQUEST.splitlines():
            self.say(f"    {line}")
        self.driver.slash_command(user=people.REQUESTER, channel=people.CHANNEL, text=DEMO_REQUEST)
        root = self.state.wait_for(lambda: next(iter(self.state.top_level(people.CHANNEL)), None))
        self.show("approval-bot, in #changes", root)
        card = self.card(root)
        self.show("approval-bot, in the thread", card)
        self.show_pings(root)
        self.show_home(people.RELEASE_MANAGER)

        approve_send = next(b for b in buttons(card) if b.text == "Approve")
        reject_delete = [b for b in buttons(card) if b.text == "Reject"][1]
        self.say(f"\n@{users[people.REQUESTER]} clicks [Approve] on action 1 (their own run)")
        self.driver.click(user=people.REQUESTER, message=card, button=approve_send)
        refusal = self.state.wait_for(lambda: self.state.ephemerals_for(people.REQUESTER))
        self.say(f"  (only @{users[people.REQUESTER]} sees) {refusal[-1].text}")

        reviewer = people.RELEASE_MANAGER
        self.say(f"\n@{users[reviewer]} clicks [Approve] on action 1")
        self.driver.click(user=reviewer, message=card, button=approve_send)
        self.state.wait_for(
            lambda: f"<@{reviewer}> approved" in json.dumps(self.state.current(card).blocks)
        )

        self.say(f"@{users[reviewer]} clicks [Reject] on action 2")
        assert reject_delete.action_id == ActionId.REJECT
        self.driver.click(user=reviewer, message=card, button=reject_delete)
        modal = self.state.wait_for(lambda: self.state.open_views(reviewer))[-1]
        reason = "We still need these notes for the audit."
        self.say(f"  modal '{modal.view['title']['text']}', reason: {reason}")
        self.driver.submit_view(
            user=reviewer, view_id=modal.id, values={"reject_reason": {"reason": reason}}
        )
        result = self.state.wait_for(
            lambda: next(
                (
                    m
                    for m in self.state.thread(people.CHANNEL, root.ts)
                    if m.text.startswith("Run ")
                ),
                None,
            )
        )
        self.show("approval-bot, the card after the decisions", self.state.current(card))
        self.show("approval-bot, in the thread", result)
        return self.report()

    def show_home(self, user: str) -> None:
        """The reviewer opens the bot's Home tab: one line per section, as Slack shows it."""
        self.say(f"\n@{self.state.users[user]} opens the approval-bot Home tab")
        self.driver.open_home(user=user)
        view = self.state.wait_for(lambda: self.state.home_of(user))
        self.say(indent(render_view(view, self.state.users), "  "))

    def report(self) -> int:
        effects = [json.loads(line) for line in _effects(self.bot).splitlines() if line]
        self.say("\nSide effects that ran: " + (", ".join(e["tool"] for e in effects) or "none"))
        self.say("\nAudit trail:")
        with self.bot.db.transaction() as session:
            for event in AuditRepository(session).iter_all():
                who = self.state.users.get(event.actor_id or "", event.actor_id or "-")
                why = f" ({event.reason})" if event.reason else ""
                if event.kind == "tool_outcome":
                    why = f" ({event.detail.get('tool')}: {event.detail.get('status')})"
                self.say(f"  {event.id:>3} {event.kind:<20} {event.outcome:<8} {who}{why}")
            chain = AuditRepository(session).verify()
        verdict = "intact, keyed" if chain.intact else f"NOT INTACT: {chain.problem}"
        self.say(f"Audit chain: {verdict} ({chain.checked} events)")
        ok = chain.intact and [e["tool"] for e in effects] == ["send_external_message"]
        self.say("\nDemo finished: " + ("everything as expected." if ok else "UNEXPECTED effects!"))
        return 0 if ok else 1

    def close(self) -> None:
        self.server.stop()
        self.bot.close()
        self.sandbox.stop()


def _effects(bot: Bot) -> str:
    path = Path(bot.settings.workspace_dir) / ".effects.jsonl"
    return path.read_text(encoding="utf-8") if path.exists() else ""


def run_demo(out: TextIO = sys.stdout) -> int:
    with tempfile.TemporaryDirectory(prefix="approval-bot-demo-") as folder:
        demo = Demo(Path(folder), out)
        try:
            return demo.run()
        except TimeoutError as exc:
            print(f"demo failed: {exc}", file=sys.stderr)
            return 1
        finally:
            demo.close()
