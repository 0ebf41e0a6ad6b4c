"""Signed jobs: who may hand a worker a job.

Anyone who can write to the Redis stream can add a job, and a job chooses the run a record is
about and the evaluator that grades it. With a shared secret in ``$JUDGEHOOKS_JOB_KEY`` (the same
on producers and workers), producers sign every stream entry with HMAC-SHA256 and workers refuse
entries that are unsigned or mis-signed. Without the key, producers publish unsigned and workers
grade unsigned jobs, with their imported evaluators only, and say at start that jobs are not
authenticated. Replaying a signed entry is harmless: the record id is the same, stores keep one.
"""

from __future__ import annotations

import hashlib
import hmac
import os

JOB_KEY_ENV = "JUDGEHOOKS_JOB_KEY"
MIN_KEY_LENGTH = 16
GENERATE = "python -c 'import secrets; print(secrets.token_hex(32))'"


def job_key(value: str | bytes | None = None) -> bytes | None:
    """The signing key: `value`, else $JUDGEHOOKS_JOB_KEY; None when neither is set (or empty).
    A key shorter than 16 characters is refused: it could be guessed."""
    value = os.environ.get(JOB_KEY_ENV) if value is None else value
    if not value:
        return None
    key = value.encode() if isinstance(value, str) else value
    if len(key) < MIN_KEY_LENGTH:
        raise ValueError(f"{JOB_KEY_ENV} must be at least {MIN_KEY_LENGTH} characters (it signs Redis jobs); "
                         f"generate one with: {GENERATE}")
    return key


def sign(key: bytes, data: bytes) -> bytes:
    """The signature a stream entry carries beside its data (hex HMAC-SHA256)."""
    return hmac.new(key, data, hashlib.sha256).hexdigest().encode()


def refusal(key: bytes | None, data: bytes, signature: bytes | None) -> str | None:
    """Why a worker with `key` must refuse this entry ("unsigned", "bad_signature"), or None."""
    if key is None:
        return None
    if signature is None:
        return "unsigned"
    return None if hmac.compare_digest(sign(key, data), signature) else "bad_signature"
