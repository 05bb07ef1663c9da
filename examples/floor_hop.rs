//! The floor of the HTTP → gRPC hop on this stack, for
//! `docs/performance.md`'s cost budget: pingora's HTTP/1 session in front,
//! the `h2` crate behind, on one tokio thread, and nothing of tensorgate;
//! and the floor of the gRPC passthrough, `h2` on both sides.
//!
//! Each HTTP/1 request is read whole (head and body), then one `ModelInfer`
//! call goes to the backend with a request encoded once at start (add_sub,
//! 2×16 FP32), its answer is read to its trailers, and the client gets a
//! fixed binary add_sub answer. No parsing, translation, routing, metrics or
//! logs: what is left is what the libraries cost per request, the part of
//! the budget tensorgate's own code cannot cut.
//!
//! ```text
//! cargo build --release --example floor_hop
//! target/release/examples/floor_hop --listen 127.0.0.1:9000 --upstream 127.0.0.1:8001
//! ```
//!
//! With `--grpc-listen`, it also relays gRPC (h2 in, the same h2
//! connection out, a call's request read whole, its answer relayed as it
//! comes, headers as they are): the floor of the passthrough.
//!
//! It takes tensorgate's `--listen`, `--upstream`, `--admin-listen` and
//! `--grpc-listen` and ignores its other flags, so
//! `scripts/bench-instructions` and `scripts/bench-ab` measure it beside
//! the gateway. A `GET` is answered `200`: empty (the scripts' readiness probe), or on
//! `/metrics` the count of calls, as tensorgate's metric the scripts read.
//! Same allocator as the gateway (mimalloc).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};
use pingora_core::protocols::http::ServerSession;
use pingora_core::protocols::l4::stream::Stream as L4Stream;
use pingora_core::protocols::Stream;
use pingora_http::ResponseHeader;

mod add_sub;

/// What every request sends and answers, made once at start.
struct Fixed {
    /// The `ModelInfer` request as a gRPC message.
    call: Bytes,
    /// The binary answer to the client.
    answer: Bytes,
    /// The length of the answer's JSON header, as its header's value.
    header_len: String,
}

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Calls answered, for `/metrics`.
static CALLS: AtomicU64 = AtomicU64::new(0);

/// add_sub's two inputs: 16 FP32 each.
const ELEMENTS: usize = 16;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let flag = |name: &str| {
        let at = args.iter().position(|a| a == name)?;
        args.get(at + 1)?.parse::<SocketAddr>().ok()
    };
    let (Some(listen), Some(upstream)) = (flag("--listen"), flag("--upstream")) else {
        eprintln!("usage: floor_hop --listen ADDR --upstream ADDR");
        std::process::exit(2);
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    runtime.block_on(serve(
        listen,
        flag("--admin-listen"),
        flag("--grpc-listen"),
        upstream,
    ));
}

async fn serve(
    listen: SocketAddr,
    admin: Option<SocketAddr>,
    grpc: Option<SocketAddr>,
    upstream: SocketAddr,
) {
    let tcp = tokio::net::TcpStream::connect(upstream)
        .await
        .expect("the backend accepts");
    tcp.set_nodelay(true).expect("TCP_NODELAY");
    let (backend, connection) = h2::client::handshake(tcp).await.expect("h2 handshake");
    tokio::spawn(connection);
    let fixed = Arc::new(Fixed {
        call: call_message(),
        answer: answer_body(),
        header_len: answer_header().len().to_string(),
    });
    if let Some(admin) = admin {
        tokio::spawn(accept(admin, http1(&backend, &fixed)));
    }
    if let Some(grpc) = grpc {
        let backend = backend.clone();
        tokio::spawn(accept(grpc, move |tcp| {
            relay_connection(tcp, backend.clone())
        }));
    }
    accept(listen, http1(&backend, &fixed)).await;
}

/// Accepts on `listen` for ever, each connection (TCP_NODELAY) served by
/// its own task.
async fn accept<F, Fut>(listen: SocketAddr, serve: F)
where
    F: Fn(tokio::net::TcpStream) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .expect("the listen address is free");
    loop {
        let Ok((tcp, _)) = listener.accept().await else {
            continue;
        };
        let _ = tcp.set_nodelay(true);
        tokio::spawn(serve(tcp));
    }
}

