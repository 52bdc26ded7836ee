//! Shared by the serve benchmark's binaries: the clock both sides read.

/// CLOCK_MONOTONIC in nanoseconds: the clock Node's `process.hrtime.bigint()` and
/// Python's `time.monotonic_ns()` read, so a timestamp a server's model writes into a
/// text delta can be compared with the moment the load generator reads it.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}
