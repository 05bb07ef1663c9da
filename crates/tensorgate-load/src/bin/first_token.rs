//! `first_token`: the time to the first token of one LLM stream, read
//! (a) directly over gRPC `ModelStreamInfer` and (b) through tensorgate's
//! OpenAI front as `POST /v1/completions` with `"stream": true`, one
//! request at a time, alternating, on one kept-alive HTTP/2 connection and
//! one kept-alive HTTP/1.1 connection. `scripts/bench-openai.py` runs it
//! (docs/performance.md, "OpenAI streams").
//!
//! Both clients are written on `h2` and raw sockets, like the load tool's
//! (no tonic or HTTP client library in the measured legs): the request
//! bytes are made once; the time runs from the request's first write to
//! the first DATA frame (a) or the first complete `data:` event (b); each
//! stream is then read to its end before the next request.
//!
//! ```text
//! first_token --upstream 127.0.0.1:8001 --gateway 127.0.0.1:8000 --model llm_vllm
//! ```
//!
//! Prints one JSON object: the rounds and, for each leg, p50 and p99 in
//! microseconds.

use std::io;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::{BufMut, Bytes, BytesMut};
use clap::Parser;
use prost::Message;
use tensorgate_proto::inference::model_infer_request::InferInputTensor;
use tensorgate_proto::inference::ModelInferRequest;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const PATH: &str = "/inference.GRPCInferenceService/ModelStreamInfer";
/// Unmeasured rounds first: connections, the gateway's model cache.
const WARMUP_ROUNDS: usize = 10;

#[derive(Parser, Debug)]
struct Args {
    /// The gRPC server (the demo upstream) as IP:PORT.
    #[arg(long)]
    upstream: SocketAddr,
    /// The gateway's HTTP listener as IP:PORT.
    #[arg(long)]
    gateway: SocketAddr,
    /// A model of the vLLM backend's inputs.
    #[arg(long, default_value = "llm_vllm")]
    model: String,
    /// Measured rounds (each one stream of each leg).
    #[arg(long, default_value_t = 300)]
    rounds: usize,
    /// Tokens of each stream.
    #[arg(long, default_value_t = 4)]
    tokens: usize,
}

