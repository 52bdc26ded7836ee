//! The queries that read a conversation or its runs back, one text for both stores: PostgreSQL and
//! SQLite run the same SQL (sqlx takes `$N` placeholders on both) through the same
//! generic code, so a column added to one cannot be forgotten in the other.

use std::collections::HashMap;

use llmchain::message::ExecutionStatus;
use sqlx::{ColumnIndex, Database, Decode, Encode, Executor, FromRow, IntoArguments, Row, Type};

use crate::assemble;
use crate::error::{StoreError, StoreResult};
use crate::model::{ConversationSummary, Run, RunFilter, RunKind, RunStatus, StoredConversation};

/// A conversation's row (`summary` reads it). Parameter: the conversation.
pub(crate) const CONVERSATION_ROW: &str = "SELECT id, title, metadata, header, next_seq, created_at, updated_at FROM conversations WHERE id = $1";

/// A conversation's call statuses: call id, status. Parameter: the conversation.
pub(crate) const STATUSES: &str =
    "SELECT call_id, status FROM tool_calls WHERE conversation_id = $1";

/// A conversation's messages in order: seq, body. Parameter: the conversation.
pub(crate) const MESSAGES: &str =
    "SELECT seq, body FROM messages WHERE conversation_id = $1 ORDER BY seq";

/// Every recorded execution status of conversation `id`, by call id.
pub(crate) async fn statuses<DB>(
    conn: &mut DB::Connection,
    id: &str,
) -> StoreResult<HashMap<String, ExecutionStatus>>
where
    DB: Database,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    for<'q> &'q str: Encode<'q, DB> + Type<DB>,
    for<'r> (String, String): FromRow<'r, DB::Row>,
{
    let rows: Vec<(String, String)> = sqlx::query_as(STATUSES)
        .bind(id)
        .fetch_all(&mut *conn)
        .await?;
    parse_statuses(id, rows)
}

/// Status rows (call id, status) of conversation `id`, by call id.
pub(crate) fn parse_statuses(
    id: &str,
    rows: Vec<(String, String)>,
) -> StoreResult<HashMap<String, ExecutionStatus>> {
    rows.into_iter()
        .map(|(call, s)| Ok((call.clone(), assemble::parse_status(id, &call, &s)?)))
        .collect()
}

/// A conversation's summary from a row of `conversations` (its `title`, `metadata`,
/// `next_seq`, `created_at` and `updated_at`).
pub(crate) fn summary<R>(id: String, row: &R) -> StoreResult<ConversationSummary>
where
    R: Row,
    for<'a> &'a str: ColumnIndex<R>,
    for<'r> String: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> Option<String>: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> i64: Decode<'r, R::Database> + Type<R::Database>,
{
    let metadata: String = row.try_get("metadata")?;
    Ok(ConversationSummary {
        metadata: assemble::parse_metadata(&id, &metadata)?,
        title: row.try_get("title")?,
        message_count: row.try_get("next_seq")?,
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
        id,
    })
}

/// The summaries of rows of `conversations` (with their `id`), in their order.
pub(crate) fn summaries<R>(rows: &[R]) -> StoreResult<Vec<ConversationSummary>>
where
    R: Row,
    for<'a> &'a str: ColumnIndex<R>,
    for<'r> String: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> Option<String>: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> i64: Decode<'r, R::Database> + Type<R::Database>,
{
    rows.iter()
        .map(|row| summary(row.try_get("id")?, row))
        .collect()
}

/// Conversation `id` whole (its header, messages and call statuses), read on `conn`
/// (in a transaction where the caller needs one snapshot); `None` when there is none.
pub(crate) async fn conversation<DB>(
    conn: &mut DB::Connection,
    id: &str,
) -> StoreResult<Option<StoredConversation>>
where
    DB: Database,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    for<'q> &'q str: Encode<'q, DB> + Type<DB>,
    for<'r> (String, String): FromRow<'r, DB::Row>,
    for<'r> (i64, String): FromRow<'r, DB::Row>,
    for<'a> &'a str: ColumnIndex<DB::Row>,
    for<'r> String: Decode<'r, DB> + Type<DB>,
    for<'r> Option<String>: Decode<'r, DB> + Type<DB>,
    for<'r> i64: Decode<'r, DB> + Type<DB>,
{
    let Some(row) = sqlx::query(CONVERSATION_ROW)
        .bind(id)
        .fetch_optional(&mut *conn)
        .await?
    else {
        return Ok(None);
    };
    let summary = summary(id.to_owned(), &row)?;
    let header: String = row.try_get("header")?;
    let statuses = statuses::<DB>(conn, id).await?;
    let rows: Vec<(i64, String)> = sqlx::query_as(MESSAGES)
        .bind(id)
        .fetch_all(&mut *conn)
        .await?;
    whole(summary, &header, &statuses, rows).map(Some)
}

