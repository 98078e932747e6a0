"""Rollout history under `WORKBENCH_HOME`: a SQLite index, one document file per rollout, and a
per-rollout JSONL of turns appended as they land (so a crash mid-rollout keeps them).

Layout:
    <home>/workbench.sqlite3           index (WAL; one connection per thread)
    <home>/rollouts/<id>.json          the rollout document
    <home>/rollouts/<id>.turns.jsonl   captured turns, appended live by the session listener
    <home>/jobs/<job>/<trial>/         Harbor's trial dirs (`harbor view <home>/jobs --jobs`)
"""

import json
import os
import sqlite3
import threading
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from capture.sessions import Session
from capture.turns import Turn

_SCHEMA = """
CREATE TABLE IF NOT EXISTS rollouts (
    id TEXT PRIMARY KEY,
    created_at REAL NOT NULL,
    dataset TEXT NOT NULL,
    task TEXT NOT NULL,
    harness TEXT NOT NULL,
    sandbox TEXT NOT NULL,
    engine TEXT NOT NULL,
    tier TEXT,
    ok INTEGER NOT NULL,
    error_kind TEXT,
    error_message TEXT,
    reward REAL,
    turns INTEGER NOT NULL DEFAULT 0,
    tokens INTEGER NOT NULL DEFAULT 0,
    seconds REAL,
    document_path TEXT,
    trial_dir TEXT
);
CREATE INDEX IF NOT EXISTS rollouts_created ON rollouts (created_at DESC);
"""


class RolloutRow(BaseModel):
    """One line of the history index (what the UI's history table shows)."""

    id: str
    created_at: float
    dataset: str
    task: str
    harness: str
    sandbox: str
    engine: str  # URL without credentials
    tier: str | None = None
    ok: bool
    error_kind: str | None = None
    error_message: str | None = None
    reward: float | None = None
    turns: int = 0
    tokens: int = 0
    seconds: float | None = None
    document_path: str | None = None
    trial_dir: str | None = None


class TurnLog:
    """Session listener appending each captured turn to `<id>.turns.jsonl` as it lands.

    A prompt is written as the graph stores it: a delta after its parent's prompt+completion
    (`prompt_from` = the parent's index), the full ids only for a root, so the log stays linear
    in unique tokens, branches included.
    """

    def __init__(self, path: Path):
        self.path = path
        self._lock = threading.Lock()

    def __call__(self, session: Session, index: int, turn: Turn) -> None:
        parent, delta = session.with_graph(
            lambda graph: (graph.node(index).parent, graph.prompt_delta(index))
        )
        # Never the session id: it is the live rollout's API key, and this file is served to the UI.
        record: dict[str, Any] = {"index": index}
        if parent is None:
            record["prompt_ids"] = turn.prompt_ids.tolist()
        else:
            record.update(prompt_from=parent, prompt_delta=delta.tolist())
        record.update(
            completion_ids=turn.completion_ids.tolist(),
            logprobs=(
                None if turn.completion_logprobs is None else turn.completion_logprobs.tolist()
            ),
            dialect=turn.dialect,
            route=turn.route,
            finish_reason=turn.finish_reason,
            content=turn.content,
            reasoning=turn.reasoning,
            tool_calls=turn.tool_calls,
            usage=turn.usage,
            timings=turn.timings,
            tier=turn.tier,
            model=turn.model,
        )
        line = json.dumps(record, separators=(",", ":")) + "\n"
        with self._lock, self.path.open("a", encoding="utf-8") as out:
            out.write(line)


class Store:
    """The history index and document files. Safe to share across threads and event loops."""

    def __init__(self, home: Path):
        self.home = Path(home)
        self.documents_dir = self.home / "rollouts"
        self.jobs_dir = self.home / "jobs"
        self.documents_dir.mkdir(parents=True, exist_ok=True)
        self.jobs_dir.mkdir(parents=True, exist_ok=True)
        self.db_path = self.home / "workbench.sqlite3"
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._connections_lock = threading.Lock()
        with self._connect() as conn:
            conn.executescript(_SCHEMA)

    def _connect(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            # One connection per thread; check_same_thread=False only so close() may run anywhere.
            conn = sqlite3.connect(self.db_path, timeout=30.0, check_same_thread=False)
            conn.row_factory = sqlite3.Row
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            self._local.conn = conn
            with self._connections_lock:
                self._connections.append(conn)
        return conn

    def turn_log(self, rollout_id: str) -> TurnLog:
        return TurnLog(self.documents_dir / f"{rollout_id}.turns.jsonl")

    def document_path(self, rollout_id: str) -> Path:
        return self.documents_dir / f"{rollout_id}.json"

    def save(self, row: RolloutRow, document: dict[str, Any]) -> Path:
        """Write the document (atomically), then index it. Returns the document's path."""
        path = self.document_path(row.id)
        tmp = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
        tmp.write_text(json.dumps(document, separators=(",", ":")), encoding="utf-8")
        tmp.replace(path)
        row = row.model_copy(update={"document_path": str(path)})
        fields = list(RolloutRow.model_fields)
        values = [getattr(row, f) for f in fields]
        sql = (
            f"INSERT OR REPLACE INTO rollouts ({', '.join(fields)}) "
            f"VALUES ({', '.join('?' for _ in fields)})"
        )
        with self._connect() as conn:
            conn.execute(sql, values)
        return path

    def list_rollouts(self, limit: int = 200, offset: int = 0) -> list[RolloutRow]:
        """Newest first."""
        rows = self._connect().execute(
            "SELECT * FROM rollouts ORDER BY created_at DESC LIMIT ? OFFSET ?", (limit, offset)
        )
        return [RolloutRow(**dict(r)) for r in rows]

    def get(self, rollout_id: str) -> RolloutRow | None:
        row = (
            self._connect().execute("SELECT * FROM rollouts WHERE id = ?", (rollout_id,)).fetchone()
        )
        return None if row is None else RolloutRow(**dict(row))

    def get_document(self, rollout_id: str) -> dict[str, Any] | None:
        row = self.get(rollout_id)
        if row is None or row.document_path is None:
            return None
        path = Path(row.document_path)
        return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None

    def count(self) -> int:
        return self._connect().execute("SELECT COUNT(*) FROM rollouts").fetchone()[0]

    def close(self) -> None:
        with self._connections_lock:
            for conn in self._connections:
                conn.close()
            self._connections.clear()
        self._local = threading.local()
