//! The embedded demo upstream: an in-process gRPC inference server
//! (`inference.GRPCInferenceService` + `grpc.health.v1.Health`) with a few
//! small models, so that `tensorgate demo` works without any other server
//! and the integration tests have an upstream on `127.0.0.1:0`.
//!
//! It behaves like Triton 2.51's gRPC frontend for what it implements —
//! same validation order, error texts and gRPC codes — because tests
//! compare the gateway's answers with Triton's.
//!
//! Models (all version `1`):
//!
//! | model | inputs → outputs | max_batch_size |
//! |---|---|---|
//! | `add_sub` | INPUT0, INPUT1 FP32 `[-1]` → OUTPUT0 = a+b (labels `label0`..`label15`), OUTPUT1 = a−b | 0 |
//! | `identity_<type>` for bool, int8..64, uint8..64, fp16, bf16, fp32, fp64, bytes | INPUT0 → OUTPUT0, `[-1]` | 8 |
//! | `string_single` | INPUT0 BYTES `[1]` → OUTPUT0 | 0 |
//! | `slow_identity` | INPUT0 FP32 `[-1]` → OUTPUT0, after request parameter `delay_ms` ms | 0 |
//! | `repeat_decoupled` (decoupled) | INPUT0 INT32 `[1]` = N → N responses OUTPUT0 = `[i]`, 10 ms apart | 0 |
//!
//! `repeat_decoupled` answers only on `ModelStreamInfer`; the last of its
//! responses carries `triton_final_response: true` (N = 0 gives no response,
//! or one empty final response with `triton_enable_empty_final_response`).
//! Its pause comes from the config parameter `delay_ms`; a request parameter
//! `delay_ms` overrides it. A client that cancels the stream ends the pause
//! at once and is counted ([`DemoUpstream::cancelled_streams`]).
//!
//! Where the demo is not Triton: no shared memory can be registered (register
//! fails as for a key that cannot be opened, so shared-memory tensors are
//! always `Unable to find shared memory region`); trace and log settings
//! always read back the defaults; classification of BYTES outputs is an
//! error instead of Triton 2.51's crash; where Triton walks an unordered map
//! (inputs, parameters) the demo uses request order or key order.
//!
//! Code map: `models.rs` (the table and what each model computes),
//! `validate.rs` (request checks), `classify.rs` (top-K outputs),
//! `service.rs` (the RPCs), `stream_stats.rs` (stream counters), `tests.rs`.

mod classify;
mod models;
mod service;
mod stream_stats;
mod validate;

#[cfg(test)]
mod tests;

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tonic::transport::server::TcpIncoming;

use crate::proto::health::health_server::HealthServer;
use crate::proto::inference::grpc_inference_service_server::GrpcInferenceServiceServer;
use crate::proto::inference::ModelInferRequest;
use service::{DemoService, DemoState, HealthService};

/// Largest message the demo accepts or sends (64 MiB tensors pass).
const MAX_MESSAGE_SIZE: usize = 512 * 1024 * 1024;

/// How long [`DemoUpstream::shutdown`] waits for a background server to
/// finish its open calls before leaving it behind.
const SHUTDOWN_WAIT: Duration = Duration::from_secs(5);

/// A running demo upstream. Stops serving when shut down or dropped.
#[derive(Debug)]
pub struct DemoUpstream {
    addr: SocketAddr,
    state: Arc<DemoState>,
    stop: Option<oneshot::Sender<()>>,
    /// For [`DemoUpstream::start_in_background`]: the server's own thread.
    thread: Option<std::thread::JoinHandle<()>>,
}

