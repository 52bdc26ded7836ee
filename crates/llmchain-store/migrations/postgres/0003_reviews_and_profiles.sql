-- llmchain-store schema version 3 (PostgreSQL): who a run belongs to (queued for
-- workers, or held by an interactive process), the operator's profile a queued run runs
-- under, and the review inbox.

ALTER TABLE runs ADD COLUMN kind    TEXT NOT NULL DEFAULT 'queued';
ALTER TABLE runs ADD COLUMN profile TEXT;

-- Version 2 recorded what a queued run executes (MCP commands, base URLs) in the run
-- itself; version 3 takes it only from the worker's configuration, by profile name.
-- Open runs of version 2 name no profile: no worker would claim them, so say so.
UPDATE runs SET status = 'cancelled', lease_owner = NULL, lease_expires_at = NULL,
       last_error = 'cancelled by the upgrade to schema version 3: a queued run now names a profile of the worker''s configuration (llmchain run --enqueue --profile NAME); queue it again'
WHERE status IN ('pending', 'running', 'paused');

DROP INDEX runs_pending;
CREATE INDEX runs_pending ON runs (priority DESC, run_at, created_at, id) WHERE status = 'pending' AND kind = 'queued';

CREATE TABLE reviews (
    id              TEXT PRIMARY KEY,
    conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    run_id          TEXT REFERENCES runs (id) ON DELETE SET NULL,
    call_id         TEXT NOT NULL,
    -- A call can be asked about more than once: again after its tool interrupts anew.
    round           INTEGER NOT NULL DEFAULT 0,
    tool            TEXT NOT NULL,
    arguments       TEXT NOT NULL,
    -- What the tool asked, when its own interrupt opened the review.
    question        TEXT,
    status          TEXT NOT NULL,
    decision        TEXT,
    decided_by      TEXT,
    created_at      BIGINT NOT NULL,
    decided_at      BIGINT
);
-- One live review per call and round; a review of a call that a regenerated answer
-- removed is `voided` (kept, with its decision, for the record) and answers nothing.
CREATE UNIQUE INDEX reviews_call ON reviews (conversation_id, call_id, round) WHERE status <> 'voided';
CREATE INDEX reviews_pending ON reviews (created_at) WHERE status = 'pending';
CREATE INDEX reviews_run ON reviews (run_id);
