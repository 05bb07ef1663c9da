//! The lingering close: the one way the gateway closes a client connection
//! it has decided to end (after a refusal over the cap, a refused head or
//! body, an answer with `Connection: close`, an idle keep-alive timeout or
//! the drain): send what is buffered and a FIN, read and discard what the
//! client still sends for a bounded time and size, then close.
//!
//! Closing a socket that has unread bytes, or that receives bytes
//! afterwards, makes the kernel answer with a reset; the client's write
//! of its request (or the rest of its body) then fails with a broken pipe
//! and most clients report that instead of the answer waiting in their
//! receive buffer. Reading until the client closes lets every client
//! finish writing and read the answer (nginx calls this "lingering
//! close"). A client that keeps sending is not waited for past the
//! bounds.

use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// How much is read and dropped at most: the rest of a refused body up to
/// this size is taken (reading costs a copy, not memory), so a client
/// that writes its whole body before reading the answer still gets it.
/// A larger body meets the reset this avoids for smaller ones.
pub(crate) const LINGER_BYTES: usize = 64 << 20;

/// Bytes read per call while lingering.
const READ_SIZE: usize = 64 << 10;

/// Flushes, sends FIN (TLS: `close_notify`, then FIN), reads and drops
/// what the client sends until it closes, `linger` passes
/// (`connections.linger_ms`) or [`LINGER_BYTES`] were read, then closes.
/// Returns how many bytes were dropped (the drain counts a request that
/// arrived on a connection being closed as cut).
pub(crate) async fn close_lingering<S: AsyncRead + AsyncWrite + Unpin>(
    mut stream: S,
    linger: Duration,
) -> usize {
    let deadline = tokio::time::Instant::now() + linger;
    if tokio::time::timeout_at(deadline, stream.shutdown())
        .await
        .is_err()
    {
        return 0; // the client reads nothing: nothing to linger for
    }
    let mut sink = vec![0u8; READ_SIZE];
    let mut dropped = 0usize;
    while dropped < LINGER_BYTES {
        match tokio::time::timeout_at(deadline, stream.read(&mut sink)).await {
            Ok(Ok(n)) if n > 0 => dropped += n,
            _ => break,
        }
    }
    dropped
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The peer reads the answer and EOF, may still write (nothing is
    /// refused), and the close completes when the peer closes.
    #[tokio::test]
    async fn the_peer_reads_the_answer_then_finishes_writing() {
        let (mut ours, mut peer) = tokio::io::duplex(1 << 16);
        ours.write_all(b"HTTP/1.1 503 \r\n\r\n").await.unwrap();
        let closing = tokio::spawn(close_lingering(ours, Duration::from_secs(60)));
        let mut answer = Vec::new();
        peer.read_to_end(&mut answer).await.unwrap();
        assert_eq!(answer, b"HTTP/1.1 503 \r\n\r\n");
        peer.write_all(b"GET / HTTP/1.1\r\n\r\n").await.unwrap();
        drop(peer);
        assert_eq!(closing.await.unwrap(), 18);
    }
}
