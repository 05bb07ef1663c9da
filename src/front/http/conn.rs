//! One downstream HTTP connection, from accept to close, with a deadline on
//! every step a client could stall (`[connections]`):
//!
//! 1. the connection takes a slot under `max_connections`, or is answered
//!    `503` + `Connection: close` (`server::listen`);
//! 2. its first bytes (or TLS handshake) must arrive within
//!    `handshake_timeout_ms`; they tell an h2c preface from HTTP/1;
//! 3. HTTP/1: each request head must be complete within
//!    `header_timeout_ms` of its first byte (a total, not reset by every
//!    byte), and an idle keep-alive connection is closed after
//!    `keepalive_timeout_ms`. Once draining, answers say
//!    `Connection: close`; an idle connection may still send one request
//!    (answered so) until the drain's last phase closes it;
//! 4. h2 (h2c or TLS ALPN): pingora's h2 server drives the connection
//!    (GOAWAY on drain, closed when idle); each stream is one request.
//!
//! A head that cannot be parsed, is too large or comes too slowly gets its
//! `{"error":...}` answer from the one error table. Every close the
//! gateway decides is a lingering close (`app::linger`), so the client
//! reads the answer even while it is still writing.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::BytesMut;
use pingora_core::apps::{HttpServerApp, HttpServerOptions, ReusedHttpStream, ServerApp};
use pingora_core::protocols::http::ServerSession;
use pingora_core::protocols::Stream;
use pingora_core::server::ShutdownWatch;
use tokio::io::AsyncReadExt;

use crate::connections::linger::close_lingering;
use crate::connections::OpenConnections;
use crate::error::{Error, Kind};
use crate::front::http::session::GatewayService;
use crate::front::http::write_buffer::WriteBuffered;
use crate::front::http::HttpResponse;

/// Serves HTTP/1 requests on one connection (a [`WriteBuffered`] stream)
/// until it closes, a deadline passes, or the drain ends it. `first` holds
/// bytes already read from the stream (by `connections::sniff`); empty for
/// TLS, whose first request then gets `handshake_timeout_ms` for its first
/// byte. Every close the gateway decides is a lingering close
/// ([`close_lingering`]).
pub(crate) async fn serve_http1(
    service: &GatewayService,
    mut stream: Stream,
    mut first: BytesMut,
    shutdown: &ShutdownWatch,
    open: &OpenConnections,
) {
    let timeouts = &service.gateway().config().connections;
    let mut wait = timeouts.handshake_timeout();
    loop {
        if first.is_empty() {
            match next_bytes(&mut stream, &mut first, wait, open).await {
                Next::Request => {}
                Next::Gone => return,
                Next::Idle => return close(service, stream, false).await,
                Next::Closing => return close(service, stream, true).await,
            }
        }
        // Boxed: the request's future (its head, the handler, the answer)
        // lives only while it is served. Inline, every idle connection's
        // task would hold its 20 KiB (measured: the connection task's
        // future was 21,472 bytes, the handler's 9,984 of them). It is
        // written into its box where it is made: `Box::pin` would make it
        // on the stack and copy its whole size into the box.
        let slot = Box::new_uninit();
        let served = Box::write(
            slot,
            one_request(service, stream, std::mem::take(&mut first), shutdown),
        );
        match Box::into_pin(served).await {
            After::Reuse(next, over) => {
                stream = next;
                first = over;
            }
            After::Close(stream) => return close(service, stream, false).await,
            After::Gone => return,
        }
        wait = timeouts.keepalive_timeout();
    }
}

/// Reads one request's head (its first bytes in `first`), serves it and
/// ends its answer; a head that cannot be read is answered and the
/// connection closed here.
async fn one_request(
    service: &GatewayService,
    stream: Stream,
    first: BytesMut,
    shutdown: &ShutdownWatch,
) -> After {
    let timeouts = &service.gateway().config().connections;
    let inflight = service.gateway().inflight().enter();
    let mut session = ServerSession::new_http1(stream);
    session.set_pipelined_prefix(first);
    session.set_keepalive(Some(KEEPALIVE_UNTIMED));
    let head = tokio::time::timeout(timeouts.header_timeout(), session.read_request()).await;
    match head {
        Ok(Ok(true)) => {}
        Ok(Ok(false)) => return After::Gone,
        Ok(Err(e)) => {
            refuse_head(service, session, head_error(&e)).await;
            return After::Gone;
        }
        Err(_) => {
            let error = Error::new(
                Kind::RequestTimeout,
                format!(
                    "the request head did not arrive within {} ms (connections.header_timeout_ms)",
                    timeouts.header_timeout_ms
                ),
            );
            refuse_head(service, session, Some(error)).await;
            return After::Gone;
        }
    }
    service.serve(&mut session, shutdown).await;
    drop(inflight);
    finish(session).await
}

