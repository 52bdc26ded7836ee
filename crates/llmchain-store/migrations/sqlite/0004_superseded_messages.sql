-- llmchain-store schema version 4 (SQLite): what a regenerated answer replaced stays on
-- record. Regenerating moves the answer's messages here (with the status each call had)
-- instead of deleting them: a call that ran, or may have, is never forgotten.
CREATE TABLE superseded_messages (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    -- The position the message had in the conversation.
    seq             INTEGER NOT NULL,
    body            TEXT NOT NULL,
    superseded_at   INTEGER NOT NULL
);
CREATE INDEX superseded_conversation ON superseded_messages (conversation_id, id);
