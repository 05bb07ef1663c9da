//! The per-request pingora glue: [`GatewayService::serve`] takes one
//! request whose head `conn` has read, classifies it, reads the body
//! within the limits, runs the pipeline and writes the one answer.
//! `/generate_stream` answers are written event by event while the client
//! is watched for going away. Once the gateway drains, every HTTP/1
//! answer says `Connection: close`.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use pingora_core::protocols::http::ServerSession;
use pingora_core::server::ShutdownWatch;
use pingora_core::{Error as PingoraError, ErrorType, Result as PingoraResult};
use pingora_http::ResponseHeader;

use crate::app::Gateway;
use crate::body::{self, BodyFeed};
use crate::config::Limits;
use crate::error::{Error, Kind};
use crate::front::http::{
    too_large, via, Answer, HttpRequest, HttpResponse, StreamedResponse, StreamedRest,
};
use crate::front::route::Route;
use crate::wire::{compress, v2_request};

/// Answers the gateway's routes (every route is answered here; nothing is
/// proxied raw).
pub(crate) struct GatewayService {
    pub(crate) gateway: Arc<Gateway>,
}

/// Why a body could not be read in full.
enum BodyError {
    /// Refused by a limit or malformed: answer, then close the connection.
    Refused(Error),
    /// The client went away or the stream broke: nobody to answer.
    Gone,
}

impl GatewayService {
    /// Serves the request whose head `session` holds. Errors writing the
    /// answer mean the client is gone; the connection is then not reused.
    pub(crate) async fn serve(&self, session: &mut ServerSession, shutdown: &ShutdownWatch) {
        if *shutdown.borrow() {
            session.set_keepalive(None);
        }
        if self.handle(session, shutdown).await.is_err() {
            session.set_keepalive(None);
        }
    }

    async fn handle(
        &self,
        session: &mut ServerSession,
        shutdown: &ShutdownWatch,
    ) -> PingoraResult<()> {
        let header = session.req_header();
        let target = String::from_utf8_lossy(header.raw_path()).into_owned();
        let path = target.split('?').next().unwrap_or_default().to_string();
        let method = header.method.clone();
        let headers: Vec<(String, Bytes)> = header
            .case_header_iter()
            .map(|(name, value)| {
                let name = String::from_utf8_lossy(name.as_slice()).into_owned();
                (name, Bytes::copy_from_slice(value.as_bytes()))
            })
            .collect();
        let v1_prefix = &self.gateway.config().v1.path_prefix;
        let Some(route) = Route::classify_target(&target, v1_prefix) else {
            let refusal = HttpResponse::error(&Error::route_not_found());
            return self.write_now(session, refusal, true, shutdown).await;
        };
        let body_timeout = self.gateway.config().limits.body_timeout();
        let deadline = tokio::time::Instant::now() + body_timeout;
        let header_len = self.streams_from(&route, session);
        let read = tokio::time::timeout_at(deadline, self.read_body(session, header_len)).await;
        let read = match read.unwrap_or_else(|_| Err(slow_body(body_timeout))) {
            Ok(read) => read,
            Err(error) => return self.body_failed(session, &route, error, shutdown).await,
        };
        let peer = session
            .client_addr()
            .and_then(|a| a.as_inet())
            .map(|a| a.ip());
        let (body, head) = match read {
            Read::Whole(body) => (body, None),
            Read::Head(body, counted) => (body, Some(counted)),
        };
        let mut request = HttpRequest::new(method, path, headers, body);
        request.peer = peer;
        if let Some(counted) = head {
            return self
                .stream_body(session, &route, request, counted, deadline, shutdown)
                .await;
        }
        if !route.is_generate() {
            let response = self.gateway.handle_route(&route, request).await;
            return self.write_now(session, response, false, shutdown).await;
        }
        // A generation may take long before its first response: a client
        // that goes away meanwhile drops the pipeline, cancelling upstream.
        let answer = tokio::select! {
            answer = self.gateway.answer(&route, request) => answer,
            _ = session.read_body_or_idle(true) => {
                client_gone(session);
                return Ok(());
            },
        };
        match answer {
            Answer::Full(response) => self.write_now(session, response, false, shutdown).await,
            Answer::Streamed(streamed) => self.stream(session, streamed, shutdown).await,
        }
    }

    /// [`GatewayService::write`], closing the connection if the gateway
    /// started draining while the answer was being made.
    async fn write_now(
        &self,
        session: &mut ServerSession,
        response: HttpResponse,
        close: bool,
        shutdown: &ShutdownWatch,
    ) -> PingoraResult<()> {
        self.write(session, response, close || *shutdown.borrow())
            .await
    }
}

