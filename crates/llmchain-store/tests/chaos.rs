//! The chaos suite: the at-most-once promise under real faults.
//!
//! N worker processes (this test binary re-invoked, each running the library's
//! [`Worker`] with real chains) execute M queued runs on a PostgreSQL server of the
//! test's own, while the test SIGKILLs workers (and starts replacements), freezes
//! workers with SIGSTOP for three lease lengths then lets them go on with SIGCONT (a
//! VM paused and resumed: the frozen worker wakes holding leases that were taken over),
//! restarts PostgreSQL (`pg_ctl restart -m fast`), terminates every worker backend
//! (`pg_terminate_backend`); some model calls outlast the lease, some chains take two
//! lease lengths to build (MCP servers slow to start), and one run in ten pauses for
//! review, its call approved from the review inbox by the test while the faults go on.
//! The tool `charge` is not idempotent: every execution appends one fsync'd line to a
//! ledger file.
//!
//! Afterwards, it checks that every run ended `done` or `discarded`, that no ledger line
//! repeats a call, that every conversation is well-formed (each call answered exactly
//! once, in order, nothing after the final answer), and that no execution was lost
//! (each one's call has a stored result).
//!
//! Short form (in CI): 4 workers, 300 runs, 3 kills, 2 freezes, 1 restart, 1
//! termination. Full form: `scripts/chaos.sh` (8 workers, 5,000 runs, 20 kills, 3
//! restarts). Settings: `CHAOS_WORKERS`, `CHAOS_RUNS`, `CHAOS_KILLS`, `CHAOS_FREEZES`,
//! `CHAOS_RESTARTS`, `CHAOS_TERMINATES`, `CHAOS_SLOW_PERCENT`,
//! `CHAOS_SLOW_START_PERCENT`. Needs PostgreSQL's server binaries (`initdb`, `pg_ctl`); without
//! them it prints `skipped`.

mod common;

use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use llmchain::chain::{ChainState, ChatModel, LLMChain, Mode, ModelStream, ScriptedModel};
use llmchain::conversation::Conversation;
use llmchain::message::{Message, Role};
use llmchain::tool::Tool;
use llmchain_store::worker::BoxError;
use llmchain_store::{
    NewConversation, PostgresStore, Run, RunOptions, RunState, RunStatus, Store, Worker,
};

const LEASE: Duration = Duration::from_millis(1000);

