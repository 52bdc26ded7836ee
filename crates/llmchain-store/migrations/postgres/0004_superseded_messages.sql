-- llmchain-store schema version 4 (PostgreSQL): what a regenerated answer replaced stays
-- on record. Regenerating moves the answer's messages here (with the status each call
-- had) instead of deleting them: a call that ran, or may have, is never forgotten.
CREATE TABLE superseded_messages (
    id              BIGSERIAL PRIMARY KEY,
    conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    -- The position the message had in the conversation.
    seq             BIGINT NOT NULL,
    body            TEXT NOT NULL,
    superseded_at   BIGINT NOT NULL
);
CREATE INDEX superseded_conversation ON superseded_messages (conversation_id, id);

-- Chats of `llmchain serve` are marked with the profile they belong to (a server lists,
-- reads and decides only its own); those served before the mark existed are found by
-- their runs, which recorded the server's profile.
UPDATE conversations c SET metadata = (
    c.metadata::jsonb || jsonb_build_object('llmchain_serve',
        coalesce((SELECT r.state::jsonb -> 'serve' ->> 'profile' FROM runs r
                  WHERE r.conversation_id = c.id
                    AND jsonb_typeof(r.state::jsonb -> 'serve') = 'object'
                  ORDER BY r.created_at DESC LIMIT 1), ''))
)::text
WHERE EXISTS (SELECT 1 FROM runs r WHERE r.conversation_id = c.id
                AND jsonb_typeof(r.state::jsonb -> 'serve') = 'object');

-- The tool's parameters schema as it was when its call paused: an edited call's
-- arguments are checked against it before the decision is recorded.
ALTER TABLE reviews ADD COLUMN parameters_schema TEXT;
