//! What stops a long-running command (`worker`, `serve`): Ctrl-C, or SIGTERM on Unix
//! (what a service manager or `docker stop` sends).

/// Waits for Ctrl-C, or SIGTERM on Unix.
pub(crate) async fn signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}
