//! [`JobSpec`]: what one run executes — provider, model, tool servers, review policy —
//! resolved from the operator's configuration (a [`Profile`]) and, for an interactive
//! run, the flags of the command that runs it.
//!
//! The trust boundary: the database holds data, not authority. A queued run stores the
//! name of its profile and [`QueuedOptions`] (nothing that starts a command or reaches
//! a URL); a worker builds its job from its own configuration's profile of that name.
//! An interactive run stores its job as a record ([`JobSpec::record`], URLs without
//! credentials) that `run -c` compares with the user's own configuration, never runs.

use std::sync::Arc;

use llmchain::chain::{ChainState, LLMChain};
use llmchain::http::{HttpModel, HttpModelConfig, Provider};
use llmchain::tool::Tool;
use llmchain_mcp::McpTool;
use serde::{Deserialize, Serialize};

use crate::cmd::mcp::{ServerArgs, connect_mcp_tools};
use crate::config::Profile;
use crate::error::CliError;
use crate::review::{ApprovalPolicy, TerminalReview, ToolMeta, approval_handler};
use crate::tools;

/// The key of the job record in a run state's `extra`.
pub(crate) const JOB_KEY: &str = "job";

/// The key of a queued run's [`QueuedOptions`] in its state's `extra`.
pub(crate) const OPTIONS_KEY: &str = "options";

/// How to run a conversation. API keys are never part of it: each process reads its
/// own from the environment.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct JobSpec {
    /// The profile it came from.
    #[serde(default)]
    pub profile: String,
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
    /// A JSON Schema file: the runs answer with an object matching it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<String>,
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
    /// `-o KEY=VALUE`: provider options, written into the request body over the typed
    /// fields.
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    pub options: serde_json::Map<String, serde_json::Value>,
    /// `--no-stream`: ask for the whole answer at once.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub no_stream: bool,
    /// The profile's `[[policy]]` rules.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub policy: Vec<llmchain::policy::RuleSpec>,
    /// The profile's `policy_mode`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_mode: Option<String>,
    /// The profile's `[[guard]]` checks.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub guard: Vec<llmchain::guard::GuardSpec>,
    /// The profile's `context_window`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_window: Option<u32>,
    /// The profile's `[budget]`, tightened by `--budget`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<llmchain::chain::Budget>,
}

/// `-o KEY=VALUE` pairs as request-body fields: a value that is JSON (a number, `true`,
/// an object...) as that, any other as a string. `model` and `stream` have flags of
/// their own and are refused here.
pub(crate) fn parse_options(
    pairs: &[String],
) -> Result<serde_json::Map<String, serde_json::Value>, CliError> {
    let mut out = serde_json::Map::new();
    for pair in pairs {
        let Some((key, value)) = pair.split_once('=') else {
            return Err(CliError::usage(format!(
                "-o takes KEY=VALUE (e.g. -o top_p=0.9), not {pair:?}"
            )));
        };
        let key = key.trim();
        if key.is_empty() {
            return Err(CliError::usage(format!("-o {pair:?} has no key")));
        }
        if let Some(flag) = match key {
            "model" => Some("--model"),
            "stream" => Some("--no-stream"),
            _ => None,
        } {
            return Err(CliError::usage(format!(
                "-o {key}=... is not taken: use {flag}"
            )));
        }
        let value = serde_json::from_str(value)
            .unwrap_or_else(|_| serde_json::Value::String(value.to_owned()));
        out.insert(key.to_owned(), value);
    }
    Ok(out)
}

/// What a queued run says about itself: options that cannot start a command, reach a
/// URL or widen what runs unasked. Everything else comes from the worker's profile.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct QueuedOptions {
    /// The model, instead of the profile's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// `--max-tokens`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    /// `--temperature`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// `--tool-choice`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<String>,
    /// `--approve`: a policy at least this strict (a run can ask for more review than
    /// its profile gives, never for less).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approve: Option<String>,
    /// `-o KEY=VALUE`: provider options (request-body fields; data, not commands).
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    pub options: serde_json::Map<String, serde_json::Value>,
    /// `--no-stream`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub no_stream: bool,
}

