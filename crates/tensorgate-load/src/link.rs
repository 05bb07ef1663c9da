//! A connection of either mode (HTTP/1.1 or gRPC) behind one interface:
//! connect to the target, exchange the request for its answer (a
//! `response::Response`, which both modes build).

use std::io;
use std::net::SocketAddr;

use bytes::Bytes;

use crate::response::Response;
use crate::{grpc, http};

/// Where the connections go, and how.
#[derive(Clone, Copy)]
pub(crate) struct Target {
    pub(crate) addr: SocketAddr,
    pub(crate) grpc: bool,
    /// Bytes a second per direction (`--rate-mb-s`).
    pub(crate) rate: Option<f64>,
}

pub(crate) enum Link {
    Http(http::Conn),
    Grpc(grpc::Conn),
}

impl Link {
    pub(crate) async fn connect(target: Target) -> io::Result<Link> {
        Ok(if target.grpc {
            Link::Grpc(grpc::Conn::connect(target.addr).await?)
        } else {
            Link::Http(http::Conn::connect(target.addr, target.rate).await?)
        })
    }

    /// Sends `request` and reads its whole answer; the body is kept whole
    /// with `keep_all` (the checked request), else counted.
    pub(crate) async fn exchange(
        &mut self,
        request: &Bytes,
        keep_all: bool,
    ) -> io::Result<Response> {
        match self {
            Link::Http(c) => c.exchange(request, keep_all).await,
            Link::Grpc(c) => c.exchange(request, keep_all).await,
        }
    }
}
