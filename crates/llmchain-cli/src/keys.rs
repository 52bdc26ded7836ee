//! Provider keys kept outside the database: a JSON file of `{"provider": "key"}`
//! readable by its owner only (mode 0600), `$LLMCHAIN_KEYS`, else
//! `$XDG_CONFIG_HOME/llmchain/keys.json` (else `~/.config/llmchain/keys.json`).
//!
//! The environment wins: a provider's key variable (`OPENAI_API_KEY`...) set is used
//! instead of the file's key. Keys go only into the provider's auth header: never into
//! the store (a run records its job without them), the terminal or an error message.

use std::collections::BTreeMap;
use std::path::PathBuf;

use llmchain::http::Provider;

use crate::error::CliError;

/// The variable naming the keys file.
pub(crate) const KEYS_ENV: &str = "LLMCHAIN_KEYS";

/// The largest keys file read.
const MAX_BYTES: u64 = 1 << 20;

/// Where the keys file is (whether or not it exists).
pub(crate) fn path() -> Result<PathBuf, CliError> {
    if let Some(p) = std::env::var_os(KEYS_ENV).filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(p));
    }
    Ok(crate::config::dir()?.join("keys.json"))
}

/// The keys in the file (none when it does not exist). A file others may read is
/// refused, as ssh refuses such a key.
pub(crate) fn load() -> Result<BTreeMap<String, String>, CliError> {
    use std::io::Read as _;
    let path = path()?;
    let file = match std::fs::File::open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(BTreeMap::new()),
        Err(e) => {
            return Err(CliError::usage(format!(
                "cannot read the keys file {}: {e}",
                path.display()
            )));
        }
    };
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = file
            .metadata()
            .map_err(|e| CliError::usage(format!("{}: {e}", path.display())))?
            .permissions()
            .mode();
        if mode & 0o077 != 0 {
            return Err(CliError::usage(format!(
                "the keys file {} may be read by others (mode {:o}): run `chmod 600 {}`",
                path.display(),
                mode & 0o777,
                path.display()
            )));
        }
    }
    let mut text = String::new();
    file.take(MAX_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(|e| CliError::usage(format!("{}: {e}", path.display())))?;
    if text.len() as u64 > MAX_BYTES {
        return Err(CliError::usage(format!(
            "the keys file {} is larger than 1 MiB",
            path.display()
        )));
    }
    // The parse error names a line and column, never the text (it holds keys).
    serde_json::from_str(&text).map_err(|e| {
        CliError::usage(format!(
            "the keys file {} is not a JSON object of provider names and keys (line {}, column {})",
            path.display(),
            e.line(),
            e.column()
        ))
    })
}

/// Writes `keys`, creating the file (mode 0600) and its directory as needed; replaced
/// whole through a temporary file, so a crash leaves the old or the new one.
pub(crate) fn save(keys: &BTreeMap<String, String>) -> Result<PathBuf, CliError> {
    use std::io::Write as _;
    let path = path()?;
    let dir = path.parent().unwrap_or(std::path::Path::new("."));
    std::fs::create_dir_all(dir)
        .map_err(|e| CliError::io(format!("cannot create {}", dir.display()), e))?;
    // tempfile creates it with mode 0600.
    let mut tmp = tempfile::NamedTempFile::new_in(dir)
        .map_err(|e| CliError::io(format!("cannot write in {}", dir.display()), e))?;
    let text = serde_json::to_string_pretty(keys).unwrap_or_default();
    tmp.write_all(text.as_bytes())
        .and_then(|()| tmp.as_file().sync_all())
        .map_err(|e| CliError::io("cannot write the keys file", e))?;
    tmp.persist(&path)
        .map_err(|e| CliError::runtime(format!("cannot write {}: {}", path.display(), e.error)))?;
    Ok(path)
}

/// Every secret the process can see, registered with the masker before any text from
/// outside is read (an attachment, a provider's answer, an exporter's error): each
/// provider's key variables, the URL secrets of its base-URL variables, the cloud
/// credentials, the keys file's keys, and the OTLP endpoints' and headers' secrets.
pub(crate) fn register_known() {
    use llmchain::secrets;
    let var = |k: &str| std::env::var(k).ok();
    for p in llmchain::http::providers::PROVIDERS {
        p.key_env()
            .iter()
            .filter_map(|v| var(v))
            .for_each(|k| secrets::register(&k));
        p.base_url_env()
            .iter()
            .filter_map(|v| var(v))
            .for_each(|u| secrets::register_url(&u));
    }
    for v in [
        "AWS_SECRET_ACCESS_KEY",
        "SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AZURE_OPENAI_AD_TOKEN",
        "LLMCHAIN_SERVE_TOKEN",
    ] {
        if let Some(k) = var(v) {
            secrets::register(&k);
        }
    }
    if let Ok(keys) = load() {
        keys.values().for_each(|k| secrets::register(k));
    }
    crate::telemetry::register_secrets(var);
}

/// The environment, then the keys file for `spec`'s key variables: what a provider's
/// config reads.
pub(crate) fn lookup_for(
    spec: &'static dyn Provider,
) -> Result<impl Fn(&str) -> Option<String>, CliError> {
    let from_file = if spec.key_env().iter().any(|v| std::env::var_os(v).is_some()) {
        None
    } else {
        load()?.remove(spec.name())
    };
    Ok(move |k: &str| {
        std::env::var(k).ok().or_else(|| {
            spec.key_env()
                .contains(&k)
                .then(|| from_file.clone())
                .flatten()
        })
    })
}