impl QueuedOptions {
    /// The options stored in a run's state extra (none: the defaults).
    pub(crate) fn from_extra(
        extra: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<QueuedOptions, String> {
        match extra.get(OPTIONS_KEY) {
            None => Ok(QueuedOptions::default()),
            Some(v) => serde_json::from_value(v.clone())
                .map_err(|e| format!("the run's options cannot be read: {e}")),
        }
    }
}

/// How strict a policy is: `always` < `auto` < `ask` < `never`.
fn strictness(p: ApprovalPolicy) -> u8 {
    match p {
        ApprovalPolicy::Always => 0,
        ApprovalPolicy::Auto => 1,
        ApprovalPolicy::Ask => 2,
        ApprovalPolicy::Never => 3,
    }
}

/// A policy's name.
pub(crate) fn policy_name(p: ApprovalPolicy) -> String {
    p.name().to_owned()
}

/// The policy of a name.
pub(crate) fn parse_policy(name: &str) -> Result<ApprovalPolicy, CliError> {
    <ApprovalPolicy as clap::ValueEnum>::from_str(name, true).map_err(|_| {
        CliError::usage(format!(
            "unknown approve policy {name:?}: expected auto, always, never or ask"
        ))
    })
}

/// A chain for a job with its tools, and what the job's tools need to stay alive.
pub(crate) struct Built {
    /// The chain: model, tools and review (no messages, no sink yet).
    pub chain: LLMChain,
    /// The MCP tools (their servers run while these live).
    pub mcp_tools: Vec<McpTool>,
}

/// The parts of a chain a job connects before any run is held: the model (its key
/// checked), the tools (MCP servers started) and what the reviewer knows of them.
/// Cloning shares them (one set of MCP servers for every chain built from the clones).
#[derive(Clone)]
pub(crate) struct Parts {
    model: Arc<dyn llmchain::model::ChatModel>,
    spec: &'static dyn Provider,
    builtins: Vec<Tool>,
    mcp_tools: Vec<McpTool>,
    trust: Vec<String>,
    policy: ApprovalPolicy,
    /// The profile's rules with the approve word as their shorthand.
    rules: Arc<llmchain::policy::Rules>,
    /// The profile's guards, built.
    guards: Vec<Arc<dyn llmchain::guard::Guard>>,
    context_window: Option<u32>,
    budget: llmchain::chain::Budget,
    tool_choice: Option<llmchain::conversation::ToolChoice>,
}

/// Who answers the calls a policy asks about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Reviewer {
    /// The terminal when stdin and stderr are one (questions name the run `run`);
    /// otherwise the calls wait in the review inbox.
    Terminal {
        /// The run's id, for the question.
        run: String,
    },
    /// Never a terminal (a worker): calls that need a person wait in the review inbox.
    Inbox,
}

impl JobSpec {
    /// The job of profile `name`: its settings, with the defaults for what it leaves out.
    pub(crate) fn from_profile(name: &str, p: &Profile) -> Result<JobSpec, CliError> {
        let provider = p.provider.clone().unwrap_or_else(|| "openai".into());
        let spec = parse_provider(&provider)?;
        let approve = p.approve.clone().unwrap_or_else(|| "auto".into());
        parse_policy(&approve)?;
        Ok(JobSpec {
            profile: name.to_owned(),
            model: p
                .model
                .clone()
                .unwrap_or_else(|| spec.default_model().to_owned()),
            provider,
            base_url: p.base_url.clone(),
            mcp: p.mcp.clone(),
            mcp_http: p.mcp_http.clone(),
            trust: p.trust.clone(),
            approve,
            mcp_start_timeout: p.mcp_start_timeout,
            mcp_timeout: p.mcp_timeout,
            tools: p.tools.clone(),
            no_builtin_tools: p.no_builtin_tools,
            root: p.root.clone(),
            mcp_prefix: p.mcp_prefix,
            schema: p.schema.clone(),
            policy: p.policy.clone(),
            policy_mode: p.policy_mode.clone(),
            guard: p.guard.clone(),
            context_window: p.context_window,
            budget: p.budget.clone(),
            ..JobSpec::default()
        })
    }

    /// The job with `--budget KEY=VALUE` limits over its profile's (each the stricter
    /// where both set one).
    pub(crate) fn tighten_budget(&mut self, words: &[String]) -> Result<(), CliError> {
        let Some(given) = crate::config::budget_flags(words)? else {
            return Ok(());
        };
        self.budget = Some(self.budget.take().unwrap_or_default().tightened_by(&given));
        Ok(())
    }

    /// The job's rules, compiled.
    fn rules(&self) -> Result<Option<Arc<llmchain::policy::Rules>>, CliError> {
        crate::policy_rules::compile(&self.policy, self.policy_mode.as_deref())
            .map_err(|e| CliError::usage(format!("profile {:?}: {e}", self.profile)))
    }

