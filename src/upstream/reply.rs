//! `ModelInfer` replies (what a backend sends back for one call; the
//! client's answer is made from it) whose raw outputs are handed on as
//! they arrive instead of being held whole. A call made with a
//! [`ReplyTap`] has its response body walked field by field (`Walker`):
//! the reply's small
//! fields (everything but `raw_output_contents`, field 6) are collected
//! and decoded as the [`Tapped::Head`]; each raw output then follows as
//! [`Tapped::Entry`] (its length, from its field header) and
//! [`Tapped::Data`] chunks, slices of the HTTP/2 DATA frames, never
//! copied. The generated client, which still makes the call (deadline,
//! metadata, status), gets the small fields alone as the message.
//!
//! Servers write fields in number order (prost and protobuf's C++
//! serializer do), so `outputs` (field 5) come before the raw contents; a
//! small field after a raw output fails the reply. The walker takes the
//! next DATA frame only once the previous one's pieces are in the tap's
//! bounded queue, so a slow reader holds the backend back through HTTP/2
//! flow control.

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use http_body::Frame;
use prost::encoding::encode_varint;
use prost::Message;
use tokio::sync::mpsc;
use tokio_util::sync::PollSender;
use tonic::body::Body;
use tonic::Status;

use crate::error::Error;
use crate::proto::inference::ModelInferResponse;

/// Items queued between the walker and the answer's writer: with the
/// backend's 1 MiB frames (`h2_transport::MAX_FRAME`), a few MiB at most.
const QUEUED: usize = 8;

/// `raw_output_contents`' field number in `ModelInferResponse`.
const RAW_OUTPUT_CONTENTS: u64 = 6;

/// What the tap hands on, in order: the head, then each raw output as its
/// length and its bytes, then how the call ended.
#[derive(Debug)]
pub(crate) enum Tapped {
    /// The answer without its raw outputs; `raw_follow` says whether any
    /// follow.
    Head {
        response: ModelInferResponse,
        raw_follow: bool,
    },
    /// The next raw output: this many bytes of `Data` follow.
    Entry(u64),
    Data(Bytes),
    /// The call ended (its failure, if it failed).
    Ended(Result<(), Error>),
}

/// A tap whose items ended before the call's answer was whole.
pub(crate) fn ended_without_answer() -> Error {
    Error::internal("the upstream call ended without an answer")
}

/// One raw output's `Data` chunks as one `Bytes` (a copy only when it
/// came in several).
pub(crate) fn join(chunks: Vec<Bytes>) -> Bytes {
    match <[Bytes; 1]>::try_from(chunks) {
        Ok([one]) => one,
        Err(chunks) => Bytes::from(chunks.concat()),
    }
}

/// The sending end, carried by the call's request; cheap to clone.
#[derive(Clone)]
pub(crate) struct ReplyTap(mpsc::Sender<Tapped>);

/// A new tap and the queue it fills.
pub(crate) fn tap() -> (ReplyTap, mpsc::Receiver<Tapped>) {
    let (tx, rx) = mpsc::channel(QUEUED);
    (ReplyTap(tx), rx)
}

impl ReplyTap {
    /// Says how the call ended (after every piece the walker queued).
    pub(crate) async fn end(&self, result: Result<(), Error>) {
        let _ = self.0.send(Tapped::Ended(result)).await;
    }

    /// `body`, walked: what the generated client reads of it.
    pub(super) fn walk(&self, body: Body) -> Body {
        Body::new(Walker {
            inner: body,
            tap: PollSender::new(self.0.clone()),
            parser: Parser::default(),
            queued: VecDeque::new(),
            message: None,
            done: false,
        })
    }
}

/// A response body split into the generated client's part and the tap's.
struct Walker {
    inner: Body,
    tap: PollSender<Tapped>,
    parser: Parser,
    /// Pieces parsed but not yet in the tap's queue.
    queued: VecDeque<Tapped>,
    /// The small fields' message for the generated client, once complete.
    message: Option<Bytes>,
    done: bool,
}

impl http_body::Body for Walker {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        let this = self.get_mut();
        loop {
            while !this.queued.is_empty() {
                // Room first: an item leaves the queue only to be sent.
                let room = ready!(this.tap.poll_reserve(cx));
                let Some(item) = this.queued.pop_front() else {
                    break;
                };
                if room.is_err() || this.tap.send_item(item).is_err() {
                    // Nobody reads the answer any more: give up the call.
                    return Poll::Ready(Some(Err(Status::cancelled(
                        "the answer's reader went away",
                    ))));
                }
            }
            if let Some(message) = this.message.take() {
                return Poll::Ready(Some(Ok(Frame::data(message))));
            }
            if this.done {
                return Poll::Ready(None);
            }
            match ready!(Pin::new(&mut this.inner).poll_frame(cx)) {
                None => {
                    this.done = true;
                    if let Err(status) = this.parser.finish() {
                        return Poll::Ready(Some(Err(status)));
                    }
                }
                Some(Err(status)) => return Poll::Ready(Some(Err(status))),
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) => {
                        let parsed = this.parser.feed(data, &mut this.queued)?;
                        this.message = parsed;
                    }
                    // Trailers: the status, for the generated client.
                    Err(frame) => return Poll::Ready(Some(Ok(frame))),
                },
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.done && self.queued.is_empty() && self.message.is_none()
    }
}

