-- llmchain-store schema version 2 (SQLite): a run queue with fencing, attempts,
-- scheduling, priorities and at most one open run per conversation.

ALTER TABLE runs ADD COLUMN epoch        INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN attempt      INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN max_attempts INTEGER NOT NULL DEFAULT 5;
ALTER TABLE runs ADD COLUMN run_at       INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN priority     INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN last_error   TEXT;

-- Version 1 allowed several open runs per conversation: keep the newest of each.
UPDATE runs SET status = 'cancelled', lease_owner = NULL, lease_expires_at = NULL,
       last_error = 'cancelled by the upgrade to schema version 2: a newer open run of the conversation exists'
WHERE status IN ('pending', 'running', 'paused')
  AND EXISTS (SELECT 1 FROM runs AS newer
              WHERE newer.conversation_id = runs.conversation_id
                AND newer.status IN ('pending', 'running', 'paused')
                AND (newer.created_at, newer.id) > (runs.created_at, runs.id));

DROP INDEX runs_claim;
CREATE INDEX runs_pending ON runs (priority DESC, run_at, created_at, id) WHERE status = 'pending';
CREATE INDEX runs_leased ON runs (lease_expires_at) WHERE status = 'running';
CREATE INDEX runs_finished ON runs (updated_at) WHERE status IN ('done', 'failed', 'discarded', 'cancelled');
CREATE UNIQUE INDEX runs_one_open ON runs (conversation_id) WHERE status IN ('pending', 'running', 'paused');
