//! Store hot paths: appending messages with durability on, and loading a conversation.
//!
//! `cargo bench -p llmchain-store --bench store`. The PostgreSQL benches run when
//! `LLMCHAIN_TEST_POSTGRES_URL` is set. Besides criterion's figures, each backend prints
//! the wall time (and the process's CPU time) of literally appending 10,000 messages: one
//! call at a time, then from 50 conversations appending concurrently (200 each), where
//! SQLite's writer commits the appends that arrive together in one transaction.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use llmchain::message::{Message, ToolCall};
use llmchain_store::{Durability, NewConversation, PostgresStore, SqliteStore, Store, Writer};
use serde_json::json;
use tokio::runtime::Runtime;

fn message(i: usize) -> Message {
    let call = ToolCall::function(
        format!("call_{i}"),
        "get_weather",
        json!({"city": "Paris", "units": "metric", "days": 3}),
    )
    .unwrap();
    Message::assistant_with_calls(format!("Let me check the weather, step {i}."), vec![call])
}

fn rt() -> Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// CPU time of the whole process (every thread), from `/proc/self/stat`.
fn process_cpu() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some(Duration::from_millis(ticks * 10)) // USER_HZ is 100 on Linux
}

/// Runs `f`, printing its wall and CPU time for `n` messages.
fn report(label: &str, what: &str, n: u32, f: impl FnOnce()) {
    let (cpu, started) = (process_cpu(), Instant::now());
    f();
    let took = started.elapsed();
    let cpu = match (cpu, process_cpu()) {
        (Some(a), Some(b)) => format!(
            ", CPU {:.0} us/message",
            (b - a).as_secs_f64() * 1e6 / f64::from(n)
        ),
        _ => String::new(),
    };
    eprintln!(
        "{label}: {what}: {n} messages in {took:.2?} = {:.0} messages/s (wall {:.0} us/message{cpu})",
        f64::from(n) / took.as_secs_f64(),
        took.as_secs_f64() * 1e6 / f64::from(n),
    );
}

const WRITERS: usize = 50;

fn bench_store<S: Store + Clone + 'static>(
    c: &mut Criterion,
    label: &str,
    rt: &Runtime,
    store: &S,
) {
    // Literally 10,000 appends, one call (one transaction) each.
    let id = rt
        .block_on(store.create_conversation(NewConversation::default()))
        .unwrap();
    report(
        label,
        "10,000 single appends, one at a time",
        10_000,
        || {
            for i in 0..10_000 {
                rt.block_on(store.append_message(&id, &message(i))).unwrap();
            }
        },
    );

    // 10,000 appends from 50 conversations at once, 200 each, one call per message.
    let ids: Vec<String> = (0..WRITERS)
        .map(|_| {
            rt.block_on(store.create_conversation(NewConversation::default()))
                .unwrap()
        })
        .collect();
    report(
        label,
        "10,000 appends from 50 concurrent conversations",
        10_000,
        || {
            rt.block_on(async {
                let mut tasks = tokio::task::JoinSet::new();
                for id in ids.clone() {
                    let store = store.clone();
                    tasks.spawn(async move {
                        for i in 0..10_000 / WRITERS {
                            store.append_message(&id, &message(i)).await.unwrap();
                        }
                    });
                }
                while let Some(done) = tasks.join_next().await {
                    done.unwrap();
                }
            })
        },
    );

    let mut g = c.benchmark_group(label);
    g.measurement_time(Duration::from_secs(4));
    g.warm_up_time(Duration::from_secs(1));
    g.throughput(Throughput::Elements(1));
    let mut i = 0;
    g.bench_function("append_one", |b| {
        b.iter(|| {
            i += 1;
            rt.block_on(store.append_message(&id, &message(i))).unwrap()
        })
    });
    g.throughput(Throughput::Elements(WRITERS as u64));
    g.bench_function("append_50_concurrent", |b| {
        b.iter(|| {
            rt.block_on(async {
                let mut tasks = tokio::task::JoinSet::new();
                for id in ids.clone() {
                    let store = store.clone();
                    tasks.spawn(async move { store.append_message(&id, &message(0)).await });
                }
                while let Some(done) = tasks.join_next().await {
                    done.unwrap().unwrap();
                }
            })
        })
    });
    let batch: Vec<Message> = (0..10).map(message).collect();
    g.throughput(Throughput::Elements(10));
    g.bench_function("append_batch_of_10", |b| {
        b.iter(|| {
            rt.block_on(store.append_messages(Writer::from(&id), &batch))
                .unwrap()
        })
    });

    let small = rt
        .block_on(store.create_conversation(NewConversation::default()))
        .unwrap();
    let thousand: Vec<Message> = (0..1000).map(message).collect();
    rt.block_on(store.append_messages(Writer::from(&small), &thousand))
        .unwrap();
    g.throughput(Throughput::Elements(1000));
    g.bench_function("load_1000", |b| {
        b.iter(|| {
            let c = rt
                .block_on(store.get_conversation(black_box(&small)))
                .unwrap();
            assert_eq!(c.unwrap().conversation.messages.len(), 1000);
        })
    });
    g.finish();
}

fn sqlite(c: &mut Criterion) {
    let rt = rt();
    let dir = tempfile::tempdir().unwrap();
    let full = rt
        .block_on(SqliteStore::open_with(
            dir.path().join("full.db"),
            Durability::Full,
        ))
        .unwrap();
    bench_store(c, "sqlite_full", &rt, &full);
    let normal = rt
        .block_on(SqliteStore::open_with(
            dir.path().join("normal.db"),
            Durability::Normal,
        ))
        .unwrap();
    bench_store(c, "sqlite_normal", &rt, &normal);
}

fn postgres(c: &mut Criterion) {
    let Ok(url) = std::env::var("LLMCHAIN_TEST_POSTGRES_URL") else {
        eprintln!("postgres benches skipped: set LLMCHAIN_TEST_POSTGRES_URL");
        return;
    };
    let rt = rt();
    let store = rt.block_on(PostgresStore::connect(&url)).unwrap();
    bench_store(c, "postgres", &rt, &store);
}

criterion_group!(benches, sqlite, postgres);
criterion_main!(benches);