fn setting(key: &str, default: usize) -> usize {
    std::env::var(key)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A PostgreSQL server of the test's own, on a free loopback port.
struct Pg {
    bin: PathBuf,
    dir: PathBuf,
    port: u16,
    as_postgres: bool,
}

impl Pg {
    fn start(test: &str) -> Option<Pg> {
        let bin = std::fs::read_dir("/usr/lib/postgresql")
            .ok()?
            .filter_map(|e| e.ok())
            .map(|e| e.path().join("bin"))
            .filter(|b| b.join("initdb").exists())
            .max()?;
        let as_postgres = Command::new("id")
            .arg("-u")
            .output()
            .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
        let dir = std::env::temp_dir().join(format!("llmchain-chaos-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).ok()?;
        if as_postgres {
            let ok = Command::new("chown")
                .args(["postgres:postgres"])
                .arg(&dir)
                .status()
                .is_ok_and(|s| s.success());
            if !ok {
                eprintln!("{test}: skipped: cannot hand a directory to the postgres user");
                return None;
            }
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .ok()?
            .local_addr()
            .ok()?
            .port();
        let pg = Pg {
            bin,
            dir,
            port,
            as_postgres,
        };
        let data = pg.dir.join("data");
        let init = pg
            .cmd("initdb")
            .arg("-D")
            .arg(&data)
            .args(["-A", "trust", "-U", "postgres"])
            .stdout(Stdio::null())
            .status();
        if !init.is_ok_and(|s| s.success()) {
            eprintln!("{test}: skipped: initdb failed");
            return None;
        }
        let opts = format!(
            "-c listen_addresses=127.0.0.1 -p {} -k {} -c max_connections=200",
            pg.port,
            pg.dir.display()
        );
        let started = pg
            .cmd("pg_ctl")
            .arg("-D")
            .arg(&data)
            .arg("-l")
            .arg(pg.dir.join("log"))
            .args(["-w", "-o", &opts, "start"])
            .stdout(Stdio::null())
            .status();
        if !started.is_ok_and(|s| s.success()) {
            eprintln!("{test}: skipped: PostgreSQL did not start");
            return None;
        }
        Some(pg)
    }

    fn cmd(&self, tool: &str) -> Command {
        let exe = self.bin.join(tool);
        if self.as_postgres {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(exe);
            c
        } else {
            Command::new(exe)
        }
    }

    fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    fn restart(&self) {
        let ok = self
            .cmd("pg_ctl")
            .arg("-D")
            .arg(self.dir.join("data"))
            .args(["-w", "-m", "fast", "restart"])
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "pg_ctl restart failed");
    }
}

impl Drop for Pg {
    fn drop(&mut self) {
        let _ = self
            .cmd("pg_ctl")
            .arg("-D")
            .arg(self.dir.join("data"))
            .args(["-m", "immediate", "stop"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A model whose call sleeps first: slower than the lease for some calls.
struct Slow {
    inner: ScriptedModel,
    delay: Duration,
}

impl ChatModel for Slow {
    fn model_name(&self) -> &str {
        "slow"
    }
    fn provider_name(&self) -> &str {
        "chaos"
    }
    fn stream<'a>(&'a self, conversation: &'a Conversation) -> ModelStream<'a> {
        let delay = self.delay;
        Box::pin(
            futures_util::stream::once(async move {
                tokio::time::sleep(delay).await;
                self.inner.stream(conversation)
            })
            .flatten(),
        )
    }
}

/// Appends one line per execution and syncs it before the tool answers.
fn append_line(path: &Path, line: &str) -> std::io::Result<()> {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    f.write_all(line.as_bytes())?;
    f.sync_data()
}

/// One worker process: runs queued runs until the test stops it, surviving whatever the
/// database does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chaos_worker_process() {
    let Ok(name) = std::env::var("LLMCHAIN_CHAOS_WORKER") else {
        return; // Only meaningful as a child of `chaos`.
    };
    let url = std::env::var("LLMCHAIN_CHAOS_URL").unwrap();
    let ledger = PathBuf::from(std::env::var("LLMCHAIN_CHAOS_LEDGER").unwrap());
    let slow_percent = setting("CHAOS_SLOW_PERCENT", 2) as u64;
    let slow_start_percent = setting("CHAOS_SLOW_START_PERCENT", 3) as u64;
    // The database may be restarting right now: keep trying to connect.
    let store = loop {
        match PostgresStore::connect_with(&url, 4).await {
            Ok(s) => break Arc::new(s),
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    };
    let worker_name = name.clone();
    let factory = move |run: Run, state: ChainState| {
        let (ledger, worker) = (ledger.clone(), worker_name.clone());
        async move {
            // A chain slow to build (an MCP server slow to start): two lease lengths.
            if fastrand::u64(0..100) < slow_start_percent {
                tokio::time::sleep(LEASE * 2).await;
            }
            let reviewed = state
                .conversation
                .messages
                .first()
                .and_then(Message::text)
                .is_some_and(|t| t.ends_with("review"));
            let script = common::charge_once(&state)?;
            let delay = if fastrand::u64(0..100) < slow_percent {
                LEASE * 3 / 2
            } else {
                Duration::ZERO
            };
            let conversation = run.conversation_id.clone();
            let charge = Tool::builder("charge")
                .handler(move |_, ctx| {
                    let line = format!("{conversation} {} {worker}\n", ctx.tool_call_id());
                    let ledger = ledger.clone();
                    async move {
                        append_line(&ledger, &line).map_err(|e| e.to_string())?;
                        tokio::time::sleep(Duration::from_millis(3)).await; // a window to die in
                        Ok::<_, String>("charged")
                    }
                })
                .build()?;
            let model = Arc::new(Slow {
                inner: script,
                delay,
            });
            let mut chain = LLMChain::from_state(model, state).with_tool(charge);
            if reviewed {
                chain = chain.with_review(|_: &llmchain::message::ToolCall| {
                    llmchain::chain::ReviewDecision::Interrupt
                });
            }
            Ok::<_, BoxError>((chain, Mode::while_needs_response()))
        }
    };
    // Until the test ends it: a drain would stop while a run waits for its review,
    // which the test approves a moment later.
    Worker::new(store, name, factory)
        .concurrency(2)
        .lease(LEASE)
        .poll_interval(Duration::from_millis(50))
        .run(llmchain::tool::CancellationToken::new())
        .await;
}

fn spawn_worker(exe: &Path, name: &str, url: &str, ledger: &Path) -> Child {
    Command::new(exe)
        .args([
            "--exact",
            "chaos_worker_process",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("LLMCHAIN_CHAOS_WORKER", name)
        .env("LLMCHAIN_CHAOS_URL", url)
        .env("LLMCHAIN_CHAOS_LEDGER", ledger)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

#[derive(Default, Debug)]
struct Faults {
    kills: usize,
    freezes: usize,
    restarts: usize,
    terminated_backends: u64,
    reviews_approved: usize,
}

/// Sends `signal` (`STOP`, `CONT`) to process `pid`.
fn signal(pid: u32, signal: &str) {
    let _ = Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(pid.to_string())
        .status();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chaos() {
    if std::env::var_os("LLMCHAIN_CHAOS_WORKER").is_some() {
        return;
    }
    let workers_n = setting("CHAOS_WORKERS", 4);
    let runs_n = setting("CHAOS_RUNS", 300);
    let kills_n = setting("CHAOS_KILLS", 3);
    let freezes_n = setting("CHAOS_FREEZES", 2);
    let restarts_n = setting("CHAOS_RESTARTS", 1);
    let terminates_n = setting("CHAOS_TERMINATES", 1);
    let Some(pg) = Pg::start("chaos") else {
        return;
    };
    let url = pg.url();
    let store = PostgresStore::connect_with(&url, 4).await.unwrap();
    let ledger = pg.dir.join("ledger.txt");
    std::fs::write(&ledger, "").unwrap();
    if pg.as_postgres {
        let _ = Command::new("chmod").arg("0666").arg(&ledger).status();
    }
    let mut ids = Vec::with_capacity(runs_n);
    for k in 0..runs_n {
        let mut c = Conversation::new();
        // One run in ten asks a person about its call (the review inbox).
        let review = if k % 10 == 0 { " review" } else { "" };
        c.messages
            .push(Message::user(format!("charge #{k}{review}")));
        let id = store
            .create_conversation(NewConversation::from_conversation(c))
            .await
            .unwrap();
        store
            .enqueue_run(
                &id,
                &RunState::default(),
                &RunOptions {
                    max_attempts: 10,
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        ids.push(id);
    }
    store.pool().close().await;

    let exe = std::env::current_exe().unwrap();
    let mut spawned = 0;
    let mut workers: Vec<Child> = (0..workers_n)
        .map(|_| {
            spawned += 1;
            spawn_worker(&exe, &format!("w{spawned}"), &url, &ledger)
        })
        .collect();
    let started = Instant::now();
    let mut faults = Faults::default();
    // Faults spread over the first part of the run, one every 700 ms, in a shuffled order.
    let mut schedule: Vec<&str> = std::iter::repeat_n("kill", kills_n)
        .chain(std::iter::repeat_n("freeze", freezes_n))
        .chain(std::iter::repeat_n("restart", restarts_n))
        .chain(std::iter::repeat_n("terminate", terminates_n))
        .collect();
    fastrand::shuffle(&mut schedule);
    let deadline = started + Duration::from_secs(60 + runs_n as u64 / 10);
    let mut next_fault = started + Duration::from_millis(700);
    let open = |counts: &HashMap<RunStatus, i64>| {
        counts
            .iter()
            .filter(|(s, _)| s.is_open())
            .map(|(_, n)| n)
            .sum::<i64>()
    };
    // A person answers the review inbox while the faults go on, on a task of its own
    // (a decision may wait for a row a frozen worker's transaction holds).
    let approved = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let reviewer = {
        let (url, approved) = (url.clone(), approved.clone());
        tokio::spawn(async move {
            loop {
                if let Ok(inbox) = PostgresStore::connect_with(&url, 1).await {
                    let pending = inbox
                        .list_reviews(&llmchain_store::ReviewFilter::pending())
                        .await
                        .unwrap_or_default();
                    for r in pending {
                        let decided = inbox
                            .decide_review(&r.id, &llmchain::chain::HumanDecision::Approve, "chaos")
                            .await;
                        if decided.is_ok() {
                            approved.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        }
                    }
                    inbox.pool().close().await;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };
    // Frozen workers are let go on by a thread of their own, whatever the test awaits.
    let mut frozen: Vec<std::thread::JoinHandle<()>> = Vec::new();
    loop {
        faults.reviews_approved = approved.load(std::sync::atomic::Ordering::Relaxed);
        if Instant::now() >= deadline {
            let probe = PostgresStore::connect_with(&url, 1).await;
            let (counts, pending) = match &probe {
                Ok(p) => (
                    p.run_counts().await.ok(),
                    p.list_reviews(&llmchain_store::ReviewFilter::pending())
                        .await
                        .map(|r| r.len())
                        .ok(),
                ),
                Err(_) => (None, None),
            };
            panic!(
                "the queue did not drain in time ({faults:?}); runs by status {counts:?}, \
                 {pending:?} reviews pending"
            );
        }
        if Instant::now() >= next_fault
            && let Some(fault) = schedule.pop()
        {
            match fault {
                "freeze" => {
                    // A frozen VM: no heartbeat, no progress, for three lease lengths.
                    let pid = workers[fastrand::usize(..workers.len())].id();
                    signal(pid, "STOP");
                    frozen.push(std::thread::spawn(move || {
                        std::thread::sleep(LEASE * 3);
                        signal(pid, "CONT");
                    }));
                    faults.freezes += 1;
                }
                "kill" => {
                    let i = fastrand::usize(..workers.len());
                    let _ = workers[i].kill(); // SIGKILL
                    let _ = workers[i].wait();
                    spawned += 1;
                    workers[i] = spawn_worker(&exe, &format!("w{spawned}"), &url, &ledger);
                    faults.kills += 1;
                }
                "restart" => {
                    pg.restart();
                    faults.restarts += 1;
                }
                _ => {
                    use sqlx::Connection;
                    if let Ok(mut admin) = sqlx::PgConnection::connect(&url).await {
                        let n: i64 = sqlx::query_scalar(
                            "SELECT COUNT(pg_terminate_backend(pid)) FROM pg_stat_activity \
                             WHERE pid <> pg_backend_pid() AND datname = current_database()",
                        )
                        .fetch_one(&mut admin)
                        .await
                        .unwrap_or(0);
                        faults.terminated_backends += n as u64;
                        let _ = admin.close().await;
                    }
                }
            }
            next_fault = Instant::now() + Duration::from_millis(700);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        frozen.retain(|t| !t.is_finished());
        if !schedule.is_empty() || !frozen.is_empty() {
            continue;
        }
        let Ok(probe) = PostgresStore::connect_with(&url, 1).await else {
            continue;
        };
        let counts = probe.run_counts().await.unwrap_or_default();
        probe.pool().close().await;
        if !counts.is_empty() && open(&counts) == 0 {
            break;
        }
    }
    let took = started.elapsed();
    reviewer.abort();
    faults.reviews_approved = approved.load(std::sync::atomic::Ordering::Relaxed);
    for w in &mut workers {
        // The workers run until stopped here.
        let _ = w.kill();
        let _ = w.wait();
    }

    // The checks.
    let store = PostgresStore::connect_with(&url, 2).await.unwrap();
    let counts = store.run_counts().await.unwrap();
    let done = *counts.get(&RunStatus::Done).unwrap_or(&0);
    let discarded = *counts.get(&RunStatus::Discarded).unwrap_or(&0);
    assert_eq!(
        done + discarded,
        runs_n as i64,
        "every run ends done or discarded: {counts:?}"
    );
    let lines = std::fs::read_to_string(&ledger).unwrap();
    let mut executed: HashSet<(String, String)> = HashSet::new();
    for line in lines.lines() {
        let mut parts = line.split(' ');
        let key = (
            parts.next().unwrap_or_default().to_owned(),
            parts.next().unwrap_or_default().to_owned(),
        );
        assert!(executed.insert(key.clone()), "executed twice: {key:?}");
    }
    let mut unknown = 0;
    let mut with_result = 0;
    for (k, id) in ids.iter().enumerate() {
        let stored = store.get_conversation(id).await.unwrap().unwrap();
        let messages = &stored.conversation.messages;
        let run = &store.list_runs(id).await.unwrap()[0];
        assert_eq!(messages[0].role, Role::User, "conversation {k}");
        // Each call answered exactly once, by the tool message right after it.
        let mut i = 1;
        while i < messages.len() {
            let m = &messages[i];
            assert_eq!(
                m.role,
                Role::Assistant,
                "conversation {k} message {i}: {messages:?}"
            );
            if m.tool_calls.is_empty() {
                assert_eq!(
                    i,
                    messages.len() - 1,
                    "nothing after the final answer ({k})"
                );
                break;
            }
            let answer = messages
                .get(i + 1)
                .unwrap_or_else(|| panic!("conversation {k}: a call without an answer"));
            assert_eq!(answer.role, Role::Tool, "conversation {k}");
            let asked: Vec<_> = m
                .tool_calls
                .iter()
                .map(|c| c.call_id.clone().unwrap_or_default())
                .collect();
            let answered: Vec<_> = answer
                .tool_results
                .iter()
                .map(|r| r.tool_call_id.clone())
                .collect();
            assert_eq!(asked, answered, "conversation {k}: answered once, in order");
            for r in &answer.tool_results {
                if r.is_error() {
                    assert!(
                        r.content_text().contains("is unknown"),
                        "{}",
                        r.content_text()
                    );
                    unknown += 1;
                } else {
                    with_result += 1;
                    assert!(
                        executed.contains(&(id.clone(), r.tool_call_id.clone())),
                        "conversation {k}: a result for a call the ledger never saw"
                    );
                }
            }
            i += 2;
        }
        if run.state.status == RunStatus::Done {
            let last = messages.last().unwrap();
            assert!(
                last.role == Role::Assistant && last.tool_calls.is_empty(),
                "conversation {k}"
            );
        }
        // No execution lost: a call the tool ran has a stored result (its own, or
        // "outcome unknown" when the worker died before storing it).
        for (conv, call) in executed.iter().filter(|(c, _)| c == id) {
            let answered = messages
                .iter()
                .flat_map(|m| &m.tool_results)
                .any(|r| &r.tool_call_id == call);
            assert!(
                answered || run.state.status == RunStatus::Discarded,
                "{conv} {call} lost"
            );
        }
    }
    eprintln!(
        "chaos: {runs_n} runs with {workers_n} workers in {took:.1?}: {done} done, {discarded} discarded; \
         {} executions, {with_result} results stored, {unknown} unknown outcomes; faults: {} kills, \
         {} freezes, {} PostgreSQL restarts, {} backends terminated; {} reviews approved; no call ran twice",
        executed.len(),
        faults.kills,
        faults.freezes,
        faults.restarts,
        faults.terminated_backends,
        faults.reviews_approved
    );
}