/// Where the walk is in the gRPC message.
#[derive(Debug, Default)]
enum State {
    /// The 5-byte gRPC prefix.
    #[default]
    Prefix,
    /// A field's key (a varint).
    Key,
    /// A small field's value: a varint, fixed bytes, or a length first.
    SmallVarint,
    SmallFixed(u64),
    SmallLength,
    /// A raw output's length (a varint).
    EntryLength,
    /// A raw output's bytes still to come.
    EntryData(u64),
    /// After the message: only trailers may follow.
    After,
}

/// The field-by-field reader of one length-prefixed message.
#[derive(Debug, Default)]
struct Parser {
    state: State,
    /// Bytes of a prefix, key or varint not yet complete.
    partial: Vec<u8>,
    /// Message bytes not yet walked.
    left: u64,
    /// The small fields as they came (keys and values).
    small: BytesMut,
    /// The head went out (at the first raw output, or the message's end).
    head_sent: bool,
}

fn malformed(what: &str) -> Status {
    Status::internal(format!(
        "malformed ModelInferResponse from the upstream: {what}"
    ))
}

/// An answer walked whole, as the tap hands it on: the generated client's
/// message, the head (the answer without its raw outputs, and whether any
/// follow) and each raw output (its declared length, then its bytes). For
/// the tests and the fuzz target (fuzz/fuzz_targets/infer_answer.rs:
/// hence `pub`); the gateway walks a live body instead ([`AnswerTap`]).
#[derive(Debug, Default, PartialEq)]
pub struct Walked {
    pub message: Vec<u8>,
    pub head: Option<(ModelInferResponse, bool)>,
    pub raw: Vec<(u64, Vec<u8>)>,
}

/// Walks a response body arriving in `frames`. Panics if the walker
/// breaks its own order (the head first, then each raw output's length
/// before its bytes, never more bytes than that length): the fuzz
/// target's check of what the answer's writer relies on.
pub fn walk_frames<'a>(frames: impl IntoIterator<Item = &'a [u8]>) -> Result<Walked, Status> {
    let mut parser = Parser::default();
    let mut out = VecDeque::new();
    let mut walked = Walked::default();
    for frame in frames {
        if let Some(message) = parser.feed(Bytes::copy_from_slice(frame), &mut out)? {
            walked.message.extend_from_slice(&message);
        }
    }
    parser.finish()?;
    for item in out {
        match item {
            Tapped::Head {
                response,
                raw_follow,
            } => {
                assert!(walked.head.is_none(), "a second head");
                walked.head = Some((response, raw_follow));
            }
            Tapped::Entry(len) => {
                assert!(walked.head.is_some(), "a raw output before the head");
                walked.raw.push((len, Vec::new()));
            }
            Tapped::Data(data) => {
                let (len, bytes) = walked.raw.last_mut().expect("data before its length");
                bytes.extend_from_slice(&data);
                assert!(bytes.len() as u64 <= *len, "more data than its length");
            }
            Tapped::Ended(_) => unreachable!("only the call ends the tap"),
        }
    }
    Ok(walked)
}

impl Parser {
    /// Walks one DATA frame: tap items into `out`; the generated client's
    /// message once the small fields are complete.
    fn feed(
        &mut self,
        mut data: Bytes,
        out: &mut VecDeque<Tapped>,
    ) -> Result<Option<Bytes>, Status> {
        let mut message = None;
        loop {
            if matches!(self.state, State::Key) && self.left == 0 {
                // The message's end.
                if !self.head_sent {
                    message = Some(self.head(out, false)?);
                }
                self.state = State::After;
            }
            if data.is_empty() {
                return Ok(message);
            }
            match self.state {
                State::Prefix => {
                    if !self.take_partial(&mut data, 5) {
                        continue;
                    }
                    if self.partial[0] != 0 {
                        return Err(malformed("compressed message"));
                    }
                    let len = [
                        self.partial[1],
                        self.partial[2],
                        self.partial[3],
                        self.partial[4],
                    ];
                    self.left = u64::from(u32::from_be_bytes(len));
                    self.partial.clear();
                    self.state = State::Key;
                }
                State::After => return Err(malformed("more than one message")),
                _ => {
                    if let Some(head) = self.field_step(&mut data, out)? {
                        message = Some(head);
                    }
                }
            }
        }
    }