/// The HTTP/1 listener's connections.
fn http1(
    backend: &h2::client::SendRequest<Bytes>,
    fixed: &Arc<Fixed>,
) -> impl Fn(tokio::net::TcpStream) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>
{
    let (backend, fixed) = (backend.clone(), fixed.clone());
    move |tcp| {
        let stream: Stream = Box::new(L4Stream::from(tcp));
        Box::pin(connection_loop(stream, backend.clone(), fixed.clone()))
    }
}

/// Serves one client connection's requests until it closes.
async fn connection_loop(
    mut stream: Stream,
    backend: h2::client::SendRequest<Bytes>,
    fixed: Arc<Fixed>,
) {
    loop {
        let mut session = ServerSession::new_http1(stream);
        if !matches!(session.read_request().await, Ok(true)) {
            return;
        }
        let infer = session.req_header().method == http::Method::POST;
        while let Ok(Some(_)) = session.read_request_body().await {}
        let body = if infer {
            if model_infer(backend.clone(), fixed.call.clone())
                .await
                .is_none()
            {
                return;
            }
            CALLS.fetch_add(1, Relaxed);
            fixed.answer.clone()
        } else {
            get(session.req_header().uri.path())
        };
        let header_len = infer.then_some(fixed.header_len.as_str());
        if respond(&mut session, header_len, body).await.is_none() {
            return;
        }
        let ServerSession::H1(h1) = session else {
            return;
        };
        match h1.reuse().await {
            Ok(Some(reused)) => stream = reused.into_parts().0,
            _ => return,
        }
    }
}

/// One gRPC client connection: h2 in, each stream relayed on the one
/// backend connection.
async fn relay_connection(tcp: tokio::net::TcpStream, backend: h2::client::SendRequest<Bytes>) {
    let Ok(mut connection) = h2::server::handshake(tcp).await else {
        return;
    };
    while let Some(Ok((request, respond))) = connection.accept().await {
        tokio::spawn(relay_call(request, respond, backend.clone()));
    }
}

/// One gRPC call relayed: the request's head as it came and its body read
/// whole, then the answer's head, DATA and trailers as they come.
async fn relay_call(
    request: http::Request<h2::RecvStream>,
    mut respond: h2::server::SendResponse<Bytes>,
    backend: h2::client::SendRequest<Bytes>,
) -> Option<()> {
    let (head, mut body) = request.into_parts();
    let infer = head.uri.path().ends_with("/ModelInfer");
    let mut message = BytesMut::new();
    while let Some(data) = body.data().await {
        let data = data.ok()?;
        let _ = body.flow_control().release_capacity(data.len());
        message.extend_from_slice(&data);
    }
    let mut backend = backend.ready().await.ok()?;
    let upstream = http::Request::from_parts(head, ());
    let (answer, mut send) = backend.send_request(upstream, false).ok()?;
    send.send_data(message.freeze(), true).ok()?;
    let (head, mut body) = answer.await.ok()?.into_parts();
    let only_head = body.is_end_stream();
    let mut out = respond
        .send_response(http::Response::from_parts(head, ()), only_head)
        .ok()?;
    while let Some(data) = body.data().await {
        let data = data.ok()?;
        let _ = body.flow_control().release_capacity(data.len());
        out.send_data(data, false).ok()?;
    }
    if let Some(trailers) = body.trailers().await.ok()? {
        out.send_trailers(trailers).ok()?;
    }
    if infer {
        CALLS.fetch_add(1, Relaxed);
    }
    Some(())
}

/// A `GET`'s answer: what perf_analyzer reads before it starts (the
/// server's and add_sub's metadata and configuration, as Triton 2.51 gives
/// them, trimmed; statistics counting the calls, which perf_analyzer
/// needs to see grow), the
/// call count on `/metrics`, and an empty body elsewhere.
fn get(path: &str) -> Bytes {
    const METADATA: &str = r#"{"name":"add_sub","versions":["1"],"platform":"python","inputs":[{"name":"INPUT0","datatype":"FP32","shape":[-1]},{"name":"INPUT1","datatype":"FP32","shape":[-1]}],"outputs":[{"name":"OUTPUT0","datatype":"FP32","shape":[-1]},{"name":"OUTPUT1","datatype":"FP32","shape":[-1]}]}"#;
    const CONFIG: &str = r#"{"name":"add_sub","backend":"python","max_batch_size":0,"input":[{"name":"INPUT0","data_type":"TYPE_FP32","dims":[-1]},{"name":"INPUT1","data_type":"TYPE_FP32","dims":[-1]}],"output":[{"name":"OUTPUT0","data_type":"TYPE_FP32","dims":[-1]},{"name":"OUTPUT1","data_type":"TYPE_FP32","dims":[-1]}]}"#;
    const SERVER: &str = r#"{"name":"triton","version":"2.51.0","extensions":["classification","sequence","model_repository","schedule_policy","model_configuration","system_shared_memory","cuda_shared_memory","binary_tensor_data","parameters","statistics","trace","logging"]}"#;
    match path {
        "/v2" => Bytes::from_static(SERVER.as_bytes()),
        "/v2/models/add_sub" => Bytes::from_static(METADATA.as_bytes()),
        "/v2/models/add_sub/config" => Bytes::from_static(CONFIG.as_bytes()),
        "/metrics" => {
            let calls = CALLS.load(Relaxed);
            format!("tensorgate_upstream_requests_total{{outcome=\"ok\"}} {calls}\n").into()
        }
        _ if path.ends_with("/stats") => stats(CALLS.load(Relaxed)).into(),
        _ => Bytes::new(),
    }
}

