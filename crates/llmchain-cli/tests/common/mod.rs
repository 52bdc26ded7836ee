//! Shared by the CLI tests: a local model server speaking the real wire format, the
//! test MCP servers, and driving a real terminal with tmux.

#![allow(dead_code)] // each test file uses a part

use std::collections::VecDeque;
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::http::{StatusCode, Uri};
use axum::response::Response;

/// The `llmchain` binary under test.
pub(crate) const BIN: &str = env!("CARGO_BIN_EXE_llmchain");

/// The requests the model server saw: path and JSON body.
pub(crate) type Seen = Arc<Mutex<Vec<(String, serde_json::Value)>>>;

/// One reply of the model server.
pub(crate) enum Reply {
    /// A whole SSE body.
    Body(Vec<u8>),
    /// These bytes, then a stream that never ends (for Ctrl-C mid-stream).
    Stall(Vec<u8>),
    /// HTTP 429 with `retry-after` of this many seconds.
    RateLimited(u32),
    /// A whole SSE body, one event at a time with this pause between events (a slow
    /// model).
    Trickle(Vec<u8>, Duration),
    /// This status with this JSON body (a provider's refusal).
    Status(u16, &'static str),
}

/// Serves the scripted SSE bodies in order on a background thread; returns the base
/// URL (`http://127.0.0.1:PORT/v1`) and what the server saw.
pub(crate) fn serve(bodies: Vec<Vec<u8>>) -> (String, Seen) {
    serve_replies(bodies.into_iter().map(Reply::Body).collect())
}

/// [`serve`] with replies that may stall.
pub(crate) fn serve_replies(replies: Vec<Reply>) -> (String, Seen) {
    let queue = Arc::new(Mutex::new(VecDeque::from(replies)));
    let seen: Seen = Arc::default();
    let (tx, rx) = std::sync::mpsc::channel();
    let s = seen.clone();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let app = Router::new().fallback(move |uri: Uri, body: Bytes| {
                let queue = queue.clone();
                let s = s.clone();
                async move {
                    let request: serde_json::Value =
                        serde_json::from_slice(&body).unwrap_or_default();
                    s.lock().unwrap().push((uri.to_string(), request.clone()));
                    // As OpenAI does: a call without its result is refused.
                    if let Some(why) = unpaired(&request) {
                        return Response::builder()
                            .status(StatusCode::BAD_REQUEST)
                            .header("content-type", "application/json")
                            .body(Body::from(
                                serde_json::json!({"error": {"message": why, "type": "invalid_request_error"}})
                                    .to_string(),
                            ))
                            .unwrap();
                    }
                    let next = queue.lock().unwrap().pop_front();
                    let sse = Response::builder().header("content-type", "text/event-stream");
                    match next {
                        Some(Reply::Body(b)) => sse.body(Body::from(b)).unwrap(),
                        Some(Reply::Stall(first)) => {
                            use futures_util::StreamExt;
                            let chunks = futures_util::stream::iter([Ok::<_, std::io::Error>(
                                Bytes::from(first),
                            )])
                            .chain(futures_util::stream::pending());
                            sse.body(Body::from_stream(chunks)).unwrap()
                        }
                        Some(Reply::RateLimited(secs)) => Response::builder()
                            .status(StatusCode::TOO_MANY_REQUESTS)
                            .header("retry-after", secs.to_string())
                            .body(Body::from(
                                r#"{"error":{"message":"Rate limit reached for requests","type":"requests"}}"#,
                            ))
                            .unwrap(),
                        Some(Reply::Trickle(body, pause)) => {
                            use futures_util::StreamExt;
                            let text = String::from_utf8(body).unwrap();
                            let events: Vec<String> =
                                text.split_inclusive("\n\n").map(str::to_owned).collect();
                            let chunks = futures_util::stream::iter(events).then(move |e| async move {
                                tokio::time::sleep(pause).await;
                                Ok::<_, std::io::Error>(Bytes::from(e))
                            });
                            sse.body(Body::from_stream(chunks)).unwrap()
                        }
                        Some(Reply::Status(code, body)) => Response::builder()
                            .status(code)
                            .header("content-type", "application/json")
                            .body(Body::from(body))
                            .unwrap(),
                        None => Response::builder()
                            .status(StatusCode::INTERNAL_SERVER_ERROR)
                            .body(Body::from(r#"{"error":{"message":"no more replies"}}"#))
                            .unwrap(),
                    }
                }
            });
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(listener.local_addr().unwrap()).unwrap();
            axum::serve(listener, app).await.unwrap();
        });
    });
    let addr = rx.recv().unwrap();
    (format!("http://{addr}/v1"), seen)
}