    /// This job with a queued run's own options applied (the approve policy only ever
    /// made stricter).
    pub(crate) fn with_options(mut self, o: &QueuedOptions) -> Result<JobSpec, CliError> {
        if let Some(m) = &o.model {
            self.model = m.clone();
        }
        self.max_tokens = o.max_tokens.or(self.max_tokens);
        self.temperature = o.temperature.or(self.temperature);
        self.tool_choice = o.tool_choice.clone().or(self.tool_choice);
        for (k, v) in &o.options {
            self.options.insert(k.clone(), v.clone());
        }
        self.no_stream |= o.no_stream;
        if let Some(asked) = &o.approve {
            let asked = parse_policy(asked)?;
            if strictness(asked) > strictness(self.policy()?) {
                self.approve = policy_name(asked);
            }
        }
        Ok(self)
    }

    /// The review policy.
    pub(crate) fn policy(&self) -> Result<ApprovalPolicy, CliError> {
        parse_policy(&self.approve)
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

    /// The job as recorded with an interactive run: every URL without its credentials
    /// (a record for comparing and showing, never for running).
    pub(crate) fn record(&self) -> serde_json::Value {
        let mut shown = self.clone();
        shown.base_url = shown.base_url.as_deref().map(llmchain::redact::url);
        shown.mcp_http = shown
            .mcp_http
            .iter()
            .map(|u| llmchain::redact::url(u))
            .collect();
        // A server command may carry a URL with credentials (`npx mcp-remote https://…`).
        shown.mcp = shown
            .mcp
            .iter()
            .map(|c| llmchain::redact::urls_in(c))
            .collect();
        serde_json::to_value(shown).unwrap_or_default()
    }

    /// How the job's runs go: to a typed answer when it names a schema, else while the
    /// model needs to answer.
    pub(crate) fn mode(&self) -> Result<llmchain::chain::Mode, CliError> {
        Ok(match &self.schema {
            Some(path) => {
                llmchain::chain::Mode::custom(extract_from_file(std::path::Path::new(path))?)
            }
            None => llmchain::chain::Mode::while_needs_response(),
        })
    }

    /// The job recorded in a run state's extra, if any.
    pub(crate) fn from_extra(
        extra: &serde_json::Map<String, serde_json::Value>,
    ) -> Option<Result<JobSpec, CliError>> {
        let v = extra.get(JOB_KEY)?;
        Some(
            serde_json::from_value(v.clone())
                .map_err(|e| CliError::usage(format!("the run's job cannot be read: {e}"))),
        )
    }

    /// Connects what the job needs before a run is held: the model (keys from this
    /// process's environment), the built-in tools (reading files under `cwd`, or the
    /// job's root) and the MCP servers' tools.
    pub(crate) async fn connect(&self, cwd: std::path::PathBuf) -> Result<Parts, CliError> {
        let spec = parse_provider(&self.provider)?;
        let model_err = |e: llmchain::model::ModelError| {
            CliError::runtime(llmchain::redact::urls_in(&crate::shown::one_line(
                &e.to_string(),
            )))
            .typed(e.error_type())
        };
        // The environment, then the keys file (`llmchain keys`).
        let mut config = HttpModelConfig::for_provider(spec, self.model.clone())
            .read_env(crate::keys::lookup_for(spec)?)
            .map_err(model_err)?;
        if let Some(url) = &self.base_url {
            config.base_url = url.clone();
        }
        config.validate().map_err(model_err)?;
        if let Some(n) = self.max_tokens {
            config = config.max_tokens(n);
        }
        if self.temperature.is_some() {
            config.temperature = self.temperature;
        }
        for (k, v) in &self.options {
            config = config.extra(k.clone(), v.clone());
        }
        if self.no_stream {
            config = config.stream(false);
        }
        let model = HttpModel::new(config).map_err(model_err)?;
        self.assemble(cwd, Arc::new(model)).await
    }

    /// The job's tools, review and tool choice, without a model that can be asked
    /// (no key needed): `conversations resume` runs the calls a run left exactly as
    /// the run's profile would, and asks no model.
    pub(crate) async fn connect_tools_only(
        &self,
        cwd: std::path::PathBuf,
    ) -> Result<Parts, CliError> {
        // The job's own wire format, with no turns: a call to it would fail, and none
        // is made (no credentials are read for a run that only answers calls).
        let format = parse_provider(&self.provider)?.format();
        let model = llmchain::chain::ScriptedModel::new(format);
        self.assemble(cwd, Arc::new(model)).await
    }

    /// What [`connect`](Self::connect) and [`connect_tools_only`](Self::connect_tools_only)
    /// share: the one place a job's tools are put together.
    async fn assemble(
        &self,
        cwd: std::path::PathBuf,
        model: Arc<dyn llmchain::model::ChatModel>,
    ) -> Result<Parts, CliError> {
        let spec = parse_provider(&self.provider)?;
        let policy = self.policy()?;
        // A bad rule stops the job before any server starts.
        self.rules()?;
        let builtins = if self.no_builtin_tools {
            Vec::new()
        } else {
            tools::builtins(self.root.as_ref().map_or(cwd, std::path::PathBuf::from))
        };
        let reserved: Vec<&str> = builtins.iter().map(Tool::name).collect();
        let mut mcp_tools = connect_mcp_tools(&self.servers(), &reserved).await?;
        let mut builtins = builtins;
        let known = |b: &[Tool], m: &[McpTool]| -> Vec<String> {
            b.iter()
                .map(|t| t.name().to_owned())
                .chain(m.iter().map(|t| t.tool.name().to_owned()))
                .collect()
        };
        if !self.tools.is_empty() {
            let names = known(&builtins, &mcp_tools);
            if let Some(unknown) = self.tools.iter().find(|n| !names.contains(n)) {
                return Err(CliError::usage(format!(
                    "--tools names {unknown:?}, which no tool here is called; the tools are: {}",
                    names.join(", ")
                )));
            }
            builtins.retain(|t| self.tools.iter().any(|n| n == t.name()));
            mcp_tools.retain(|t| self.tools.iter().any(|n| n == t.tool.name()));
        }
        let tool_choice = match self.tool_choice.as_deref() {
            None => None,
            Some(choice) => {
                use llmchain::conversation::{ToolChoice, ToolChoiceMode};
                Some(match choice {
                    "auto" => ToolChoice::Mode(ToolChoiceMode::Auto),
                    "none" => ToolChoice::Mode(ToolChoiceMode::None),
                    "required" => ToolChoice::Mode(ToolChoiceMode::Required),
                    name => {
                        let names = known(&builtins, &mcp_tools);
                        if !names.iter().any(|n| n == name) {
                            return Err(CliError::usage(format!(
                                "--tool-choice {name:?} is not auto, none, required or a tool here ({})",
                                names.join(", ")
                            )));
                        }
                        ToolChoice::Tool {
                            name: name.to_owned(),
                        }
                    }
                })
            }
        };
        // The approve word is the rules' default, and under `auto` the tools believed
        // read-only are allowed by a rule each: one set of rules decides, and every
        // ruling is on record with its id.
        let read_only: Vec<String> = builtins
            .iter()
            .map(|t| (t.policy_name().to_owned(), ToolMeta::of_tool(t).1))
            .chain(mcp_tools.iter().map(|t| {
                (
                    t.tool.policy_name().to_owned(),
                    ToolMeta::of_mcp(t, &self.trust).1,
                )
            }))
            .filter(|(_, meta)| meta.believed_read_only())
            .map(|(name, _)| name)
            .collect();
        let rules = crate::policy_rules::with_approve(
            &self.policy,
            self.policy_mode.as_deref(),
            policy,
            &read_only,
        )
        .map_err(|e| CliError::usage(format!("profile {:?}: {e}", self.profile)))?;
        let guards = self
            .guard
            .iter()
            .map(llmchain::guard::GuardSpec::build)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| CliError::usage(format!("profile {:?}: {e}", self.profile)))?;
        Ok(Parts {
            model,
            spec,
            builtins,
            mcp_tools,
            trust: self.trust.clone(),
            policy,
            rules,
            guards,
            context_window: self.context_window,
            budget: self.budget.clone().unwrap_or_default(),
            tool_choice,
        })
    }

