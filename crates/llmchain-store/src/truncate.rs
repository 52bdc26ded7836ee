//! Superseding the end of a conversation (a regenerated answer), one text for both
//! stores (as [`crate::read`]); the backends open the write transaction and check the
//! lease.
//!
//! What ran stays on record: the messages leave the conversation (the model and the
//! chain see it as if they were never sent) but move, with the status each call had,
//! to `superseded_messages` ([`Store::superseded_messages`](crate::Store::superseded_messages)),
//! where an export, an auditor and a page that wants them find them.

use std::collections::HashMap;

use llmchain::message::Message;
use sqlx::{Database, Encode, Executor, FromRow, IntoArguments, Type};

use crate::error::StoreResult;

/// Moves the messages of `conversation` from sequence number `keep` on to
/// `superseded_messages`, inside the caller's write transaction: each call's recorded
/// status goes into the moved message (and out of the live records), and their reviews
/// are voided (kept for the record, answering nothing: a later call that reuses an id is
/// asked about anew). Returns how many messages were moved.
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
    for<'q> String: Encode<'q, DB> + Type<DB>,
    for<'q> i64: Encode<'q, DB> + Type<DB>,
    for<'r> (i64, String): FromRow<'r, DB::Row>,
    for<'r> (String, String): FromRow<'r, DB::Row>,
{
    let keep = keep.max(0);
    let rows: Vec<(i64, String)> = sqlx::query_as(
        "SELECT seq, body FROM messages WHERE conversation_id = $1 AND seq >= $2 ORDER BY seq",
    )
    .bind(conversation)
    .bind(keep)
    .fetch_all(&mut *conn)
    .await?;
    if rows.is_empty() {
        return Ok(0);
    }
    let statuses: HashMap<String, String> = sqlx::query_as::<_, (String, String)>(
        "SELECT call_id, status FROM tool_calls WHERE conversation_id = $1",
    )
    .bind(conversation)
    .fetch_all(&mut *conn)
    .await?
    .into_iter()
    .collect();
    let mut calls = Vec::new();
    for (seq, body) in &rows {
        // A body that does not parse is kept as it was.
        let kept = match serde_json::from_str::<Message>(body) {
            Ok(mut message) => {
                for call in &mut message.tool_calls {
                    let Some(id) = call.call_id.clone() else {
                        continue;
                    };
                    if let Some(status) = statuses.get(&id) {
                        call.metadata
                            .insert("execution_status".into(), status.clone().into());
                    }
                    calls.push(id);
                }
                serde_json::to_string(&message).unwrap_or_else(|_| body.clone())
            }
            Err(_) => body.clone(),
        };
        sqlx::query(
            "INSERT INTO superseded_messages (conversation_id, seq, body, superseded_at) \
             VALUES ($1, $2, $3, $4)",
        )
        .bind(conversation)
        .bind(*seq)
        .bind(kept)
        .bind(now)
        .execute(&mut *conn)
        .await?;
    }
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
    Ok(rows.len() as u64)
}

/// The messages regenerated answers replaced in `conversation`, oldest first, with the
/// position each had and when it was superseded.
pub(crate) async fn superseded<DB>(
    conn: &mut DB::Connection,
    conversation: &str,
) -> StoreResult<Vec<crate::model::Superseded>>
where
    DB: Database,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    for<'q> &'q str: Encode<'q, DB> + Type<DB>,
    for<'r> (i64, String, i64): FromRow<'r, DB::Row>,
{
    let rows: Vec<(i64, String, i64)> = sqlx::query_as(
        "SELECT seq, body, superseded_at FROM superseded_messages WHERE conversation_id = $1 ORDER BY id",
    )
    .bind(conversation)
    .fetch_all(&mut *conn)
    .await?;
    rows.into_iter()
        .map(|(seq, body, at)| {
            let message = serde_json::from_str(&body).map_err(|e| crate::StoreError::Corrupt {
                conversation: conversation.to_owned(),
                location: format!("superseded message seq {seq}"),
                message: e.to_string(),
            })?;
            Ok(crate::model::Superseded {
                position: seq,
                message,
                superseded_at: at,
            })
        })
        .collect()
}