impl GatewayService {
    /// Reads the whole body into one buffer sized from `Content-Length`,
    /// enforcing the body-size and chunk-count limits as it goes; with
    /// `stop_at`, only until that many bytes are in (the JSON header of a
    /// body to stream), unless the body ends first.
    async fn read_body(
        &self,
        session: &mut ServerSession,
        stop_at: Option<usize>,
    ) -> Result<Read, BodyError> {
        let limits = &self.gateway.config().limits;
        let declared = declared_length(session);
        let counted = Counted {
            declared,
            streamed: stop_at.is_some(),
            ..Counted::default()
        };
        if let Some(n) = declared {
            counted.check(n, limits)?;
        }
        let expects_continue = session
            .req_header()
            .headers
            .get(http::header::EXPECT)
            .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue"));
        if expects_continue {
            session
                .write_continue_response()
                .await
                .map_err(|_| BodyError::Gone)?;
        }
        let reserve = declared.unwrap_or(0) as usize;
        let mut body = BytesMut::with_capacity(stop_at.map_or(reserve, |n| n.min(reserve)));
        let mut counted = counted;
        while let Some(chunk) = session
            .read_request_body()
            .await
            .map_err(|e| body_error(&e))?
        {
            if chunk.is_empty() {
                continue;
            }
            counted.add(chunk.len(), limits)?;
            if body.is_empty() && declared == Some(chunk.len() as u64) {
                return Ok(Read::Whole(chunk));
            }
            body.extend_from_slice(&chunk);
            if stop_at.is_some_and(|n| body.len() >= n) {
                return Ok(Read::Head(body.freeze(), counted));
            }
        }
        Ok(Read::Whole(body.freeze()))
    }

    /// A POST to `/infer` whose body is streamed: the length of its JSON
    /// header. Streamed are bodies with a binary tail
    /// (`Inference-Header-Content-Length` above 0, within the JSON size
    /// limit), not compressed, of [`STREAM_FROM`] bytes or more, or of a
    /// length not declared (chunked). Other bodies are read whole.
    fn streams_from(&self, route: &Route, session: &ServerSession) -> Option<usize> {
        let head = session.req_header();
        if !matches!(route, Route::Infer(_)) || head.method != http::Method::POST {
            return None;
        }
        let value = |name: &str| head.headers.get(name).map(|v| v.as_bytes());
        let encoding = compress::request_encoding(value("Content-Encoding"));
        if encoding != Ok(compress::Encoding::Identity) {
            return None;
        }
        let header_len = v2_request::atoi(value("Inference-Header-Content-Length")?);
        let header_len = usize::try_from(header_len).ok().filter(|n| *n > 0)?;
        if header_len > self.gateway.config().limits.max_input_size {
            return None;
        }
        match declared_length(session) {
            Some(n) if n < STREAM_FROM || n < header_len as u64 => None,
            _ => Some(header_len),
        }
    }

    /// Runs the pipeline while the rest of the body is read into it (see
    /// `body`), then writes the one answer. A body that fails (a limit, its
    /// deadline, a client gone) drops the pipeline, which cancels the
    /// upstream stream before its message completes; the failure is
    /// answered as for a body read whole. A pipeline that answers before
    /// the body ended (a refusal) leaves the rest unread: the connection
    /// then closes after the answer.
    async fn stream_body(
        &self,
        session: &mut ServerSession,
        route: &Route,
        mut request: HttpRequest,
        counted: Counted,
        deadline: tokio::time::Instant,
        shutdown: &ShutdownWatch,
    ) -> PingoraResult<()> {
        let (feed, rest) = body::channel();
        let len = counted
            .declared
            .map(|n| n.saturating_sub(request.body.len() as u64));
        request.rest = Some(StreamedRest { rest, len });
        let limits = &self.gateway.config().limits;
        let outcome = {
            let pipeline = self.gateway.answer(route, request);
            let pump = pump(session, feed, counted, limits, deadline);
            tokio::pin!(pipeline, pump);
            tokio::select! {
                response = &mut pipeline => Ok(response),
                pumped = &mut pump => match pumped {
                    Ok(()) => Ok((&mut pipeline).await),
                    Err(error) => Err(error),
                },
            }
        };
        match outcome {
            Ok(Answer::Full(response)) => {
                let unread = !session.is_body_done();
                if unread {
                    linger(session).await;
                }
                self.write_now(session, response, unread, shutdown).await
            }
            // Only an answer to a complete body streams (the upstream
            // answers a complete message).
            Ok(Answer::Streamed(streamed)) => self.stream(session, streamed, shutdown).await,
            Err(error) => self.body_failed(session, route, error, shutdown).await,
        }
    }

