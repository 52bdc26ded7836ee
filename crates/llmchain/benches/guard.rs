//! Guards on the path users run (issue 49): the personal-data redactor over prose, the
//! hold-back buffer streaming an answer through it, and a whole chain turn answering
//! 64 KiB of text with and without a guard on the answer. The hold-back's delay (the
//! most bytes ever waiting) is printed once: it is bounded by construction
//! (`guard::HARD` plus one chunk), and this measures it on a real stream.

use std::hint::black_box;
use std::sync::Arc;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use llmchain::chain::{LLMChain, Mode, ScriptedModel};
use llmchain::guard::{Guard, Guards, HoldBack, Pii, Point, Released};
use llmchain::message::Message;
use llmchain::provider::Format;
use llmchain::provider::render::{ResponseScript, render_stream};

/// `size` bytes of prose: sentences, line ends, and a personal datum every ~2 KiB.
fn prose(size: usize) -> String {
    let mut s = String::with_capacity(size + 128);
    let mut i = 0;
    while s.len() < size {
        i += 1;
        s.push_str("The quarterly report covers revenue, costs and the plan for next year. ");
        if i % 12 == 0 {
            s.push_str("Ask ann.lee@corp.example or pay DE89 3704 0044 0532 0130 00. ");
        }
        if i % 5 == 0 {
            s.push('\n');
        }
    }
    s.truncate(size);
    s
}

fn bench(c: &mut Criterion) {
    let mut guards = Guards::default();
    guards.push(Arc::new(Pii::default()));

    let text = prose(64 << 10);
    let mut g = c.benchmark_group("guard");
    g.throughput(Throughput::Bytes(text.len() as u64));
    g.bench_function("pii_check/64KiB", |b| {
        let pii = Pii::default();
        b.iter(|| black_box(pii.check(Point::ModelOutput, black_box(&text))));
    });

    let big = prose(1 << 20);
    // The delay, measured once on the stream the bench replays.
    let mut h = HoldBack::default();
    let mut most = 0;
    for chunk in big.as_bytes().chunks(32) {
        h.push(&guards, std::str::from_utf8(chunk).unwrap());
        most = most.max(h.waiting());
    }
    eprintln!(
        "hold-back: at most {most} bytes waited (HARD is {} bytes) over 1 MiB in 32-byte chunks",
        llmchain::guard::HARD
    );
    g.throughput(Throughput::Bytes(big.len() as u64));
    g.bench_function("hold_back/1MiB_in_32B_chunks", |b| {
        b.iter(|| {
            let mut h = HoldBack::default();
            let mut shown = 0;
            for chunk in big.as_bytes().chunks(32) {
                if let Some(Released::Text(t)) =
                    h.push(&guards, std::str::from_utf8(chunk).unwrap())
                {
                    shown += t.len();
                }
            }
            if let Some(Released::Text(t)) = h.finish(&guards) {
                shown += t.len();
            }
            black_box(shown)
        });
    });
    g.finish();

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    // Rendered once: the turn decodes the same bytes every time.
    let answer: Arc<[u8]> =
        render_stream(Format::OPENAI_CHAT, &ResponseScript::text(prose(64 << 10)))
            .unwrap()
            .into();
    let mut g = c.benchmark_group("guard_turn_64KiB_text");
    for guarded in [false, true] {
        let label = if guarded {
            "pii_on_the_answer"
        } else {
            "no_guard"
        };
        g.bench_with_input(
            BenchmarkId::new("chain_turn", label),
            &guarded,
            |b, &guarded| {
                b.iter(|| {
                    rt.block_on(async {
                        let model = ScriptedModel::new(Format::OPENAI_CHAT)
                            .chunk_size(64)
                            .respond_bytes(answer.clone());
                        let mut chain = LLMChain::new(model);
                        if guarded {
                            chain = chain.with_guard(Pii::default().at(&[Point::ModelOutput]));
                        }
                        chain
                            .add_message(Message::user("the report?"))
                            .await
                            .unwrap();
                        chain.run(Mode::Single).await.unwrap();
                        black_box(chain.last_message().map(|m| m.content.len()))
                    })
                });
            },
        );
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
