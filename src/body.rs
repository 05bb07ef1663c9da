//! The rest of a request body while it is still arriving: a bounded queue
//! of chunks between the front that reads them off the client's socket
//! ([`BodyFeed`]) and the upstream request that sends them on
//! ([`BodyRest`]). A streamed `/infer` request holds no more of its body
//! than this queue, one chunk being sent and the upstream's HTTP/2 window,
//! whatever the tensors' size.
//!
//! The feed says explicitly where the body ends ([`BodyFeed::end`]); a feed
//! dropped without it (the client went away, a limit refused the body)
//! breaks the rest, and whoever reads it stops and cancels what it sent.

use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{ready, Context, Poll};

use bytes::Bytes;
use tokio::sync::mpsc;

/// Chunks queued between reader and sender. pingora hands an HTTP/1 body
/// over in reads of at most 64 KiB, so a body holds at most 1 MiB here,
/// the size of the stream window we grant backends ourselves (chosen, not
/// tuned: the 2×64 MiB and 2×256 MiB cells of `scripts/bench` peak at
/// 57 MB of gateway RSS with it).
pub(crate) const QUEUED_CHUNKS: usize = 16;

/// Bodies (HTTP) and messages (gRPC passthrough) of this size or more are
/// streamed upstream instead of read whole first. Below it a body costs at
/// most this much memory while read whole, and reading it whole costs less
/// CPU: at 2×1 MiB, streaming measured 5–10 % more gateway CPU per request
/// (its writes upstream follow the client's pace: 36 `writev`s per request
/// instead of 4), with the same latency. From 2×4 MiB on, both cost the
/// same CPU and streaming holds less.
pub(crate) const STREAM_FROM: u64 = 4 << 20;

enum Item {
    Data(Bytes),
    End,
}

/// A new queue: its writing end and its reading end.
pub(crate) fn channel() -> (BodyFeed, BodyRest) {
    let (tx, rx) = mpsc::channel(QUEUED_CHUNKS);
    let rest = BodyRest(Arc::new(Mutex::new(Inner {
        rx,
        pending: Bytes::new(),
        read: 0,
        fault: None,
        reader: None,
        readers: 0,
    })));
    (BodyFeed(tx), rest)
}

/// The end the client's bytes are written into.
pub(crate) struct BodyFeed(mpsc::Sender<Item>);

/// Nobody reads the body any more (the request was answered or dropped).
#[derive(Debug)]
pub(crate) struct Unread;

impl BodyFeed {
    /// Queues one chunk, waiting while the queue is full.
    pub(crate) async fn send(&self, chunk: Bytes) -> Result<(), Unread> {
        self.0.send(Item::Data(chunk)).await.map_err(|_| Unread)
    }

    /// Says the body is complete.
    pub(crate) async fn end(self) -> Result<(), Unread> {
        self.0.send(Item::End).await.map_err(|_| Unread)
    }

    /// Resolves once nobody reads the body any more.
    pub(crate) async fn closed(&self) {
        self.0.closed().await
    }
}

/// Why the rest of a body could not be sent as declared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fault {
    /// It ended after `read` bytes, before what the request declared.
    Short { read: u64 },
    /// More bytes came than the request declared.
    Long,
    /// Its feed stopped without an end: the front knows why.
    Broken,
    /// An earlier attempt already sent part of it: it cannot be sent again.
    Spent,
}

/// The reading end; clones share it (each attempt of a call holds one,
/// and the front keeps one to learn what went wrong).
#[derive(Clone)]
pub(crate) struct BodyRest(Arc<Mutex<Inner>>);

struct Inner {
    rx: mpsc::Receiver<Item>,
    /// Bytes handed back to be read first.
    pending: Bytes,
    /// Bytes taken so far.
    read: u64,
    fault: Option<Fault>,
    /// The reader that may take bytes; `readers` numbers them.
    reader: Option<u32>,
    readers: u32,
}

/// Never the bytes: how far the reading got.
impl std::fmt::Debug for BodyRest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let inner = self.lock();
        f.debug_struct("BodyRest")
            .field("read", &inner.read)
            .field("fault", &inner.fault)
            .finish()
    }
}

