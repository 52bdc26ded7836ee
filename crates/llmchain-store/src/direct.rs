//! SQLite work run directly on a `rusqlite` connection: the writer thread's connection
//! for a database file, the pool's one connection in memory (see
//! [`SqliteStore::transaction`](crate::SqliteStore) and `SqliteStore::direct`).
//!
//! These are the SQLite operations a chat turn makes before its first write: create the
//! conversation, claim its run, read it back. Through sqlx each statement of them is a
//! round trip to the connection's worker thread (create 3, claim 4, read 5, with the
//! transactions' `BEGIN` and `COMMIT`); here each operation is one hop, whatever its
//! statements. The writes run in a transaction the caller holds, which for a file is the
//! writer's batch: a claim shares its sync with the writes queued beside it. The reads
//! use the same SQL text as the generic ones ([`read`]), so the two cannot drift apart.

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use crate::assemble::{self, RunRow};
use crate::error::{StoreError, StoreResult};
use crate::group_commit;
use crate::model::{ConversationSummary, Opening, Run, RunKind, RunStatus, StoredConversation};
use crate::read;

/// What [`create_conversation`] writes, serialised by the caller.
pub(crate) struct NewRow {
    pub id: String,
    pub title: Option<String>,
    pub metadata: String,
    pub header: String,
    pub bodies: Vec<String>,
    pub at: i64,
}

/// Creates a conversation with its first messages; answers its id, or
/// `ConversationExists`. The caller holds the write transaction.
pub(crate) fn create_conversation(tx: &Connection, new: &NewRow) -> StoreResult<String> {
    if !insert_conversation(tx, new)?? {
        return Err(StoreError::ConversationExists(new.id.clone()));
    }
    Ok(new.id.clone())
}

/// Inserts conversation `new` with its messages unless one with its id exists; answers
/// whether it did. The caller holds the write transaction.
fn insert_conversation(tx: &Connection, new: &NewRow) -> rusqlite::Result<StoreResult<bool>> {
    let inserted = tx
        .prepare_cached(
            "INSERT INTO conversations (id, title, metadata, header, next_seq, created_at, updated_at) \
             VALUES (?1, ?2, ?3, ?4, 0, ?5, ?5) ON CONFLICT (id) DO NOTHING",
        )?
        .execute(params![new.id, new.title, new.metadata, new.header, new.at])?;
    if inserted == 0 {
        return Ok(Ok(false));
    }
    if !new.bodies.is_empty()
        && let Err(e) = group_commit::append(tx, &new.id, &new.bodies, new.at)?
    {
        return Ok(Err(e));
    }
    Ok(Ok(true))
}

/// [`Store::claim_and_read`](crate::Store::claim_and_read): the conversation created
/// from `create` if there is none, its run claimed, and the conversation read under the
/// new lease. The caller holds the write transaction.
pub(crate) fn claim_and_read(
    tx: &Connection,
    create: Option<&NewRow>,
    claim: &Claim,
    opening: Option<&Opening>,
) -> StoreResult<(Run, StoredConversation)> {
    if let Some(new) = create {
        insert_conversation(tx, new)??;
    }
    let run = claim_in(tx, claim)?;
    let mut stored = conversation_in(tx, &claim.conversation)?
        .ok_or_else(|| StoreError::ConversationNotFound(claim.conversation.clone()))?;
    if let Some(opening) = opening {
        let messages = opening(&stored)?;
        if !messages.is_empty() {
            let bodies = crate::sqlite::bodies(&messages)?;
            group_commit::append(tx, &claim.conversation, &bodies, claim.now)??;
            stored.extend(messages);
        }
    }
    Ok((assemble::run(run)?, stored))
}

/// What [`claim_conversation`] needs, serialised by the caller.
pub(crate) struct Claim {
    pub conversation: String,
    pub worker: String,
    /// The new run's id, if one is created.
    pub new_run: String,
    /// The new run's state JSON.
    pub state: String,
    pub now: i64,
    pub expires: i64,
}

/// [`Store::claim_conversation`](crate::Store::claim_conversation). The caller holds the
/// write transaction.
pub(crate) fn claim_conversation(tx: &Connection, claim: &Claim) -> StoreResult<Run> {
    assemble::run(claim_in(tx, claim)?)
}

