//! The serving threads: `server.threads` OS threads, each with a
//! single-threaded tokio runtime that accepts on every client listener
//! (its own handle on the shared socket) and serves what it accepts to
//! the end, with its own channels to the backends
//! (`upstream::thread_slot`). A request never leaves its thread, so no
//! thread wakes another on the way: nginx's worker model, inside one
//! process. An idle thread is the first to take a new connection, which
//! spreads the load; a connection then stays where it was accepted.
//!
//! Threads run until the process exits. Stopping is not theirs to do: the
//! drain service waits for in-flight requests and open connections, then
//! pingora ends the process.

use std::future::Future;
use std::sync::Arc;

use crate::upstream::thread_slot;

/// Starts `count` serving threads; each runs `serve(index)` on its own
/// runtime (the future may spawn the thread's accept loops and return).
pub(crate) fn spawn<F, Fut>(count: usize, serve: F) -> std::io::Result<()>
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + 'static,
{
    let serve = Arc::new(serve);
    for index in 0..count {
        let serve = serve.clone();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        std::thread::Builder::new()
            .name(format!("tensorgate-serve-{index}"))
            .spawn(move || {
                thread_slot::enter_serving_thread(index);
                runtime.block_on(async move {
                    serve(index).await;
                    std::future::pending::<()>().await
                })
            })?;
    }
    Ok(())
}
