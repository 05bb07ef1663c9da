//! The per-request pingora glue: [`GatewayService::serve`] takes one
//! request whose head `conn` has read, plans it (`entry::plan`), reads the
//! body within the limits (`request_body`; a large binary body is
//! streamed while the answer is made), has it answered (`entry::answer`)
//! and writes the one answer.
//! `/generate_stream` answers are written event by event while the client
//! is watched for going away. Once the gateway drains, every HTTP/1
//! answer says `Connection: close`.

use std::sync::Arc;

use bytes::Bytes;
use http::HeaderValue;
use pingora_core::protocols::http::ServerSession;
use pingora_core::server::ShutdownWatch;
use pingora_core::{Error as PingoraError, ErrorType, OrErr, Result as PingoraResult};
use pingora_http::ResponseHeader;

use crate::app::Gateway;
use crate::body;
use crate::error::{Error, Kind};
use crate::front::http::entry::plan_for;
use crate::front::http::plan::Plan;
use crate::front::http::request_body::{pump, read_body, slow_body, BodyError, Counted, Read};
use crate::front::http::route::Route;
use crate::front::http::write_buffer;
use crate::front::http::{answer, Routes};
use crate::front::http::{via, Answer, HttpRequest, HttpResponse, StreamedResponse, StreamedRest};

/// Answers the gateway's routes (every route is answered here; nothing is
/// proxied raw).
pub(crate) struct GatewayService {
    gateway: Arc<Gateway>,
    /// The routes of the listener it serves.
    routes: Routes,
}

impl GatewayService {
    /// The service of a listener that serves `routes`.
    pub(crate) fn new(gateway: Arc<Gateway>, routes: Routes) -> GatewayService {
        GatewayService { gateway, routes }
    }

    /// The core the requests are answered with.
    pub(crate) fn gateway(&self) -> &Arc<Gateway> {
        &self.gateway
    }

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
        let target = text(header.raw_path());
        let path = target.split('?').next().unwrap_or_default().to_string();
        let method = header.method.clone();
        let headers: Vec<(String, HeaderValue)> = header
            .case_header_iter()
            .map(|(name, value)| (text(name.as_slice()), value.clone()))
            .collect();
        // The plan (route and headers, read once) before the body: it
        // says whether the body streams.
        let mut request = HttpRequest::with_values(method, path, headers, Bytes::new());
        let Some(plan) = plan_for(&self.gateway, self.routes, &target, &request) else {
            let refusal = HttpResponse::error(&Error::route_not_found());
            return self.write_now(session, refusal, true, shutdown).await;
        };
        let limits = &self.gateway().config().limits;
        let body_timeout = limits.body_timeout();
        let deadline = tokio::time::Instant::now() + body_timeout;
        let read = tokio::time::timeout_at(deadline, read_body(session, &plan, limits)).await;
        let read = match read.unwrap_or_else(|_| Err(slow_body(body_timeout))) {
            Ok(read) => read,
            Err(error) => {
                return self
                    .body_failed(session, &plan.route, error, shutdown)
                    .await
            }
        };
        let peer = session
            .client_addr()
            .and_then(|a| a.as_inet())
            .map(|a| a.ip());
        let (body, head) = match read {
            Read::Whole(body) => (body, None),
            Read::Head(body, counted) => (body, Some(counted)),
        };
        request.body = body;
        request.peer = peer;
        if let Some(counted) = head {
            return self
                .stream_body(session, &plan, request, counted, deadline, shutdown)
                .await;
        }
        if !plan.route.is_generate() {
            return match answer(&self.gateway, &plan, request).await {
                Answer::Full(response) => self.write_now(session, response, false, shutdown).await,
                Answer::Streamed(streamed) => self.stream(session, streamed, shutdown).await,
            };
        }
        // A generation may take long before its first response: a client
        // that goes away meanwhile drops the answer's future, cancelling
        // upstream.
        let answer = tokio::select! {
            answer = answer(&self.gateway, &plan, request) => answer,
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
    /// Makes the answer while the rest of the body is read into it (see
    /// `body`), then writes it. A body that fails (a limit, its
    /// deadline, a client gone) drops the answer's future, which cancels the
    /// upstream stream before its message completes; the failure is
    /// answered as for a body read whole. An answer made before
    /// the body ended (a refusal) leaves the rest unread: the connection
    /// then closes after the answer.
    async fn stream_body(
        &self,
        session: &mut ServerSession,
        plan: &Plan,
        mut request: HttpRequest,
        counted: Counted,
        deadline: tokio::time::Instant,
        shutdown: &ShutdownWatch,
    ) -> PingoraResult<()> {
        let (feed, rest) = body::channel();
        let len = counted
            .declared()
            .map(|n| n.saturating_sub(request.body.len() as u64));
        request.rest = Some(StreamedRest { rest, len });
        let limits = &self.gateway().config().limits;
        let outcome = {
            let answering = answer(&self.gateway, plan, request);
            let pump = pump(session, feed, counted, limits, deadline);
            tokio::pin!(answering, pump);
            tokio::select! {
                response = &mut answering => Ok(response),
                pumped = &mut pump => match pumped {
                    Ok(()) => Ok((&mut answering).await),
                    Err(error) => Err(error),
                },
            }
        };
        match outcome {
            // A refusal before the body's end: answered, then the
            // connection closes lingering (`conn`), which takes the rest.
            Ok(Answer::Full(response)) => {
                let unread = !session.is_body_done();
                self.write_now(session, response, unread, shutdown).await
            }
            // An upstream answers a complete message, so the body is
            // complete; if one answered early, the rest of the body is
            // never read: the connection closes after the answer.
            Ok(Answer::Streamed(streamed)) => {
                if !session.is_body_done() {
                    session.set_keepalive(None);
                }
                self.stream(session, streamed, shutdown).await
            }
            Err(error) => {
                self.body_failed(session, &plan.route, error, shutdown)
                    .await
            }
        }
    }

    /// Answers a body that could not be read: a refusal (then the
    /// connection closes lingering, taking what the client still sends),
    /// or nothing for a client that is gone.
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
        let metrics = self.gateway().metrics();
        metrics.rejected.with_label_values(&[reason]).inc();
        let refusal = crate::front::http::entry::refusal(self.gateway(), route, &error);
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
        let framing = ("Content-Length", HeaderValue::from(response.body_len()));
        let header = head(response.status, response.headers, framing, session)?;
        if close {
            session.set_keepalive(None);
        }
        session.write_response_header(header).await?;
        let mut chunks = joined_if_small(response.body).into_iter().peekable();
        // The last chunk ends the message; an empty body still ends the h2
        // stream / the HTTP/1 message.
        while let Some(chunk) = chunks.next() {
            let last = chunks.peek().is_none();
            session.write_response_body(chunk, last).await?;
            if last {
                return Ok(());
            }
        }
        session.write_response_body(Bytes::new(), true).await
    }
}

