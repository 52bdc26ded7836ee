-- llmchain-store schema version 1 (SQLite).
CREATE TABLE conversations (
    id         TEXT PRIMARY KEY,
    title      TEXT,
    metadata   TEXT NOT NULL DEFAULT '{}',
    header     TEXT NOT NULL,
    next_seq   INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);
CREATE INDEX conversations_updated ON conversations (updated_at);

CREATE TABLE messages (
    conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    seq             INTEGER NOT NULL,
    body            TEXT NOT NULL,
    created_at      INTEGER NOT NULL,
    PRIMARY KEY (conversation_id, seq)
) WITHOUT ROWID;

-- An append is one statement: the insert takes `next_seq` as its sequence number and this
-- trigger advances the counter in the same (atomic) statement.
CREATE TRIGGER messages_advance_seq AFTER INSERT ON messages
BEGIN
    UPDATE conversations SET next_seq = NEW.seq + 1, updated_at = NEW.created_at
    WHERE id = NEW.conversation_id;
END;

CREATE TABLE tool_calls (
    conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    call_id         TEXT NOT NULL,
    status          TEXT NOT NULL,
    updated_at      INTEGER NOT NULL,
    PRIMARY KEY (conversation_id, call_id)
) WITHOUT ROWID;

CREATE TABLE runs (
    id               TEXT PRIMARY KEY,
    conversation_id  TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    status           TEXT NOT NULL,
    state            TEXT NOT NULL,
    lease_owner      TEXT,
    lease_expires_at INTEGER,
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL
);
CREATE INDEX runs_claim ON runs (status, created_at);
CREATE INDEX runs_conversation ON runs (conversation_id);