/// add_sub's statistics after `calls` calls, in Triton's shape.
fn stats(calls: u64) -> String {
    let zero = r#"{"count":0,"ns":0}"#;
    let counted = format!(r#"{{"count":{calls},"ns":{}}}"#, calls * 1000);
    format!(
        r#"{{"model_stats":[{{"name":"add_sub","version":"1","last_inference":0,"inference_count":{calls},"execution_count":{calls},"inference_stats":{{"success":{counted},"fail":{zero},"queue":{counted},"compute_input":{counted},"compute_infer":{counted},"compute_output":{counted},"cache_hit":{zero},"cache_miss":{zero}}},"response_stats":{{}},"batch_stats":[],"memory_usage":[]}}]}}"#
    )
}

/// Writes the fixed answer (binary add_sub outputs, `header_len` the
/// length of its JSON part) or an empty `200`.
async fn respond(session: &mut ServerSession, header_len: Option<&str>, body: Bytes) -> Option<()> {
    let mut head = ResponseHeader::build(200, Some(3)).ok()?;
    if let Some(len) = header_len {
        head.insert_header("Content-Type", "application/octet-stream")
            .ok()?;
        head.insert_header("Inference-Header-Content-Length", len.to_owned())
            .ok()?;
    }
    head.insert_header("Content-Length", body.len().to_string())
        .ok()?;
    session.write_response_header(Box::new(head)).await.ok()?;
    session.write_response_body(body, true).await.ok()?;
    session.finish_body().await.ok()?;
    Some(())
}

/// One unary `ModelInfer` on the shared connection, read to its trailers.
async fn model_infer(backend: h2::client::SendRequest<Bytes>, call: Bytes) -> Option<()> {
    let request = http::Request::post("http://backend/inference.GRPCInferenceService/ModelInfer")
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(())
        .ok()?;
    let mut backend = backend.ready().await.ok()?;
    let (answer, mut send) = backend.send_request(request, false).ok()?;
    send.send_data(call, true).ok()?;
    let mut body = answer.await.ok()?.into_body();
    while let Some(data) = body.data().await {
        let data = data.ok()?;
        let _ = body.flow_control().release_capacity(data.len());
    }
    let trailers = body.trailers().await.ok()??;
    (trailers.get("grpc-status")? == "0").then_some(())
}

/// The `ModelInfer` request as a gRPC message (5-byte prefix), made once:
/// both inputs 0, 1, … 15.
fn call_message() -> Bytes {
    let values: Vec<f32> = (0..ELEMENTS).map(|i| i as f32).collect();
    add_sub::call(&values, &values, &[])
}

/// The JSON header of the fixed answer.
fn answer_header() -> String {
    let output = |name: &str| {
        format!(
            r#"{{"name":"{name}","datatype":"FP32","shape":[{ELEMENTS}],"parameters":{{"binary_data_size":{}}}}}"#,
            ELEMENTS * 4
        )
    };
    format!(
        r#"{{"model_name":"add_sub","model_version":"1","outputs":[{},{}]}}"#,
        output("OUTPUT0"),
        output("OUTPUT1")
    )
}

/// The fixed answer: the JSON header, then both outputs' bytes.
fn answer_body() -> Bytes {
    let mut body = BytesMut::from(answer_header().as_bytes());
    for _ in 0..2 {
        for i in 0..ELEMENTS {
            body.put_f32_le(i as f32);
        }
    }
    body.freeze()
}
