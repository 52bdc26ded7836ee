//! Group commit for SQLite: appends and tool-call statuses go to one writer thread that
//! commits the writes waiting at the same moment in one transaction.
//!
//! Under `synchronous=FULL` every commit costs one sync of the WAL (`fdatasync`, about
//! 0.3 ms on the disk we measured), so one transaction per write caps a database at a few
//! thousand writes per second however fast the rest is. The writer takes every request
//! queued while the previous transaction was syncing (up to [`MAX_BATCH`]), runs them in
//! one `BEGIN IMMEDIATE … COMMIT` of at most five statements whatever the batch size
//! (see [`together`]), and answers each caller only after that commit returned: a write is still durable when its call returns, and concurrent writers share
//! the sync. A lone write (the common case of one conversation) is a single statement in
//! autocommit mode: one round trip to SQLite, one sync.
//!
//! The writer owns its connection, so a write never pays for a pool checkout (sqlx pings
//! a connection when it goes back to the pool). It runs on its own thread with its own
//! small runtime, so it keeps working whatever runtime the callers use and whatever
//! happens to a caller's future: a caller that gives up still has its write committed or
//! not, exactly as it would without batching. The thread ends when the last handle to the
//! store is dropped.
//!
//! If a statement of a batch fails (an SQL error such as a status for an unknown
//! conversation, not an append to one, which simply answers `ConversationNotFound`), the
//! transaction rolls back and each request of the batch is retried on its own, so one bad
//! write cannot fail the others.

use std::collections::HashMap;

use sqlx::Connection;
use sqlx::sqlite::SqliteConnection;
use tokio::sync::{mpsc, oneshot};

use crate::error::{StoreError, StoreResult, ser};

/// At most this many requests share one transaction.
pub(crate) const MAX_BATCH: usize = 256;

/// Requests waiting for the writer beyond this many make callers wait to enqueue.
const QUEUE: usize = 4 * MAX_BATCH;

const BEGIN_WRITE: &str = "BEGIN IMMEDIATE";

/// One write the writer thread performs.
#[derive(Debug)]
pub(crate) enum Write {
    /// Append messages (already serialised, at least one: an empty list answers
    /// `ConversationNotFound`) to a conversation; answers the first sequence number.
    Append {
        /// The conversation.
        conversation: String,
        /// The storage-format JSON of each message.
        bodies: Vec<String>,
        /// The time stamp (ms since the Unix epoch).
        at: i64,
    },
    /// Record a tool call's execution status; answers 0.
    Status {
        /// The conversation.
        conversation: String,
        /// The tool call.
        call_id: String,
        /// The status's storage name.
        status: &'static str,
        /// The time stamp (ms since the Unix epoch).
        at: i64,
    },
}

struct Request {
    write: Write,
    reply: oneshot::Sender<StoreResult<i64>>,
}

/// The handle to a writer thread; cloning it shares the thread.
#[derive(Debug, Clone)]
pub(crate) struct Writer {
    queue: mpsc::Sender<Request>,
}

impl std::fmt::Debug for Request {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.write.fmt(f)
    }
}

impl Writer {
    /// Starts a writer thread that owns `conn`.
    pub(crate) fn start(conn: SqliteConnection) -> StoreResult<Writer> {
        let io = |source| StoreError::Io {
            context: "cannot start the SQLite writer thread".into(),
            source,
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .map_err(io)?;
        let (queue, requests) = mpsc::channel(QUEUE);
        std::thread::Builder::new()
            .name("llmchain-sqlite-writer".into())
            .spawn(move || runtime.block_on(run(conn, requests)))
            .map_err(io)?;
        Ok(Writer { queue })
    }

    /// Performs `write`; returns once the transaction holding it committed.
    pub(crate) async fn write(&self, write: Write) -> StoreResult<i64> {
        let (reply, answer) = oneshot::channel();
        self.queue
            .send(Request { write, reply })
            .await
            .map_err(|_| StoreError::WriterStopped)?;
        answer.await.map_err(|_| StoreError::WriterStopped)?
    }
}

async fn run(mut conn: SqliteConnection, mut requests: mpsc::Receiver<Request>) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    while requests.recv_many(&mut batch, MAX_BATCH).await > 0 {
        let results = commit(&mut conn, &batch).await;
        for (request, result) in batch.drain(..).zip(results) {
            // A caller that gave up no longer listens; its write stands.
            let _ = request.reply.send(result);
        }
    }
    let _ = conn.close().await;
}

