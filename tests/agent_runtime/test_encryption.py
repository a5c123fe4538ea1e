"""Checkpoints at rest: encrypted blobs, and clear errors for a missing or wrong key."""

from __future__ import annotations

import base64
import os

import psycopg
import pytest

from agent_runtime.encryption import CheckpointKeyError, parse_key, verify_key
from bot.app import build_bot
from bot.sandbox.server import SANDBOX_TOKEN, SlackSandbox
from bot.settings import ConfigError, load_settings
from store.db import Database
from store.migrate import upgrade
from tests.agent_runtime.engine_env import make_env, paused_run

MARKER = "confidential-launch-codename-zebra"
KEY = base64.b64encode(os.urandom(32)).decode()


def test_tool_arguments_are_not_readable_in_postgres_checkpoint_blobs(tmp_path, migrated_pg_url):
    env = make_env(tmp_path, url=migrated_pg_url, key=parse_key(KEY))
    paused_run(env, f'send_external_message {{"recipient": "x@example.com", "text": "{MARKER}"}}')
    with psycopg.connect(migrated_pg_url) as conn:
        blobs = conn.execute("SELECT blob FROM checkpoint_blobs").fetchall()
        writes = conn.execute("SELECT blob FROM checkpoint_writes").fetchall()
    stored = b"".join(bytes(row[0]) for row in blobs + writes if row[0] is not None)
    assert stored, "the paused run has checkpoint data"
    assert MARKER.encode() not in stored
    assert env.runtime.state(env.notes.requested[-1].run.id).interrupts, "still readable"


def test_plain_checkpoints_do_contain_the_arguments(tmp_path, migrated_pg_url):
    """The control: without a key the same marker is in the blobs, so the test above can fail."""
    env = make_env(tmp_path, url=migrated_pg_url)
    paused_run(env, f'send_external_message {{"recipient": "x@example.com", "text": "{MARKER}"}}')
    with psycopg.connect(migrated_pg_url) as conn:
        rows = conn.execute("SELECT blob FROM checkpoint_blobs").fetchall()
    assert MARKER.encode() in b"".join(bytes(r[0]) for r in rows if r[0] is not None)


def test_missing_or_wrong_key_on_an_encrypted_database_is_refused(tmp_path):
    db = Database(f"sqlite:///{tmp_path / 'k.db'}")
    upgrade(db.engine)
    verify_key(db, parse_key(KEY))
    verify_key(db, parse_key(KEY))  # the same key again is fine
    with pytest.raises(CheckpointKeyError, match="set the key they were written with"):
        verify_key(db, None)
    with pytest.raises(CheckpointKeyError, match="wrong key"):
        verify_key(db, os.urandom(32))


@pytest.mark.parametrize("value", ["not base64!!", base64.b64encode(b"short").decode()])
def test_malformed_keys_are_refused_at_start(value):
    with pytest.raises(ConfigError, match="CHECKPOINT_ENCRYPTION_KEY"):
        load_settings(checkpoint_encryption_key=value)


def test_the_bot_refuses_to_start_without_the_key(tmp_path):
    sandbox = SlackSandbox().start()
    url = f"sqlite:///{tmp_path / 'bot.db'}"
    common = {
        "slack_bot_token": SANDBOX_TOKEN,
        "slack_signing_secret": "s",
        "slack_api_url": sandbox.api_url,
        "database_url": url,
        "workspace_dir": tmp_path / "ws",
    }
    try:
        build_bot(load_settings(checkpoint_encryption_key=KEY, **common)).close()
        with pytest.raises(CheckpointKeyError, match="encrypted"):
            build_bot(load_settings(**common))
    finally:
        sandbox.stop()
