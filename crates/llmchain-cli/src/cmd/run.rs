//! `llmchain run`: a real agent run against a provider over HTTP.
//!
//! Assistant text streams to stdout as its bytes arrive; reasoning, tool activity, the
//! spinner, tool progress lines and the usage summary go to stderr, so
//! `llmchain run ... > answer.txt` keeps only the answer.
//!
//! The tools are the built-in ones plus those of every `--mcp`/`--mcp-http` server;
//! calls are reviewed by `--approve` ([`crate::review`]). The conversation is stored as
//! it goes (`--db`), so Ctrl-C cancels the run through the chain's cancellation token,
//! leaves a consistent stored conversation and exits 130 saying how to resume it.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use llmchain::chain::{Callbacks, ChainError, Mode, ModelError, ReviewDecision};
use llmchain::http::Provider;
use llmchain::message::{Message, Role, TokenUsage, ToolCall};
use llmchain::provider::StreamEvent;
use llmchain_store::{AnyStore, Drive, NewConversation, RunEnd, RunOptions, RunState, Store};

use crate::cmd::mcp::ServerArgs;
use crate::config::{Config, DEFAULT_PROFILE};
use crate::error::{CliError, CliResult};
use crate::interactive_run::AskAtTerminal;
use crate::job::{
    Built, JOB_KEY, JobSpec, OPTIONS_KEY, QueuedOptions, parse_options, parse_provider, policy_name,
};
use crate::progress::{Progress, ProgressSink};
use crate::review::ApprovalPolicy;
use crate::shown::one_line;
use crate::stdout::{out, outln};
use crate::store_access::{open_store, resolve_id};

/// Arguments of `llmchain run`.
#[derive(Debug, Clone, Default, clap::Args)]
#[command(
    after_help = "A tool call running longer than 500 ms shows a progress line on stderr (only \
                  when stderr is a terminal).\nCtrl-C cancels the run cleanly: the stored \
                  conversation stays consistent, the exit code is 130 and the message says how \
                  to resume it (llmchain conversations resume ID)."
)]
pub(crate) struct RunArgs {
    /// The profile of the config file to run under (`llmchain config profiles`): its
    /// provider, model, base URL, MCP servers, trust, approve policy, tools and root;
    /// the flags below win over it. With --enqueue, the worker's own definition of the
    /// profile is used [default: the continued conversation's, else "default"].
    #[arg(long, value_name = "NAME")]
    pub profile: Option<String>,
    /// The provider (`--help` lists them) [default: $LLMCHAIN_PROVIDER, the continued
    /// conversation's, the profile's, else openai].
    #[arg(long, long_help = crate::job::provider_help())]
    pub provider: Option<String>,
    /// Model id [default: $LLMCHAIN_MODEL, the continued conversation's, the profile's,
    /// else the provider's current model: openai gpt-4.1, openai_responses gpt-5,
    /// anthropic claude-sonnet-4-5, gemini gemini-2.5-flash, ollama llama3.2].
    #[arg(long)]
    pub model: Option<String>,
    /// Base URL (overrides OPENAI_BASE_URL, ANTHROPIC_BASE_URL, GEMINI_BASE_URL, OLLAMA_HOST).
    #[arg(long)]
    pub base_url: Option<String>,
    /// System prompt.
    #[arg(short = 's', long)]
    pub system: Option<String>,
    /// A provider option, written into the request body (over a field llmchain sets):
    /// `-o top_p=0.9 -o reasoning_effort=low -o 'response_format={"type":"json_object"}'`.
    /// A value that is JSON goes as that, any other as a string. Repeatable.
    #[arg(short = 'o', long = "option", value_name = "KEY=VALUE")]
    pub options: Vec<String>,
    /// Ask for the whole answer at once instead of a stream (for servers or proxies that
    /// stream badly).
    #[arg(long)]
    pub no_stream: bool,
    /// Attach a file (an image, a PDF, a text file) or an http(s) URL to the prompt;
    /// repeatable. One the provider does not take is refused, saying so.
    #[arg(short = 'a', long = "attach", value_name = "FILE|URL")]
    pub attachments: Vec<String>,
    /// MCP servers whose tools join the built-in ones [default when continuing: the
    /// conversation's].
    #[command(flatten)]
    pub servers: ServerArgs,
    /// Review of tool calls [default: auto, or the continued conversation's]. auto:
    /// read-only tools (readOnlyHint, and the built-in tools) run; any other call is
    /// asked about when stdin and stderr are a terminal and denied otherwise (the model
    /// is told; pass --approve always to allow). ask: every call is asked about —
    /// approve, edit (in $EDITOR or as JSON typed in), reject or deny; the question
    /// shows the tool's hints (read-only, destructive, ...). always: run every call.
    /// never: run none.
    #[arg(long, value_enum, verbatim_doc_comment)]
    pub approve: Option<ApprovalPolicy>,
    /// Only these tools (comma-separated llmchain names, built-in or MCP, as
    /// `llmchain mcp list` shows them) [default: all].
    #[arg(long, value_name = "NAME,…", value_delimiter = ',')]
    pub tools: Vec<String>,
    /// Leave out the built-in tools (calculator, clock, read_file).
    #[arg(long)]
    pub no_builtin_tools: bool,
    /// The directory read_file reads [default: the working directory]. It never reads
    /// outside it, hidden files or directories (.env, .ssh, .git), or a file with more
    /// than one hard link.
    #[arg(long, value_name = "DIR")]
    pub root: Option<std::path::PathBuf>,
    /// Print, instead of the streamed text, one JSON object when the run is done: the
    /// conversation id, the final answer (its text and the whole message in the
    /// storage format) and the usage.
    #[arg(long, conflicts_with = "enqueue")]
    pub json: bool,
    /// Ask for a typed answer: a JSON object matching the JSON Schema in FILE (named by
    /// its "title"). Only the checked object is printed on stdout; with --json, it is
    /// `object` beside the usage. A wrong answer is sent back to the model, which tries
    /// again within the failure budget; tools may run first.
    #[arg(long, value_name = "FILE", conflicts_with = "enqueue")]
    pub schema: Option<std::path::PathBuf>,
    /// A limit on what this run may spend, over the profile's `[budget]` (the
    /// stricter wins): tokens=N, cost_usd=D, model_calls=N, tool_calls=N, tool_calls.TOOL=N,
    /// wall_seconds=S, step_seconds=S, first_chunk_seconds=S, idle_seconds=S,
    /// tool_seconds=S, on_exhausted=stop|final_answer|error. Repeatable.
    #[arg(long, value_name = "KEY=VALUE", conflicts_with = "enqueue")]
    pub budget: Vec<String>,
    /// Whether the model must call a tool: auto (it decides), none, required (some
    /// tool), or a tool's name (that tool).
    #[arg(long, value_name = "auto|none|required|NAME")]
    pub tool_choice: Option<String>,
    /// The most tokens the model may answer with, per call.
    #[arg(long, value_name = "N")]
    pub max_tokens: Option<u32>,
    /// Sampling temperature (0 = most deterministic).
    #[arg(long, value_name = "T")]
    pub temperature: Option<f64>,
    /// Continue the most recent conversation: the prompt is its next user message, with
    /// the provider, model, tool servers and approve policy it ran with (flags given
    /// here win).
    #[arg(short = 'c', long = "continue", conflicts_with_all = ["conversation", "enqueue"])]
    pub continue_latest: bool,
    /// Continue this conversation (its id, or a unique prefix of it), as --continue does.
    #[arg(long, value_name = "ID", conflicts_with = "enqueue")]
    pub conversation: Option<String>,
    /// Where the conversation is stored: sqlite://PATH or postgres://… (default:
    /// $LLMCHAIN_DATABASE_URL, else the SQLite file in the user's data directory).
    #[arg(long, value_name = "URL")]
    pub db: Option<String>,
    /// Do not run here: store the conversation and a pending run under --profile, print
    /// the run's id and exit. An `llmchain worker --db URL` that has the profile runs
    /// it, with its own configuration's provider, servers and policy (the flags that
    /// would start a command or reach a URL are refused here); --model, --max-tokens,
    /// --temperature, --tool-choice and a stricter --approve are kept with the run.
    #[arg(long)]
    pub enqueue: bool,
    /// With --enqueue: attempts before the run is discarded.
    #[arg(long, default_value_t = llmchain_store::DEFAULT_MAX_ATTEMPTS, requires = "enqueue")]
    pub max_attempts: i32,
    /// With --enqueue: higher runs are claimed first.
    #[arg(long, default_value_t = 0, requires = "enqueue")]
    pub priority: i32,
    /// The prompt. `-`, or nothing when stdin is piped, reads it from stdin; piped
    /// stdin with a prompt sends both (the piped text first), as `llm` does.
    pub prompt: Option<String>,
    /// Set by `llmchain chat`, which says once, at the end, where the conversation is
    /// kept rather than after every answer.
    #[arg(skip)]
    pub in_chat: bool,
}