/// Why a Chat Completions request would be refused for its tool calls and results (as
/// OpenAI refuses it: "An assistant message with 'tool_calls' must be followed by tool
/// messages responding to each 'tool_call_id'"), if it would.
pub(crate) fn unpaired(request: &serde_json::Value) -> Option<String> {
    let messages = request.get("messages")?.as_array()?;
    let mut waiting: Vec<String> = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        let role = m.get("role").and_then(|r| r.as_str()).unwrap_or("");
        if role == "tool" {
            let id = m.get("tool_call_id").and_then(|r| r.as_str()).unwrap_or("");
            match waiting.iter().position(|w| w == id) {
                Some(p) => {
                    waiting.remove(p);
                }
                None => {
                    return Some(format!(
                        "messages[{i}]: a tool message answers {id:?}, which no call before it has"
                    ));
                }
            }
            continue;
        }
        if !waiting.is_empty() {
            return Some(format!(
                "An assistant message with 'tool_calls' must be followed by tool messages \
                 responding to each 'tool_call_id'. The following tool_call_ids did not have \
                 response messages: {}",
                waiting.join(", ")
            ));
        }
        if let Some(calls) = m.get("tool_calls").and_then(|c| c.as_array()) {
            waiting = calls
                .iter()
                .filter_map(|c| c.get("id").and_then(|i| i.as_str()).map(str::to_owned))
                .collect();
        }
    }
    (!waiting.is_empty()).then(|| {
        format!(
            "the last assistant message's tool_call_ids did not have response messages: {}",
            waiting.join(", ")
        )
    })
}