/// How a connection goes on after an answer.
enum After {
    /// Kept alive: the stream, and bytes of the next request already read.
    Reuse(Stream, BytesMut),
    /// To be closed (`Connection: close`, a refusal, the drain).
    Close(Stream),
    /// Broken or closed already.
    Gone,
}

/// Ends the answer's message, then hands the stream back to be reused or
/// closed: pingora's own `finish` would close a connection that is not
/// kept alive without lingering.
async fn finish(session: ServerSession) -> After {
    let ServerSession::H1(mut h1) = session else {
        return After::Gone;
    };
    if h1.finish_body().await.is_err() {
        return After::Gone;
    }
    if !h1.will_keepalive() {
        return After::Close(h1.into_inner());
    }
    match h1.reuse().await {
        Ok(Some(reusable)) => {
            let (stream, over) = reusable.into_parts();
            After::Reuse(stream, over.unwrap_or_default())
        }
        _ => After::Gone,
    }
}

/// Closes the connection lingering; `drained`: closed by the drain's last
/// phase, so bytes that arrived meanwhile were a request cut by it.
async fn close(service: &GatewayService, stream: Stream, drained: bool) {
    let linger = service.gateway().config().connections.linger();
    let dropped = close_lingering(stream, linger).await;
    if drained && dropped > 0 {
        let metrics = service.gateway().metrics();
        metrics.drain_cut.inc();
        tracing::warn!(
            bytes = dropped,
            "grace period over: a request arriving on an idle connection was cut"
        );
    }
}

/// How much the first read of a request may take: pingora's own first
/// read size. Head and body of a small request arrive in one read (an
/// empty buffer would read 64 bytes, then 64, 128, ...: measured, four
/// reads for a 600-byte request).
const FIRST_READ: usize = 4096;

/// What waiting for a request's first bytes ended with.
enum Next {
    /// Bytes arrived.
    Request,
    /// The client closed the connection or broke it.
    Gone,
    /// Nothing came within the deadline.
    Idle,
    /// The drain's last phase began (until then, an idle connection may
    /// still send a request: it is answered with `Connection: close`).
    Closing,
}

/// Waits up to `wait` for the next request's first bytes.
async fn next_bytes(
    stream: &mut Stream,
    into: &mut BytesMut,
    wait: Duration,
    open: &OpenConnections,
) -> Next {
    tokio::select! {
        biased;
        read = tokio::time::timeout(wait, read_first(stream, into)) => match read {
            Ok(Ok(n)) if n > 0 => Next::Request,
            Ok(_) => Next::Gone,
            Err(_) => Next::Idle,
        },
        _ = open.closing() => Next::Closing,
    }
}

/// Reads the next request's first bytes into `into`. Over plain TCP the
/// wait is for the socket's readiness, and the buffer is taken only once
/// bytes are there: an idle keep-alive connection holds none. A TLS
/// connection waits with its buffer: decrypted bytes may already sit in
/// the TLS layer, where the socket's readiness does not show them, and
/// pingora's TLS stream does not expose that readiness anyway.
async fn read_first(stream: &mut Stream, into: &mut BytesMut) -> std::io::Result<usize> {
    let Some(tcp) = WriteBuffered::tcp(stream) else {
        into.reserve(FIRST_READ);
        return stream.read_buf(into).await;
    };
    loop {
        tcp.readable().await?;
        into.reserve(FIRST_READ);
        match tcp.try_read_buf(into) {
            // The readiness was the last request's (tokio clears it only
            // when a read would block, and the request was read to its
            // end): the buffer is given back before the real wait
            // (measured: kept, 4 KiB more per idle connection).
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => *into = BytesMut::new(),
            read => return read,
        }
    }
}

/// pingora's keep-alive setting `0`: the connection may be reused, and
/// pingora puts no timer of its own on reading the request head. With a
/// timer (whole seconds), it also cut every head read at that length and
/// closed the connection without an answer, racing the 408 of
/// `header_timeout_ms`. Our deadlines (`next_bytes`, the head deadline
/// above) are the only ones.
const KEEPALIVE_UNTIMED: u64 = 0;