impl BodyRest {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock leaves plain counters behind.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Puts `first` (bytes read with the body's head) in front of the rest.
    pub(crate) fn unread(&self, first: Bytes) {
        let mut inner = self.lock();
        debug_assert!(inner.pending.is_empty() && inner.read == 0);
        inner.pending = first;
    }

    /// Nobody will read on: the feed is told ([`BodyFeed::closed`]), and a
    /// reader still waiting finds the body broken once the feed stops.
    pub(crate) fn abandon(&self) {
        self.lock().rx.close();
    }

    /// What went wrong while it was read, if anything.
    pub(crate) fn fault(&self) -> Option<Fault> {
        self.lock().fault
    }

    /// A reader for one attempt. Only one reader ever takes bytes: a later
    /// attempt may read only while nothing was taken yet (an attempt that
    /// never reached its backend is retried elsewhere).
    pub(crate) fn reader(&self) -> Reader {
        let mut inner = self.lock();
        inner.readers += 1;
        let id = inner.readers;
        if inner.read == 0 && inner.fault.is_none() {
            inner.reader = Some(id);
        }
        Reader {
            rest: self.clone(),
            id,
        }
    }

    /// Reads everything up to the end (bodies that cannot be streamed):
    /// `Long` once more than `max` bytes came.
    pub(crate) async fn collect(&self, max: u64) -> Result<Vec<Bytes>, Fault> {
        let reader = self.reader();
        let mut chunks = Vec::new();
        let mut len = 0u64;
        loop {
            let next = std::future::poll_fn(|cx| {
                let mut inner = reader.owned()?;
                Poll::Ready(Ok(ready!(inner.poll_next(cx, u64::MAX))))
            });
            match next.await? {
                Next::Data(chunk) => {
                    len += chunk.len() as u64;
                    if len > max {
                        return Err(Fault::Long);
                    }
                    chunks.push(chunk);
                }
                Next::End => return Ok(chunks),
                Next::Broken => return Err(Fault::Broken),
            }
        }
    }
}

/// One attempt's access to the rest.
pub(crate) struct Reader {
    rest: BodyRest,
    id: u32,
}

/// What the queue gave.
enum Next {
    Data(Bytes),
    End,
    Broken,
}

impl Reader {
    /// The shared state, if this reader may take bytes.
    fn owned(&self) -> Result<MutexGuard<'_, Inner>, Fault> {
        let inner = self.rest.lock();
        if inner.reader == Some(self.id) {
            Ok(inner)
        } else {
            Err(inner.fault.unwrap_or(Fault::Spent))
        }
    }

    /// The next bytes, at most `max` (> 0) of them; `Short` at the end.
    pub(crate) fn poll_take(
        &mut self,
        cx: &mut Context<'_>,
        max: u64,
    ) -> Poll<Result<Bytes, Fault>> {
        let mut inner = self.owned()?;
        Poll::Ready(match ready!(inner.poll_next(cx, max)) {
            Next::Data(chunk) => Ok(chunk),
            Next::End => {
                let short = Fault::Short { read: inner.read };
                Err(inner.record(short))
            }
            Next::Broken => Err(inner.record(Fault::Broken)),
        })
    }

    /// Waits for the end once every declared byte was taken: `Long` if
    /// more bytes come.
    pub(crate) fn poll_end(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Fault>> {
        let mut inner = self.owned()?;
        Poll::Ready(match ready!(inner.poll_next(cx, u64::MAX)) {
            Next::Data(_) => Err(inner.record(Fault::Long)),
            Next::End => Ok(()),
            Next::Broken => Err(inner.record(Fault::Broken)),
        })
    }
}

impl Inner {
    /// Pending bytes first (at most `max`), then the queue's next item.
    fn poll_next(&mut self, cx: &mut Context<'_>, max: u64) -> Poll<Next> {
        loop {
            if !self.pending.is_empty() {
                let n = usize::try_from(max)
                    .unwrap_or(usize::MAX)
                    .min(self.pending.len());
                self.read += n as u64;
                return Poll::Ready(Next::Data(self.pending.split_to(n)));
            }
            match ready!(self.rx.poll_recv(cx)) {
                Some(Item::Data(chunk)) => self.pending = chunk,
                Some(Item::End) => return Poll::Ready(Next::End),
                None => return Poll::Ready(Next::Broken),
            }
        }
    }

