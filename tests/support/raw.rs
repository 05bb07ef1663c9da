//! Raw HTTP/1.1 over a `TcpStream`, for tests that drive the real binary
//! byte by byte: one answer (head + `Content-Length` body) and its headers.

use std::io::Read;
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// A connection to `addr` whose reads give up after 30 s (a test that
/// would otherwise hang fails instead).
pub(crate) fn connect(addr: SocketAddr) -> TcpStream {
    let stream = TcpStream::connect(addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    stream
}

/// Reads one answer: the head (up to the blank line) and its
/// `Content-Length` body.
pub(crate) fn read_answer(stream: &mut TcpStream) -> (String, Vec<u8>) {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        let n = stream.read(&mut byte).expect("read head");
        assert_eq!(
            n,
            1,
            "closed before the head ended: {:?}",
            String::from_utf8_lossy(&head)
        );
        head.push(byte[0]);
    }
    let head = String::from_utf8(head).expect("ascii head");
    let len = header(&head, "content-length").map_or(0, |v| v.parse().unwrap());
    let mut body = vec![0; len];
    stream.read_exact(&mut body).expect("read body");
    (head, body)
}

/// A header's value in a response head, the name compared case-insensitively.
pub(crate) fn header(head: &str, name: &str) -> Option<String> {
    head.lines().find_map(|line| {
        let (n, v) = line.split_once(':')?;
        n.eq_ignore_ascii_case(name).then(|| v.trim().to_string())
    })
}
