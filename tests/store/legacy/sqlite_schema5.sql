BEGIN TRANSACTION;
CREATE TABLE approvals (
    session_id TEXT NOT NULL,
    call_id TEXT NOT NULL,
    input_digest TEXT NOT NULL,
    approved INTEGER NOT NULL,
    decided_at TEXT NOT NULL, reason TEXT, edited_input TEXT,
    PRIMARY KEY (session_id, call_id)
) WITHOUT ROWID;
INSERT INTO "approvals" VALUES('approval','c1','sha256:abababababababababababababababababababababababababababababababab',1,'2026-12-07T16:54:28.836646+00:00','looks fine','{"path": "/tmp/edited"}');
INSERT INTO "approvals" VALUES('approval','c2','sha256:abababababababababababababababababababababababababababababababab',0,'2026-12-07T16:54:28.840606+00:00',NULL,NULL);
CREATE TABLE items (
    session_id TEXT NOT NULL,
    position INTEGER NOT NULL,
    item TEXT NOT NULL,
    PRIMARY KEY (session_id, position)
) WITHOUT ROWID;
INSERT INTO "items" VALUES('approval',0,'{"kind":"user","parts":[{"text":"go","metadata":{},"type":"text"}],"id":null,"metadata":{},"usage":null,"finish_reason":null,"created_at":null}');
INSERT INTO "items" VALUES('approval',1,'{"kind":"assistant","parts":[{"id":"c0","name":"write_file","input":{"path":"/tmp/c0"},"metadata":{},"type":"tool_call"},{"id":"c9","name":"write_file","input":{"path":"/tmp/c9"},"metadata":{},"type":"tool_call"},{"id":"c1","name":"write_file","input":{"path":"/tmp/c1"},"metadata":{},"type":"tool_call"},{"id":"c2","name":"write_file","input":{"path":"/tmp/c2"},"metadata":{},"type":"tool_call"}],"id":null,"metadata":{},"usage":null,"finish_reason":"tool_call","created_at":null}');
INSERT INTO "items" VALUES('approval',2,'{"kind":"tool","parts":[{"call_id":"c9","output_type":"text","output":"wrote c9","is_error":false,"metadata":{},"type":"tool_result"}],"id":null,"metadata":{},"usage":null,"finish_reason":null,"created_at":null}');
INSERT INTO "items" VALUES('leased',0,'{"kind":"user","parts":[{"text":"mine","metadata":{},"type":"text"}],"id":null,"metadata":{},"usage":null,"finish_reason":null,"created_at":null}');
INSERT INTO "items" VALUES('plain',0,'{"kind":"user","parts":[{"text":"hello","metadata":{},"type":"text"}],"id":null,"metadata":{},"usage":null,"finish_reason":null,"created_at":null}');
INSERT INTO "items" VALUES('plain',1,'{"kind":"assistant","parts":[{"text":"hi ünïcode","metadata":{},"type":"text"}],"id":null,"metadata":{},"usage":null,"finish_reason":null,"created_at":null}');
INSERT INTO "items" VALUES('plain',2,'{"kind":"user","parts":[{"text":"again","metadata":{},"type":"text"}],"id":null,"metadata":{},"usage":null,"finish_reason":null,"created_at":null}');
INSERT INTO "items" VALUES('turn',0,'{"kind":"user","parts":[{"text":"long turn","metadata":{},"type":"text"}],"id":null,"metadata":{},"usage":null,"finish_reason":null,"created_at":null}');
CREATE TABLE leases (
    session_id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    token INTEGER NOT NULL,
    expires_at REAL NOT NULL,
    released INTEGER NOT NULL
) WITHOUT ROWID;
INSERT INTO "leases" VALUES('leased','worker-a',1,2.1120224688444623948e+09,0);
INSERT INTO "leases" VALUES('unsaved','worker-b',2,2.11202246886045217504e+09,0);
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
INSERT INTO "meta" VALUES('last_sequence','1');
INSERT INTO "meta" VALUES('last_token','2');
INSERT INTO "meta" VALUES('schema_version','5');
CREATE TABLE sessions (
    session_id TEXT PRIMARY KEY,
    head TEXT NOT NULL,
    item_count INTEGER NOT NULL,
    sequence INTEGER NOT NULL,
    updated_at TEXT NOT NULL
, status TEXT NOT NULL DEFAULT 'awaiting_input', pending_approvals TEXT NOT NULL DEFAULT '[]', turn_counts TEXT);
INSERT INTO "sessions" VALUES('plain','{"format":"agentloop.checkpoint","version":1,"session_id":"plain","state":"IDLE"}',3,3,'2026-12-07T16:54:28.815748+00:00','awaiting_input','[]',NULL);
INSERT INTO "sessions" VALUES('turn','{"format":"agentloop.checkpoint","version":1,"session_id":"turn","config":{"session_id":"turn"},"turn":{"items":[],"tool_calls":[],"model_calls_made":[],"round":1},"state":"AFTER_TOOL_RESULT"}',1,4,'2026-12-07T16:54:28.820650+00:00','ready','[]','{"items":1,"model_calls_made":1,"tool_calls":1}');
INSERT INTO "sessions" VALUES('approval','{"format":"agentloop.checkpoint","version":1,"session_id":"approval","state":"AWAITING_APPROVAL","turn":{"round":{"calls":[{"index":0,"call":{"id":"c1"},"status":"awaiting_approval"},{"index":1,"call":{"id":"c2"},"status":"awaiting_approval"}]}}}',3,5,'2026-12-07T16:54:28.833528+00:00','awaiting_approval','["c1", "c2"]',NULL);
INSERT INTO "sessions" VALUES('leased','{"format":"agentloop.checkpoint","version":1,"session_id":"leased","state":"IDLE"}',1,6,'2026-12-07T16:54:28.848635+00:00','awaiting_input','[]',NULL);
CREATE TABLE started_calls (
    session_id TEXT NOT NULL,
    call_id TEXT NOT NULL,
    tool_name TEXT NOT NULL,
    started_at TEXT NOT NULL, input_digest TEXT, answered INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (session_id, call_id)
) WITHOUT ROWID;
INSERT INTO "started_calls" VALUES('approval','c0','write_file','2026-12-07T16:54:28.824496+00:00',NULL,0);
INSERT INTO "started_calls" VALUES('approval','c9','write_file','2026-12-07T16:54:28.828509+00:00','sha256:abababababababababababababababababababababababababababababababab',1);
INSERT INTO "started_calls" VALUES('unsaved','u1','pay','2026-12-07T16:54:28.852476+00:00',NULL,0);
CREATE TABLE turn_rows (
    session_id TEXT NOT NULL,
    list TEXT NOT NULL,
    position INTEGER NOT NULL,
    element TEXT NOT NULL,
    PRIMARY KEY (session_id, list, position)
) WITHOUT ROWID;
INSERT INTO "turn_rows" VALUES('turn','items',0,'{"kind":"user","parts":[{"text":"long turn","metadata":{},"type":"text"}],"id":null,"metadata":{},"usage":null,"finish_reason":null,"created_at":null}');
INSERT INTO "turn_rows" VALUES('turn','model_calls_made',0,'{"round":0}');
INSERT INTO "turn_rows" VALUES('turn','tool_calls',0,'{"id":"t1","n":1}');
CREATE INDEX sessions_by_status ON sessions (status, sequence);
COMMIT;