/// The prompt: the argument, stdin, or both; `None` when there is none and
/// `continuing` (an interrupted conversation is finished without a new message).
fn prompt(arg: Option<&str>, continuing: bool) -> Result<Option<String>, CliError> {
    use std::io::{IsTerminal, Read};
    let piped = !std::io::stdin().is_terminal();
    let read_stdin = || {
        let mut text = String::new();
        std::io::stdin()
            .take(MAX_PROMPT_BYTES + 1)
            .read_to_string(&mut text)
            .map_err(|e| CliError::usage(format!("cannot read the prompt from stdin: {e}")))?;
        if text.len() as u64 > MAX_PROMPT_BYTES {
            return Err(CliError::usage(format!(
                "the prompt on stdin is longer than {} MiB",
                MAX_PROMPT_BYTES >> 20
            )));
        }
        Ok::<_, CliError>(text)
    };
    let text = match arg {
        Some("-") => read_stdin()?,
        None if piped => read_stdin()?,
        None if continuing => return Ok(None),
        None => {
            return Err(CliError::usage(
                "give a prompt (or `-` to read it from stdin)",
            ));
        }
        Some(p) if piped => {
            let context = read_stdin()?;
            if context.trim().is_empty() {
                p.to_owned()
            } else {
                format!("{}\n\n{p}", context.trim_end())
            }
        }
        Some(p) => p.to_owned(),
    };
    if text.trim().is_empty() {
        if continuing && arg.is_none() {
            return Ok(None);
        }
        return Err(CliError::usage("the prompt is empty"));
    }
    Ok(Some(text))
}

/// The longest prompt read from stdin.
const MAX_PROMPT_BYTES: u64 = 16 << 20;