    /// Answers a body that could not be read: a refusal (then the
    /// connection closes), or nothing for a client that is gone.
    async fn body_failed(
        &self,
        session: &mut ServerSession,
        route: &Route,
        error: BodyError,
        shutdown: &ShutdownWatch,
    ) -> PingoraResult<()> {
        let error = match error {
            BodyError::Refused(error) => error,
            BodyError::Gone => {
                session.set_keepalive(None);
                return Ok(());
            }
        };
        let reason = match error.kind {
            Kind::RequestTimeout => "slow",
            Kind::PayloadTooLarge => "size",
            _ => "malformed",
        };
        let metrics = self.gateway.metrics();
        metrics.rejected.with_label_values(&[reason]).inc();
        linger(session).await;
        let refusal = crate::front::v1::refusal(&self.gateway, route, &error);
        self.write_now(session, refusal, true, shutdown).await
    }

    /// Writes the one answer. `close` drops the connection afterwards
    /// (used when the request body was not read to its end, and while
    /// draining: HTTP/1 answers then say `Connection: close`).
    pub(crate) async fn write(
        &self,
        session: &mut ServerSession,
        response: HttpResponse,
        close: bool,
    ) -> PingoraResult<()> {
        let mut header = ResponseHeader::build(response.status, Some(response.headers.len() + 1))?;
        for (name, value) in &response.headers {
            header.insert_header(*name, value.as_str())?;
        }
        header.insert_header("Content-Length", response.body_len().to_string())?;
        header.insert_header("Via", via(session.is_http2()))?;
        if close {
            session.set_keepalive(None);
        }
        session.write_response_header(Box::new(header)).await?;
        let mut chunks = response.body.into_iter().peekable();
        while let Some(chunk) = chunks.next() {
            let last = chunks.peek().is_none();
            session.write_response_body(chunk, last).await?;
        }
        // An empty body still ends the h2 stream / the HTTP/1 message.
        session.write_response_body(Bytes::new(), true).await
    }
}

impl GatewayService {
    /// Writes a streamed answer chunk by chunk as the pipeline produces it
    /// (chunked encoding: pingora flushes every chunk; or, with a known
    /// length, `Content-Length`: a body that ends short of it was cut off,
    /// and the connection is closed under it). Stops when the client goes
    /// away (a failed write, or the connection closing while we wait):
    /// dropping `streamed` then cancels the upstream call.
    async fn stream(
        &self,
        session: &mut ServerSession,
        mut streamed: StreamedResponse,
        shutdown: &ShutdownWatch,
    ) -> PingoraResult<()> {
        let mut header = ResponseHeader::build(streamed.status, Some(streamed.headers.len() + 1))?;
        for (name, value) in &streamed.headers {
            header.insert_header(*name, value.as_str())?;
        }
        match streamed.length {
            Some(length) => header.insert_header("Content-Length", length.to_string())?,
            None => header.insert_header("Transfer-Encoding", "chunked")?,
        }
        header.insert_header("Via", via(session.is_http2()))?;
        if *shutdown.borrow() {
            session.set_keepalive(None);
        }
        session.write_response_header(Box::new(header)).await?;
        let mut written = 0u64;
        loop {
            let chunk = tokio::select! {
                chunk = streamed.body.recv() => chunk,
                _ = session.read_body_or_idle(true) => {
                client_gone(session);
                return Ok(());
            },
            };
            let Some(chunk) = chunk else { break };
            written += chunk.len() as u64;
            if session.write_response_body(chunk, false).await.is_err() {
                {
                    client_gone(session);
                    return Ok(());
                };
            }
        }
        if streamed.length.is_some_and(|length| written != length) {
            return Err(PingoraError::explain(
                ErrorType::WriteError,
                "the upstream's answer broke off",
            ));
        }
        session.write_response_body(Bytes::new(), true).await
    }
}

/// The client closed the connection (or broke it) while its answer was
/// being produced: nothing more to write, and the connection is not reused.
fn client_gone(session: &mut ServerSession) {
    tracing::debug!("client closed the connection during a streamed answer");
    session.set_keepalive(None);
}

/// A body read failure: malformed framing (bad chunk sizes, extensions or
/// trailers) is the client's mistake and gets a 400; anything else means
/// the connection broke or closed.
fn body_error(e: &PingoraError) -> BodyError {
    match e.etype().as_str() {
        "InvalidChunk" | "InvalidTrailerEnd" | "InvalidHTTPHeader" => {
            let detail = e
                .context
                .as_ref()
                .map(|c| c.as_str())
                .unwrap_or("invalid framing");
            BodyError::Refused(Error::invalid(format!(
                "malformed chunked request body: {detail}"
            )))
        }
        _ => BodyError::Gone,
    }
}