    /// The body ended: the message must be complete.
    fn finish(&self) -> Result<(), Status> {
        match self.state {
            State::After | State::Prefix if self.partial.is_empty() => Ok(()),
            _ => Err(malformed("the message ended early")),
        }
    }

    /// One step inside the message; the generated client's message when
    /// the first raw output starts.
    fn field_step(
        &mut self,
        data: &mut Bytes,
        out: &mut VecDeque<Tapped>,
    ) -> Result<Option<Bytes>, Status> {
        match self.state {
            State::Key => {
                let Some(key) = self.varint(data)? else {
                    return Ok(None);
                };
                let (field, wire) = (key >> 3, key & 7);
                if field == RAW_OUTPUT_CONTENTS && wire == 2 {
                    self.state = State::EntryLength;
                    if !self.head_sent {
                        return self.head(out, true).map(Some);
                    }
                    return Ok(None);
                }
                if self.head_sent {
                    return Err(malformed("a field after the raw outputs"));
                }
                encode_varint(key, &mut self.small);
                self.state = match wire {
                    0 => State::SmallVarint,
                    1 => State::SmallFixed(8),
                    2 => State::SmallLength,
                    5 => State::SmallFixed(4),
                    _ => return Err(malformed("an unknown wire type")),
                };
            }
            State::SmallVarint => {
                let Some(value) = self.varint(data)? else {
                    return Ok(None);
                };
                encode_varint(value, &mut self.small);
                self.state = State::Key;
            }
            State::SmallLength => {
                let Some(len) = self.varint(data)? else {
                    return Ok(None);
                };
                encode_varint(len, &mut self.small);
                self.state = State::SmallFixed(len);
            }
            State::SmallFixed(n) => {
                let taken = self.take(data, n)?;
                self.small.put_slice(&taken);
                let n = n - taken.len() as u64;
                self.state = if n == 0 {
                    State::Key
                } else {
                    State::SmallFixed(n)
                };
            }
            State::EntryLength => {
                let Some(len) = self.varint(data)? else {
                    return Ok(None);
                };
                out.push_back(Tapped::Entry(len));
                self.state = if len == 0 {
                    State::Key
                } else {
                    State::EntryData(len)
                };
            }
            State::EntryData(n) => {
                let taken = self.take(data, n)?;
                let n = n - taken.len() as u64;
                out.push_back(Tapped::Data(taken));
                self.state = if n == 0 {
                    State::Key
                } else {
                    State::EntryData(n)
                };
            }
            State::Prefix | State::After => {}
        }
        Ok(None)
    }

    /// Up to `n` message bytes off the front of `data`.
    fn take(&mut self, data: &mut Bytes, n: u64) -> Result<Bytes, Status> {
        let k = n.min(data.len() as u64).min(self.left);
        if k == 0 {
            return Err(malformed("a field runs past the message"));
        }
        self.left -= k;
        Ok(data.split_to(k as usize))
    }

    /// Collects bytes into `partial` until it holds `n`; `true` then.
    fn take_partial(&mut self, data: &mut Bytes, n: usize) -> bool {
        let k = (n - self.partial.len()).min(data.len());
        self.partial.extend_from_slice(&data[..k]);
        data.advance(k);
        self.partial.len() == n
    }

    /// A varint of the message, possibly split across frames.
    fn varint(&mut self, data: &mut Bytes) -> Result<Option<u64>, Status> {
        while let Some(&byte) = data.first() {
            if self.left == 0 {
                return Err(malformed("a field runs past the message"));
            }
            data.advance(1);
            self.left -= 1;
            self.partial.push(byte);
            if byte < 0x80 {
                let value = prost::encoding::decode_varint(&mut self.partial.as_slice())
                    .map_err(|_| malformed("a bad varint"))?;
                self.partial.clear();
                return Ok(Some(value));
            }
            if self.partial.len() == 10 {
                return Err(malformed("a bad varint"));
            }
        }
        Ok(None)
    }