/// The job of an interactive run: its profile (`--profile`, the continued
/// conversation's when the user's configuration has it, else `default`), the flags over
/// it, and for a continued conversation its recorded provider, model and options (data:
/// they cannot start a command or reach a URL of the record's choosing). The recorded
/// servers and base URL are compared with the result, never used: see
/// [`check_recorded`].
fn job_of(
    args: &RunArgs,
    recorded: Option<&JobSpec>,
    config: &Config,
    conversation: Option<&str>,
) -> Result<JobSpec, CliError> {
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let name = match (&args.profile, recorded) {
        (Some(p), _) => p.clone(),
        (None, Some(r)) if config.profiles.contains_key(&r.profile) => r.profile.clone(),
        _ => DEFAULT_PROFILE.to_owned(),
    };
    let base = JobSpec::from_profile(&name, config.profile(&name)?)?;
    // `--model NAME` of an `[aliases]` entry: its model, and its provider unless one is
    // given.
    let alias = args
        .model
        .clone()
        .or_else(|| env("LLMCHAIN_MODEL"))
        .and_then(|m| config.alias(&m));
    let provider = args
        .provider
        .clone()
        .or_else(|| alias.as_ref().and_then(|(p, _)| p.map(str::to_owned)))
        .or_else(|| env("LLMCHAIN_PROVIDER"))
        .or_else(|| {
            recorded
                .map(|r| r.provider.clone())
                .filter(|p| !p.is_empty())
        })
        .unwrap_or_else(|| base.provider.clone());
    let spec = parse_provider(&provider)?;
    // The profile's model and base URL belong to the profile's provider, the recorded
    // model to the recorded provider.
    let same_provider = provider == base.provider;
    let recorded_same = recorded.filter(|r| r.provider == provider);
    let servers_given = !args.servers.mcp.is_empty() || !args.servers.mcp_http.is_empty();
    let (mcp, mcp_http) = if servers_given {
        (args.servers.mcp.clone(), args.servers.mcp_http.clone())
    } else {
        (base.mcp.clone(), base.mcp_http.clone())
    };
    let job = JobSpec {
        profile: name,
        model: alias
            .map(|(_, m)| m)
            .or_else(|| args.model.clone())
            .or_else(|| env("LLMCHAIN_MODEL"))
            .or_else(|| {
                recorded_same
                    .map(|r| r.model.clone())
                    .filter(|m| !m.is_empty())
            })
            .or_else(|| same_provider.then(|| base.model.clone()))
            .unwrap_or_else(|| spec.default_model().to_owned()),
        base_url: args
            .base_url
            .clone()
            .or_else(|| base.base_url.clone().filter(|_| same_provider)),
        provider,
        mcp,
        mcp_http,
        trust: if args.servers.trust.is_empty() {
            base.trust.clone()
        } else {
            args.servers.trust.clone()
        },
        approve: args
            .approve
            .map(policy_name)
            .unwrap_or(base.approve.clone()),
        mcp_start_timeout: args.servers.start_timeout.or(base.mcp_start_timeout),
        mcp_timeout: args.servers.call_timeout.or(base.mcp_timeout),
        tools: if args.tools.is_empty() {
            base.tools.clone()
        } else {
            args.tools.clone()
        },
        no_builtin_tools: args.no_builtin_tools || base.no_builtin_tools,
        schema: args
            .schema
            .as_ref()
            .map(|p| p.display().to_string())
            .or_else(|| base.schema.clone()),
        root: match &args.root {
            // Absolute, so a later `--continue` elsewhere reads the same place.
            Some(r) => Some(
                std::fs::canonicalize(r)
                    .map_err(|e| CliError::usage(format!("--root {}: {e}", r.display())))?
                    .display()
                    .to_string(),
            ),
            None => base.root.clone(),
        },
        mcp_prefix: args.servers.prefix || base.mcp_prefix,
        tool_choice: args
            .tool_choice
            .clone()
            .or_else(|| recorded.and_then(|j| j.tool_choice.clone())),
        max_tokens: args
            .max_tokens
            .or_else(|| recorded.and_then(|j| j.max_tokens)),
        temperature: args
            .temperature
            .or_else(|| recorded.and_then(|j| j.temperature)),
        // The conversation's options, with this run's over them.
        options: {
            let mut o = recorded.map(|j| j.options.clone()).unwrap_or_default();
            o.extend(parse_options(&args.options)?);
            o
        },
        no_stream: args.no_stream,
        policy: base.policy.clone(),
        policy_mode: base.policy_mode.clone(),
        guard: base.guard.clone(),
        context_window: base.context_window,
        budget: base.budget.clone(),
    };
    let mut job = job;
    job.tighten_budget(&args.budget)?;
    if let (Some(r), Some(id)) = (recorded, conversation) {
        check_recorded(r, &job, args, id)?;
    }
    Ok(job)
}

/// Refuses to go on with a conversation whose record names an MCP server or a base
/// URL that the user's own configuration (profile and flags) does not: whoever can
/// write the database could otherwise make `run -c` start a command or send the user's
/// key to a server of their choosing. Passing the server or URL again on the command
/// line is the user's consent.
fn check_recorded(
    recorded: &JobSpec,
    job: &JobSpec,
    args: &RunArgs,
    id: &str,
) -> Result<(), CliError> {
    use llmchain::redact;
    let servers_given = !args.servers.mcp.is_empty() || !args.servers.mcp_http.is_empty();
    if !servers_given {
        let have_http: Vec<String> = job.mcp_http.iter().map(|u| redact::url(u)).collect();
        // Compared as recorded: without the credentials of any URL they hold.
        let have_cmd: Vec<String> = job.mcp.iter().map(|c| redact::urls_in(c)).collect();
        let mut missing: Vec<String> = recorded
            .mcp
            .iter()
            .map(|c| redact::urls_in(c))
            .filter(|c| !have_cmd.contains(c))
            .map(|c| format!("--mcp {}", shell_words::quote(&c)))
            .collect();
        missing.extend(
            recorded
                .mcp_http
                .iter()
                .map(|u| redact::url(u))
                .filter(|u| !have_http.contains(u))
                .map(|u| format!("--mcp-http {u}")),
        );
        if !missing.is_empty() {
            return Err(CliError::usage(format!(
                "conversation {id} ran with MCP servers that your configuration (profile {}) does not have: {}. \
                 llmchain starts only the servers you configure; pass them again on the command line to use them, \
                 or name the servers to use with --mcp/--mcp-http",
                job.profile,
                crate::shown::inline(&missing.join(", "), 2000)
            )));
        }
    }
    // Where this user's configuration sends requests: the profile's or the flag's base
    // URL, else the provider's environment variable.
    let env_vars = parse_provider(&job.provider).map_or(&[][..], |s| s.base_url_env());
    let configured = job.base_url.clone().or_else(|| {
        env_vars
            .iter()
            .find_map(|v| std::env::var(v).ok().filter(|v| !v.is_empty()))
    });
    if args.base_url.is_none()
        && recorded.provider == job.provider
        && let Some(url) = recorded.base_url.as_deref().map(redact::url)
        && configured.as_deref().map(redact::url).as_deref() != Some(url.as_str())
    {
        return Err(CliError::usage(format!(
            "conversation {id} ran against {}, but your configuration (profile {}) sends {} requests to {}. \
             llmchain sends your key only where you configure; pass --base-url to choose the server",
            crate::shown::inline(&url, 500),
            job.profile,
            job.provider,
            configured
                .as_deref()
                .map(redact::url)
                .unwrap_or_else(|| format!(
                    "the provider's own address{}",
                    env_vars
                        .first()
                        .map(|v| format!(" (or ${v})"))
                        .unwrap_or_default()
                ))
        )));
    }
    Ok(())
}

