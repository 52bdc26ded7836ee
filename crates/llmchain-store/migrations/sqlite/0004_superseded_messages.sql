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

-- Chats of `llmchain serve` are marked with the profile they belong to (a server lists,
-- reads and decides only its own); those served before the mark existed are found by
-- their runs, which recorded the server's profile.
UPDATE conversations SET metadata = json_set(
    CASE WHEN json_valid(metadata) THEN metadata ELSE '{}' END,
    '$.llmchain_serve',
    coalesce((SELECT json_extract(r.state, '$.serve.profile') FROM runs r
              WHERE r.conversation_id = conversations.id
                AND json_type(r.state, '$.serve') = 'object'
              ORDER BY r.created_at DESC LIMIT 1), ''))
WHERE EXISTS (SELECT 1 FROM runs r WHERE r.conversation_id = conversations.id
                AND json_valid(r.state) AND json_type(r.state, '$.serve') = 'object');

-- The tool's parameters schema as it was when its call paused: an edited call's
-- arguments are checked against it before the decision is recorded.
ALTER TABLE reviews ADD COLUMN parameters_schema TEXT;
