//! What a [`Client`](super::Client) sends its requests through: the direct
//! HTTP/2 transport for plain-TCP backends' request traffic, tonic's
//! `Channel` for TLS backends and for health checks (which use its
//! per-call timeout). Either sends a request that carries an
//! [`EncodedInfer`] with its pieces as the body, in place of the
//! placeholder tonic encoded (a streamed body's promised pieces read from
//! its rest as they arrive), and walks the answer into the message's
//! reply tap, if it has one (`reply`).

use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use bytes::Bytes;
use http_body::Frame;
use tonic::body::Body;
use tonic::transport::Channel;
use tower_service::Service;

use super::encoded::{EncodedInfer, Piece};
use super::h2_transport::{BoxError, H2Transport};
use super::reply::ReplyTap;
use crate::body::{Fault, Reader};

#[derive(Clone)]
pub struct Transport(Inner);

#[derive(Clone)]
enum Inner {
    Direct(H2Transport),
    Tonic(Channel),
}

impl Transport {
    pub(crate) fn direct(transport: H2Transport) -> Transport {
        Transport(Inner::Direct(transport))
    }

    pub(crate) fn tonic(channel: Channel) -> Transport {
        Transport(Inner::Tonic(channel))
    }

    /// `request` with `message`'s pieces as its body, its answer walked
    /// into the message's tap (as [`Service::call`] does with a message in
    /// the request's extensions). On the direct transport the call is
    /// made in place: without the extension's map, the body's box and the
    /// boxed future `call` returns (5 allocations fewer a call,
    /// `scripts/bench-instructions`).
    pub(crate) async fn call_encoded(
        &mut self,
        mut request: http::Request<Body>,
        message: EncodedInfer,
    ) -> Result<http::Response<Body>, BoxError> {
        let Inner::Direct(direct) = &self.0 else {
            request.extensions_mut().insert(message);
            return self.call(request).await;
        };
        let tap = message.tap().cloned();
        let reply = direct
            .clone()
            .send(request.map(|_| Pieces::new(message)))
            .await?;
        Ok(walked(reply, tap.as_ref()))
    }
}

/// `reply` with its body walked into `tap`, if there is one.
fn walked(reply: http::Response<Body>, tap: Option<&ReplyTap>) -> http::Response<Body> {
    match tap {
        None => reply,
        Some(tap) => reply.map(|body| tap.walk(body)),
    }
}

impl Service<http::Request<Body>> for Transport {
    type Response = http::Response<Body>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<http::Response<Body>, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        match &mut self.0 {
            Inner::Direct(direct) => direct.poll_ready(cx),
            Inner::Tonic(channel) => channel.poll_ready(cx).map_err(Into::into),
        }
    }

    fn call(&mut self, mut request: http::Request<Body>) -> Self::Future {
        let mut tap = None;
        if let Some(encoded) = request.extensions_mut().remove::<EncodedInfer>() {
            tap = encoded.tap().cloned();
            *request.body_mut() = Body::new(Pieces::new(encoded));
        }
        let call = match &mut self.0 {
            Inner::Direct(direct) => direct.call(request),
            Inner::Tonic(channel) => {
                let call = channel.call(request);
                Box::pin(async move { call.await.map_err(Into::into) })
            }
        };
        match tap {
            None => call,
            Some(tap) => Box::pin(async move { Ok(walked(call.await?, Some(&tap))) }),
        }
    }
}

/// A message's pieces as a request body. `Rest` pieces are read from the
/// request body's rest as it arrives; once the last of them is complete,
/// the rest must end there before anything more is sent (the message's
/// last bytes included, when they are the rest's), so a client body that
/// runs long never completes the message. Any fault fails the body,
/// and the transport resets the stream (`CANCEL`): the backend never sees a
/// complete message. The body ends with its last piece, so that piece's
/// DATA frame carries END_STREAM.
struct Pieces {
    pieces: std::vec::IntoIter<Piece>,
    /// This attempt's reader of the body's rest (streamed messages only).
    reader: Option<Reader>,
    /// Bytes the current `Rest` piece still needs.
    owed: u64,
    /// `Rest` pieces not yet begun.
    rests: usize,
    /// The rest was seen to end where the message does.
    ended: bool,
    /// The message's last bytes, when they come from the rest: held until
    /// the rest is seen to end with them, so that a body running long never
    /// hands the backend a whole message (a tonic server takes a `CANCEL`
    /// after a whole message as the end of a unary request, and runs it).
    last: Option<Bytes>,
}