/// What a conversation's most recent run says of how it ran: the job an interactive
/// run recorded, or the profile and options of a queued one. Data, never authority.
pub(crate) async fn recorded_job(store: &AnyStore, id: &str) -> Result<Option<JobSpec>, CliError> {
    let runs = store.list_runs(id).await.map_err(CliError::store)?;
    for r in runs.iter().rev() {
        if let Some(job) = JobSpec::from_extra(&r.state.extra) {
            return job.map(Some);
        }
        if let Some(profile) = &r.profile {
            let options = QueuedOptions::from_extra(&r.state.extra).unwrap_or_default();
            return Ok(Some(JobSpec {
                profile: profile.clone(),
                model: options.model.unwrap_or_default(),
                tool_choice: options.tool_choice,
                max_tokens: options.max_tokens,
                temperature: options.temperature,
                options: options.options,
                no_stream: options.no_stream,
                ..JobSpec::default()
            }));
        }
    }
    Ok(None)
}

/// The job a run over stored conversation `id` runs under, chosen as `run --conversation`
/// chooses it (the profile, the flags over it, the recorded provider and model): also
/// `conversations resume`'s, so both build the same tools and review.
pub(crate) async fn job_for(
    args: &RunArgs,
    store: &AnyStore,
    id: &str,
) -> Result<JobSpec, CliError> {
    let config = crate::config::load()?;
    let recorded = recorded_job(store, id).await?;
    let job = job_of(args, recorded.as_ref(), &config, Some(id))?;
    job.policy()?;
    Ok(job)
}

/// Answer text on stdout. To a terminal, escape sequences from the model are shown, not
/// run (and Markdown is drawn when it is on); a pipe or a file gets the text as it came.
/// Secrets are masked either way. `mid_line`: whether the text ended inside a line.
fn print_answer(
    text: &str,
    markdown: &Mutex<Option<crate::markdown::Markdown>>,
    terminal: bool,
    mid_line: &AtomicBool,
) {
    if terminal {
        let safe = crate::shown::block(text);
        match markdown.lock().unwrap_or_else(|p| p.into_inner()).as_mut() {
            Some(md) => out!("{}", md.push(&safe)),
            None => out!("{safe}"),
        }
    } else {
        out!("{}", llmchain::secrets::mask(text));
    }
    mid_line.store(!text.ends_with('\n'), Ordering::Relaxed);
}

/// `e`, for a question the store did not take, with how to send it again (`chat` puts
/// it back at its prompt instead).
fn unsaved(
    e: CliError,
    args: &RunArgs,
    conversation: Option<&str>,
    prompt: Option<&str>,
) -> CliError {
    match prompt {
        Some(q) if !args.in_chat => e.noting(&format!(
            "Your question was not saved; send it again with `llmchain run{}{} {}`",
            args.db
                .as_deref()
                .map(|db| format!(" --db {}", shell_words::quote(&llmchain::redact::url(db))))
                .unwrap_or_default(),
            conversation
                .map(|c| format!(" --conversation {}", shell_words::quote(c)))
                .unwrap_or_default(),
            shell_words::quote(&crate::shown::inline(q, 2000))
        )),
        _ => e,
    }
}

/// Runs `llmchain run`.
pub(crate) fn run(args: RunArgs) -> CliResult {
    let continuing = args.continue_latest || args.conversation.is_some();
    let prompt = prompt(args.prompt.as_deref(), continuing)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::io("cannot start the async runtime", e))?;
    let cwd = std::env::current_dir()
        .map_err(|e| CliError::io("cannot read the current directory", e))?;
    let result = rt.block_on(async {
        let config = crate::config::load()?;
        if args.enqueue {
            let prompt = prompt.ok_or_else(|| CliError::usage("give a prompt"))?;
            return enqueue(args, prompt, &config).await;
        }
        let (store, location) = open_store(args.db.clone())
            .await
            .map_err(|e| unsaved(e, &args, args.conversation.as_deref(), prompt.as_deref()))?;
        let continued = match (&args.conversation, args.continue_latest) {
            (Some(id), _) => Some(resolve_id(&store, id).await?),
            (None, true) => Some(resolve_id(&store, "").await?),
            (None, false) => None,
        };
        let recorded = match &continued {
            Some(id) => recorded_job(&store, id).await?,
            None => None,
        };
        let job = job_of(&args, recorded.as_ref(), &config, continued.as_deref())?;
        job.policy()?;
        agent(job, args, prompt, cwd, store, location, continued).await
    });
    // Do not wait for a review question still blocked on the terminal.
    rt.shutdown_background();
    result
}

