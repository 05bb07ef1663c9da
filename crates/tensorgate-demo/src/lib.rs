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
//! | `fixed_capacity` | as `add_sub` (without labels); at most 4 at once, 10 ms each, the others waiting in arrival order (400 req/s: the overload benchmark's upstream) | 0 |
//! | `repeat_decoupled` (decoupled) | INPUT0 INT32 `[1]` = N → N responses OUTPUT0 = `[i]`, 10 ms apart | 0 |
//! | `llm_vllm` (decoupled) | the vLLM backend's inputs (`text_input`, `sampling_parameters`, ...) → `text_output`, `num_input_tokens`, `num_output_tokens`: the prompt's words, a token each, 2 ms apart | 0 |
//! | `llm_trtllm` (decoupled) | the TensorRT-LLM backend's (`text_input`, `max_tokens`, `temperature`, ...; all but those two optional) → the same | 8 |
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
//! [`Quirks`] make it behave like KServe's or MLServer's gRPC front instead
//! (the tests of what the gateway makes of those servers).
//!
//! Code map: `models.rs` (the table and what each model computes),
//! `llm.rs` (the two language models), `capacity.rs` (a model's slots),
//! `validate.rs` (request checks), `classify.rs` (top-K outputs),
//! `quirks.rs` (the ways it can differ from Triton),
//! `service.rs` (the RPCs), `stream_stats.rs` (stream counters), `tests.rs`.

mod capacity;
mod classify;
mod llm;
mod models;
mod quirks;
mod service;
mod stream_stats;
mod validate;

#[cfg(test)]
mod tests;

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tonic::transport::server::TcpIncoming;

pub use quirks::Quirks;
use service::{DemoService, DemoState, HealthService};
use tensorgate_proto::health::health_server::HealthServer;
use tensorgate_proto::inference::grpc_inference_service_server::GrpcInferenceServiceServer;
use tensorgate_proto::inference::ModelInferRequest;

/// Largest message the demo accepts or sends: gRPC's own limit (a 4-byte
/// length), so the gateway's large-tensor tests (1 GiB) pass through it.
const MAX_MESSAGE_SIZE: usize = u32::MAX as usize;

/// How long [`DemoUpstream::shutdown`] waits for a background server to
/// finish its open calls before leaving it behind.
const SHUTDOWN_WAIT: Duration = Duration::from_secs(5);

/// A running demo upstream. Stops serving when shut down or dropped.
#[derive(Debug)]
pub struct DemoUpstream {
    addr: SocketAddr,
    state: Arc<DemoState>,
    stop: Option<oneshot::Sender<()>>,
    /// For [`DemoUpstream::start_in_background`]: its own runtime, so
    /// [`DemoUpstream::kill`] can drop every connection at once.
    runtime: Option<tokio::runtime::Runtime>,
    /// Fires when the server future has finished (graceful stop done).
    finished: Option<std::sync::Mutex<std::sync::mpsc::Receiver<()>>>,
}

/// Binds `addr` synchronously (so callers learn the port at once, inside
/// or outside a runtime) and returns the listener.
fn bind(addr: SocketAddr) -> std::io::Result<std::net::TcpListener> {
    let listener = std::net::TcpListener::bind(addr)?;
    listener.set_nonblocking(true)?;
    Ok(listener)
}

/// The server future: serves `listener` until `stop` fires (then drains
/// open calls gracefully).
async fn serve(
    listener: std::net::TcpListener,
    state: Arc<DemoState>,
    stop: oneshot::Receiver<()>,
) {
    serve_tls(listener, state, stop, None).await
}

/// [`serve`], with TLS (and client certificates) when `tls` is given.
async fn serve_tls(
    listener: std::net::TcpListener,
    state: Arc<DemoState>,
    stop: oneshot::Receiver<()>,
    tls: Option<tonic::transport::ServerTlsConfig>,
) {
    let listener = match TcpListener::from_std(listener) {
        Ok(listener) => listener,
        Err(error) => {
            tracing::error!(%error, "demo upstream cannot use its listener");
            return;
        }
    };
    let inference = GrpcInferenceServiceServer::new(DemoService { state })
        .max_decoding_message_size(MAX_MESSAGE_SIZE)
        .max_encoding_message_size(MAX_MESSAGE_SIZE);
    let mut builder = tonic::transport::Server::builder();
    if let Some(tls) = tls {
        builder = match builder.tls_config(tls) {
            Ok(builder) => builder,
            Err(error) => {
                tracing::error!(%error, "demo upstream: invalid TLS settings");
                return;
            }
        };
    }
    let server = builder
        .add_service(inference)
        .add_service(HealthServer::new(HealthService))
        .serve_with_incoming_shutdown(
            // TCP_NODELAY: without it large messages stall on delayed ACKs.
            TcpIncoming::from(listener).with_nodelay(Some(true)),
            async {
                let _ = stop.await;
            },
        );
    if let Err(error) = server.await {
        tracing::error!(%error, "demo upstream stopped");
    }
}

