//! [`ProfileFlags`]: the profile "default" from command-line flags, over the config
//! file's top-level keys (`worker` and `serve` take them, as `run` takes its own).

use crate::error::CliError;

/// Flags that define the profile "default" over the config file's, for the commands that
/// run the operator's profiles (`worker`, `serve`).
#[derive(Debug, Default, clap::Args)]
#[command(next_help_heading = "The profile \"default\" (over the config file's)")]
pub(crate) struct ProfileFlags {
    /// The provider (`--help` lists them).
    #[arg(long, long_help = crate::job::provider_help())]
    pub provider: Option<String>,
    /// Model id.
    #[arg(long)]
    pub model: Option<String>,
    /// Base URL of the provider.
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,
    /// Review of tool calls: auto, always, never or ask (a call it would ask about
    /// waits in `llmchain reviews`).
    #[arg(long, value_name = "POLICY")]
    pub approve: Option<String>,
    /// MCP servers, trust and timeouts, as for `run`.
    #[command(flatten)]
    pub servers: crate::cmd::mcp::ServerArgs,
    /// Only these tools (comma-separated).
    #[arg(long, value_name = "NAME,…", value_delimiter = ',')]
    pub tools: Vec<String>,
    /// Leave out the built-in tools.
    #[arg(long)]
    pub no_builtin_tools: bool,
    /// The directory read_file reads.
    #[arg(long, value_name = "DIR")]
    pub root: Option<std::path::PathBuf>,
}

impl ProfileFlags {
    /// Whether any flag is given.
    pub(crate) fn any(&self) -> bool {
        self.provider.is_some()
            || self.model.is_some()
            || self.base_url.is_some()
            || self.approve.is_some()
            || !self.servers.mcp.is_empty()
            || !self.servers.mcp_http.is_empty()
            || !self.servers.trust.is_empty()
            || self.servers.start_timeout.is_some()
            || self.servers.call_timeout.is_some()
            || self.servers.prefix
            || !self.tools.is_empty()
            || self.no_builtin_tools
            || self.root.is_some()
    }

    /// `profile` with these flags over it.
    pub(crate) fn apply(&self, profile: &mut crate::config::Profile) -> Result<(), CliError> {
        let p = profile;
        if self.provider.is_some() {
            p.provider = self.provider.clone();
        }
        if self.model.is_some() {
            p.model = self.model.clone();
        }
        if self.base_url.is_some() {
            p.base_url = self.base_url.clone();
        }
        if self.approve.is_some() {
            p.approve = self.approve.clone();
        }
        if !self.servers.mcp.is_empty() || !self.servers.mcp_http.is_empty() {
            p.mcp = self.servers.mcp.clone();
            p.mcp_http = self.servers.mcp_http.clone();
        }
        if !self.servers.trust.is_empty() {
            p.trust = self.servers.trust.clone();
        }
        p.mcp_start_timeout = self.servers.start_timeout.or(p.mcp_start_timeout);
        p.mcp_timeout = self.servers.call_timeout.or(p.mcp_timeout);
        p.mcp_prefix |= self.servers.prefix;
        if !self.tools.is_empty() {
            p.tools = self.tools.clone();
        }
        p.no_builtin_tools |= self.no_builtin_tools;
        if let Some(r) = &self.root {
            p.root = Some(
                std::fs::canonicalize(r)
                    .map_err(|e| CliError::usage(format!("--root {}: {e}", r.display())))?
                    .display()
                    .to_string(),
            );
        }
        Ok(())
    }
}