/// `run --enqueue`: the conversation and a pending run naming its profile.
async fn enqueue(args: RunArgs, prompt: String, config: &Config) -> CliResult {
    let authority: Vec<&str> = [
        (args.provider.is_some(), "--provider"),
        (args.base_url.is_some(), "--base-url"),
        (!args.servers.mcp.is_empty(), "--mcp"),
        (!args.servers.mcp_http.is_empty(), "--mcp-http"),
        (!args.servers.trust.is_empty(), "--trust"),
        (args.servers.start_timeout.is_some(), "--mcp-start-timeout"),
        (args.servers.call_timeout.is_some(), "--mcp-timeout"),
        (args.servers.prefix, "--mcp-prefix"),
        (!args.tools.is_empty(), "--tools"),
        (args.no_builtin_tools, "--no-builtin-tools"),
        (args.root.is_some(), "--root"),
    ]
    .into_iter()
    .filter_map(|(given, flag)| given.then_some(flag))
    .collect();
    if !authority.is_empty() {
        return Err(CliError::usage(format!(
            "{} cannot be given with --enqueue: a queued run runs under a profile of the worker's \
             configuration, which alone says what it may execute (never the database). Define \
             them in a profile ([profiles.NAME] in {}) and pass --profile NAME",
            authority.join(", "),
            crate::config::path()
                .map(|p| p.display().to_string())
                .unwrap_or_else(|_| "the config file".into())
        )));
    }
    if let Some(choice) = &args.approve {
        crate::job::parse_policy(&policy_name(*choice))?;
    }
    let profile = args
        .profile
        .clone()
        .unwrap_or_else(|| DEFAULT_PROFILE.to_owned());
    let (store, location) = open_store(args.db.clone()).await?;
    let mut conversation = llmchain::conversation::Conversation::new();
    conversation.system = args.system.clone();
    let mut message = Message::user(prompt.clone());
    // The worker's provider places them (what it does not take, it names in the text).
    message.content.extend(crate::attach::parts_unchecked(
        &args.attachments,
        &std::env::current_dir()
            .map_err(|e| CliError::io("cannot read the current directory", e))?,
    )?);
    conversation.messages.push(message);
    let id = store
        .create_conversation(NewConversation::from_conversation(conversation).titled_by(&prompt))
        .await
        .map_err(CliError::store)?;
    let options = QueuedOptions {
        model: args.model.clone(),
        max_tokens: args.max_tokens,
        temperature: args.temperature,
        tool_choice: args.tool_choice.clone(),
        approve: args.approve.map(policy_name),
        options: parse_options(&args.options)?,
        no_stream: args.no_stream,
    };
    let mut state = RunState {
        mode: Mode::while_needs_response().name().to_owned(),
        ..Default::default()
    };
    state.extra.insert(
        OPTIONS_KEY.into(),
        serde_json::to_value(&options).unwrap_or_default(),
    );
    // The run keeps the trace it is queued in (this command's span, under the caller's
    // TRACEPARENT when there is one): the worker that runs it, and any that resumes it
    // after a review or a crash, continue that trace.
    let span = tracing::info_span!(
        "llmchain.enqueue",
        "otel.name" = "llmchain enqueue",
        "otel.kind" = "producer",
        "gen_ai.conversation.id" = %id,
    );
    let caller = std::env::var("TRACEPARENT").ok();
    if let Some(parent) = &caller {
        llmchain_store::trace_context::set_parent(&span, parent);
    }
    let traceparent = span
        .in_scope(llmchain_store::trace_context::current)
        .or(caller);
    if let Some(tp) = traceparent {
        llmchain_store::trace_context::keep(&mut state, &tp);
    }
    let run = store
        .enqueue_run(
            &id,
            &state,
            &RunOptions {
                profile: Some(profile.clone()),
                max_attempts: args.max_attempts.max(1),
                priority: args.priority,
                run_at: None,
            },
        )
        .await
        .map_err(CliError::store)?;
    outln!("{}", run.id);
    let db_flag = match &args.db {
        Some(_) => format!(" --db {location}"),
        None => String::new(),
    };
    let here = if config.profiles.contains_key(&profile) {
        String::new()
    } else {
        " (this machine's configuration does not define it)".to_owned()
    };
    eprintln!(
        "queued run {} of conversation {id} under profile {profile}{here}; a worker with that profile runs it \
         (`llmchain worker{db_flag}`); follow it with `llmchain runs{db_flag} show {}`",
        run.id, run.id
    );
    Ok(())
}
/// Runs the job here, holding the conversation's run lease: a new conversation, or
/// `continued` with the prompt as its next user message (without one, a continued
/// conversation that waits for the model gets its answer: an interrupted run finishes).
///
/// The model and the tools are set up before any run is held, so a failed start (no
/// key, an MCP server that does not start) leaves nothing behind; once the run is held,
/// every way out records how it ended (`done`, `failed` with its error, `paused`,
/// `cancelled`).
async fn agent(
    job: JobSpec,
    args: RunArgs,
    prompt: Option<String>,
    cwd: std::path::PathBuf,
    store: AnyStore,
    location: String,
    continued: Option<String>,
) -> CliResult {
    let attached = {
        let spec = parse_provider(&job.provider)?;
        crate::attach::parts(&args.attachments, &cwd, spec.codec(), spec.name())?
    };
    if !attached.is_empty() && prompt.is_none() {
        return Err(CliError::usage("-a attaches to a prompt: give one"));
    }
    let extract = match &job.schema {
        Some(path) => Some(crate::job::extract_from_file(std::path::Path::new(path))?),
        None => None,
    };
    let parts = job.connect(cwd).await?;
    let spec = parts.spec();
    let store = Arc::new(store);
    // A question the store could not take is never lost: the error says how to send it
    // again (in `chat`, it goes back to the prompt instead).
    let unsaved = |e: CliError, conversation: Option<&str>| {
        unsaved(e, &args, conversation, prompt.as_deref())
    };
    let conversation_id = match continued {
        Some(id) => id,
        None => {
            let mut conversation = llmchain::conversation::Conversation::new();
            conversation.system = args.system.clone();
            store
                .create_conversation(
                    NewConversation::from_conversation(conversation)
                        .titled_by(prompt.as_deref().unwrap_or_default()),
                )
                .await
                .map_err(|e| unsaved(CliError::store(e), None))?
        }
    };
    // This process holds the run: no other process can run the conversation meanwhile.
    // The job is recorded with it (without credentials), for `--continue` to compare.
    let mut extra = serde_json::Map::new();
    extra.insert(JOB_KEY.into(), job.record());
    let mode = match &extract {
        Some(extract) => Mode::custom(extract.clone()),
        None => Mode::while_needs_response(),
    };
    let held = crate::interactive_run::claim(store.clone(), &conversation_id, mode.name(), extra)
        .await
        .map_err(|e| unsaved(e, Some(&conversation_id)))?;
    let run_id = held.run().id.clone();
    let crate::interactive_run::Started {
        held,
        built:
            Built {
                chain,
                mcp_tools: _mcp_tools,
                ..
            },
        before,
        asking,
    } = crate::interactive_run::start(held, parts, &conversation_id)
        .await
        .map_err(|e| unsaved(e, Some(&conversation_id)))?;
    let progress = Progress::for_stderr();
    // Text printed since the last line break on stdout.
    let mid_line = Arc::new(AtomicBool::new(false));
    let callbacks = callbacks(&progress, &mid_line, !args.json && extract.is_none());
    let mut chain = chain.with_callbacks(callbacks);
    if let Some(s) = args.system.clone() {
        chain = chain.with_system(s);
    }
    let waits_for_model = chain.needs_response() || chain.has_unanswered_calls();

    // Ctrl-C cancels the run; a second one stops at once.
    let cancel = llmchain::tool::CancellationToken::new();
    let on_signal = cancel.clone();
    let signals = tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            on_signal.cancel();
            if tokio::signal::ctrl_c().await.is_ok() {
                std::process::exit(130);
            }
        }
    });
    let sink_progress = progress.clone();
    let mut drive = Drive::new()
        .undecided(AskAtTerminal {
            review: asking,
            store: store.clone(),
        })
        .cancel_on(cancel)
        .wrap_sink(move |inner| Arc::new(ProgressSink::new(inner, sink_progress)))
        .explain(move |e| explain(e, spec));
    // Under the caller's trace, when it names one.
    if let Ok(parent) = std::env::var("TRACEPARENT") {
        drive = drive.trace_parent(parent);
    }
    if let Some(prompt) = prompt.clone() {
        let mut message = Message::user(prompt);
        message.content.extend(attached);
        drive = drive.message(message);
    }
    progress.waiting("waiting for the model…");
    // Runs until done, or until calls wait for a person with no decision stored for
    // them yet (one may be: made while an earlier process held the conversation).
    let ended = held.drive(chain, mode, drive).await;
    signals.abort();
    progress.clear();
    if mid_line.swap(false, Ordering::Relaxed) {
        outln!();
    }
    let db_flag = match &args.db {
        Some(_) => format!(" --db {location}"),
        None => String::new(),
    };
    if let Some(e) = crate::interactive_run::ended_error(&ended, &conversation_id, None) {
        return Err(e);
    }
    let Some(chain) = ended.chain else {
        return Err(CliError::runtime(format!(
            "run {run_id} ended before it started"
        )));
    };
    match ended.end {
        RunEnd::Done if prompt.is_none() && !waits_for_model => {
            let cut = chain
                .last_message()
                .is_some_and(|m| m.status != llmchain::message::MessageStatus::Complete);
            return Err(CliError::usage(if cut {
                format!(
                    "conversation {conversation_id} ends with a cut-off answer; give a prompt to go on (e.g. \"continue\")"
                )
            } else {
                format!(
                    "conversation {conversation_id} is not waiting for the model; give a prompt to go on"
                )
            }));
        }
        RunEnd::Done if chain.stopped().is_some() => {
            let stop = chain.stopped().cloned();
            return Err(CliError::runtime(format!(
                "run {run_id} stopped: {}; every open call was answered \"not run\" (`llmchain runs{db_flag} show {run_id}` lists its decisions)",
                stop.map(|s| s.to_string()).unwrap_or_default()
            ))
            .typed("budget_exhausted"));
        }
        RunEnd::Done => {}
        RunEnd::Cancelled => {
            return Err(CliError::interrupted(format!(
                "interrupted; conversation {conversation_id} is saved: resume it with `{}`",
                resume_command(&db_flag, &conversation_id, &job.servers(), job.policy()?)
                    + &job
                        .base_url
                        .as_deref()
                        .map(|u| format!(
                            " --base-url {}",
                            shell_words::quote(&llmchain::redact::url(u))
                        ))
                        .unwrap_or_default()
            )));
        }
        RunEnd::Paused { reviews, .. } => {
            let ids: Vec<&str> = reviews.iter().map(|r| r.id.as_str()).collect();
            let not_sent = if ended.left_out.is_some() {
                " Your prompt was not sent: it goes after their results."
            } else {
                ""
            };
            return Err(CliError::runtime(format!(
                "run {run_id} is paused: {} call(s) wait for review ({}). Decide with \
                 `llmchain reviews{db_flag} approve|deny|edit ID`, then go on with \
                 `llmchain conversations{db_flag} resume {conversation_id}`.{not_sent}",
                ids.len(),
                ids.join(", ")
            ))
            .typed("paused"));
        }
        RunEnd::Yielded => {
            return Err(CliError::runtime(format!(
                "the run stopped before its end; go on with `llmchain run{db_flag} --conversation {conversation_id}`"
            ))
            .typed("yielded"));
        }
        other => return Err(CliError::runtime(format!("the run ended as {other:?}"))),
    }
    // This invocation's model calls and usage, not the whole conversation's.
    let new = &chain.messages()[before.min(chain.messages().len())..];
    let calls = new.iter().filter(|m| m.role == Role::Assistant).count();
    let usage = crate::usage::total(new);
    if let Some(extract) = &extract {
        let object = extract
            .answer(chain.conversation())
            .map_err(CliError::chain)?;
        if args.json {
            outln!(
                "{}",
                crate::shown::json(
                    &serde_json::json!({
                        "conversation": conversation_id,
                        "run": run_id,
                        "object": object,
                        "usage": usage_json(&usage, calls),
                    }),
                    false
                )
            );
        } else {
            outln!("{}", crate::shown::json(&object, true));
        }
    } else if args.json {
        let last = chain.last_message();
        outln!(
            "{}",
            crate::shown::json(
                &serde_json::json!({
                    "conversation": conversation_id,
                    "run": run_id,
                    "text": last.and_then(Message::text).unwrap_or_default(),
                    "message": last,
                    "usage": usage_json(&usage, calls),
                }),
                false
            )
        );
    }
    eprintln!(
        "usage: {} in {calls} model call(s)",
        crate::usage::summary(&usage)
    );
    // An answer the token limit cut short says so, with what to do.
    if new
        .iter()
        .any(|m| m.role == Role::Assistant && m.status == llmchain::message::MessageStatus::Length)
    {
        eprintln!(
            "note: the answer was cut short by the token limit{}: go on with `llmchain run{db_flag} \
             --conversation {conversation_id} continue`, or ask again with a higher --max-tokens",
            job.max_tokens
                .map(|n| format!(" (--max-tokens {n})"))
                .unwrap_or_default()
        );
    }
    if !args.in_chat {
        eprintln!(
            "conversation {conversation_id} saved (llmchain conversations{db_flag} show {conversation_id})"
        );
    }
    Ok(())
}