impl DemoUpstream {
    /// Like [`DemoUpstream::start`], over TLS with the PEM `cert` and `key`;
    /// with `client_ca`, clients must present a certificate it signed.
    pub async fn start_tls(
        addr: SocketAddr,
        cert: &[u8],
        key: &[u8],
        client_ca: Option<&[u8]>,
    ) -> std::io::Result<DemoUpstream> {
        use tonic::transport::{Certificate, Identity, ServerTlsConfig};
        let mut tls = ServerTlsConfig::new().identity(Identity::from_pem(cert, key));
        if let Some(ca) = client_ca {
            tls = tls.client_ca_root(Certificate::from_pem(ca));
        }
        DemoUpstream::start_on_current(addr, Some(tls))
    }

    /// Binds `addr` (e.g. `127.0.0.1:0`) and serves on the current tokio
    /// runtime (a spawned task). Returns once bound.
    pub async fn start(addr: SocketAddr) -> std::io::Result<DemoUpstream> {
        DemoUpstream::start_on_current(addr, None)
    }

    fn start_on_current(
        addr: SocketAddr,
        tls: Option<tonic::transport::ServerTlsConfig>,
    ) -> std::io::Result<DemoUpstream> {
        let listener = bind(addr)?;
        let addr = listener.local_addr()?;
        let state = Arc::new(DemoState::new());
        let (stop, stopped) = oneshot::channel();
        tokio::spawn(serve_tls(listener, state.clone(), stopped, tls));
        tracing::info!(%addr, "demo upstream listening");
        Ok(DemoUpstream {
            addr,
            state,
            stop: Some(stop),
            runtime: None,
            finished: None,
        })
    }

    /// Starts on its own tokio runtime (for callers that are not inside
    /// one, like `tensorgate demo`, and for tests that kill upstreams).
    /// Returns once bound.
    pub fn start_in_background(addr: SocketAddr) -> std::io::Result<DemoUpstream> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("demo-upstream")
            .enable_all()
            .build()?;
        let listener = bind(addr)?;
        let addr = listener.local_addr()?;
        let state = Arc::new(DemoState::new());
        let (stop, stopped) = oneshot::channel();
        let (finished_tx, finished) = std::sync::mpsc::channel();
        let server_state = state.clone();
        runtime.spawn(async move {
            serve(listener, server_state, stopped).await;
            let _ = finished_tx.send(());
        });
        tracing::info!(%addr, "demo upstream listening");
        Ok(DemoUpstream {
            addr,
            state,
            stop: Some(stop),
            runtime: Some(runtime),
            finished: Some(std::sync::Mutex::new(finished)),
        })
    }

    /// Like a crashed server: for a background server, every connection
    /// and call is dropped at once (peers see resets, then refusals).
    /// Returns once the listener and every connection are closed, so the
    /// next connect is refused (not accepted by a dying server and reset).
    pub fn kill(mut self) {
        if let Some(runtime) = self.runtime.take() {
            // A runtime cannot be dropped inside async code: on a thread of
            // its own, joined; dropping it drops every task and socket.
            let _ = std::thread::spawn(move || drop(runtime)).join();
        }
    }

    /// Reports `ServerReady` as `ready` (inference keeps working, as on a
    /// server that is draining).
    pub fn set_ready(&self, ready: bool) {
        self.state.ready.store(ready, Ordering::SeqCst);
    }

    /// While hung, every call is accepted and never answered (until the
    /// hang is lifted). Connections stay open.
    pub fn set_hang(&self, hang: bool) {
        self.state.hang.send_replace(hang);
    }

    /// Behaves like another server's gRPC front from now on ([`Quirks`]).
    pub fn set_quirks(&self, quirks: Quirks) {
        *self
            .state
            .quirks
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = quirks;
    }

    /// Loads or unloads a model, as repository control would.
    pub fn set_loaded(&self, model: &str, loaded: bool) {
        self.state.set_loaded(model, loaded);
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

    /// How often `method` was called: `"ModelConfig"`, `"ModelMetadata"`
    /// or `"RepositoryIndex"` (the RPCs a server may lack), refused or not.
    pub fn calls(&self, method: &str) -> u64 {
        let calls = self
            .state
            .calls
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        calls.get(method).copied().unwrap_or(0)
    }

    /// The `traceparent` metadata of the last `ModelInfer` call.
    pub fn last_traceparent(&self) -> Option<String> {
        self.state
            .last_traceparent
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
    /// background server, waits (up to a few seconds) for the drain.
    pub fn shutdown(mut self) {
        self.stop_serving();
        if let Some(finished) = self.finished.take() {
            let finished = finished.into_inner().unwrap_or_else(|e| e.into_inner());
            let _ = finished.recv_timeout(SHUTDOWN_WAIT);
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
        if let Some(runtime) = self.runtime.take() {
            // Dropping a runtime may block, which async contexts forbid.
            runtime.shutdown_background();
        }
    }
}