/// A conversation from what was read of it: its summary, header, statuses and message
/// rows (which must be as many as the summary counts).
pub(crate) fn whole(
    summary: ConversationSummary,
    header: &str,
    statuses: &HashMap<String, ExecutionStatus>,
    rows: Vec<(i64, String)>,
) -> StoreResult<StoredConversation> {
    let id = summary.id.as_str();
    let mut conversation = assemble::parse_header(id, header)?;
    if rows.len() as i64 != summary.message_count {
        return Err(StoreError::Corrupt {
            conversation: id.into(),
            location: "messages".into(),
            message: format!(
                "{} messages stored, {} expected",
                rows.len(),
                summary.message_count
            ),
        });
    }
    conversation.messages = assemble::messages(id, rows, statuses)?;
    Ok(StoredConversation {
        summary,
        conversation,
    })
}

/// Run `run_id`, read on `conn`.
pub(crate) async fn run<DB>(conn: &mut DB::Connection, run_id: &str) -> StoreResult<Option<Run>>
where
    DB: Database,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    for<'q> &'q str: Encode<'q, DB> + Type<DB>,
    for<'r> assemble::RunRow: FromRow<'r, DB::Row>,
{
    one_run::<DB>(
        conn,
        concat!("SELECT ", run_columns!(), " FROM runs WHERE id = $1"),
        run_id,
    )
    .await
}

/// Run `run_id`, read on `conn`; `RunNotFound` when there is none.
pub(crate) async fn existing_run<DB>(conn: &mut DB::Connection, run_id: &str) -> StoreResult<Run>
where
    DB: Database,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    for<'q> &'q str: Encode<'q, DB> + Type<DB>,
    for<'r> assemble::RunRow: FromRow<'r, DB::Row>,
{
    run::<DB>(conn, run_id)
        .await?
        .ok_or_else(|| StoreError::RunNotFound(run_id.into()))
}

/// The open run (pending, running or paused) of conversation `id`, if it has one (there
/// is at most one: `runs_one_open`).
pub(crate) async fn open_run<DB>(conn: &mut DB::Connection, id: &str) -> StoreResult<Option<Run>>
where
    DB: Database,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    for<'q> &'q str: Encode<'q, DB> + Type<DB>,
    for<'r> assemble::RunRow: FromRow<'r, DB::Row>,
{
    one_run::<DB>(
        conn,
        concat!(
            "SELECT ",
            run_columns!(),
            " FROM runs WHERE conversation_id = $1 AND status IN ('pending', 'running', 'paused')"
        ),
        id,
    )
    .await
}

/// The run `sql` selects by `key`, if any.
async fn one_run<DB>(
    conn: &mut DB::Connection,
    sql: &'static str,
    key: &str,
) -> StoreResult<Option<Run>>
where
    DB: Database,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    for<'q> &'q str: Encode<'q, DB> + Type<DB>,
    for<'r> assemble::RunRow: FromRow<'r, DB::Row>,
{
    let row: Option<assemble::RunRow> = sqlx::query_as(sql)
        .bind(key)
        .fetch_optional(&mut *conn)
        .await?;
    row.map(assemble::run).transpose()
}

/// Every run of conversation `id`, oldest first.
pub(crate) async fn runs_of<DB>(conn: &mut DB::Connection, id: &str) -> StoreResult<Vec<Run>>
where
    DB: Database,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    for<'q> &'q str: Encode<'q, DB> + Type<DB>,
    for<'r> assemble::RunRow: FromRow<'r, DB::Row>,
{
    let rows: Vec<assemble::RunRow> = sqlx::query_as(concat!(
        "SELECT ",
        run_columns!(),
        " FROM runs WHERE conversation_id = $1 ORDER BY created_at, id"
    ))
    .bind(id)
    .fetch_all(&mut *conn)
    .await?;
    rows.into_iter().map(assemble::run).collect()
}

/// The runs `filter` selects, newest first.
pub(crate) async fn runs_where<DB>(
    conn: &mut DB::Connection,
    filter: &RunFilter,
) -> StoreResult<Vec<Run>>
where
    DB: Database,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    for<'q> Option<&'q str>: Encode<'q, DB> + Type<DB>,
    for<'q> i64: Encode<'q, DB> + Type<DB>,
    for<'r> assemble::RunRow: FromRow<'r, DB::Row>,
{
    let rows: Vec<assemble::RunRow> = sqlx::query_as(concat!(
        "SELECT ",
        run_columns!(),
        " FROM runs WHERE (CAST($1 AS TEXT) IS NULL OR status = $1) \
           AND (CAST($2 AS TEXT) IS NULL OR kind = $2) \
         ORDER BY created_at DESC, id DESC LIMIT $3"
    ))
    .bind(filter.status.map(RunStatus::as_str))
    .bind(filter.kind.map(RunKind::as_str))
    .bind(filter.limit.max(0))
    .fetch_all(&mut *conn)
    .await?;
    rows.into_iter().map(assemble::run).collect()
}

/// How many runs there are in each status.
pub(crate) async fn run_counts<DB>(
    conn: &mut DB::Connection,
) -> StoreResult<HashMap<RunStatus, i64>>
where
    DB: Database,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    for<'r> (String, i64): FromRow<'r, DB::Row>,
{
    let rows: Vec<(String, i64)> =
        sqlx::query_as("SELECT status, COUNT(*) FROM runs GROUP BY status")
            .fetch_all(&mut *conn)
            .await?;
    Ok(rows
        .into_iter()
        .map(|(s, n)| (RunStatus::read(&s), n))
        .collect())
}
