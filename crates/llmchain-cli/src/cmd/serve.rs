//! `llmchain serve`: the back end of AI SDK front ends (`useChat`), with a chat page of
//! its own at `/` ([`llmchain_web`]).
//!
//! The chains run under one profile of the operator's configuration (`--profile`): its
//! provider, model, MCP servers (started once, shared by every chat), trust and review
//! policy; a request never names any of them. A call the policy asks about waits in the
//! review inbox: the page and `useChat` answer it (`addToolApprovalResponse`), and so
//! does `llmchain reviews` from anywhere. A bearer token is required unless the server
//! listens on loopback: `$LLMCHAIN_SERVE_TOKEN` or `--token-file`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use llmchain::chain::ChainState;
use llmchain_store::Run;
use llmchain_store::worker::BoxError;
use llmchain_web::{ChatServer, ServeConfig};

use crate::config::DEFAULT_PROFILE;
use crate::error::{CliError, CliResult};
use crate::job::{JobSpec, Reviewer};
use crate::store_access::open_store;

/// The environment variable holding the bearer token.
const TOKEN_ENV: &str = "LLMCHAIN_SERVE_TOKEN";

/// Arguments of `llmchain serve`.
#[derive(Debug, clap::Args)]
pub(crate) struct ServeArgs {
    /// A limit on what each run may spend, over every profile's `[budget]` (the
    /// stricter wins): tokens=N, cost_usd=D, model_calls=N, tool_calls=N, tool_calls.TOOL=N,
    /// wall_seconds=S, step_seconds=S, first_chunk_seconds=S, idle_seconds=S,
    /// tool_seconds=S, on_exhausted=stop|final_answer|error. Repeatable.
    #[arg(long, value_name = "KEY=VALUE")]
    pub budget: Vec<String>,
    /// The address to listen on. Anything but loopback needs a token.
    #[arg(long, default_value = "127.0.0.1:3000", value_name = "ADDR")]
    pub listen: SocketAddr,
    /// Database URL (default: $LLMCHAIN_DATABASE_URL, else the SQLite file in the user's
    /// data directory).
    #[arg(long, value_name = "URL")]
    pub db: Option<String>,
    /// The config file whose profile the chains run under [default: $LLMCHAIN_CONFIG,
    /// else the standard one].
    #[arg(long, value_name = "FILE")]
    pub config: Option<std::path::PathBuf>,
    /// The profile the chains run under [default: "default"].
    #[arg(long, value_name = "NAME")]
    pub profile: Option<String>,
    /// A file holding the bearer token clients must send [default: $LLMCHAIN_SERVE_TOKEN].
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<std::path::PathBuf>,
    /// An origin allowed to call the API from a browser page elsewhere (CORS);
    /// repeatable. Off unless given.
    #[arg(long = "cors", value_name = "ORIGIN")]
    pub cors: Vec<String>,
    /// A host name requests may name besides the loopback ones (localhost, 127.0.0.1,
    /// [::1]); repeatable; `*` for any. Requests for another host are refused (a page of
    /// a name resolved to this machine cannot use the server).
    #[arg(long = "allow-host", value_name = "NAME")]
    pub allow_host: Vec<String>,
    /// Connections served at once [default: 4096, or fewer to fit the open-file limit].
    #[arg(long, value_name = "N")]
    pub max_connections: Option<usize>,
    /// Answers generated at once.
    #[arg(long, default_value_t = 1024, value_name = "N")]
    pub max_answers: usize,
    /// The profile "default", from flags: they override the config file's top-level
    /// keys, as the worker's do.
    #[command(flatten)]
    pub default_profile: crate::profile_flags::ProfileFlags,
}

/// Runs `llmchain serve`.
pub(crate) fn run(args: ServeArgs) -> CliResult {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| CliError::io("cannot start the async runtime", e))?;
    rt.block_on(serve(args))
}

/// The token: the file's first line, else the environment's.
fn token(args: &ServeArgs) -> Result<Option<String>, CliError> {
    let token = match &args.token_file {
        Some(path) => Some(
            std::fs::read_to_string(path)
                .map_err(|e| CliError::usage(format!("--token-file {}: {e}", path.display())))?
                .lines()
                .next()
                .unwrap_or_default()
                .trim()
                .to_owned(),
        ),
        None => std::env::var(TOKEN_ENV).ok(),
    }
    .filter(|t| !t.is_empty());
    if let Some(t) = &token
        && t.len() < 16
    {
        return Err(CliError::usage(
            "the token is shorter than 16 characters; use a long random one (e.g. `openssl rand -hex 24`)",
        ));
    }
    Ok(token)
}

/// `*` where it cannot be honoured, refused with what to use instead: `--cors '*'` (any
/// site's page could drive the server) and `--allow-host '*'` without a token (any name
/// that resolves here, DNS rebinding included, could read and run its chats). Whether
/// `--allow-host '*'` was given (and so a warning is due).
fn wildcards(args: &ServeArgs, has_token: bool) -> Result<bool, CliError> {
    for o in &args.cors {
        if o.contains('*') {
            return Err(CliError::usage(format!(
                "--cors {}: a wildcard cannot be honoured (a page of any site could use this \
                 server); name each origin instead, e.g. --cors https://app.example.com \
                 (repeatable)",
                crate::shown::inline(o, 100)
            )));
        }
    }
    if let Some(h) = args
        .allow_host
        .iter()
        .find(|h| h.contains('*') && h.trim() != "*")
    {
        return Err(CliError::usage(format!(
            "--allow-host {}: partial wildcards are not supported; name each host \
             (--allow-host chat.example.com, repeatable)",
            crate::shown::inline(h, 100)
        )));
    }
    let any_host = args.allow_host.iter().any(|h| h.trim() == "*");
    if any_host && !has_token {
        return Err(CliError::usage(format!(
            "--allow-host '*' answers any host name, so a page of any site whose name \
             resolves to this machine could read and run its chats; set a bearer token with \
             it ({TOKEN_ENV} or --token-file), or name the hosts instead (--allow-host \
             chat.example.com)"
        )));
    }
    Ok(any_host)
}