/// The claim's statements; the caller holds the write transaction.
fn claim_in(tx: &Connection, claim: &Claim) -> StoreResult<RunRow> {
    let open = tx
        .prepare_cached(concat!(
            "SELECT ",
            run_columns!(),
            " FROM runs WHERE conversation_id = ?1 AND status IN ('pending', 'running', 'paused')"
        ))?
        .query_row(params![claim.conversation], run_row)
        .optional()?
        .map(assemble::run)
        .transpose()?;
    let now = claim.now;
    let row = match open {
        Some(run) if run.kind == RunKind::Queued => {
            return Err(crate::sqlite::queued_open(&claim.conversation, run));
        }
        Some(run)
            if run.state.status == RunStatus::Running
                && run.lease_expires_at.is_some_and(|e| e > now) =>
        {
            return Err(StoreError::RunBusy {
                conversation: claim.conversation.clone(),
                owner: run.lease_owner.unwrap_or_default(),
                remaining_ms: run.lease_expires_at.unwrap_or(now) - now,
                run: run.id,
            });
        }
        // Then read back by id: `RETURNING` would buffer the row in a temporary b-tree
        // opened and freed for the statement, which costs more than the read.
        Some(run) => {
            tx.prepare_cached(
                "UPDATE runs SET status = 'running', lease_owner = ?1, lease_expires_at = ?2, \
                 updated_at = ?3, epoch = epoch + 1, attempt = attempt + 1 WHERE id = ?4",
            )?
            .execute(params![claim.worker, claim.expires, now, run.id])?;
            run_by_id(tx, &run.id)?
        }
        None => {
            let inserted = tx
                .prepare_cached(
                    "INSERT INTO runs (id, conversation_id, status, state, lease_owner, lease_expires_at, \
                     created_at, updated_at, epoch, attempt, run_at, kind) \
                     SELECT ?1, id, 'running', ?2, ?3, ?4, ?5, ?5, 1, 1, ?5, 'interactive' \
                     FROM conversations WHERE id = ?6",
                )?
                .execute(params![
                    claim.new_run,
                    claim.state,
                    claim.worker,
                    claim.expires,
                    now,
                    claim.conversation
                ])?;
            if inserted == 0 {
                return Err(StoreError::ConversationNotFound(claim.conversation.clone()));
            }
            run_by_id(tx, &claim.new_run)?
        }
    };
    Ok(row)
}

/// Run `id`'s row, which exists.
fn run_by_id(tx: &Connection, id: &str) -> rusqlite::Result<RunRow> {
    tx.prepare_cached(concat!(
        "SELECT ",
        run_columns!(),
        " FROM runs WHERE id = ?1"
    ))?
    .query_row(params![id], run_row)
}

/// A run's row, in [`run_columns!`]'s order.
fn run_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<RunRow> {
    Ok((
        r.get(0)?,
        r.get(1)?,
        r.get(2)?,
        r.get(3)?,
        r.get(4)?,
        r.get(5)?,
        r.get(6)?,
        r.get(7)?,
        r.get(8)?,
        r.get(9)?,
        r.get(10)?,
        r.get(11)?,
        r.get(12)?,
        r.get(13)?,
        r.get(14)?,
        r.get(15)?,
    ))
}

/// Conversation `id` whole, read in one transaction (one snapshot); `None` when there is
/// none.
pub(crate) fn conversation(
    conn: &mut Connection,
    id: &str,
) -> StoreResult<Option<StoredConversation>> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Deferred)?;
    let out = conversation_in(&tx, id)?;
    tx.commit()?;
    Ok(out)
}

/// Conversation `id` whole, read in the caller's transaction.
fn conversation_in(tx: &Connection, id: &str) -> StoreResult<Option<StoredConversation>> {
    let Some((summary, header)) = tx
        .prepare_cached(read::CONVERSATION_ROW)?
        .query_row(params![id], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, Option<String>>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, String>(3)?,
                r.get::<_, i64>(4)?,
                r.get::<_, i64>(5)?,
                r.get::<_, i64>(6)?,
            ))
        })
        .optional()?
        .map(
            |(id, title, metadata, header, next_seq, created_at, updated_at)| {
                let summary = ConversationSummary {
                    metadata: assemble::parse_metadata(&id, &metadata)?,
                    title,
                    message_count: next_seq,
                    created_at,
                    updated_at,
                    id,
                };
                Ok::<_, StoreError>((summary, header))
            },
        )
        .transpose()?
    else {
        return Ok(None);
    };
    let statuses = tx
        .prepare_cached(read::STATUSES)?
        .query_map(params![id], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<rusqlite::Result<Vec<(String, String)>>>()?;
    let statuses = read::parse_statuses(id, statuses)?;
    let rows = tx
        .prepare_cached(read::MESSAGES)?
        .query_map(params![id], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<rusqlite::Result<Vec<(i64, String)>>>()?;
    read::whole(summary, &header, &statuses, rows).map(Some)
}

/// Runs `job` on a connection sqlx opened (an in-memory database's only connection),
/// locked for us by `handle`, through a `rusqlite` view of it: the one SQLite code for
/// both kinds of database.
pub(crate) fn on_sqlx_connection<T>(
    handle: &mut sqlx::sqlite::LockedSqliteHandle<'_>,
    job: impl FnOnce(&mut Connection) -> StoreResult<T>,
) -> StoreResult<T> {
    let raw = handle.as_raw_handle();
    // SAFETY: `raw` is a live `sqlite3*` that `handle` locks for us until it is dropped,
    // which is after `conn` (dropped at the end of this function). sqlx and rusqlite link
    // the same `libsqlite3-sys`, so it is the same SQLite. `from_handle` does not take
    // ownership: dropping `conn` finalizes the statements it prepared and leaves the
    // connection open. sqlx opened it in multi-thread mode and no other thread uses it
    // while the lock is held.
    #[allow(unsafe_code)]
    let mut conn = unsafe { Connection::from_handle(raw.as_ptr()) }?;
    let out = job(&mut conn);
    drop(conn);
    out
}