/// Commits a batch: one request on its own, several in one transaction.
async fn commit(conn: &mut SqliteConnection, batch: &[Request]) -> Vec<StoreResult<i64>> {
    if let [one] = batch {
        return vec![alone(conn, &one.write).await];
    }
    match together(conn, batch).await {
        Ok(results) => results,
        Err(_) => {
            // Rolled back: retry each on its own, so only the faulty one fails.
            let mut results = Vec::with_capacity(batch.len());
            for request in batch {
                results.push(alone(conn, &request.write).await);
            }
            results
        }
    }
}

/// Commits a batch in one transaction with a fixed number of statements, however many
/// writes it holds: read the conversations' `next_seq`, insert every message with its
/// number, upsert every status (each from a JSON array, through `json_each`), commit.
/// `BEGIN IMMEDIATE` holds the write lock from the read on, so the numbers stay ours.
async fn together(
    conn: &mut SqliteConnection,
    batch: &[Request],
) -> StoreResult<Vec<StoreResult<i64>>> {
    let mut tx = conn.begin_with(BEGIN_WRITE).await?;
    let mut conversations: Vec<&str> = batch
        .iter()
        .filter_map(|r| match &r.write {
            Write::Append { conversation, .. } => Some(conversation.as_str()),
            Write::Status { .. } => None,
        })
        .collect();
    conversations.sort_unstable();
    conversations.dedup();
    let mut next: HashMap<String, i64> = if conversations.is_empty() {
        HashMap::new()
    } else {
        sqlx::query_as(
            "SELECT id, next_seq FROM conversations WHERE id IN (SELECT value FROM json_each(?))",
        )
        .bind(ser("conversation ids", &conversations)?)
        .fetch_all(&mut *tx)
        .await?
        .into_iter()
        .collect()
    };
    let mut results = Vec::with_capacity(batch.len());
    let mut messages: Vec<(&str, i64, &str, i64)> = Vec::new();
    let mut statuses: Vec<(&str, &str, &str, i64)> = Vec::new();
    for request in batch {
        match &request.write {
            Write::Append {
                conversation,
                bodies,
                at,
            } => match next
                .get_mut(conversation.as_str())
                .filter(|_| !bodies.is_empty())
            {
                None => results.push(Err(StoreError::ConversationNotFound(conversation.clone()))),
                Some(seq) => {
                    results.push(Ok(*seq));
                    for body in bodies {
                        messages.push((conversation, *seq, body, *at));
                        *seq += 1;
                    }
                }
            },
            Write::Status {
                conversation,
                call_id,
                status,
                at,
            } => {
                statuses.push((conversation, call_id, status, *at));
                results.push(Ok(0));
            }
        }
    }
    if !messages.is_empty() {
        // In array order, so the schema's trigger leaves each `next_seq` past the last.
        sqlx::query(
            "INSERT INTO messages (conversation_id, seq, body, created_at) \
             SELECT value ->> 0, value ->> 1, value ->> 2, value ->> 3 FROM json_each(?) ORDER BY key",
        )
        .bind(ser("messages", &messages)?)
        .execute(&mut *tx)
        .await?;
    }
    if !statuses.is_empty() {
        sqlx::query(
            "INSERT INTO tool_calls (conversation_id, call_id, status, updated_at) \
             SELECT value ->> 0, value ->> 1, value ->> 2, value ->> 3 FROM json_each(?) WHERE true ORDER BY key \
             ON CONFLICT (conversation_id, call_id) DO UPDATE SET status = excluded.status, updated_at = excluded.updated_at",
        )
        .bind(ser("statuses", &statuses)?)
        .execute(&mut *tx)
        .await?;
    }
    tx.commit().await?;
    Ok(results)
}

/// Performs one write in its own transaction: a single statement needs no explicit one
/// (in autocommit mode a statement, with its triggers, is atomic and commits when done).
pub(crate) async fn alone(conn: &mut SqliteConnection, write: &Write) -> StoreResult<i64> {
    if matches!(write, Write::Append { bodies, .. } if bodies.len() > 1) {
        let mut tx = conn.begin_with(BEGIN_WRITE).await?;
        let result = apply(&mut tx, write).await?;
        if result.is_ok() {
            tx.commit().await?;
        }
        return result;
    }
    apply(conn, write).await?
}

/// Performs one write inside the caller's transaction (or in autocommit mode if the write
/// is a single statement).
pub(crate) async fn within(conn: &mut SqliteConnection, write: &Write) -> StoreResult<i64> {
    apply(conn, write).await?
}

