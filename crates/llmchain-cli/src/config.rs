//! The config file: defaults for `llmchain run` (provider, model, base URL, approve
//! policy, MCP servers), in `$XDG_CONFIG_HOME/llmchain/config.toml` (else
//! `~/.config/llmchain/config.toml`); `llmchain config path` prints where.
//!
//! ```toml
//! provider = "anthropic"
//! model = "claude-sonnet-4-5"
//! approve = "ask"
//! mcp = ["npx -y @modelcontextprotocol/server-filesystem /home/me/notes"]
//! mcp_http = []
//! trust = ["server-filesystem"]
//! ```
//!
//! Flags and `LLMCHAIN_PROVIDER`/`LLMCHAIN_MODEL` win over it; a continued conversation's
//! own settings too. Keys are checked: a misspelt one is an error naming the file.

use std::path::PathBuf;

use serde::Deserialize;

use crate::error::CliError;

/// The most a config file may hold.
const MAX_BYTES: u64 = 1 << 20;

/// The defaults a config file sets.
#[derive(Debug, Default, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Config {
    /// `--provider`.
    pub provider: Option<String>,
    /// `--model`.
    pub model: Option<String>,
    /// `--base-url`.
    pub base_url: Option<String>,
    /// `--approve`, by name.
    pub approve: Option<String>,
    /// `--mcp` server commands.
    #[serde(default)]
    pub mcp: Vec<String>,
    /// `--mcp-http` URLs.
    #[serde(default)]
    pub mcp_http: Vec<String>,
    /// `--trust` server names.
    #[serde(default)]
    pub trust: Vec<String>,
}

/// Where the config file is (whether or not it exists).
pub(crate) fn path() -> Result<PathBuf, CliError> {
    let dir = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))
        .ok_or_else(|| {
            CliError::Usage("cannot find the config directory: set XDG_CONFIG_HOME or HOME".into())
        })?;
    Ok(dir.join("llmchain").join("config.toml"))
}

/// The config file's settings; the defaults when there is none.
pub(crate) fn load() -> Result<Config, CliError> {
    let Ok(path) = path() else {
        return Ok(Config::default());
    };
    let text = match std::fs::metadata(&path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Config::default()),
        Ok(m) if m.len() > MAX_BYTES => {
            return Err(CliError::Usage(format!(
                "{} is larger than {} KiB; is it the right file?",
                path.display(),
                MAX_BYTES >> 10
            )));
        }
        _ => std::fs::read_to_string(&path)
            .map_err(|e| CliError::Usage(format!("cannot read {}: {e}", path.display())))?,
    };
    parse(&text).map_err(|e| CliError::Usage(format!("{}: {e}", path.display())))
}

fn parse(text: &str) -> Result<Config, String> {
    toml::from_str(text).map_err(|e| crate::job::one_line(&e.to_string()))
}

/// `llmchain config path`.
#[derive(Debug, clap::Args)]
pub(crate) struct ConfigArgs {
    #[command(subcommand)]
    command: ConfigCommand,
}

#[derive(Debug, clap::Subcommand)]
enum ConfigCommand {
    /// Print where the config file is (or would be).
    Path,
}

/// Runs `llmchain config`.
pub(crate) fn run(args: ConfigArgs) -> crate::error::CliResult {
    match args.command {
        ConfigCommand::Path => {
            crate::stdout::outln!("{}", path()?.display());
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_config_parses_and_a_misspelt_key_is_named() {
        let c = parse(
            "provider = \"anthropic\"\nmodel = \"m\"\nmcp = [\"python3 s.py\"]\napprove = \"ask\"\n",
        )
        .unwrap();
        assert_eq!(c.provider.as_deref(), Some("anthropic"));
        assert_eq!(c.mcp, ["python3 s.py"]);
        let e = parse("modle = \"x\"\n").unwrap_err();
        assert!(e.contains("unknown field `modle`"), "{e}");
        assert_eq!(parse("").unwrap(), Config::default());
    }
}