    /// [`connect`](Self::connect), then [`Parts::chain`].
    pub(crate) async fn build(
        &self,
        cwd: std::path::PathBuf,
        state: Option<ChainState>,
        reviewer: Reviewer,
    ) -> Result<Built, CliError> {
        Ok(self.connect(cwd).await?.chain(state, reviewer))
    }
}

impl Parts {
    /// The provider.
    pub(crate) fn spec(&self) -> &'static dyn Provider {
        self.spec
    }

    /// The review handler of the job's policy for these tools.
    pub(crate) fn reviewer(&self, reviewer: &Reviewer) -> TerminalReview {
        let handler = approval_handler(
            self.policy,
            self.builtins.iter().map(ToolMeta::of_tool).chain(
                self.mcp_tools
                    .iter()
                    .map(|t| ToolMeta::of_mcp(t, &self.trust)),
            ),
        );
        match reviewer {
            Reviewer::Terminal { run } => handler.for_run(run),
            Reviewer::Inbox => handler.interactive(false),
        }
    }

    /// The chain over `state` (a stored conversation to go on with) or a new one.
    pub(crate) fn chain(self, state: Option<ChainState>, reviewer: Reviewer) -> Built {
        let review = self.reviewer(&reviewer);
        let chain = match state {
            Some(state) => LLMChain::from_state(self.model, state),
            None => LLMChain::new(self.model),
        };
        let mut chain = chain
            .with_review_handler(review)
            .with_budget(self.budget.clone());
        chain = chain.with_policy_arc(self.rules.clone());
        for g in &self.guards {
            chain = chain.with_guard_arc(g.clone());
        }
        if let Some(w) = self.context_window {
            chain = chain.with_context_window(w);
        }
        if let Some(choice) = self.tool_choice {
            chain = chain.with_tool_choice(choice);
        }
        for t in self
            .builtins
            .into_iter()
            .chain(self.mcp_tools.iter().map(|t| t.tool.clone()))
        {
            chain = chain.with_tool(t);
        }
        Built {
            chain,
            mcp_tools: self.mcp_tools,
        }
    }
}

