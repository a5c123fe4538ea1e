"""The messages that reach reviewers: snapshots, Block Kit validation, and only policy ids live."""

from __future__ import annotations

import dataclasses
import json
import re

import pytest

from agent_runtime.views import Reviewers
from bot.blocks.pings import card_elsewhere, mentions, reviewer_dm, reviewers_ping
from tests.bot.snapshot_files import assert_matches_snapshot
from tests.bot.test_blocks import STATES, assert_valid_message

LINK = "https://acme.slack.com/archives/C1/p20?thread_ts=1.0&cid=C1"
PENDING = STATES["pending"]
REVIEWERS = Reviewers(users=("U0REL1", "U0REL2"), usergroups=("S0RELMGR",))
MESSAGES = {
    "ping_on_post": reviewers_ping(PENDING, REVIEWERS, after=None),
    "ping_after_sign_off": reviewers_ping(PENDING, Reviewers(("U0REL2",), ()), after="U0REL1"),
    "dm_on_post": reviewer_dm(PENDING, link=LINK, after=None),
    "dm_after_sign_off": reviewer_dm(PENDING, link=LINK, after="U0REL1"),
    "card_elsewhere": card_elsewhere(
        STATES["in_review_channel"], channel="C0REVIEW", link=LINK.replace("C1", "C0REVIEW")
    ),
}


@pytest.mark.parametrize("name", sorted(MESSAGES))
def test_ping_messages_match_snapshots_and_validate(name):
    message = MESSAGES[name]
    assert_valid_message(message)
    assert_matches_snapshot(message, f"{name}")


def test_only_well_formed_policy_ids_become_mentions():
    odd = Reviewers(
        users=("U0REL1", "<!channel>", "u0lower", "U0X> <!here"),
        usergroups=("S0RELMGR", "S1|x", "<!everyone>"),
    )
    assert mentions(odd) == "<@U0REL1> <!subteam^S0RELMGR>"


def test_the_signer_is_never_mentioned_in_the_ping_after_their_sign_off():
    text = reviewers_ping(PENDING, Reviewers(("U0REL2",), ()), after="U0REL1")["text"]
    assert "U0REL1" not in text and "<@U0REL2>" in text


def test_links_that_do_not_look_like_permalinks_are_left_out():
    hostile = reviewer_dm(PENDING, link="https://x.example|Approve> <!channel", after=None)
    assert not re.search(r"<!|<https?:", json.dumps(hostile))
    ids = dataclasses.replace(PENDING, id="apr_<!channel>", card_channel="<!here>")
    for message in (
        reviewer_dm(ids, link=None, after=None),
        reviewers_ping(ids, REVIEWERS, after=None),
    ):
        assert "<!channel>" not in message["text"] and "<!here>" not in message["text"]