    /// Records the first fault.
    fn record(&mut self, fault: Fault) -> Fault {
        self.fault.get_or_insert(fault);
        fault
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::poll_fn;

    async fn take(reader: &mut Reader, max: u64) -> Result<Bytes, Fault> {
        poll_fn(|cx| reader.poll_take(cx, max)).await
    }

    #[tokio::test]
    async fn bytes_come_out_in_order_cut_at_the_asked_size() {
        let (feed, rest) = channel();
        rest.unread(Bytes::from_static(b"ab"));
        let writer = tokio::spawn(async move {
            feed.send(Bytes::from_static(b"cdef")).await.unwrap();
            feed.send(Bytes::from_static(b"g")).await.unwrap();
            feed.end().await.unwrap();
        });
        let mut reader = rest.reader();
        assert_eq!(take(&mut reader, 5).await.unwrap(), "ab");
        assert_eq!(take(&mut reader, 3).await.unwrap(), "cde");
        assert_eq!(take(&mut reader, 3).await.unwrap(), "f");
        assert_eq!(take(&mut reader, 3).await.unwrap(), "g");
        assert_eq!(poll_fn(|cx| reader.poll_end(cx)).await, Ok(()));
        writer.await.unwrap();
        assert_eq!(rest.fault(), None);
    }

    #[tokio::test]
    async fn an_early_end_is_short_and_extra_bytes_are_long() {
        let (feed, rest) = channel();
        feed.send(Bytes::from_static(b"abc")).await.unwrap();
        feed.end().await.unwrap();
        let mut reader = rest.reader();
        assert_eq!(take(&mut reader, 10).await.unwrap(), "abc");
        assert_eq!(take(&mut reader, 10).await, Err(Fault::Short { read: 3 }));

        let (feed, rest) = channel();
        feed.send(Bytes::from_static(b"abc")).await.unwrap();
        let mut reader = rest.reader();
        assert_eq!(take(&mut reader, 2).await.unwrap(), "ab");
        assert_eq!(poll_fn(|cx| reader.poll_end(cx)).await, Err(Fault::Long));
        assert_eq!(rest.fault(), Some(Fault::Long));
    }

    #[tokio::test]
    async fn a_feed_dropped_without_an_end_breaks_the_rest() {
        let (feed, rest) = channel();
        feed.send(Bytes::from_static(b"abc")).await.unwrap();
        drop(feed);
        let mut reader = rest.reader();
        assert_eq!(take(&mut reader, 10).await.unwrap(), "abc");
        assert_eq!(take(&mut reader, 10).await, Err(Fault::Broken));
        assert_eq!(rest.fault(), Some(Fault::Broken));
        assert_eq!(rest.collect(u64::MAX).await, Err(Fault::Broken));
    }

    #[tokio::test]
    async fn a_second_reader_may_read_only_what_nobody_took() {
        let (feed, rest) = channel();
        feed.send(Bytes::from_static(b"abc")).await.unwrap();
        feed.end().await.unwrap();
        let unused = rest.reader();
        let mut second = rest.reader();
        drop(unused);
        assert_eq!(take(&mut second, 1).await.unwrap(), "a");
        let mut third = rest.reader();
        assert_eq!(take(&mut third, 1).await, Err(Fault::Spent));
        assert_eq!(take(&mut second, 9).await.unwrap(), "bc");
    }

    #[tokio::test]
    async fn a_dropped_rest_tells_the_feed() {
        let (feed, rest) = channel();
        drop(rest);
        assert!(feed.send(Bytes::from_static(b"x")).await.is_err());
    }

    #[tokio::test]
    async fn collect_reads_to_the_end() {
        let (feed, rest) = channel();
        rest.unread(Bytes::from_static(b"a"));
        feed.send(Bytes::from_static(b"bc")).await.unwrap();
        feed.end().await.unwrap();
        assert_eq!(rest.collect(3).await.unwrap().concat(), b"abc");
        let (feed, rest) = channel();
        feed.send(Bytes::from_static(b"abcd")).await.unwrap();
        assert_eq!(rest.collect(3).await, Err(Fault::Long));
    }
}
