//! The review inbox's statements, one text for both stores (as [`crate::read`]): the
//! backends open the transaction and lock the run (SQLite: `BEGIN IMMEDIATE`;
//! PostgreSQL: `FOR UPDATE` on the run's row) and call these inside it, so both keep the
//! same rules.

use sqlx::{Database, Encode, Executor, FromRow, IntoArguments, Type};

use crate::error::{StoreError, StoreResult, ser};
use crate::model::{RunKind, RunState, RunStatus};
use crate::review::{self, Decided, NewReview, Review, ReviewFilter, ReviewRow, ReviewStatus};
use llmchain::chain::HumanDecision;

/// The reviews `filter` selects, oldest first.
pub(crate) async fn list<DB>(
    conn: &mut DB::Connection,
    filter: &ReviewFilter,
) -> StoreResult<Vec<Review>>
where
    DB: Database,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    for<'q> Option<&'q str>: Encode<'q, DB> + Type<DB>,
    for<'q> i64: Encode<'q, DB> + Type<DB>,
    for<'r> ReviewRow: FromRow<'r, DB::Row>,
{
    let rows: Vec<ReviewRow> = sqlx::query_as(concat!(
        "SELECT ",
        review::review_columns!(),
        " FROM reviews WHERE (CAST($1 AS TEXT) IS NULL OR status = $1) \
           AND (CAST($2 AS TEXT) IS NULL OR conversation_id = $2) \
           AND (CAST($3 AS TEXT) IS NULL OR run_id = $3) \
         ORDER BY created_at, id LIMIT $4"
    ))
    .bind(filter.status.map(ReviewStatus::as_str))
    .bind(filter.conversation.as_deref())
    .bind(filter.run.as_deref())
    .bind(filter.limit.max(0))
    .fetch_all(&mut *conn)
    .await?;
    rows.into_iter().map(review::review).collect()
}

/// A review by id.
pub(crate) async fn get<DB>(conn: &mut DB::Connection, id: &str) -> StoreResult<Option<Review>>
where
    DB: Database,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    for<'q> &'q str: Encode<'q, DB> + Type<DB>,
    for<'r> ReviewRow: FromRow<'r, DB::Row>,
{
    let row: Option<ReviewRow> = sqlx::query_as(concat!(
        "SELECT ",
        review::review_columns!(),
        " FROM reviews WHERE id = $1"
    ))
    .bind(id)
    .fetch_optional(&mut *conn)
    .await?;
    row.map(review::review).transpose()
}

/// Opens `reviews` for run `run_id` of `conversation` (inside the caller's fenced
/// transaction), one per call and round: a review that exists keeps its decision (one
/// made while another run held the call answers it still) and moves to this run; a
/// cancelled one is opened again. Returns how many of the run's reviews are pending.
pub(crate) async fn open<DB>(
    conn: &mut DB::Connection,
    conversation: &str,
    run_id: &str,
    reviews: &[NewReview],
    now: i64,
) -> StoreResult<i64>
where
    DB: Database,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    for<'q> &'q str: Encode<'q, DB> + Type<DB>,
    for<'q> String: Encode<'q, DB> + Type<DB>,
    for<'q> Option<String>: Encode<'q, DB> + Type<DB>,
    for<'q> i64: Encode<'q, DB> + Type<DB>,
    for<'r> (i64,): FromRow<'r, DB::Row>,
{
    for r in reviews {
        sqlx::query(
            "INSERT INTO reviews (id, conversation_id, run_id, call_id, round, tool, arguments, \
                question, status, created_at, parameters_schema) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'pending', $9, $10) \
             ON CONFLICT (conversation_id, call_id, round) WHERE status <> 'voided' DO UPDATE SET \
                run_id = excluded.run_id, \
                tool = CASE WHEN reviews.status = 'cancelled' THEN excluded.tool ELSE reviews.tool END, \
                arguments = CASE WHEN reviews.status = 'cancelled' THEN excluded.arguments ELSE reviews.arguments END, \
                question = CASE WHEN reviews.status = 'cancelled' THEN excluded.question ELSE reviews.question END, \
                parameters_schema = CASE WHEN reviews.status = 'cancelled' THEN excluded.parameters_schema ELSE reviews.parameters_schema END, \
                status = CASE WHEN reviews.status = 'cancelled' THEN 'pending' ELSE reviews.status END, \
                decided_at = CASE WHEN reviews.status = 'cancelled' THEN NULL ELSE reviews.decided_at END",
        )
        .bind(crate::model::new_id())
        .bind(conversation)
        .bind(run_id)
        .bind(r.call_id.as_str())
        .bind(i64::from(r.round))
        .bind(r.tool.as_str())
        .bind(ser("review arguments", &r.arguments)?)
        .bind(r.question.clone())
        .bind(now)
        .bind(r.schema.as_ref().map(|s| ser("review schema", s)).transpose()?)
        .execute(&mut *conn)
        .await?;
    }
    pending_of::<DB>(conn, run_id).await
}

