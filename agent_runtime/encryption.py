"""Checkpoints at rest: AES-GCM through ``cryptography``, and a key check at start-up.

LangGraph's ``EncryptedSerializer`` encrypts what goes through the serializer (channel blobs,
pending writes such as interrupts); checkpoint metadata and primitive channel values stay plain.
A database written with a key remembers a check value, so a missing or wrong key stops start-up
with a clear message instead of failing later on unreadable data.
"""

from __future__ import annotations

import base64
import binascii
import os
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from langgraph.checkpoint.serde.base import CipherProtocol, SerializerProtocol
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from agent_runtime.errors import ApprovalError
from store.control_models import StoreMeta
from store.db import Database

CIPHER = "aesgcm"
CHECK_KEY = "checkpoint_key_check"
CHECK_PLAINTEXT = b"approval-bot checkpoint key check"


class CheckpointKeyError(ApprovalError):
    """The checkpoint encryption key is missing, malformed or wrong for this database."""


def parse_key(value: str) -> bytes:
    """A base64 key of 16, 24 or 32 bytes (e.g. ``openssl rand -base64 32``)."""
    try:
        key = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise CheckpointKeyError("CHECKPOINT_ENCRYPTION_KEY: not valid base64") from None
    if len(key) not in (16, 24, 32):
        raise CheckpointKeyError("CHECKPOINT_ENCRYPTION_KEY: must decode to 16, 24 or 32 bytes")
    return key


class AesGcmCipher(CipherProtocol):
    def __init__(self, key: bytes) -> None:
        self._aead = AESGCM(key)

    def encrypt(self, plaintext: bytes) -> tuple[str, bytes]:
        nonce = os.urandom(12)
        return CIPHER, nonce + self._aead.encrypt(nonce, plaintext, None)

    def decrypt(self, ciphername: str, ciphertext: bytes) -> bytes:
        if ciphername != CIPHER:
            raise CheckpointKeyError(f"checkpoint encrypted with unknown cipher {ciphername!r}")
        try:
            return self._aead.decrypt(ciphertext[:12], ciphertext[12:], None)
        except InvalidTag:
            raise CheckpointKeyError(
                "CHECKPOINT_ENCRYPTION_KEY does not decrypt this database's checkpoints"
            ) from None


class _RefuseEncrypted(JsonPlusSerializer):
    """Without a key: reading an encrypted checkpoint is an error that says why."""

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        if "+" in data[0]:
            raise CheckpointKeyError(
                "checkpoints are encrypted: set CHECKPOINT_ENCRYPTION_KEY to the key they were "
                "written with"
            )
        return super().loads_typed(data)


def checkpoint_serde(key: bytes | None) -> SerializerProtocol:
    return EncryptedSerializer(AesGcmCipher(key)) if key else _RefuseEncrypted()


def verify_key(db: Database, key: bytes | None) -> None:
    """Refuse to start with a missing or wrong key on a database written with one."""
    with db.transaction() as s:
        check = s.get(StoreMeta, CHECK_KEY)
        if check is None:
            if key is not None:
                _, sealed = AesGcmCipher(key).encrypt(CHECK_PLAINTEXT)
                s.add(StoreMeta(key=CHECK_KEY, value=base64.b64encode(sealed).decode()))
            return
        if key is None:
            raise CheckpointKeyError(
                "CHECKPOINT_ENCRYPTION_KEY: this database's checkpoints are encrypted; "
                "set the key they were written with"
            )
        try:
            AesGcmCipher(key).decrypt(CIPHER, base64.b64decode(check.value))
        except CheckpointKeyError:
            raise CheckpointKeyError(
                "CHECKPOINT_ENCRYPTION_KEY: wrong key for this database"
            ) from None