async fn serve(args: ServeArgs) -> CliResult {
    let token = token(&args)?;
    if token.is_none() && !llmchain_web::is_loopback(&args.listen) {
        return Err(CliError::usage(format!(
            "listening on {} (not loopback) needs a bearer token: set {TOKEN_ENV} or pass --token-file",
            args.listen
        )));
    }
    let any_host = wildcards(&args, token.is_some())?;
    let mut config = crate::config::load_from(args.config.as_deref())?;
    config.tighten_budgets(&args.budget)?;
    let profile = args
        .profile
        .clone()
        .unwrap_or_else(|| DEFAULT_PROFILE.to_owned());
    if args.default_profile.any() {
        if profile != DEFAULT_PROFILE {
            return Err(CliError::usage(format!(
                "the profile flags (--provider, --model, --approve…) define the profile \
                 \"{DEFAULT_PROFILE}\"; serve it (drop --profile {profile}) or put them in \
                 the profile {profile} of the config file"
            )));
        }
        if let Some(default) = config.profiles.get_mut(DEFAULT_PROFILE) {
            args.default_profile.apply(default)?;
        }
    }
    let job = JobSpec::from_profile(&profile, config.profile(&profile)?)?;
    let cwd = std::env::current_dir()
        .map_err(|e| CliError::io("cannot read the current directory", e))?;
    // The model and the MCP servers, once for every chat.
    let parts = job.connect(cwd).await?;
    let mode = job.mode()?;
    let (store, location) = open_store(args.db.clone()).await?;
    let factory = move |_run: Run, state: ChainState| {
        let parts = parts.clone();
        let mode = mode.clone();
        async move {
            let built = parts.chain(Some(state), Reviewer::Inbox);
            Ok::<_, BoxError>((built.chain, mode))
        }
    };
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .map_err(|e| CliError::io(format!("cannot listen on {}", args.listen), e))?;
    let local = listener
        .local_addr()
        .map_err(|e| CliError::runtime(e.to_string()))?;
    let mut allowed_hosts = args.allow_host.clone();
    // The address it listens on, when it is one, is its own name too.
    if !local.ip().is_unspecified() {
        allowed_hosts.push(match local.ip() {
            std::net::IpAddr::V6(ip) => format!("[{ip}]"),
            ip => ip.to_string(),
        });
    }
    let server = ChatServer::new(Arc::new(store), factory).config(ServeConfig {
        token,
        cors_origins: args.cors.clone(),
        allowed_hosts,
        profile: Some(profile.clone()),
        model_label: Some(format!("{} · {}", job.provider, job.model)),
        max_answers: args.max_answers,
        max_connections: connection_cap(args.max_connections),
        // Stable across restarts, unique among live processes (one listener per
        // address): a restarted server takes over its own chats at once.
        name: format!(
            "serve@{}:{}",
            crate::cmd::reviews::host_name(),
            local.port()
        ),
        ..ServeConfig::default()
    });
    server.release_own_leases().await.map_err(CliError::store)?;
    let shutdown = server.shutdown_token();
    let _resumer = server.spawn_resumer(Duration::from_secs(2));
    eprintln!(
        "llmchain serve: http://{local}/ (profile {profile}, {} on {location}); Ctrl-C to stop",
        job.provider
    );
    if any_host {
        eprintln!(
            "llmchain serve: warning: --allow-host '*' answers requests for any host name: \
             only the bearer token keeps pages of other sites out"
        );
    }
    let stop = shutdown.clone();
    let limits = server.limits();
    llmchain_web::serve(listener, server.router(), limits, async move {
        crate::stop::signal().await;
        eprintln!("llmchain serve: stopping; the answers in flight are saved");
        stop.cancel();
    })
    .await
    .map_err(|e| CliError::runtime(format!("the server failed: {e}")))?;
    shutdown.cancel();
    Ok(())
}

/// The connections to serve at once: `asked`, or 4096; either way within the open-file
/// limit (raised to its hard limit first), leaving room for the database, MCP servers
/// and the model's connections.
fn connection_cap(asked: Option<usize>) -> usize {
    let wanted = asked.unwrap_or(4096).max(1);
    #[cfg(unix)]
    {
        use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
        let limit = getrlimit(Resource::Nofile);
        if limit.current < limit.maximum {
            let raised = Rlimit {
                current: limit.maximum,
                maximum: limit.maximum,
            };
            // Not allowed here: the cap fits the limit as it is.
            let _ = setrlimit(Resource::Nofile, raised);
        }
        if let Some(files) = getrlimit(Resource::Nofile).current {
            // What is open already (the database, MCP servers' pipes, the listener) and
            // 128 more for what opens later (a connection to the database, a log, an
            // MCP server restarted) stay out of the connections' share.
            let open = std::fs::read_dir("/proc/self/fd")
                .or_else(|_| std::fs::read_dir("/dev/fd"))
                .map_or(0, |d| d.count());
            let room = usize::try_from(files)
                .unwrap_or(usize::MAX)
                .saturating_sub(open + 128);
            return wanted.min(room.max(16));
        }
    }
    wanted
}