/// Bytes of a refused body read and discarded before the connection closes:
/// closing a socket with unread input makes the kernel send a reset that
/// can destroy our error answer before the client reads it (nginx's
/// "lingering close"). Bounded so a refused upload cannot hold us long.
const LINGER_BYTES: usize = 1 << 20;
const LINGER_TIME: std::time::Duration = std::time::Duration::from_secs(1);

/// Reads and drops what the client already sent of a refused body.
async fn linger(session: &mut ServerSession) {
    let drain = async {
        let mut seen = 0usize;
        while let Ok(Some(chunk)) = session.read_request_body().await {
            seen += chunk.len();
            if seen > LINGER_BYTES {
                break;
            }
        }
    };
    let _ = tokio::time::timeout(LINGER_TIME, drain).await;
}

/// Bodies of this many bytes or more are streamed upstream as they arrive
/// instead of read whole first (`GatewayService::streams_from`). Below it
/// a body costs at most this much memory while read whole, and reading it
/// whole costs less CPU: at 2×1 MiB, streaming measured 5–10 % more
/// gateway CPU per request (its writes upstream follow the client's
/// pace: 36 `writev`s per request instead of 4), with the same latency.
/// From 2×4 MiB on, both cost the same CPU and streaming holds less.
const STREAM_FROM: u64 = 4 << 20;

/// What [`GatewayService::read_body`] read.
enum Read {
    /// The whole body.
    Whole(Bytes),
    /// Its first bytes (the JSON header at least); the rest is to come.
    Head(Bytes, Counted),
}

/// A body's chunks and bytes so far, against the limits.
#[derive(Debug, Default, Clone, Copy)]
struct Counted {
    /// `Content-Length`, if the client sent one.
    declared: Option<u64>,
    /// Streamed upstream (`limits.max_streamed_body_size` applies), or
    /// read whole (`limits.max_body_size`).
    streamed: bool,
    chunks: usize,
    bytes: usize,
}

impl Counted {
    /// Counts one more non-empty chunk: refused past the body-size limit,
    /// or past the chunk-count limit for a body of undeclared length.
    fn add(&mut self, len: usize, limits: &Limits) -> Result<(), BodyError> {
        self.chunks += 1;
        if self.declared.is_none() && self.chunks > limits.max_chunks {
            return Err(BodyError::Refused(Error::invalid(format!(
                "Chunked request body exceeds maximum of {} non-empty chunks. Send fewer or larger HTTP chunks.",
                limits.max_chunks
            ))));
        }
        self.bytes = self.bytes.saturating_add(len);
        self.check(self.bytes as u64, limits)
    }

    /// Refuses a body of `size` bytes above its limit.
    fn check(&self, size: u64, limits: &Limits) -> Result<(), BodyError> {
        let (limit, setting) = if self.streamed {
            (
                limits.max_streamed_body_size,
                "limits.max_streamed_body_size",
            )
        } else {
            (limits.max_body_size, "--max-body-size")
        };
        if size > limit as u64 {
            return Err(BodyError::Refused(too_large(size, limit, setting)));
        }
        Ok(())
    }
}

/// Reads the rest of a streamed body into `feed`, within the limits, and
/// marks its end. Stops quietly when nobody reads the rest any more (the
/// pipeline answered without it). `deadline` is the body's: time spent
/// waiting for room in the queue (the upstream holding the body back) is
/// added to it, so a slow upstream is never blamed on the client.
async fn pump(
    session: &mut ServerSession,
    feed: BodyFeed,
    mut counted: Counted,
    limits: &Limits,
    mut deadline: tokio::time::Instant,
) -> Result<(), BodyError> {
    loop {
        let read = tokio::time::timeout_at(deadline, session.read_request_body()).await;
        let read = read.map_err(|_| slow_body(limits.body_timeout()))?;
        let Some(chunk) = read.map_err(|e| body_error(&e))? else {
            let _ = feed.end().await;
            return Ok(());
        };
        if chunk.is_empty() {
            continue;
        }
        counted.add(chunk.len(), limits)?;
        let waiting = tokio::time::Instant::now();
        if feed.send(chunk).await.is_err() {
            return Ok(());
        }
        deadline += waiting.elapsed();
    }
}

/// `Content-Length`, when the client sent one that parses.
fn declared_length(session: &ServerSession) -> Option<u64> {
    session
        .req_header()
        .headers
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
}

fn slow_body(limit: std::time::Duration) -> BodyError {
    BodyError::Refused(Error::new(
        Kind::RequestTimeout,
        format!(
            "the request body did not arrive within {} ms",
            limit.as_millis()
        ),
    ))
}