impl GatewayService {
    /// Writes a streamed answer chunk by chunk as its handler produces it
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
        let framing = match streamed.length {
            Some(length) => ("Content-Length", HeaderValue::from(length)),
            None => ("Transfer-Encoding", HeaderValue::from_static("chunked")),
        };
        let headers = std::mem::take(&mut streamed.headers);
        let header = head(streamed.status, headers, framing, session)?;
        if *shutdown.borrow() {
            session.set_keepalive(None);
        }
        session.write_response_header(header).await?;
        let mut written = 0u64;
        if let Some(first) = streamed.first.take() {
            written += first.len() as u64;
            if session.write_response_body(first, false).await.is_err() {
                client_gone(session);
                return Ok(());
            }
        }
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

/// An answer's head: `headers` (their values moved in, not copied), then
/// the body's framing (`Content-Length` or `Transfer-Encoding`) and `Via`.
fn head(
    status: u16,
    headers: Vec<(&'static str, String)>,
    (framing, value): (&'static str, HeaderValue),
    session: &ServerSession,
) -> PingoraResult<Box<ResponseHeader>> {
    // Sized for every header it gets: a map that grows re-hashes.
    let mut header = ResponseHeader::build(status, Some(headers.len() + 2))?;
    for (name, value) in headers {
        let value = HeaderValue::from_maybe_shared(Bytes::from(value))
            .explain_err(ErrorType::InvalidHTTPHeader, |_| "invalid header value")?;
        header.insert_header(name, value)?;
    }
    header.insert_header(framing, value)?;
    header.insert_header("Via", HeaderValue::from_static(via(session.is_http2())))?;
    Ok(Box::new(header))
}

/// A small answer's chunks (a binary answer's JSON header and its tensors)
/// as one: one pass through pingora's body writer rather than one per
/// chunk (~500 instructions each), for a copy of at most
/// [`write_buffer::CAPACITY`] bytes, which the write buffer copies anyway.
fn joined_if_small(body: Vec<Bytes>) -> Vec<Bytes> {
    let len: usize = body.iter().map(Bytes::len).sum();
    if body.len() < 2 || len > write_buffer::CAPACITY {
        return body;
    }
    vec![Bytes::from(body.concat())]
}

/// `bytes` as text, lossily. A header name and the target are ASCII
/// (httparse takes no other), so the strict check decides; the lossy
/// conversion walks the text in chunks first (~350 instructions more over
/// a small request's names and target, `scripts/bench-instructions`).
fn text(bytes: &[u8]) -> String {
    match std::str::from_utf8(bytes) {
        Ok(text) => text.to_owned(),
        Err(_) => String::from_utf8_lossy(bytes).into_owned(),
    }
}

/// The client closed the connection (or broke it) while its answer was
/// being produced: nothing more to write, and the connection is not reused.
fn client_gone(session: &mut ServerSession) {
    tracing::debug!("client closed the connection during a streamed answer");
    session.set_keepalive(None);
}
