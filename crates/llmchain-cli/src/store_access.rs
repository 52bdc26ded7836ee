//! Opening the store a command works on and naming what is in it, for every command:
//! `--db URL`, else `LLMCHAIN_DATABASE_URL`, else the default SQLite file
//! (`$XDG_DATA_HOME/llmchain/llmchain.db` or `~/.local/share/llmchain/llmchain.db`);
//! a conversation by id or id prefix; times for people (store errors: `CliError::store`).

use std::path::PathBuf;

use llmchain_store::{AnyStore, Store};

use crate::error::CliError;

/// The environment variable naming the database.
pub(crate) const DATABASE_URL_ENV: &str = "LLMCHAIN_DATABASE_URL";

/// Opens the store named by `--db`, else `LLMCHAIN_DATABASE_URL`, else the default
/// SQLite file; also returns where it is, for messages.
pub(crate) async fn open_store(flag: Option<String>) -> Result<(AnyStore, String), CliError> {
    match database_url(flag) {
        Some(url) => {
            let store = AnyStore::open(&url).await.map_err(CliError::store)?;
            Ok((store, redact_url(&url)))
        }
        None => {
            let path = llmchain_store::default_sqlite_path().map_err(CliError::store)?;
            let store = AnyStore::open_default().await.map_err(CliError::store)?;
            Ok((store, format!("sqlite://{}", path.display())))
        }
    }
}

/// Opens the store for a command that only reads it: `None` when it is a SQLite file
/// that does not exist (nothing was ever stored there), which is then not created.
pub(crate) async fn open_existing(
    flag: Option<String>,
) -> Result<Option<(AnyStore, String)>, CliError> {
    let file = match database_url(flag.clone()) {
        Some(url) => sqlite_file(&url),
        None => Some(llmchain_store::default_sqlite_path().map_err(CliError::store)?),
    };
    if file.is_some_and(|f| !f.exists()) {
        return Ok(None);
    }
    open_store(flag).await.map(Some)
}

/// The file of a `sqlite:` URL (not of an in-memory one).
fn sqlite_file(url: &str) -> Option<PathBuf> {
    let rest = url
        .strip_prefix("sqlite://")
        .or_else(|| url.strip_prefix("sqlite:"))?;
    let path = rest.split_once('?').map_or(rest, |(p, _)| p);
    (!path.is_empty() && path != ":memory:").then(|| PathBuf::from(path))
}

/// A database URL without its credentials, for messages.
pub(crate) fn redact_url(url: &str) -> String {
    llmchain::redact::url(url)
}

/// The database URL from `--db`, else the environment, else `None` (the default file).
fn database_url(flag: Option<String>) -> Option<String> {
    flag.or_else(|| {
        std::env::var(DATABASE_URL_ENV)
            .ok()
            .filter(|v| !v.is_empty())
    })
}

pub(crate) async fn resolve_id(store: &AnyStore, given: &str) -> Result<String, CliError> {
    if given.is_empty() {
        let latest = store.list_conversations(1).await.map_err(CliError::store)?;
        return latest
            .into_iter()
            .next()
            .map(|s| s.id)
            .ok_or_else(|| CliError::usage("there is no conversation to continue"));
    }
    if store
        .get_conversation(given)
        .await
        .map_err(CliError::store)?
        .is_some()
    {
        return Ok(given.to_owned());
    }
    let all = store
        .list_conversations(MAX_PREFIX_SCAN)
        .await
        .map_err(CliError::store)?;
    let matching: Vec<String> = all
        .into_iter()
        .map(|s| s.id)
        .filter(|id| id.starts_with(given))
        .collect();
    match matching.as_slice() {
        [one] => Ok(one.clone()),
        [] => Err(CliError::usage(format!(
            "no conversation with id {given:?} (or starting with it)"
        ))
        .typed("conversation_not_found")),
        many => Err(CliError::usage(format!(
            "{given:?} starts {} conversation ids ({}, …): give more of the id",
            many.len(),
            many.iter()
                .take(3)
                .map(String::as_str)
                .collect::<Vec<_>>()
                .join(", ")
        ))
        .typed("ambiguous_id")),
    }
}

/// A prefix is looked for among this many most recent conversations.
const MAX_PREFIX_SCAN: i64 = 100_000;

pub(crate) use time::format_ms;

/// Times for humans, in UTC.
mod time {
    /// `YYYY-MM-DD HH:MM:SS UTC` from milliseconds since the Unix epoch (times out of
    /// 1970–9999, which no store writes, are clamped: humantime formats only those).
    pub(crate) fn format_ms(ms: i64) -> String {
        const LAST: u64 = 253_402_300_799_000; // 9999-12-31 23:59:59
        let ms = u64::try_from(ms).unwrap_or(0).min(LAST);
        let at = std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms);
        let mut s = humantime::format_rfc3339_seconds(at).to_string();
        // "2026-12-05T00:51:15Z" -> "2026-12-05 00:51:15 UTC"
        s.replace_range(10..11, " ");
        s.pop();
        s.push_str(" UTC");
        s
    }

    #[cfg(test)]
    mod tests {
        #[test]
        fn formats_known_instants() {
            assert_eq!(super::format_ms(0), "1970-01-01 00:00:00 UTC");
            assert_eq!(super::format_ms(951_782_400_000), "2000-02-29 00:00:00 UTC");
            assert_eq!(
                super::format_ms(1_798_761_599_000),
                "2026-12-31 23:59:59 UTC"
            );
            assert_eq!(super::format_ms(-5), "1970-01-01 00:00:00 UTC");
            assert_eq!(super::format_ms(i64::MAX), "9999-12-31 23:59:59 UTC");
        }
    }
}