/// The provider of a `--provider` name (the library's registry: names, aliases).
pub(crate) fn parse_provider(p: &str) -> Result<&'static dyn Provider, CliError> {
    llmchain::http::provider(p).ok_or_else(|| {
        CliError::usage(format!(
            "unknown --provider '{p}': expected one of {}",
            llmchain::http::providers::names().join(", ")
        ))
    })
}

/// `--provider`'s help: every provider of the registry, with its default model.
pub(crate) fn provider_help() -> String {
    let mut s = String::from(
        "The provider [default: $LLMCHAIN_PROVIDER, the continued conversation's, the profile's, else openai]:",
    );
    for p in llmchain::http::providers::PROVIDERS {
        s.push_str(&format!(
            "\n  {:<17} {} (model {}; {})",
            p.name(),
            p.summary(),
            p.default_model(),
            p.env_vars().join(", ")
        ));
    }
    s
}

/// The biggest schema file `--schema` reads.
const MAX_SCHEMA_BYTES: u64 = 1 << 20;

/// `--schema FILE` (or a profile's `schema`): the typed answer it asks for.
pub(crate) fn extract_from_file(
    path: &std::path::Path,
) -> Result<llmchain::chain::Extract, CliError> {
    use std::io::Read;
    let shown = path.display();
    let file = std::fs::File::open(path)
        .map_err(|e| CliError::usage(format!("cannot read the schema {shown}: {e}")))?;
    let mut text = String::new();
    file.take(MAX_SCHEMA_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(|e| CliError::usage(format!("cannot read the schema {shown}: {e}")))?;
    if text.len() as u64 > MAX_SCHEMA_BYTES {
        return Err(CliError::usage(format!(
            "the schema {shown} is over {MAX_SCHEMA_BYTES} bytes"
        )));
    }
    let schema: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| CliError::usage(format!("the schema {shown} is not JSON: {e}")))?;
    llmchain::chain::Extract::new(llmchain::conversation::ResponseFormat::for_schema(schema))
        .map_err(|e| CliError::usage(format!("{shown}: {e}")).typed("answer_schema"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_queued_run_can_ask_for_more_review_never_less() {
        let p = Profile {
            approve: Some("auto".into()),
            ..Profile::default()
        };
        let job = JobSpec::from_profile("p", &p).unwrap();
        let stricter = job
            .clone()
            .with_options(&QueuedOptions {
                approve: Some("ask".into()),
                ..Default::default()
            })
            .unwrap();
        assert_eq!(stricter.approve, "ask");
        let looser = job
            .with_options(&QueuedOptions {
                approve: Some("always".into()),
                model: Some("m2".into()),
                ..Default::default()
            })
            .unwrap();
        assert_eq!(looser.approve, "auto");
        assert_eq!(looser.model, "m2");
        // Anything else in a row's options is refused, not ignored.
        let mut extra = serde_json::Map::new();
        extra.insert(
            OPTIONS_KEY.into(),
            serde_json::json!({"mcp": ["sh -c evil"]}),
        );
        assert!(QueuedOptions::from_extra(&extra).is_err());
    }

    #[test]
    fn a_record_keeps_no_credential() {
        let job = JobSpec {
            base_url: Some("http://u:PW@host/v1?api-key=K".into()),
            mcp_http: vec!["http://t:PW2@h/mcp".into()],
            ..JobSpec::default()
        };
        let mut job = job;
        job.mcp = vec!["npx mcp-remote https://u:PW3@h/sse?token=K3".into()];
        let text = job.record().to_string();
        assert!(!text.contains("PW") && !text.contains("=K"), "{text}");
    }
}
