//! CPU-time measurement shared by the benches: the machine they run on is shared, so
//! wall-clock figures are also reported as the CPU time of the measuring thread.

/// CPU time this thread has run, in ns (Linux `/proc/thread-self/schedstat`).
pub fn thread_cpu_ns() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    s.split_whitespace().next()?.parse().ok()
}

/// Mean CPU time per call of `f` over `n` calls, in ms.
pub fn cpu_ms_per_iter(n: u32, mut f: impl FnMut()) -> Option<f64> {
    let start = thread_cpu_ns()?;
    for _ in 0..n {
        f();
    }
    Some((thread_cpu_ns()? - start) as f64 / f64::from(n) / 1e6)
}