/// Pauses run `run_id` of `conversation` (inside the caller's transaction, its lease
/// checked and the run locked): opens `reviews`, then saves `state` with the status
/// [`paused_status`] gives and ends the lease. Returns that status.
pub(crate) async fn pause<DB>(
    conn: &mut DB::Connection,
    conversation: &str,
    run_id: &str,
    state: &RunState,
    reviews: &[NewReview],
    now: i64,
) -> StoreResult<RunStatus>
where
    DB: Database,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    for<'q> &'q str: Encode<'q, DB> + Type<DB>,
    for<'q> String: Encode<'q, DB> + Type<DB>,
    for<'q> Option<String>: Encode<'q, DB> + Type<DB>,
    for<'q> i64: Encode<'q, DB> + Type<DB>,
    for<'r> (i64,): FromRow<'r, DB::Row>,
    for<'r> (String,): FromRow<'r, DB::Row>,
{
    let pending = open::<DB>(conn, conversation, run_id, reviews, now).await?;
    let (kind,): (String,) = sqlx::query_as("SELECT kind FROM runs WHERE id = $1")
        .bind(run_id)
        .fetch_one(&mut *conn)
        .await?;
    let status = paused_status(
        RunKind::parse(&kind).unwrap_or(RunKind::Interactive),
        pending,
    );
    let mut state = state.clone();
    state.status = status;
    // A pause is not a failed attempt: the claim's attempt is given back.
    sqlx::query(
        "UPDATE runs SET status = $1, state = $2, lease_owner = NULL, lease_expires_at = NULL, \
         updated_at = $3, run_at = $3, \
         attempt = CASE WHEN attempt > 0 THEN attempt - 1 ELSE 0 END WHERE id = $4",
    )
    .bind(status.as_str())
    .bind(ser("run state", &state)?)
    .bind(now)
    .bind(run_id)
    .execute(&mut *conn)
    .await?;
    Ok(status)
}

/// How many reviews of run `run_id` are pending.
pub(crate) async fn pending_of<DB>(conn: &mut DB::Connection, run_id: &str) -> StoreResult<i64>
where
    DB: Database,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    for<'q> &'q str: Encode<'q, DB> + Type<DB>,
    for<'r> (i64,): FromRow<'r, DB::Row>,
{
    let (n,): (i64,) =
        sqlx::query_as("SELECT COUNT(*) FROM reviews WHERE run_id = $1 AND status = 'pending'")
            .bind(run_id)
            .fetch_one(&mut *conn)
            .await?;
    Ok(n)
}

/// Where a run goes when it pauses with `pending` reviews open: `paused`, unless none
/// is pending and the run is queued (every decision is in: a worker goes on).
pub(crate) fn paused_status(kind: RunKind, pending: i64) -> RunStatus {
    if pending == 0 && kind == RunKind::Queued {
        RunStatus::Pending
    } else {
        RunStatus::Paused
    }
}

/// Decides review `id` (inside the caller's transaction, with the review's run locked
/// first): refused unless pending; then, when the run has no pending review left and is
/// a paused queued run, puts it back to `pending`.
pub(crate) async fn decide<DB>(
    conn: &mut DB::Connection,
    id: &str,
    decision: &HumanDecision,
    decided_by: &str,
    now: i64,
) -> StoreResult<Decided>
where
    DB: Database,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    for<'q> &'q str: Encode<'q, DB> + Type<DB>,
    for<'q> String: Encode<'q, DB> + Type<DB>,
    for<'q> i64: Encode<'q, DB> + Type<DB>,
    for<'r> (i64,): FromRow<'r, DB::Row>,
    for<'r> (String,): FromRow<'r, DB::Row>,
    for<'r> ReviewRow: FromRow<'r, DB::Row>,
{
    let review = get::<DB>(conn, id)
        .await?
        .ok_or_else(|| StoreError::ReviewNotFound(id.into()))?;
    if review.status != ReviewStatus::Pending {
        return Err(StoreError::ReviewNotPending {
            review: review.id,
            call_id: review.call_id,
            conversation: review.conversation_id,
            status: review.status.as_str().into(),
        });
    }
    let status = ReviewStatus::of(decision);
    sqlx::query(
        "UPDATE reviews SET status = $1, decision = $2, decided_by = $3, decided_at = $4 \
         WHERE id = $5 AND status = 'pending'",
    )
    .bind(status.as_str())
    .bind(ser("review decision", decision)?)
    .bind(decided_by)
    .bind(now)
    .bind(id)
    .execute(&mut *conn)
    .await?;
    let mut requeued = false;
    let mut still_pending = 0;
    if let Some(run_id) = review.run_id.as_deref() {
        still_pending = pending_of::<DB>(conn, run_id).await?;
        if still_pending == 0 {
            let done: Option<(String,)> = sqlx::query_as(
                "UPDATE runs SET status = 'pending', run_at = $1, updated_at = $1 \
                 WHERE id = $2 AND status = 'paused' AND kind = 'queued' RETURNING id",
            )
            .bind(now)
            .bind(run_id)
            .fetch_optional(&mut *conn)
            .await?;
            requeued = done.is_some();
        }
    }
    let review = get::<DB>(conn, id)
        .await?
        .ok_or_else(|| StoreError::ReviewNotFound(id.into()))?;
    Ok(Decided {
        review,
        still_pending,
        requeued,
    })
}

/// Cancels the pending reviews of run `run_id` (its run was cancelled).
pub(crate) async fn cancel_of<DB>(
    conn: &mut DB::Connection,
    run_id: &str,
    now: i64,
) -> StoreResult<()>
where
    DB: Database,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    for<'q> &'q str: Encode<'q, DB> + Type<DB>,
    for<'q> i64: Encode<'q, DB> + Type<DB>,
{
    sqlx::query(
        "UPDATE reviews SET status = 'cancelled', decided_at = $1 \
         WHERE run_id = $2 AND status = 'pending'",
    )
    .bind(now)
    .bind(run_id)
    .execute(&mut *conn)
    .await?;
    Ok(())
}