/// `env …` that makes a command in a tmux pane hermetic: the user's config, data,
/// database, editor and provider settings out of reach (the pane inherits the tmux
/// server's environment, which is the user's), `dir` as its config and data home.
pub(crate) fn hermetic(dir: &std::path::Path) -> String {
    let d = dir.display();
    // The pane's environment is the tmux server's: unset what the user's may hold, as
    // `bare_in` does, naming every such variable this process sees and the usual ones.
    let mut unset: Vec<String> = std::env::vars_os()
        .map(|(n, _)| n.to_string_lossy().into_owned())
        .filter(|n| {
            (USER_PREFIXES.iter().any(|p| n.starts_with(p)) && !n.starts_with("LLMCHAIN_TEST_"))
                || USER_VARS.contains(&n.as_str())
        })
        .collect();
    for usual in [
        "EDITOR",
        "VISUAL",
        "NO_COLOR",
        "LLMCHAIN_DATABASE_URL",
        "LLMCHAIN_CONFIG",
        "LLMCHAIN_PROVIDER",
        "LLMCHAIN_MODEL",
        "LLMCHAIN_SERVE_TOKEN",
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_BASE_URL",
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    ] {
        if !unset.iter().any(|u| u == usual) {
            unset.push(usual.to_owned());
        }
    }
    let unset: String = unset
        .iter()
        .filter(|n| n.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'))
        .map(|n| format!("-u {n} "))
        .collect();
    format!("env {unset}HOME={d} USER=tester XDG_DATA_HOME={d} XDG_CONFIG_HOME={d}")
}

/// Runs `llmchain ARGS` in `dir` without a terminal and without provider or database
/// settings from the environment.
pub(crate) fn llmchain(args: &[&str], dir: &std::path::Path) -> Output {
    llmchain_with_env(args, dir, &[])
}

/// [`llmchain`] with `env` set.
pub(crate) fn llmchain_with_env(
    args: &[&str],
    dir: &std::path::Path,
    env: &[(&str, &str)],
) -> Output {
    llmchain_command(args, dir)
        // After the removals: what the test sets wins.
        .envs(env.iter().copied())
        .output()
        .expect("the binary runs")
}

/// Prefixes of the variables a user's shell may hold that change what `llmchain` does:
/// its own settings, the providers' and clouds' keys and endpoints, OpenTelemetry's,
/// the XDG directories. A test's `llmchain` runs with none of them (but the
/// `LLMCHAIN_TEST_*` the suite itself reads).
const USER_PREFIXES: &[&str] = &[
    "LLMCHAIN_",
    "OTEL_",
    "XDG_",
    "OPENAI_",
    "ANTHROPIC_",
    "GEMINI_",
    "GOOGLE_",
    "VERTEX",
    "CLOUDSDK_",
    "AWS_",
    "AZURE_",
    "OLLAMA_",
    "MISTRAL_",
    "DEEPSEEK_",
    "OPENROUTER_",
    "GROQ_",
    "TOGETHER_",
    "XAI_",
    "FIREWORKS_",
];

/// Single variables of the user's that change what `llmchain` does or shows.
const USER_VARS: &[&str] = &[
    "HOME",
    "EDITOR",
    "VISUAL",
    "NO_COLOR",
    "CLICOLOR_FORCE",
    "TRACEPARENT",
    "USER",
];

/// `llmchain` with none of the user's environment that could change it (their config,
/// data, database, keys, collector, editor, colours: [`USER_PREFIXES`], [`USER_VARS`])
/// and `home` as its home, config and data directory. Every test that starts the
/// binary starts it from here (`tests/hermetic_guard.rs` keeps it so).
pub(crate) fn bare_in(home: &std::path::Path) -> Command {
    let mut command = Command::new(BIN);
    command.current_dir(home);
    for (name, _) in std::env::vars_os() {
        let n = name.to_string_lossy();
        let users =
            USER_PREFIXES.iter().any(|p| n.starts_with(p)) && !n.starts_with("LLMCHAIN_TEST_");
        if users || USER_VARS.contains(&n.as_ref()) {
            command.env_remove(&name);
        }
    }
    command
        .env("HOME", home)
        .env("XDG_DATA_HOME", home)
        .env("XDG_CONFIG_HOME", home)
        .env("USER", "tester");
    command
}

/// [`bare_in`] a home of its own (a new temporary directory, kept).
pub(crate) fn bare() -> Command {
    let home = tempfile::tempdir().expect("a temporary directory").keep();
    bare_in(&home)
}

/// The command [`llmchain`] runs, for a test that spawns it (a server).
pub(crate) fn llmchain_command(args: &[&str], dir: &std::path::Path) -> Command {
    let mut command = bare_in(dir);
    command.args(args);
    command
}

/// [`llmchain`] with `stdin` piped in.
pub(crate) fn llmchain_with_stdin(args: &[&str], dir: &std::path::Path, stdin: &str) -> Output {
    use std::io::Write;
    use std::process::Stdio;
    let mut child = Command::new(BIN)
        .args(args)
        .current_dir(dir)
        .env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_BASE_URL")
        .env_remove("LLMCHAIN_DATABASE_URL")
        .env_remove("LLMCHAIN_PROVIDER")
        .env_remove("LLMCHAIN_MODEL")
        .env("XDG_DATA_HOME", dir)
        .env("XDG_CONFIG_HOME", dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary runs");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

/// `--mcp` for our own `llmchain mcp serve` over `root`.
pub(crate) fn serve_cmd(root: &std::path::Path) -> String {
    format!("{BIN} mcp serve --root {}", root.display())
}

/// `--mcp` for the raw JSON-RPC test server of llmchain-mcp in `mode` (one tool,
/// `work`, without annotations: destructive by the MCP defaults), or `None` with a
/// visible skip message when python3 is missing.
pub(crate) fn bad_server_cmd(test: &str, mode: &str) -> Option<String> {
    let ok = Command::new("python3")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!("SKIPPED {test}: python3 is not installed");
        return None;
    }
    Some(format!(
        "python3 {}/../llmchain-mcp/tests/servers/bad_server.py {mode}",
        env!("CARGO_MANIFEST_DIR")
    ))
}

/// The Python SDK's interpreter (`LLMCHAIN_TEST_MCP_PYTHON`, set by `.ci/run`), or
/// `None` with a visible skip message.
pub(crate) fn sdk_python(test: &str) -> Option<String> {
    match std::env::var("LLMCHAIN_TEST_MCP_PYTHON") {
        Ok(p) if !p.is_empty() => Some(p),
        _ => {
            eprintln!(
                "SKIPPED {test}: set LLMCHAIN_TEST_MCP_PYTHON (crates/llmchain-mcp/tests/setup-python.sh prints it)"
            );
            None
        }
    }
}

/// The Python SDK test server script.
pub(crate) fn sdk_server_script() -> String {
    format!(
        "{}/../llmchain-mcp/tests/servers/sdk_server.py",
        env!("CARGO_MANIFEST_DIR")
    )
}

/// `tmux ARGS`.
pub(crate) fn tmux(args: &[&str]) -> Output {
    Command::new("tmux").args(args).output().unwrap()
}

/// True when tmux is installed; prints a visible skip message otherwise.
pub(crate) fn have_tmux(test: &str) -> bool {
    let ok = Command::new("tmux").arg("-V").output().is_ok();
    if !ok {
        eprintln!("SKIPPED {test}: tmux is not installed");
    }
    ok
}

/// A detached tmux session running `cmd` in a 200×50 terminal, killed on drop.
pub(crate) struct Session(pub String);

impl Session {
    /// Starts `cmd` (a shell command line) in a new session.
    pub(crate) fn start(name: &str, cmd: &str) -> Session {
        let session = format!("{name}-{}", std::process::id());
        let out = tmux(&[
            "new-session",
            "-d",
            "-s",
            &session,
            "-x",
            "200",
            "-y",
            "50",
            cmd,
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        Session(session)
    }

    /// Types `keys` (tmux key names, e.g. `Enter`, `C-c`).
    pub(crate) fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", &self.0];
        args.extend_from_slice(keys);
        tmux(&args);
    }

    /// Types `text` literally.
    pub(crate) fn type_text(&self, text: &str) {
        tmux(&["send-keys", "-t", &self.0, "-l", text]);
    }

    /// The screen (and scrollback) once it contains `needle`; panics after 30 s.
    pub(crate) fn wait_for(&self, needle: &str) -> String {
        let mut last = String::new();
        for _ in 0..150 {
            let out = tmux(&["capture-pane", "-p", "-J", "-t", &self.0, "-S", "-200"]);
            last = String::from_utf8_lossy(&out.stdout).into_owned();
            if last.contains(needle) {
                return last;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        panic!("{needle:?} never appeared in the terminal:\n{last}");
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        let _ = tmux(&["kill-session", "-t", &self.0]);
    }
}

/// The conversation id from the `conversation ID saved` line of `llmchain run`.
pub(crate) fn saved_id(stderr: &str) -> String {
    stderr
        .lines()
        .find_map(|l| l.strip_prefix("conversation "))
        .and_then(|l| l.split_whitespace().next())
        .unwrap_or_else(|| panic!("no conversation line: {stderr}"))
        .to_owned()
}

/// `llmchain conversations --db DB export ID`, parsed.
pub(crate) fn export(
    db: &str,
    id: &str,
    dir: &std::path::Path,
) -> llmchain::conversation::Conversation {
    let out = llmchain(&["conversations", "--db", db, "export", id], dir);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The value of `name`, set by `.ci/third-party` for the interoperability tests; `None`
/// (after printing `SKIPPED test`) when it is not set.
pub(crate) fn third_party(name: &str, test: &str) -> Option<String> {
    match std::env::var(name) {
        Ok(v) if !v.is_empty() => Some(v),
        _ => {
            eprintln!("SKIPPED {test}: {name} is not set (eval \"$(.ci/third-party)\")");
            None
        }
    }
}

/// `--mcp` for the files test server (one destructive tool, `write_file`, writing under
/// `root` and logging each execution in `root/.calls`), started after `delay_secs`; or
/// `None` with a visible skip message when python3 is missing.
pub(crate) fn files_server_cmd(
    test: &str,
    root: &std::path::Path,
    delay_secs: u32,
) -> Option<String> {
    let ok = Command::new("python3")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!("SKIPPED {test}: python3 is not installed");
        return None;
    }
    Some(format!(
        "python3 {}/tests/servers/files_server.py {} {delay_secs}",
        env!("CARGO_MANIFEST_DIR"),
        root.display()
    ))
}

/// The executions the files test server logged under `root`: their arguments.
pub(crate) fn files_calls(root: &std::path::Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(root.join(".calls"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Writes the config file the CLI reads when run by [`llmchain`] in `dir`
/// (`XDG_CONFIG_HOME` is `dir`).
pub(crate) fn write_config(dir: &std::path::Path, toml: &str) {
    let path = dir.join("llmchain").join("config.toml");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, toml).unwrap();
}

/// The output of a command, stdout then stderr, for assertion messages.
pub(crate) fn text(out: &Output) -> String {
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A database URL on a fresh PostgreSQL schema of its own (`LLMCHAIN_TEST_POSTGRES_URL`
/// with `search_path` set), or `None` after printing that the PostgreSQL case is
/// skipped.
pub(crate) fn pg_db(test: &str) -> Option<String> {
    let url = match std::env::var("LLMCHAIN_TEST_POSTGRES_URL") {
        Ok(u) if !u.is_empty() => u,
        _ => {
            eprintln!("{test}: skipped on PostgreSQL: set LLMCHAIN_TEST_POSTGRES_URL");
            return None;
        }
    };
    let schema = format!("cli_{}", fastrand_u64());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        use sqlx::Connection;
        let mut conn = sqlx::PgConnection::connect(&url).await.unwrap();
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE SCHEMA {schema}")))
            .execute(&mut conn)
            .await
            .unwrap();
        conn.close().await.unwrap();
    });
    let sep = if url.contains('?') { '&' } else { '?' };
    Some(format!("{url}{sep}options=-c%20search_path%3D{schema}"))
}

/// A random number for names, from the clock and the process.
fn fastrand_u64() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    nanos ^ (u64::from(std::process::id()) << 32)
}

/// Runs `body` on a SQLite database in a fresh directory, then on a fresh PostgreSQL
/// schema when one is available: `body(dir, db)`.
pub(crate) fn on_both_databases(test: &str, body: impl Fn(&std::path::Path, &str)) {
    let dir = tempfile::tempdir().unwrap();
    let sqlite = format!("sqlite://{}", dir.path().join("queue.db").display());
    body(dir.path(), &sqlite);
    if let Some(pg) = pg_db(test) {
        let dir = tempfile::tempdir().unwrap();
        body(dir.path(), &pg);
    }
}

/// `llmchain serve` running in `dir` on a port of its own, killed when dropped.
pub(crate) struct Served {
    child: std::process::Child,
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    port: u16,
    args: Vec<String>,
    dir: std::path::PathBuf,
    /// The open-file limit it runs under, if one is set (`ulimit -n`).
    files: Option<u32>,
    /// Variables set for it beyond `llmchain_command`'s.
    env: Vec<(String, String)>,
}

impl Served {
    /// Starts `llmchain serve --listen 127.0.0.1:0 ARGS` and waits until it says where it
    /// listens. The port comes from the server itself: a port picked here and handed over
    /// could be taken in between, and a bare TCP connect to a port nobody holds can
    /// connect to itself (TCP simultaneous open), which once made a test talk to nobody.
    pub(crate) fn start(dir: &std::path::Path, args: &[&str]) -> Served {
        Self::start_limited(dir, args, None)
    }

    /// [`start`](Self::start) under an open-file limit (`ulimit -n FILES`, soft and hard).
    pub(crate) fn start_limited(
        dir: &std::path::Path,
        args: &[&str],
        files: Option<u32>,
    ) -> Served {
        Self::start_full(dir, args, files, &[])
    }

    /// [`start`](Self::start) with these variables set.
    pub(crate) fn start_with_env(
        dir: &std::path::Path,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> Served {
        Self::start_full(dir, args, None, env)
    }

    fn start_full(
        dir: &std::path::Path,
        args: &[&str],
        files: Option<u32>,
        env: &[(&str, &str)],
    ) -> Served {
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        let env: Vec<(String, String)> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let child = Self::spawn(dir, 0, &args, files, &env);
        let mut served = Served {
            child,
            base: String::new(),
            port: 0,
            args,
            dir: dir.to_owned(),
            files,
            env,
        };
        served.port = served.wait_ready(1);
        served.base = format!("http://127.0.0.1:{}", served.port);
        served
    }

    fn spawn(
        dir: &std::path::Path,
        port: u16,
        args: &[String],
        files: Option<u32>,
        env: &[(String, String)],
    ) -> std::process::Child {
        let listen = format!("127.0.0.1:{port}");
        let mut all = vec!["serve", "--listen", &listen];
        all.extend(args.iter().map(String::as_str));
        let mut command = llmchain_command(&all, dir);
        command.envs(env.iter().map(|(k, v)| (k, v)));
        if let Some(n) = files {
            // The same command under `sh -c 'ulimit -n N; exec "$0" "$@"'`.
            let mut limited = Command::new("sh");
            limited
                .arg("-c")
                .arg(format!("ulimit -n {n} && exec \"$0\" \"$@\""))
                .arg(command.get_program())
                .args(command.get_args())
                .current_dir(dir);
            for (k, v) in command.get_envs() {
                match v {
                    Some(v) => limited.env(k, v),
                    None => limited.env_remove(k),
                };
            }
            command = limited;
        }
        command
            .stdout(std::process::Stdio::null())
            .stderr(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(dir.join("serve.log"))
                    .unwrap(),
            )
            .spawn()
            .expect("llmchain serve starts")
    }

    /// Waits for the server's `nth` start line (`llmchain serve: http://ADDR/ …`) and
    /// returns its port; fails at once with the log when the server exits first.
    fn wait_ready(&mut self, nth: usize) -> u16 {
        const LINE: &str = "llmchain serve: http://127.0.0.1:";
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        loop {
            let log = self.log();
            if let Some(line) = log.lines().filter(|l| l.starts_with(LINE)).nth(nth - 1) {
                let port = line[LINE.len()..]
                    .split('/')
                    .next()
                    .and_then(|p| p.parse().ok())
                    .unwrap_or_else(|| panic!("no port in {line:?}"));
                return port;
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("llmchain serve exited ({status}) before listening:\n{log}");
            }
            assert!(
                std::time::Instant::now() < deadline,
                "llmchain serve did not listen in 60 s: {log}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Kills the server (SIGKILL: nothing is saved on the way out) and starts it again
    /// on the same port.
    pub(crate) fn restart(&mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
        let starts = self
            .log()
            .lines()
            .filter(|l| l.starts_with("llmchain serve: http://"))
            .count();
        self.child = Self::spawn(&self.dir, self.port, &self.args, self.files, &self.env);
        let port = self.wait_ready(starts + 1);
        assert_eq!(port, self.port);
    }

    /// What the server printed.
    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("serve.log")).unwrap_or_default()
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One JSON `POST /api/chat` to a chat server over a raw HTTP/1.1 connection (the
/// server may be killed under it): the whole answer, status line and headers included;
/// empty when the connection could not be made or written.
pub(crate) fn post_chat(base: &str, body: &serde_json::Value) -> String {
    post_chat_with(base, body, "")
}

/// [`post_chat`] with more request headers (`headers` is whole `Name: value\r\n` lines).
pub(crate) fn post_chat_with(base: &str, body: &serde_json::Value, headers: &str) -> String {
    use std::io::{Read, Write};
    let addr = base.trim_start_matches("http://");
    let Ok(mut tcp) = std::net::TcpStream::connect(addr) else {
        return String::new();
    };
    let _ = tcp.set_read_timeout(Some(Duration::from_secs(60)));
    let body = body.to_string();
    let sent = write!(
        tcp,
        "POST /api/chat HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         {headers}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    if sent.is_err() {
        return String::new();
    }
    let mut out = String::new();
    let _ = tcp.read_to_string(&mut out);
    out
}

/// One `GET path` of a chat server over a raw HTTP/1.1 connection: the whole answer,
/// status line and headers included; empty when the connection could not be made.
#[allow(dead_code)]
pub(crate) fn get_path(base: &str, path: &str) -> String {
    use std::io::{Read, Write};
    let addr = base.trim_start_matches("http://");
    let Ok(mut tcp) = std::net::TcpStream::connect(addr) else {
        return String::new();
    };
    let _ = tcp.set_read_timeout(Some(Duration::from_secs(60)));
    if write!(
        tcp,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .is_err()
    {
        return String::new();
    }
    let mut out = String::new();
    let _ = tcp.read_to_string(&mut out);
    out
}

/// `llmchain serve` on a SQLite store in `dir`, its model a local server that answers
/// "Hello." once, with `env` added to its environment.
pub(crate) fn serve_hello(dir: &std::path::Path, env: &[(&str, &str)]) -> Served {
    use llmchain::provider::Format;
    use llmchain::provider::render::{ResponseScript, render_stream};
    let (base, _) = serve(vec![
        render_stream(Format::OPENAI_CHAT, &ResponseScript::text("Hello.")).unwrap(),
    ]);
    write_config(dir, &format!("base_url = \"{base}\"\nmodel = \"m\"\n"));
    let db = format!("sqlite://{}", dir.join("chats.db").display());
    Served::start_with_env(dir, &["--db", &db], env)
}

/// A chat request whose last message is the user's `text` (client id `id`).
pub(crate) fn user_message(chat: &str, id: &str, text: &str) -> serde_json::Value {
    serde_json::json!({"id": chat, "trigger": "submit-message", "messages": [
        {"id": id, "role": "user", "parts": [{"type": "text", "text": text}]}
    ]})
}

/// The cloud test servers' runner, shared with the `llmchain` crate's tests.
#[path = "../../../llmchain/tests/servers/cloud_mock.rs"]
pub(crate) mod cloud_mock;

/// The path of a cloud test server of the `llmchain` crate.
pub(crate) fn cloud_server(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../llmchain/tests/servers")
        .join(name)
}

/// A run queued to write `a.txt` through the files test server (one `write_file` call,
/// then "Written."), under `approve`, in `dir`: the queue is `QueuedWrite::db`. Every
/// command it runs gets `env`; the enqueue also `TRACEPARENT=traceparent`. `None`
/// (skipped, said so) without python3.
pub(crate) struct QueuedWrite {
    /// The files server's root (`.calls`, `.started`, `.hold`).
    pub(crate) root: std::path::PathBuf,
    /// The queue's database URL.
    pub(crate) db: String,
}

impl QueuedWrite {
    pub(crate) fn enqueue(
        test: &str,
        dir: &std::path::Path,
        approve: &str,
        env: &[(&str, &str)],
        traceparent: &str,
    ) -> Option<QueuedWrite> {
        use llmchain::provider::Format;
        use llmchain::provider::render::{ResponseScript, render_stream};
        let root = dir.join("files");
        std::fs::create_dir_all(&root).unwrap();
        let files = files_server_cmd(test, &root, 0)?;
        let (base, _) = serve(vec![
            render_stream(
                Format::OPENAI_CHAT,
                &ResponseScript::tool_call(
                    "call_1",
                    "write_file",
                    serde_json::json!({"path": "a.txt", "content": "A"}).to_string(),
                ),
            )
            .unwrap(),
            render_stream(Format::OPENAI_CHAT, &ResponseScript::text("Written.")).unwrap(),
        ]);
        write_config(
            dir,
            &format!(
                "base_url = \"{base}\"\nmodel = \"m\"\nmcp = [\"{files}\"]\nno_builtin_tools = true\n\
                 approve = \"{approve}\"\n"
            ),
        );
        if approve == "always" {
            // The call then waits inside the server until the test removes this.
            std::fs::write(root.join(".hold"), "").unwrap();
        }
        let db = format!("sqlite://{}", dir.join("q.db").display());
        let mut enqueue_env = env.to_vec();
        enqueue_env.push(("TRACEPARENT", traceparent));
        let queued = llmchain_with_env(
            &["run", "--enqueue", "--db", &db, "write a.txt"],
            dir,
            &enqueue_env,
        );
        assert!(queued.status.success(), "{}", text(&queued));
        Some(QueuedWrite { root, db })
    }

    /// `worker --drain` with `env`.
    pub(crate) fn drain(&self, dir: &std::path::Path, env: &[(&str, &str)]) -> Output {
        llmchain_with_env(
            &["worker", "--db", &self.db, "--drain", "--poll-ms", "20"],
            dir,
            env,
        )
    }

    /// Drains once (the run pauses for review), approves the call as `dana` from
    /// another process, drains again (the run finishes).
    pub(crate) fn through_a_review(&self, dir: &std::path::Path, env: &[(&str, &str)]) {
        let paused = self.drain(dir, env);
        assert!(
            text(&paused).contains("paused for review"),
            "{}",
            text(&paused)
        );
        let list = llmchain(&["reviews", "--db", &self.db, "list", "--json"], dir);
        let review: serde_json::Value = serde_json::from_str(
            String::from_utf8_lossy(&list.stdout)
                .lines()
                .next()
                .unwrap(),
        )
        .unwrap();
        let id = review["id"].as_str().unwrap();
        let approve = llmchain(
            &["reviews", "--db", &self.db, "--by", "dana", "approve", id],
            dir,
        );
        assert!(approve.status.success(), "{}", text(&approve));
        let done = self.drain(dir, env);
        assert!(text(&done).contains("1 done"), "{}", text(&done));
        assert_eq!(files_calls(&self.root).len(), 1);
    }
}
