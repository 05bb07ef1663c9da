//! `[connections]`: how long a downstream connection may take at each step
//! before it is closed, and how many may be open at once. These keep idle,
//! silent and trickling clients (slowloris) from holding sockets and file
//! descriptors; they apply to the HTTP, HTTPS and gRPC listeners alike.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// A real client sends its first bytes (the h2 preface, a request line, a
/// TLS hello) right after connecting; five seconds covers a congested link.
pub(super) const DEFAULT_HANDSHAKE_TIMEOUT_MS: u64 = 5_000;
/// A request head is a few hundred bytes; ten seconds from its first byte
/// is generous for any real client and ends a byte-per-second trickle.
pub(super) const DEFAULT_HEADER_TIMEOUT_MS: u64 = 10_000;
/// Idle keep-alive connections are closed after a minute (pingora's and
/// most load balancers' default): clients reconnect cheaply, and sockets
/// held by forgotten clients come back.
pub(super) const DEFAULT_KEEPALIVE_TIMEOUT_MS: u64 = 60_000;
/// Downstream connections open at once across all client listeners; more
/// are refused at once (HTTP: `503`, `Connection: close`).
pub(super) const DEFAULT_MAX_CONNECTIONS: usize = 10_000;
/// File descriptors kept free whatever the cap says: the admin listener,
/// health checks, upstream channels, certificate and key files, logs.
pub(super) const DEFAULT_FD_RESERVE: usize = 256;
/// A closing connection is read from (and what arrives dropped) for up to
/// two seconds: a client that has the answer and the FIN closes within a
/// round trip, one still writing its request or body finishes 64 MiB in
/// that time at 32 MB/s; each lingering connection holds a file
/// descriptor, so it is short.
pub(super) const DEFAULT_LINGER_MS: u64 = 2_000;
/// h2 pings to gRPC clients find dead peers in under a minute.
pub(super) const DEFAULT_H2_PING_INTERVAL_MS: u64 = 30_000;

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Connections {
    /// From accept to the first bytes that tell the protocol (HTTP/1
    /// request line, h2c preface) or the end of the TLS handshake.
    pub handshake_timeout_ms: u64,
    /// The whole request head, counted from its first byte (not reset by
    /// each byte that trickles in). Passing it closes the connection.
    pub header_timeout_ms: u64,
    /// How long a connection may sit idle between requests (HTTP/1) or
    /// with no open stream (h2, gRPC).
    pub keepalive_timeout_ms: u64,
    /// Open downstream connections at most (HTTP + HTTPS + gRPC). Lowered
    /// at start to what the process's file limit allows after
    /// `fd_reserve`.
    pub max_connections: usize,
    /// File descriptors never given to client connections (a quarter of
    /// them may hold clients over the cap while they read their `503`).
    pub fd_reserve: usize,
    /// How long a connection the gateway closes is still read from (its
    /// bytes dropped) after its answer and FIN, so the client finishes
    /// writing and reads the answer instead of a reset (`app::linger`).
    pub linger_ms: u64,
    /// Interval of h2 keep-alive pings on the gRPC listener; a peer that
    /// does not answer one within the same time is closed.
    pub h2_ping_interval_ms: u64,
}

impl Default for Connections {
    fn default() -> Connections {
        Connections {
            handshake_timeout_ms: DEFAULT_HANDSHAKE_TIMEOUT_MS,
            header_timeout_ms: DEFAULT_HEADER_TIMEOUT_MS,
            keepalive_timeout_ms: DEFAULT_KEEPALIVE_TIMEOUT_MS,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            fd_reserve: DEFAULT_FD_RESERVE,
            linger_ms: DEFAULT_LINGER_MS,
            h2_ping_interval_ms: DEFAULT_H2_PING_INTERVAL_MS,
        }
    }
}

impl Connections {
    pub(crate) fn validate(&self) -> Result<(), String> {
        for (name, value) in [
            ("handshake_timeout_ms", self.handshake_timeout_ms),
            ("header_timeout_ms", self.header_timeout_ms),
            ("keepalive_timeout_ms", self.keepalive_timeout_ms),
            ("h2_ping_interval_ms", self.h2_ping_interval_ms),
            ("linger_ms", self.linger_ms),
            ("max_connections", self.max_connections as u64),
        ] {
            if value == 0 {
                return Err(format!("connections.{name} must be at least 1"));
            }
        }
        Ok(())
    }

    pub fn handshake_timeout(&self) -> Duration {
        Duration::from_millis(self.handshake_timeout_ms)
    }

    pub fn header_timeout(&self) -> Duration {
        Duration::from_millis(self.header_timeout_ms)
    }

    pub fn keepalive_timeout(&self) -> Duration {
        Duration::from_millis(self.keepalive_timeout_ms)
    }

    pub fn linger(&self) -> Duration {
        Duration::from_millis(self.linger_ms)
    }

    pub fn h2_ping_interval(&self) -> Duration {
        Duration::from_millis(self.h2_ping_interval_ms)
    }
}
