//! [`JobSpec`]: what a run needs to be run by any process — provider, model, tool
//! servers, review policy — stored in the run's state, so that `llmchain run --enqueue`
//! can queue a run and `llmchain worker` can execute it on another machine.

use std::sync::Arc;

use llmchain::chain::{ChainState, LLMChain};
use llmchain::provider::Format;
use llmchain::provider::http::{HttpModel, HttpModelConfig, base_url_env_var};
use llmchain::tool::Tool;
use llmchain_mcp::McpTool;
use serde::{Deserialize, Serialize};

use crate::cmd::mcp::{ServerArgs, connect_mcp_tools};
use crate::error::CliError;
use crate::review::{ApprovalPolicy, TerminalReview, ToolMeta, approval_handler};
use crate::tools;

/// The key of the job in a run state's `extra`.
pub(crate) const JOB_KEY: &str = "job";

/// How to run a conversation. API keys are never part of it: each process reads its
/// own from the environment.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct JobSpec {
    /// `--provider`.
    pub provider: String,
    /// `--model`, or the provider's default.
    pub model: String,
    /// `--base-url`, if given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// `--mcp` server commands.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mcp: Vec<String>,
    /// `--mcp-http` URLs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mcp_http: Vec<String>,
    /// `--trust`: servers whose annotations are trusted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub trust: Vec<String>,
    /// `--approve`, by name.
    pub approve: String,
    /// `--mcp-start-timeout`, in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp_start_timeout: Option<u64>,
    /// `--mcp-timeout`, in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp_timeout: Option<u64>,
    /// `--tools`: only these tools (built-in or MCP, by llmchain name); empty: all.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<String>,
    /// `--no-builtin-tools`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub no_builtin_tools: bool,
    /// `--root`: the directory `read_file` reads (default: the working directory).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root: Option<String>,
    /// `--mcp-prefix`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub mcp_prefix: bool,
    /// `--tool-choice`: auto, none, required or a tool's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<String>,
    /// `--max-tokens`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    /// `--temperature`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
}

/// A chain for a job with its tools, and what the job's tools need to stay alive.
pub(crate) struct Built {
    /// The chain: model, tools and review (no messages, no sink yet).
    pub chain: LLMChain,
    /// The wire format of the provider.
    pub format: Format,
    /// The MCP tools (their servers run while these live).
    pub mcp_tools: Vec<McpTool>,
}

impl JobSpec {
    /// The review policy.
    pub(crate) fn policy(&self) -> Result<ApprovalPolicy, CliError> {
        <ApprovalPolicy as clap::ValueEnum>::from_str(&self.approve, true)
            .map_err(|e| CliError::Usage(format!("unknown approve policy {:?}: {e}", self.approve)))
    }

    /// The servers, as `--mcp`/`--mcp-http` would give them.
    pub(crate) fn servers(&self) -> ServerArgs {
        ServerArgs {
            mcp: self.mcp.clone(),
            mcp_http: self.mcp_http.clone(),
            trust: self.trust.clone(),
            start_timeout: self.mcp_start_timeout,
            prefix: self.mcp_prefix,
            call_timeout: self.mcp_timeout,
        }
    }

    /// The job as stored in a run's state.
    pub(crate) fn to_value(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }

    /// The job stored in a run's state extra, if any.
    pub(crate) fn from_extra(
        extra: &serde_json::Map<String, serde_json::Value>,
    ) -> Option<Result<JobSpec, CliError>> {
        let v = extra.get(JOB_KEY)?;
        Some(
            serde_json::from_value(v.clone())
                .map_err(|e| CliError::Usage(format!("the run's job cannot be read: {e}"))),
        )
    }