/// Binds `addr` and returns the listener with the server future, which
/// runs until `stop` fires (then drains open calls gracefully).
async fn bind(
    addr: SocketAddr,
    state: Arc<DemoState>,
    stop: oneshot::Receiver<()>,
) -> std::io::Result<(SocketAddr, impl std::future::Future<Output = ()>)> {
    let listener = TcpListener::bind(addr).await?;
    let local_addr = listener.local_addr()?;
    let inference = GrpcInferenceServiceServer::new(DemoService { state })
        .max_decoding_message_size(MAX_MESSAGE_SIZE)
        .max_encoding_message_size(MAX_MESSAGE_SIZE);
    let server = tonic::transport::Server::builder()
        .add_service(inference)
        .add_service(HealthServer::new(HealthService))
        .serve_with_incoming_shutdown(
            // TCP_NODELAY: without it large messages stall on delayed ACKs.
            TcpIncoming::from(listener).with_nodelay(Some(true)),
            async {
                let _ = stop.await;
            },
        );
    let serve = async move {
        if let Err(error) = server.await {
            tracing::error!(%error, "demo upstream stopped");
        }
    };
    Ok((local_addr, serve))
}

impl DemoUpstream {
    /// Binds `addr` (e.g. `127.0.0.1:0`) and serves on the current tokio
    /// runtime (a spawned task). Returns once bound.
    pub async fn start(addr: SocketAddr) -> std::io::Result<DemoUpstream> {
        let state = Arc::new(DemoState::new());
        let (stop, stopped) = oneshot::channel();
        let (addr, serve) = bind(addr, state.clone(), stopped).await?;
        tokio::spawn(serve);
        tracing::info!(%addr, "demo upstream listening");
        Ok(DemoUpstream {
            addr,
            state,
            stop: Some(stop),
            thread: None,
        })
    }

    /// Starts on its own thread with its own tokio runtime (for callers
    /// that are not inside one, like `tensorgate demo`). Returns once bound.
    pub fn start_in_background(addr: SocketAddr) -> std::io::Result<DemoUpstream> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("demo-upstream")
            .enable_all()
            .build()?;
        let state = Arc::new(DemoState::new());
        let (stop, stopped) = oneshot::channel();
        let (bound_tx, bound_rx) = std::sync::mpsc::channel();
        let thread_state = state.clone();
        let thread = std::thread::Builder::new()
            .name("demo-upstream".to_owned())
            .spawn(move || {
                runtime.block_on(async move {
                    match bind(addr, thread_state, stopped).await {
                        Ok((addr, serve)) => {
                            let _ = bound_tx.send(Ok(addr));
                            serve.await;
                        }
                        Err(error) => {
                            let _ = bound_tx.send(Err(error));
                        }
                    }
                });
            })?;
        let addr = bound_rx
            .recv()
            .map_err(|_| std::io::Error::other("demo upstream thread ended before binding"))??;
        tracing::info!(%addr, "demo upstream listening");
        Ok(DemoUpstream {
            addr,
            state,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// The address actually bound.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// How many inference requests arrived: `ModelInfer` calls plus every
    /// request on a `ModelStreamInfer` stream, whether they succeeded or not.
    pub fn infer_count(&self) -> u64 {
        self.state.infer_count.load(Ordering::SeqCst)
    }

    /// The last inference request received (unary or streamed).
    pub fn last_request(&self) -> Option<ModelInferRequest> {
        self.state
            .last_request
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Responses sent on `ModelStreamInfer` streams (by paced models).
    pub fn streamed_responses(&self) -> u64 {
        self.state.streams.sent()
    }

    /// Stream requests abandoned because the client cancelled the stream
    /// (dropped its response stream) before their final response; noticed
    /// at once, even while a model pauses between responses.
    pub fn cancelled_streams(&self) -> u64 {
        self.state.streams.cancelled()
    }

    /// Waits until [`DemoUpstream::cancelled_streams`] reaches `n`; `false`
    /// if it did not within `timeout`.
    pub async fn wait_for_cancelled_streams(&self, n: u64, timeout: Duration) -> bool {
        self.state.streams.wait_cancelled(n, timeout).await
    }

    /// Stops serving: no new connections; open calls are drained. For a
    /// background server, waits (up to a few seconds) for its thread.
    pub fn shutdown(mut self) {
        self.stop_serving();
        if let Some(thread) = self.thread.take() {
            let deadline = Instant::now() + SHUTDOWN_WAIT;
            while !thread.is_finished() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(5));
            }
            if thread.is_finished() {
                let _ = thread.join();
            }
        }
    }

    fn stop_serving(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

impl Drop for DemoUpstream {
    fn drop(&mut self) {
        self.stop_serving();
    }
}