/// The usage as `run --json` prints it: the token figures, and `model_calls`.
fn usage_json(usage: &TokenUsage, calls: usize) -> serde_json::Value {
    let mut v = serde_json::to_value(usage).unwrap_or_default();
    if let Some(o) = v.as_object_mut() {
        o.insert("model_calls".into(), calls.into());
    }
    v
}

/// What the run shows as it goes: text on stdout, the rest on stderr via `progress`.
fn callbacks(progress: &Progress, mid_line: &Arc<AtomicBool>, stream_text: bool) -> Callbacks {
    let (p1, p2, p3, p4, p5, p6, p7) = (
        progress.clone(),
        progress.clone(),
        progress.clone(),
        progress.clone(),
        progress.clone(),
        progress.clone(),
        progress.clone(),
    );
    let (m1, m2) = (mid_line.clone(), mid_line.clone());
    // Whether the answer's text came as deltas (an unstreamed answer, `--no-stream`,
    // comes whole with its message).
    let streamed = Arc::new(AtomicBool::new(false));
    let (s1, s2) = (streamed.clone(), streamed);
    let stdout_is_terminal = std::io::IsTerminal::is_terminal(&std::io::stdout());
    // Markdown drawn styled in a terminal (not with --json, not into a pipe).
    let markdown = Arc::new(Mutex::new(if stream_text {
        crate::markdown::Markdown::for_stdout()
    } else {
        None
    }));
    let (md1, md2) = (markdown.clone(), markdown);
    // Calls answered by the review without running (their result is the reason).
    let unrun: Arc<Mutex<HashSet<String>>> = Arc::default();
    let (u1, u2, u3) = (unrun.clone(), unrun.clone(), unrun);
    let ran = move |set: &Mutex<HashSet<String>>, call: &ToolCall| {
        let id = call.call_id.as_deref().unwrap_or_default();
        !set.lock().unwrap_or_else(|p| p.into_inner()).remove(id)
    };
    // The arguments of the calls being written, read as they stream (their preview).
    let previews: Arc<Mutex<crate::args_preview::Previews>> = Arc::default();
    // A secret the model echoes is masked even when it arrives split across pieces.
    let masking: Arc<Mutex<llmchain::secrets::StreamMask>> = Arc::default();
    let (k1, k2) = (masking.clone(), masking);
    Callbacks::new()
        .on_llm_new_delta(move |ev| {
            if matches!(
                ev,
                StreamEvent::ToolCallStarted { .. }
                    | StreamEvent::ToolCallArguments { .. }
                    | StreamEvent::ToolCallFinished { .. }
            ) {
                let mut previews = previews.lock().unwrap_or_else(|p| p.into_inner());
                if let Some(line) = previews.on_event(ev) {
                    p1.preview(&line);
                }
                return;
            }
            p1.done_waiting();
            match ev {
                StreamEvent::TextDelta { text, .. } if stream_text => {
                    let text = k1.lock().unwrap_or_else(|p| p.into_inner()).push(text);
                    print_answer(&text, &md1, stdout_is_terminal, &m1);
                    s1.store(true, Ordering::Relaxed);
                }
                StreamEvent::ReasoningDelta { text, .. } => {
                    eprint!("{}", crate::shown::block(text));
                }
                _ => {}
            }
        })
        .on_llm_new_message(move |m| {
            // What the mask held back of the streamed text, now that it has ended.
            let rest = k2.lock().unwrap_or_else(|p| p.into_inner()).finish();
            if !rest.is_empty() {
                print_answer(&rest, &md2, stdout_is_terminal, &m2);
            }
            if !s2.swap(false, Ordering::Relaxed)
                && stream_text
                && m.role == Role::Assistant
                && let Some(text) = m.text().filter(|t| !t.is_empty())
            {
                print_answer(&text, &md2, stdout_is_terminal, &m2);
            }
            if let Some(md) = md2.lock().unwrap_or_else(|p| p.into_inner()).as_mut() {
                md.finish();
            }
            if m2.swap(false, Ordering::Relaxed) {
                outln!();
            }
        })
        .on_tool_call_review(move |call, decision| match decision {
            ReviewDecision::Deny { reason } | ReviewDecision::Reject { reason } => {
                u1.lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(call.call_id.clone().unwrap_or_default());
                let tool = name(call);
                // The reason is written for the model and may start by saying the same.
                let why = first_line(reason);
                let why = why
                    .strip_prefix(&format!("{tool} was not run: "))
                    .unwrap_or(&why);
                p2.line(&format!("  ✗ {tool} not run: {why}"))
            }
            ReviewDecision::Edit { .. } => {
                p2.line(&format!("  ✎ {}: arguments edited", name(call)))
            }
            _ => {}
        })
        .on_tool_execution_started(move |call| p3.line(&format!("  → {}", describe(call))))
        .on_tool_pre_execution(move |call| {
            p4.tool_started(call.call_id.as_deref().unwrap_or_default(), name(call))
        })
        .on_tool_execution_completed(move |call, r| {
            if ran(&u2, call) {
                p5.line(&format!(
                    "  ✓ {}: {}",
                    name(call),
                    first_line(&r.content_text())
                ))
            }
        })
        .on_tool_execution_failed(move |call, r| {
            if ran(&u3, call) {
                p6.line(&format!(
                    "  ✗ {}: {}",
                    name(call),
                    first_line(&r.content_text())
                ))
            }
        })
        .on_tool_response_created(move |_| p7.waiting("waiting for the model…"))
        .on_llm_error({
            let p = progress.clone();
            move |_| p.done_waiting()
        })
        .on_llm_retry({
            let p = progress.clone();
            move |r| p.retrying(r)
        })
}

