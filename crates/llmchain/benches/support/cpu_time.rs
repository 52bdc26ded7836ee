//! CPU-time measurement shared by the benches: the machine they run on is shared, so
//! wall-clock figures are also reported as the CPU time of the measuring thread.

/// CPU time this thread has run, in ns (Linux `/proc/thread-self/schedstat`).
pub(crate) fn thread_cpu_ns() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    s.split_whitespace().next()?.parse().ok()
}

/// Mean CPU time per call of `f`, in ms, over at least `n` calls and at least 100 ms:
/// `schedstat` advances at scheduler ticks (every few ms), so a shorter run can read
/// as no time at all.
pub(crate) fn cpu_ms_per_iter(n: u32, mut f: impl FnMut()) -> Option<f64> {
    let start = thread_cpu_ns()?;
    let wall = std::time::Instant::now();
    let mut calls = 0u32;
    while calls < n || wall.elapsed() < std::time::Duration::from_millis(100) {
        f();
        calls += 1;
    }
    Some((thread_cpu_ns()? - start) as f64 / f64::from(calls) / 1e6)
}
