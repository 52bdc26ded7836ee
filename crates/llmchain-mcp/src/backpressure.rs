//! [`Backpressure`]: a server transport that stops reading requests while too many of
//! its answers wait to be written.
//!
//! rmcp writes each answer on a task of its own (its transport's `send` future), so a
//! client that sends calls and never reads the answers (its end of the pipe full) left
//! one task and one answer per call in memory: 1.07 M calls grew a server from 615 MB
//! to 5.1 GB in 25 s. The bound on calls in flight ([`ToolServer::with_max_in_flight`])
//! did not help: a call's permit is returned when its answer is made, not written, and
//! the "busy" answers themselves piled up. Here a request is read only with a slot free,
//! and its slot comes back once its answer was written: at most `slots` answers ever
//! wait, and a client that does not read is simply not read from (the pipe's own
//! backpressure does the rest).
//!
//! [`ToolServer::with_max_in_flight`]: crate::ToolServer::with_max_in_flight

use std::sync::Arc;

use rmcp::RoleServer;
use rmcp::model::JsonRpcMessage;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use tokio::sync::Semaphore;

/// Wraps a server transport; see the module's docs.
pub(crate) struct Backpressure<T> {
    inner: T,
    slots: Arc<Semaphore>,
}

impl<T> Backpressure<T> {
    /// At most `slots` requests read and not yet answered on the wire.
    pub(crate) fn new(inner: T, slots: usize) -> Self {
        Backpressure {
            inner,
            slots: Arc::new(Semaphore::new(slots.max(1))),
        }
    }
}

impl<T: Transport<RoleServer>> Transport<RoleServer> for Backpressure<T> {
    type Error = T::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        // An answer (a result or an error) gives its request's slot back once written.
        let answer = matches!(item, JsonRpcMessage::Response(_) | JsonRpcMessage::Error(_));
        let slots = self.slots.clone();
        let send = self.inner.send(item);
        async move {
            let sent = send.await;
            if answer {
                slots.add_permits(1);
            }
            sent
        }
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleServer>>> + Send {
        let slots = self.slots.clone();
        let inner = &mut self.inner;
        // Cancel-safe (rmcp polls this in a `select!`): a slot taken and then dropped
        // with the future goes back; the inner transport's read is cancel-safe.
        async move {
            let slot = slots.acquire_owned().await.ok()?;
            let message = inner.receive().await?;
            if matches!(message, JsonRpcMessage::Request(_)) {
                // Held until the answer is written (`send`).
                slot.forget();
            }
            Some(message)
        }
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}