/// A one-line error that says what to set (the provider's own variables).
fn explain(e: &ChainError, spec: &dyn Provider) -> String {
    let model_error = match e {
        ChainError::Model(m) | ChainError::AllFallbacksFailed(m) => Some(m),
        _ => None,
    };
    let base = match spec.base_url_env().first() {
        Some(v) => format!("--base-url or {v}"),
        None => "--base-url".to_owned(),
    };
    let hint = match model_error {
        Some(ModelError::Connect { .. }) | Some(ModelError::Timeout { .. }) => {
            format!(" (is the server running? set {base})")
        }
        Some(ModelError::Http {
            status: 401 | 403, ..
        }) => {
            if spec.key_env().is_empty() {
                String::new()
            } else {
                format!(" (check {})", spec.key_env().join(" or "))
            }
        }
        Some(ModelError::Http { status: 404, .. }) => {
            format!(" (check --model, and the address: {base})")
        }
        _ => String::new(),
    };
    one_line(&format!("{e}{hint}"))
}

fn name(call: &ToolCall) -> &str {
    call.name.as_deref().unwrap_or("?")
}

fn describe(call: &ToolCall) -> String {
    format!(
        "{}({})",
        name(call),
        serde_json::Value::Object(call.arguments_as_map())
    )
}

fn first_line(s: &str) -> String {
    let line = s.lines().next().unwrap_or("");
    if line.chars().count() > 120 {
        line.chars().take(117).collect::<String>() + "..."
    } else {
        line.to_owned()
    }
}