    /// The head: the small fields decoded (queued for the tap) and, for
    /// the generated client, the same fields as a gRPC message.
    fn head(&mut self, out: &mut VecDeque<Tapped>, raw_follow: bool) -> Result<Bytes, Status> {
        self.head_sent = true;
        let small = std::mem::take(&mut self.small).freeze();
        let response =
            ModelInferResponse::decode(small.clone()).map_err(|e| malformed(&e.to_string()))?;
        let mut message = BytesMut::with_capacity(5 + small.len());
        message.put_u8(0);
        message.put_u32(small.len() as u32);
        message.put_slice(&small);
        out.push_back(Tapped::Head {
            response,
            raw_follow,
        });
        Ok(message.freeze())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::inference::model_infer_response::InferOutputTensor;
    use http_body::Body as _;

    fn response(raw: &[usize]) -> ModelInferResponse {
        ModelInferResponse {
            model_name: "add_sub".into(),
            model_version: "1".into(),
            id: "7".into(),
            outputs: (0..raw.len())
                .map(|i| InferOutputTensor {
                    name: format!("OUTPUT{i}"),
                    datatype: "UINT8".into(),
                    shape: vec![raw[i] as i64],
                    ..Default::default()
                })
                .collect(),
            raw_output_contents: raw
                .iter()
                .enumerate()
                .map(|(i, n)| Bytes::from(vec![i as u8 + 1; *n]))
                .collect(),
            ..Default::default()
        }
    }

    fn framed(message: &ModelInferResponse) -> Vec<u8> {
        let body = message.encode_to_vec();
        let mut out = vec![0];
        out.extend((body.len() as u32).to_be_bytes());
        out.extend(body);
        out
    }

    #[test]
    fn raw_outputs_are_tapped_and_the_rest_is_the_clients_message() {
        for raw in [&[][..], &[0][..], &[5, 0, 300], &[70_000, 1]] {
            let full = response(raw);
            let mut small = full.clone();
            small.raw_output_contents.clear();
            let expected: Vec<(u64, Vec<u8>)> = full
                .raw_output_contents
                .iter()
                .map(|b| (b.len() as u64, b.to_vec()))
                .collect();
            for size in [1, 3, 7, 64, 1 << 20] {
                let walked = walk(&framed(&full), size).unwrap();
                assert_eq!(
                    walked.message,
                    framed(&small),
                    "{raw:?} in frames of {size}"
                );
                assert_eq!(walked.head, Some((small.clone(), !raw.is_empty())));
                assert_eq!(walked.raw, expected, "{raw:?} in frames of {size}");
            }
        }
    }

    /// Walks `wire` in frames of `size` bytes.
    fn walk(wire: &[u8], size: usize) -> Result<Walked, Status> {
        walk_frames(wire.chunks(size))
    }

    #[test]
    fn a_broken_message_fails_the_walk() {
        let wire = framed(&response(&[10, 10]));
        // Cut short.
        assert!(walk(&wire[..wire.len() - 3], 4).is_err());
        // A second message.
        let twice = [wire.clone(), wire.clone()].concat();
        assert!(walk(&twice, 1 << 20).is_err());
        // A small field after a raw output.
        let mut late = framed(&response(&[10]));
        late.extend([0x0a, 1, b'x']);
        let len = (late.len() - 5) as u32;
        late[1..5].copy_from_slice(&len.to_be_bytes());
        assert!(walk(&late, 1 << 20).is_err());
        // Compressed.
        let mut compressed = wire;
        compressed[0] = 1;
        assert!(walk(&compressed, 1 << 20).is_err());
    }

    /// A response body of ready DATA frames.
    struct Frames(VecDeque<Bytes>);

    impl http_body::Body for Frames {
        type Data = Bytes;
        type Error = Status;

        fn poll_frame(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
            Poll::Ready(self.0.pop_front().map(|b| Ok(Frame::data(b))))
        }
    }

    #[tokio::test]
    async fn a_full_tap_holds_the_walk_back_and_loses_nothing() {
        let full = response(&[300_000, 5, 200_000]);
        let wire = framed(&full);
        // Frames of 1 000 bytes: hundreds of items, far more than the tap
        // holds, so the walk waits for room again and again.
        let frames = wire.chunks(1000).map(Bytes::copy_from_slice).collect();
        let (tap, mut tapped) = tap();
        let mut body = tap.walk(Body::new(Frames(frames)));
        let reader = tokio::spawn(async move {
            let mut raw: Vec<Vec<u8>> = Vec::new();
            while let Some(item) = tapped.recv().await {
                match item {
                    Tapped::Entry(_) => raw.push(Vec::new()),
                    Tapped::Data(d) => raw.last_mut().unwrap().extend_from_slice(&d),
                    _ => {}
                }
            }
            raw
        });
        let mut message = Vec::new();
        while let Some(frame) = std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await
        {
            message.extend_from_slice(&frame.unwrap().into_data().unwrap());
        }
        drop((body, tap));
        let expected: Vec<Vec<u8>> = full
            .raw_output_contents
            .iter()
            .map(|b| b.to_vec())
            .collect();
        assert_eq!(reader.await.unwrap(), expected);
        let mut small = full;
        small.raw_output_contents.clear();
        assert_eq!(message, framed(&small));
    }

    #[test]
    fn an_empty_body_is_a_trailers_only_answer() {
        assert_eq!(walk(&[], 1).unwrap(), Walked::default());
    }
}
