-- llmchain-store schema version 2 (PostgreSQL): a run queue with fencing, attempts,
-- scheduling, priorities and at most one open run per conversation.

ALTER TABLE runs ADD COLUMN epoch        BIGINT  NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN attempt      INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN max_attempts INTEGER NOT NULL DEFAULT 5;
ALTER TABLE runs ADD COLUMN run_at       BIGINT  NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN priority     INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN last_error   TEXT;

-- Version 1 allowed several open runs per conversation: keep the newest of each.
UPDATE runs SET status = 'cancelled', lease_owner = NULL, lease_expires_at = NULL,
       last_error = 'cancelled by the upgrade to schema version 2: a newer open run of the conversation exists'
WHERE status IN ('pending', 'running', 'paused')
  AND id NOT IN (SELECT DISTINCT ON (conversation_id) id FROM runs
                 WHERE status IN ('pending', 'running', 'paused')
                 ORDER BY conversation_id, created_at DESC, id DESC);

-- Claiming reads pending runs only, in this index's order; rescuing expired leases reads
-- running runs only, by expiry. Neither scans the other's rows.
DROP INDEX runs_claim;
CREATE INDEX runs_pending ON runs (priority DESC, run_at, created_at, id) WHERE status = 'pending';
CREATE INDEX runs_leased ON runs (lease_expires_at) WHERE status = 'running';
CREATE INDEX runs_finished ON runs (updated_at) WHERE status IN ('done', 'failed', 'discarded', 'cancelled');
CREATE UNIQUE INDEX runs_one_open ON runs (conversation_id) WHERE status IN ('pending', 'running', 'paused');

-- An append updates `next_seq` and `updated_at` of its conversation: with no index on
-- those columns and room left on each page, that is a HOT update (no index is touched).
-- Listings sort by `updated_at` without an index (a top-N sort of the table).
DROP INDEX conversations_updated;
ALTER TABLE conversations SET (fillfactor = 70);

-- Workers LISTEN on `llmchain_runs` and are woken when a run becomes pending.
CREATE FUNCTION llmchain_runs_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('llmchain_runs', NEW.id);
    RETURN NULL;
END $$;
CREATE TRIGGER runs_notify AFTER INSERT OR UPDATE OF status ON runs
    FOR EACH ROW WHEN (NEW.status = 'pending') EXECUTE FUNCTION llmchain_runs_notify();