/// The command that resumes an interrupted run: the same database, MCP servers and
/// review policy, so that the unfinished calls find their tools.
fn resume_command(
    db_flag: &str,
    id: &str,
    servers: &ServerArgs,
    approve: ApprovalPolicy,
) -> String {
    let mut cmd = format!("llmchain conversations{db_flag} resume {id}");
    // Printed on a terminal: no credentials (the user adds their own back).
    for s in &servers.mcp {
        cmd.push_str(&format!(
            " --mcp {}",
            shell_words::quote(&llmchain::redact::urls_in(s))
        ));
    }
    for u in &servers.mcp_http {
        cmd.push_str(&format!(
            " --mcp-http {}",
            shell_words::quote(&llmchain::redact::url(u))
        ));
    }
    for t in &servers.trust {
        cmd.push_str(&format!(" --trust {}", shell_words::quote(t)));
    }
    if let Some(secs) = servers.start_timeout {
        cmd.push_str(&format!(" --mcp-start-timeout {secs}"));
    }
    if let Some(secs) = servers.call_timeout {
        cmd.push_str(&format!(" --mcp-timeout {secs}"));
    }
    if approve != ApprovalPolicy::default()
        && let Some(v) = clap::ValueEnum::to_possible_value(&approve)
    {
        cmd.push_str(&format!(" --approve {}", v.get_name()));
    }
    cmd
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_resume_hint_carries_the_servers_and_the_policy() {
        let none = ServerArgs::default();
        assert_eq!(
            resume_command("", "c1", &none, ApprovalPolicy::Auto),
            "llmchain conversations resume c1"
        );
        let servers = ServerArgs {
            mcp: vec!["python3 server.py --root 'my dir'".into()],
            mcp_http: vec!["http://127.0.0.1:9/mcp".into()],
            call_timeout: Some(300),
            ..ServerArgs::default()
        };
        let cmd = resume_command(
            " --db sqlite://x.db",
            "c1",
            &servers,
            ApprovalPolicy::Always,
        );
        assert_eq!(
            cmd,
            "llmchain conversations --db sqlite://x.db resume c1 \
             --mcp 'python3 server.py --root '\\''my dir'\\''' \
             --mcp-http http://127.0.0.1:9/mcp --mcp-timeout 300 --approve always"
        );
        // The quoted server command splits back into the words it was given as.
        let words = shell_words::split(&cmd).unwrap();
        assert_eq!(words[6], "--mcp");
        assert_eq!(words[7], "python3 server.py --root 'my dir'");
    }
}