impl Pieces {
    fn new(encoded: EncodedInfer) -> Pieces {
        let (pieces, rest) = encoded.into_parts();
        let rests = pieces
            .iter()
            .filter(|p| matches!(p, Piece::Rest(_)))
            .count();
        Pieces {
            pieces: pieces.into_iter(),
            reader: rest.map(|rest| rest.reader()),
            owed: 0,
            rests,
            ended: false,
            last: None,
        }
    }
}

/// A body fault as the call's failure; the front words it for the client
/// from `BodyRest::fault`.
fn cancelled(fault: Fault) -> tonic::Status {
    tonic::Status::cancelled(format!("the request body could not be sent: {fault:?}"))
}

impl http_body::Body for Pieces {
    type Data = Bytes;
    type Error = tonic::Status;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = self.get_mut();
        loop {
            if let Some(reader) = &mut this.reader {
                if this.owed > 0 {
                    let chunk = ready!(reader.poll_take(cx, this.owed)).map_err(cancelled)?;
                    this.owed -= chunk.len() as u64;
                    if this.owed == 0 && this.rests == 0 && this.pieces.len() == 0 {
                        this.last = Some(chunk);
                        continue;
                    }
                    return Poll::Ready(Some(Ok(Frame::data(chunk))));
                }
                if this.rests == 0 && !this.ended {
                    ready!(reader.poll_end(cx)).map_err(cancelled)?;
                    this.ended = true;
                }
            }
            if let Some(last) = this.last.take() {
                return Poll::Ready(Some(Ok(Frame::data(last))));
            }
            match this.pieces.next() {
                None => return Poll::Ready(None),
                Some(Piece::Ready(bytes)) => return Poll::Ready(Some(Ok(Frame::data(bytes)))),
                Some(Piece::Rest(len)) => {
                    this.rests -= 1;
                    this.owed = len;
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.owed == 0
            && self.last.is_none()
            && self.pieces.len() == 0
            && (self.reader.is_none() || self.ended)
    }

    fn size_hint(&self) -> http_body::SizeHint {
        let left: u64 = self.pieces.as_slice().iter().map(Piece::len).sum();
        let last = self.last.as_ref().map_or(0, |b| b.len() as u64);
        http_body::SizeHint::with_exact(left + self.owed + last)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body::Body as _;
    use std::future::poll_fn;

    /// Every frame `Pieces` gives, and how it ended.
    async fn frames(mut body: Pieces) -> (u64, Result<(), tonic::Status>) {
        let mut sent = 0;
        loop {
            match poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await {
                None => return (sent, Ok(())),
                Some(Ok(frame)) => sent += frame.into_data().map_or(0, |d| d.len() as u64),
                Some(Err(status)) => return (sent, Err(status)),
            }
        }
    }

    /// A message whose last 8 bytes come from the body's rest, which
    /// sends them as `chunks`, then ends.
    async fn streamed(chunks: &'static [&'static [u8]]) -> (u64, Result<(), tonic::Status>) {
        let (feed, rest) = crate::body::channel();
        let head = Bytes::from_static(b"\0\0\0\0\x0aAB");
        let body = Pieces::new(EncodedInfer::raw(vec![head], 8, rest));
        let client = tokio::spawn(async move {
            for chunk in chunks {
                if feed.send(Bytes::from_static(chunk)).await.is_err() {
                    return;
                }
            }
            let _ = feed.end().await;
        });
        let result = frames(body).await;
        client.await.unwrap();
        result
    }

    #[tokio::test]
    async fn a_body_that_ends_with_its_message_sends_it_whole() {
        assert_eq!(streamed(&[b"0123", b"4567"]).await.0, 15);
        assert_eq!(streamed(&[b"01234567"]).await.0, 15);
    }

    #[tokio::test]
    async fn a_body_that_runs_long_never_sends_the_messages_last_byte() {
        let cases: [&'static [&'static [u8]]; 2] =
            [&[b"0123", b"4567", b"x"], &[b"01234567", b"x"]];
        for chunks in cases {
            let (sent, end) = streamed(chunks).await;
            assert!(end.is_err());
            assert!(sent < 15, "{sent} bytes of 15 went out");
        }
    }
}