/// Answers a request head that could not be read (when there is still a
/// client to answer), then closes the connection.
async fn refuse_head(service: &GatewayService, mut session: ServerSession, error: Option<Error>) {
    let Some(error) = error else {
        return; // the client closed or broke the connection
    };
    let reason = if error.kind == Kind::RequestTimeout {
        "slow"
    } else {
        "malformed"
    };
    service
        .gateway()
        .metrics()
        .rejected
        .with_label_values(&[reason])
        .inc();
    let _ = service
        .write(&mut session, HttpResponse::error(&error), true)
        .await;
    if let After::Close(stream) = finish(session).await {
        close(service, stream, false).await;
    }
}

/// The answer to a request head pingora's parser refused; `None` when the
/// connection broke or closed (nobody to answer).
pub(crate) fn head_error(e: &pingora_core::Error) -> Option<Error> {
    use pingora_core::ErrorType;
    if !matches!(e.etype(), ErrorType::InvalidHTTPHeader) {
        return None;
    }
    let context = e.context.as_ref().map(|c| c.as_str()).unwrap_or_default();
    let parse = e
        .cause
        .as_ref()
        .and_then(|c| c.downcast_ref::<httparse::Error>());
    Some(match parse {
        Some(httparse::Error::TooManyHeaders) => Error::new(
            Kind::HeaderTooLarge,
            "request has too many header fields (the limit is 256)",
        ),
        Some(cause) => Error::invalid(format!("malformed HTTP request head: {cause}")),
        None if context.starts_with("Request header larger than") => Error::new(
            Kind::HeaderTooLarge,
            "request head (request line and header fields) is larger than 1048575 bytes",
        ),
        None => Error::invalid(format!("malformed HTTP request head: {context}")),
    })
}

/// pingora's h2 server for h2c and TLS-negotiated h2 connections: each
/// stream is one request through [`GatewayService::serve`].
pub(crate) struct H2App {
    pub(crate) service: Arc<GatewayService>,
    options: HttpServerOptions,
}

impl H2App {
    pub(crate) fn new(service: Arc<GatewayService>) -> H2App {
        let mut options = HttpServerOptions::default();
        options.h2c = true;
        options.h2_idle_timeout = Some(service.gateway().config().connections.keepalive_timeout());
        H2App { service, options }
    }

    /// Serves an h2 connection (its preface already put back) to the end.
    /// pingora sends GOAWAY when `shutdown` changes; a connection that
    /// starts once the drain has begun gets it at once.
    pub(crate) async fn serve(self: &Arc<Self>, stream: Stream, shutdown: &ShutdownWatch) {
        let mut shutdown = shutdown.clone();
        if *shutdown.borrow_and_update() {
            shutdown.mark_changed();
        }
        let _ = ServerApp::process_new(self, stream, &shutdown).await;
    }
}

#[async_trait]
impl HttpServerApp for H2App {
    async fn process_new_http(
        self: &Arc<Self>,
        mut session: ServerSession,
        shutdown: &ShutdownWatch,
    ) -> Option<ReusedHttpStream> {
        let _inflight = self.service.gateway().inflight().enter();
        let head = tokio::time::timeout(
            self.service.gateway().config().connections.header_timeout(),
            session.read_request(),
        );
        if let Ok(Ok(true)) = head.await {
            self.service.serve(&mut session, shutdown).await;
            let _ = session.finish().await;
        }
        None
    }

    fn server_options(&self) -> Option<&HttpServerOptions> {
        Some(&self.options)
    }
}

/// The answer to a connection over the cap (`connections.max_connections`
/// is `cap`), as HTTP/1.1 bytes: written before any request is read, so
/// before any HTTP session exists.
pub(crate) fn over_cap_answer(cap: usize) -> Vec<u8> {
    let error = Error::new(
        Kind::Overloaded,
        format!("too many open connections (connections.max_connections is {cap}); retry shortly or use another replica"),
    );
    raw_http1(&HttpResponse::error(&error))
}

/// An answer as HTTP/1.1 bytes with `Connection: close`, for refusals made
/// before any HTTP session exists.
fn raw_http1(response: &HttpResponse) -> Vec<u8> {
    let reason = http::StatusCode::from_u16(response.status)
        .ok()
        .and_then(|s| s.canonical_reason())
        .unwrap_or("");
    let mut out = format!("HTTP/1.1 {} {reason}\r\n", response.status);
    for (name, value) in &response.headers {
        out.push_str(&format!("{name}: {value}\r\n"));
    }
    out.push_str(&format!(
        "Content-Length: {}\r\nConnection: close\r\n\r\n",
        response.body_len()
    ));
    let mut out = out.into_bytes();
    for chunk in &response.body {
        out.extend_from_slice(chunk);
    }
    out
}