    /// Builds the model (keys from this process's environment), the built-in tools
    /// (reading files under `cwd`), the MCP tools and the review handler, over `state`
    /// (a stored conversation to go on with) or a new conversation.
    pub(crate) async fn build(
        &self,
        cwd: std::path::PathBuf,
        state: Option<ChainState>,
    ) -> Result<Built, CliError> {
        let format = parse_provider(&self.provider)?;
        let base_override = self.base_url.clone();
        let config = HttpModelConfig::from_lookup(format, self.model.clone(), |k| {
            if k == base_url_env_var(format) && base_override.is_some() {
                return base_override.clone();
            }
            std::env::var(k).ok()
        })
        .map_err(|e| CliError::Runtime(one_line(&e.to_string())))?;
        let mut config = config;
        if let Some(n) = self.max_tokens {
            config = config.max_tokens(n);
        }
        if self.temperature.is_some() {
            config.temperature = self.temperature;
        }
        let model =
            HttpModel::new(config).map_err(|e| CliError::Runtime(one_line(&e.to_string())))?;
        let builtins = if self.no_builtin_tools {
            Vec::new()
        } else {
            tools::builtins(self.root.as_ref().map_or(cwd, std::path::PathBuf::from))
        };
        let reserved: Vec<&str> = builtins.iter().map(Tool::name).collect();
        let mut mcp_tools = connect_mcp_tools(&self.servers(), &reserved).await?;
        let mut builtins = builtins;
        if !self.tools.is_empty() {
            let known: Vec<&str> = builtins
                .iter()
                .map(Tool::name)
                .chain(mcp_tools.iter().map(|t| t.tool.name()))
                .collect();
            if let Some(unknown) = self.tools.iter().find(|n| !known.contains(&n.as_str())) {
                return Err(CliError::Usage(format!(
                    "--tools names {unknown:?}, which no tool here is called; the tools are: {}",
                    known.join(", ")
                )));
            }
            builtins.retain(|t| self.tools.iter().any(|n| n == t.name()));
            mcp_tools.retain(|t| self.tools.iter().any(|n| n == t.tool.name()));
        }
        let reviewer: TerminalReview = approval_handler(
            self.policy()?,
            builtins
                .iter()
                .map(ToolMeta::of_tool)
                .chain(mcp_tools.iter().map(|t| ToolMeta::of_mcp(t, &self.trust))),
        );
        let model = Arc::new(model);
        let chain = match state {
            Some(state) => LLMChain::from_state(model, state),
            None => LLMChain::new(model),
        };
        let mut chain = chain.with_review_handler(reviewer);
        if let Some(choice) = &self.tool_choice {
            use llmchain::conversation::{ToolChoice, ToolChoiceMode};
            chain = chain.with_tool_choice(match choice.as_str() {
                "auto" => ToolChoice::Mode(ToolChoiceMode::Auto),
                "none" => ToolChoice::Mode(ToolChoiceMode::None),
                "required" => ToolChoice::Mode(ToolChoiceMode::Required),
                name => {
                    let known: Vec<&str> = builtins
                        .iter()
                        .map(Tool::name)
                        .chain(mcp_tools.iter().map(|t| t.tool.name()))
                        .collect();
                    if !known.contains(&name) {
                        return Err(CliError::Usage(format!(
                            "--tool-choice {name:?} is not auto, none, required or a tool here ({})",
                            known.join(", ")
                        )));
                    }
                    ToolChoice::Tool {
                        name: name.to_owned(),
                    }
                }
            });
        }
        for t in builtins
            .into_iter()
            .chain(mcp_tools.iter().map(|t| t.tool.clone()))
        {
            chain = chain.with_tool(t);
        }
        Ok(Built {
            chain,
            format,
            mcp_tools,
        })
    }
}

/// The wire format of a `--provider` name.
pub(crate) fn parse_provider(p: &str) -> Result<Format, CliError> {
    Ok(match p {
        "openai" | "openai_chat" => Format::OpenAiChat,
        "openai_responses" => Format::OpenAiResponses,
        "anthropic" => Format::Anthropic,
        "gemini" => Format::Gemini,
        "ollama" => Format::Ollama,
        other => {
            return Err(CliError::Usage(format!(
                "unknown --provider '{other}': expected openai, openai_responses, anthropic, gemini or ollama"
            )));
        }
    })
}

/// The model used when `--model` is not given.
pub(crate) fn default_model(format: Format) -> &'static str {
    match format {
        Format::OpenAiChat => "gpt-4.1",
        Format::OpenAiResponses => "gpt-5",
        Format::Anthropic => "claude-sonnet-4-5",
        Format::Gemini => "gemini-2.5-flash",
        Format::Ollama => "llama3.2",
        // A format added to the library later needs its own default; until then the
        // user names the model.
        _ => "",
    }
}

/// Whitespace folded to single spaces: one line for an error message.
pub(crate) fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}
