//! [`serve`]: the router on a TCP listener, bounded: HTTP/1.1 (what the AI SDK's
//! transport speaks) with `TCP_NODELAY`, a header-read timeout that also closes a
//! connection idle between requests or silent from its start, and a cap on the
//! connections served at once.
//!
//! `axum::serve` sets none of these (no timer, no limit): 1,100 idle sockets at the
//! common 1,024-file limit stopped a server answering anyone. hyper's own HTTP/1
//! connection does it with a timer (`header_read_timeout` starts when the connection
//! opens and again when it waits for its next request); only the accept loop and the
//! graceful shutdown are written here.

use std::future::Future;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

/// How connections are bounded ([`ServeConfig`](crate::ServeConfig) holds them).
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Connections served at once; one more waits in the kernel's backlog.
    pub max_connections: usize,
    /// Headers must arrive, and an idle connection send its next request, within this.
    pub header_timeout: Duration,
}

/// How long the answers in flight get to end when the server stops.
const DRAIN: Duration = Duration::from_secs(10);

/// Serves `router` on `listener` within `limits` until `shutdown` resolves, then stops
/// accepting and gives the open connections 10 s to end.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: Limits,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    let slots = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let graceful = GracefulShutdown::new();
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout);
    tokio::pin!(shutdown);
    loop {
        let permit = tokio::select! {
            _ = &mut shutdown => break,
            p = slots.clone().acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => break,
            },
        };
        let accepted = tokio::select! {
            _ = &mut shutdown => break,
            a = listener.accept() => a,
        };
        let tcp = match accepted {
            Ok((tcp, _)) => tcp,
            Err(e) => {
                // Out of files or memory for a moment: wait, then accept again.
                tracing::warn!(error = %e, "cannot accept a connection");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        // Each chunk leaves at once: a stream of small chunks otherwise waits on Nagle's
        // algorithm and the client's delayed ACK (up to 40 ms a chunk; `bench/serve`).
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(error = %e, "cannot set TCP_NODELAY");
        }
        let service = TowerToHyperService::new(router.clone());
        let connection = graceful.watch(builder.serve_connection(TokioIo::new(tcp), service));
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!(error = %e, "connection ended");
            }
            drop(permit);
        });
    }
    drop(listener);
    if tokio::time::timeout(DRAIN, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::info!("connections still open after the drain time; stopping anyway");
    }
    Ok(())
}