fn prompt(tokens: usize) -> String {
    (0..tokens)
        .map(|i| format!("w{i}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The framed `ModelStreamInfer` request the gateway sends for the same
/// completion (the vLLM convention's inputs).
fn grpc_message(model: &str, tokens: usize) -> Bytes {
    let bytes = |text: &str| {
        let mut out = (text.len() as u32).to_le_bytes().to_vec();
        out.extend_from_slice(text.as_bytes());
        out
    };
    let sampling = format!("{{\"max_tokens\":{tokens}}}");
    let inputs = [
        ("text_input", "BYTES", bytes(&prompt(tokens))),
        ("stream", "BOOL", vec![1]),
        ("sampling_parameters", "BYTES", bytes(&sampling)),
    ];
    let request = ModelInferRequest {
        model_name: model.to_string(),
        inputs: inputs
            .iter()
            .map(|(name, datatype, _)| InferInputTensor {
                name: name.to_string(),
                datatype: datatype.to_string(),
                shape: vec![1],
                ..Default::default()
            })
            .collect(),
        raw_input_contents: inputs.into_iter().map(|(_, _, raw)| raw.into()).collect(),
        ..Default::default()
    };
    let len = request.encoded_len();
    let mut framed = BytesMut::with_capacity(5 + len);
    framed.put_u8(0);
    framed.put_u32(len as u32);
    request.encode(&mut framed).expect("sized to the message");
    framed.freeze()
}

fn http_request(gateway: SocketAddr, model: &str, tokens: usize) -> Vec<u8> {
    let body = format!(
        "{{\"model\":\"{model}\",\"prompt\":\"{}\",\"max_tokens\":{tokens},\"stream\":true}}",
        prompt(tokens)
    );
    format!(
        "POST /v1/completions HTTP/1.1\r\nHost: {gateway}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

fn h2_error(e: h2::Error) -> io::Error {
    io::Error::other(format!("h2: {e}"))
}

/// The direct leg: one stream on `send`; the time to its first DATA frame.
async fn direct(
    send: &h2::client::SendRequest<Bytes>,
    authority: &str,
    message: &Bytes,
) -> io::Result<Duration> {
    let mut send = send.clone().ready().await.map_err(h2_error)?;
    let request = http::Request::post(format!("http://{authority}{PATH}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(())
        .map_err(|e| io::Error::other(e.to_string()))?;
    let started = Instant::now();
    let (answer, mut stream) = send.send_request(request, false).map_err(h2_error)?;
    stream.send_data(message.clone(), true).map_err(h2_error)?;
    let mut body = answer.await.map_err(h2_error)?.into_body();
    let mut first = None;
    while let Some(chunk) = body.data().await {
        let chunk = chunk.map_err(h2_error)?;
        first.get_or_insert_with(|| started.elapsed());
        let _ = body.flow_control().release_capacity(chunk.len());
    }
    first.ok_or_else(|| io::Error::other("a stream without a response"))
}

/// The gateway leg: one request on `conn`; the time to its first event.
async fn through(conn: &mut TcpStream, request: &[u8], buf: &mut Vec<u8>) -> io::Result<Duration> {
    buf.clear();
    let started = Instant::now();
    conn.write_all(request).await?;
    let mut first = None;
    let mut chunk = [0u8; 16384];
    // The body's end: `[DONE]` and the chunked terminator after it.
    while !buf.ends_with(b"data: [DONE]\n\n\r\n0\r\n\r\n") {
        let got = conn.read(&mut chunk).await?;
        if got == 0 {
            return Err(io::Error::other("the gateway closed the connection"));
        }
        buf.extend_from_slice(&chunk[..got]);
        if first.is_none() {
            let head_end = buf.windows(4).position(|w| w == b"\r\n\r\n");
            let event = head_end.is_some_and(|at| buf[at + 4..].windows(2).any(|w| w == b"\n\n"));
            if event {
                first = Some(started.elapsed());
            }
        }
    }
    if !buf.starts_with(b"HTTP/1.1 200") {
        return Err(io::Error::other(String::from_utf8_lossy(buf).into_owned()));
    }
    first.ok_or_else(|| io::Error::other("no event"))
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    let at = ((sorted.len() - 1) as f64 * p / 100.0).round() as usize;
    sorted[at].as_secs_f64() * 1e6
}

async fn run(args: Args) -> io::Result<serde_json::Value> {
    let tcp = TcpStream::connect(args.upstream).await?;
    tcp.set_nodelay(true)?;
    let (send, connection) = h2::client::handshake(tcp).await.map_err(h2_error)?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    let mut conn = TcpStream::connect(args.gateway).await?;
    conn.set_nodelay(true)?;
    let authority = args.upstream.to_string();
    let message = grpc_message(&args.model, args.tokens);
    let request = http_request(args.gateway, &args.model, args.tokens);
    let (mut direct_times, mut gateway_times, mut buf) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..WARMUP_ROUNDS + args.rounds {
        let d = direct(&send, &authority, &message).await?;
        let g = through(&mut conn, &request, &mut buf).await?;
        if round >= WARMUP_ROUNDS {
            direct_times.push(d);
            gateway_times.push(g);
        }
    }
    direct_times.sort();
    gateway_times.sort();
    Ok(serde_json::json!({
        "rounds": args.rounds,
        "direct_p50_us": percentile(&direct_times, 50.0),
        "direct_p99_us": percentile(&direct_times, 99.0),
        "gateway_p50_us": percentile(&gateway_times, 50.0),
        "gateway_p99_us": percentile(&gateway_times, 99.0),
    }))
}

fn main() -> std::process::ExitCode {
    let args = Args::parse();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    match runtime.block_on(run(args)) {
        Ok(result) => {
            println!("{result}");
            std::process::ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("first_token: {error}");
            std::process::ExitCode::FAILURE
        }
    }
}
