//! Dropping the end of a conversation (a regenerated answer), one text for both stores
//! (as [`crate::read`]); the backends open the write transaction and check the lease.

use sqlx::{Database, Encode, Executor, FromRow, IntoArguments, Type};

use crate::error::StoreResult;

/// Removes the messages of `conversation` from sequence number `keep` on, inside the
/// caller's write transaction: the recorded statuses of their calls go, and their
/// reviews are voided (kept for the record, answering nothing: a later call that reuses
/// an id is asked about anew). Returns how many messages were removed.
pub(crate) async fn messages_from<DB>(
    conn: &mut DB::Connection,
    conversation: &str,
    keep: i64,
    now: i64,
) -> StoreResult<u64>
where
    DB: Database,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    for<'q> &'q str: Encode<'q, DB> + Type<DB>,
    for<'q> i64: Encode<'q, DB> + Type<DB>,
    for<'r> (String,): FromRow<'r, DB::Row>,
{
    let keep = keep.max(0);
    let bodies: Vec<(String,)> =
        sqlx::query_as("SELECT body FROM messages WHERE conversation_id = $1 AND seq >= $2")
            .bind(conversation)
            .bind(keep)
            .fetch_all(&mut *conn)
            .await?;
    // The calls whose records go with them (a body that does not parse still goes).
    let calls: Vec<String> = bodies
        .iter()
        .filter_map(|(b,)| serde_json::from_str::<llmchain::message::Message>(b).ok())
        .flat_map(|m| m.tool_calls.into_iter().filter_map(|c| c.call_id))
        .collect();
    sqlx::query("DELETE FROM messages WHERE conversation_id = $1 AND seq >= $2")
        .bind(conversation)
        .bind(keep)
        .execute(&mut *conn)
        .await?;
    sqlx::query(
        "UPDATE conversations SET next_seq = $2, updated_at = $3 WHERE id = $1 AND next_seq > $2",
    )
    .bind(conversation)
    .bind(keep)
    .bind(now)
    .execute(&mut *conn)
    .await?;
    for call in &calls {
        sqlx::query("DELETE FROM tool_calls WHERE conversation_id = $1 AND call_id = $2")
            .bind(conversation)
            .bind(call.as_str())
            .execute(&mut *conn)
            .await?;
        sqlx::query(
            "UPDATE reviews SET status = 'voided', decided_at = COALESCE(decided_at, $3) \
             WHERE conversation_id = $1 AND call_id = $2 AND status <> 'voided'",
        )
        .bind(conversation)
        .bind(call.as_str())
        .bind(now)
        .execute(&mut *conn)
        .await?;
    }
    Ok(bodies.len() as u64)
}
