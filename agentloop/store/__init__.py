"""Durable sessions: the ``SessionStore`` protocol, the storage protocol under it, stores, JSONL.

A store keeps each session's last checkpoint document (``driver.checkpoint()``)
with a version, the session's lease, the tool calls claimed before they ran
and the approval decisions recorded for its calls, so a restarted host (or
another worker) can resume a session and answer calls that may have run as
in doubt. See ``docs/store.md``. ``PostgresSessionStore`` needs the
``postgres`` extra (psycopg 3: ``pip install 'agentloop-runtime[postgres]'``).
"""

from ..host._enqueue import enqueue_input
from ..host._problems import SessionProblem, find_session_problems, session_problems
from ..loop._checkpoint import CHECKPOINT_FORMAT, CHECKPOINT_VERSION
from ..loop._session_history import SavedStep, SessionHistory
from ..loop._session_store import (
    AnswerStore,
    Claim,
    ClaimError,
    InDoubtStore,
    Lease,
    LeaseError,
    LeaseHeldError,
    LeaseLostError,
    PendingCall,
    PendingQuestion,
    RecordedAnswer,
    RecordedApproval,
    SessionInfo,
    SessionStatus,
    SessionStore,
    SessionSummary,
    StaleSessionError,
    StoredSession,
    input_digest,
)
from ..transcript._jsonl import export_jsonl, import_jsonl
from ._backed import BackendSessionStore
from ._backend import BackendHead, BackendWrite, StorageBackend
from ._memory import MemoryBackend, MemorySessionStore
from ._postgres import PostgresSessionStore
from ._redis import RedisBackend, RedisSessionStore
from ._sqlite import SqliteSessionStore

__all__ = [
    "CHECKPOINT_FORMAT",
    "CHECKPOINT_VERSION",
    "AnswerStore",
    "BackendHead",
    "BackendSessionStore",
    "BackendWrite",
    "Claim",
    "ClaimError",
    "InDoubtStore",
    "Lease",
    "LeaseError",
    "LeaseHeldError",
    "LeaseLostError",
    "MemoryBackend",
    "MemorySessionStore",
    "PendingCall",
    "PendingQuestion",
    "PostgresSessionStore",
    "RecordedAnswer",
    "RecordedApproval",
    "RedisBackend",
    "RedisSessionStore",
    "SavedStep",
    "SessionHistory",
    "SessionInfo",
    "SessionProblem",
    "SessionStatus",
    "SessionStore",
    "SessionSummary",
    "SqliteSessionStore",
    "StaleSessionError",
    "StorageBackend",
    "StoredSession",
    "enqueue_input",
    "export_jsonl",
    "find_session_problems",
    "import_jsonl",
    "input_digest",
    "session_problems",
]