/// Runs a write's statements. The outer error is an SQL failure (the transaction must be
/// rolled back); the inner one is the write's own outcome (a missing conversation), which
/// changed nothing.
async fn apply(
    conn: &mut SqliteConnection,
    write: &Write,
) -> Result<StoreResult<i64>, sqlx::Error> {
    match write {
        Write::Append {
            conversation,
            bodies,
            at,
        } => {
            let mut first = None;
            for body in bodies {
                // The insert takes `next_seq` as its number; the schema's trigger advances it.
                let seq: Option<i64> = sqlx::query_scalar(
                    "INSERT INTO messages (conversation_id, seq, body, created_at) \
                     SELECT id, next_seq, ?, ? FROM conversations WHERE id = ? RETURNING seq",
                )
                .bind(body)
                .bind(at)
                .bind(conversation)
                .fetch_optional(&mut *conn)
                .await?;
                let Some(seq) = seq else {
                    return Ok(Err(StoreError::ConversationNotFound(conversation.clone())));
                };
                first.get_or_insert(seq);
            }
            Ok(first.ok_or_else(|| StoreError::ConversationNotFound(conversation.clone())))
        }
        Write::Status {
            conversation,
            call_id,
            status,
            at,
        } => {
            sqlx::query(
                "INSERT INTO tool_calls (conversation_id, call_id, status, updated_at) VALUES (?, ?, ?, ?) \
                 ON CONFLICT (conversation_id, call_id) DO UPDATE SET status = excluded.status, updated_at = excluded.updated_at",
            )
            .bind(conversation)
            .bind(call_id)
            .bind(status)
            .bind(at)
            .execute(&mut *conn)
            .await?;
            Ok(Ok(0))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{NewConversation, SqliteStore, Store};

    fn request(write: Write) -> Request {
        Request {
            write,
            reply: oneshot::channel().0,
        }
    }

    fn append(conversation: &str, bodies: &[&str]) -> Request {
        request(Write::Append {
            conversation: conversation.into(),
            bodies: bodies.iter().map(|b| b.to_string()).collect(),
            at: 1,
        })
    }

    fn status(conversation: &str, call_id: &str, status: &'static str) -> Request {
        request(Write::Status {
            conversation: conversation.into(),
            call_id: call_id.into(),
            status,
            at: 1,
        })
    }

    async fn rows(conn: &mut SqliteConnection, sql: &'static str) -> Vec<(String, String)> {
        sqlx::query_as(sql).fetch_all(conn).await.unwrap()
    }

    #[tokio::test]
    async fn a_batch_numbers_each_append_and_a_bad_write_fails_alone() {
        let store = SqliteStore::in_memory().await.unwrap();
        for id in ["a", "b"] {
            store
                .create_conversation(NewConversation::default().with_id(id))
                .await
                .unwrap();
        }
        let mut conn = store.pool().acquire().await.unwrap();
        let m = |n: u8| format!("{{\"role\":\"user\",\"content\":\"{n} \\\" é\"}}");
        let (m0, m1, m2, m3) = (m(0), m(1), m(2), m(3));
        // One transaction: appends to two conversations, one to a missing one, statuses.
        let batch = [
            append("a", &[&m0]),
            append("b", &[&m1, &m2]),
            append("missing", &[&m3]),
            status("a", "c1", "executing"),
            append("a", &[&m3]),
            status("a", "c1", "completed"),
        ];
        let results = together(&mut conn, &batch).await.expect("one transaction");
        let got: Vec<Option<i64>> = results.iter().map(|r| r.as_ref().ok().copied()).collect();
        assert_eq!(got, [Some(0), Some(0), None, Some(0), Some(1), Some(0)]);
        assert!(matches!(
            results[2],
            Err(StoreError::ConversationNotFound(_))
        ));
        // A status for an unknown conversation breaks the transaction: each write is then
        // retried alone, and only that one fails.
        let batch = [
            append("b", &[&m3]),
            status("missing", "c9", "failed"),
            append("a", &[&m0]),
        ];
        let results = commit(&mut conn, &batch).await;
        assert_eq!(results[0].as_ref().ok(), Some(&2));
        assert!(matches!(results[1], Err(StoreError::Database(_))));
        assert_eq!(results[2].as_ref().ok(), Some(&2));

        let messages = rows(
            &mut conn,
            "SELECT conversation_id || ':' || seq, body FROM messages ORDER BY 1",
        )
        .await;
        let expected = [
            ("a:0", &m0),
            ("a:1", &m3),
            ("a:2", &m0),
            ("b:0", &m1),
            ("b:1", &m2),
            ("b:2", &m3),
        ];
        let expected: Vec<(String, String)> = expected
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        assert_eq!(messages, expected, "bodies are stored byte for byte");
        let counters = rows(
            &mut conn,
            "SELECT id, CAST(next_seq AS TEXT) FROM conversations ORDER BY id",
        )
        .await;
        assert_eq!(
            counters,
            [("a".into(), "3".into()), ("b".into(), "3".into())]
        );
        let statuses = rows(&mut conn, "SELECT call_id, status FROM tool_calls").await;
        assert_eq!(statuses, [("c1".into(), "completed".into())]);
    }
}
