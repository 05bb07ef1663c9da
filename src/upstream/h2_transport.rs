//! The request transport to a plain-TCP backend: HTTP/2 straight on the
//! `h2` crate, under tonic's generated client, one connection per serving
//! thread (see `thread_slot`).
//!
//! Why not tonic's `Channel` (hand-written, measured): a `Channel` hands
//! each request to a buffer task, which hands it to hyper's dispatch task,
//! which spawns one more task to send the body; a unary request's HEADERS
//! and DATA then leave in two writes. Here the calling task queues both
//! frames itself before the connection task runs: one write, no hand-off
//! and no spawn per request. TLS backends keep tonic's `Channel`.

use std::future::{poll_fn, Future};
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use h2::client::SendRequest;
use h2::{RecvStream, SendStream};
use http_body::Frame;
use tonic::body::Body;

pub(super) type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The biggest header block accepted from a backend (hyper's default).
const MAX_HEADER_LIST: u32 = 16 << 10;

/// The largest frame a backend may send us (h2's default: 16 KiB). At
/// 16 KiB the 2 MiB answer of a 2×1 MiB request arrived in 128 frames and
/// ~290 reads; at 1 MiB, in ~40 reads (`strace -c`, load tool w3). A frame
/// is held whole until complete, no more than the stream window allows.
const MAX_FRAME: u32 = 1 << 20;

/// HTTP/2 settings of one connection.
#[derive(Debug, Clone, Copy)]
pub(crate) struct H2Settings {
    pub connect_timeout: Duration,
    pub stream_window: u32,
    pub connection_window: u32,
}

/// One backend's connection for the calling thread, opened on first use
/// and again after it broke. Cheap to clone.
#[derive(Clone)]
pub(crate) struct H2Transport {
    shared: Arc<Shared>,
}

struct Shared {
    addr: SocketAddr,
    settings: H2Settings,
    /// The open connection; held while one is opened, so concurrent first
    /// calls share it.
    connection: tokio::sync::Mutex<Option<Connection>>,
}

/// An open connection: its sender, and whether its task has ended.
#[derive(Clone)]
struct Connection {
    sender: SendRequest<Bytes>,
    closed: Arc<AtomicBool>,
}

impl H2Transport {
    pub(crate) fn new(addr: SocketAddr, settings: H2Settings) -> H2Transport {
        H2Transport {
            shared: Arc::new(Shared {
                addr,
                settings,
                connection: tokio::sync::Mutex::new(None),
            }),
        }
    }

    /// A sender ready for one more stream, on the open connection or, if
    /// there is none or it broke, on a new one (as tonic's `Channel`
    /// reconnects when it finds its connection closed).
    async fn ready_sender(&self) -> Result<SendRequest<Bytes>, BoxError> {
        let mut tries = 2;
        loop {
            let connection = {
                let mut slot = self.shared.connection.lock().await;
                match slot.as_ref().filter(|c| !c.closed.load(Relaxed)) {
                    Some(open) => open.clone(),
                    None => {
                        let new = self.connect().await?;
                        *slot = Some(new.clone());
                        new
                    }
                }
            };
            match connection.sender.ready().await {
                Ok(sender) => return Ok(sender),
                Err(error) => {
                    tracing::debug!(backend = %self.shared.addr, %error, "upstream connection broke");
                    connection.closed.store(true, Relaxed);
                    tries -= 1;
                    if tries == 0 {
                        return Err(error.into());
                    }
                }
            }
        }
    }

    /// A new connection; its task runs on the calling thread's runtime.
    /// Failures are `ConnectError`s: tonic answers them `UNAVAILABLE`, and
    /// the socket error stays their cause (a refused connection is retried
    /// elsewhere, see `call::never_reached`).
    async fn connect(&self) -> Result<Connection, BoxError> {
        let settings = self.shared.settings;
        let addr = self.shared.addr;
        let failed = |e: BoxError| -> BoxError { Box::new(tonic::ConnectError(e)) };
        let tcp = tokio::time::timeout(
            settings.connect_timeout,
            tokio::net::TcpStream::connect(addr),
        )
        .await
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::TimedOut))
        .and_then(|r| r)
        .map_err(|e| failed(e.into()))?;
        tcp.set_nodelay(true).map_err(|e| failed(e.into()))?;
        let (sender, task) = h2::client::Builder::new()
            .initial_window_size(settings.stream_window)
            .initial_connection_window_size(settings.connection_window)
            .max_frame_size(MAX_FRAME)
            .max_header_list_size(MAX_HEADER_LIST)
            .enable_push(false)
            .handshake::<_, Bytes>(tcp)
            .await
            .map_err(|e| failed(e.into()))?;
        let closed = Arc::new(AtomicBool::new(false));
        let ended = MarkOnDrop(closed.clone());
        tokio::spawn(async move {
            let _ended = ended;
            if let Err(error) = task.await {
                tracing::debug!(backend = %addr, %error, "upstream connection ended");
            }
        });
        Ok(Connection { sender, closed })
    }

    /// One call: HEADERS and whatever the body has ready go out from this
    /// task; a streaming body's later messages from a task of their own.
    pub(super) async fn send<B: SentBody>(
        self,
        request: http::Request<B>,
    ) -> Result<http::Response<Body>, BoxError> {
        let mut sender = self.ready_sender().await?;
        let (parts, mut body) = request.into_parts();
        let end = body.is_end_stream();
        let (response, mut stream) =
            sender.send_request(http::Request::from_parts(parts, ()), end)?;
        if !end {
            let done = poll_fn(|cx| Poll::Ready(send_ready(&mut body, &mut stream, cx))).await?;
            if !done {
                tokio::spawn(send_rest(body, stream));
            }
        }
        let (parts, recv) = response.await?.into_parts();
        Ok(http::Response::from_parts(
            parts,
            Body::new(Received {
                recv,
                data_done: false,
            }),
        ))
    }
}

/// Marks a connection closed when its task ends, also when the task is
/// dropped unfinished (its runtime shut down).
struct MarkOnDrop(Arc<AtomicBool>);

impl Drop for MarkOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Relaxed);
    }
}

/// What a call's body may be: tonic's, or a message's pieces sent as
/// they are (`transport`), polled in place.
pub(super) trait SentBody:
    http_body::Body<Data = Bytes, Error = tonic::Status> + Unpin + Send + 'static
{
}

impl<B> SentBody for B where
    B: http_body::Body<Data = Bytes, Error = tonic::Status> + Unpin + Send + 'static
{
}

/// Sends the body frames that are ready now; `true` once the body ended.
fn send_ready<B: SentBody>(
    body: &mut B,
    stream: &mut SendStream<Bytes>,
    cx: &mut Context<'_>,
) -> Result<bool, BoxError> {
    loop {
        match Pin::new(&mut *body).poll_frame(cx) {
            Poll::Pending => return Ok(false),
            Poll::Ready(frame) => {
                if send_frame(frame, body, stream)? {
                    return Ok(true);
                }
            }
        }
    }
}

/// Sends one polled frame (`None`: the end); `true` once the body ended.
/// A body that knows it ended after this frame (see `transport::Pieces`)
/// ends the stream with it, not with one more empty DATA frame.
fn send_frame<B: SentBody>(
    frame: Option<Result<Frame<Bytes>, tonic::Status>>,
    body: &B,
    stream: &mut SendStream<Bytes>,
) -> Result<bool, BoxError> {
    match frame {
        None => {
            stream.send_data(Bytes::new(), true)?;
            Ok(true)
        }
        Some(Err(status)) => {
            stream.send_reset(h2::Reason::CANCEL);
            Err(status.into())
        }
        Some(Ok(frame)) => match frame.into_data() {
            Ok(data) => {
                let end = body.is_end_stream();
                stream.send_data(data, end)?;
                Ok(end)
            }
            Err(frame) => {
                if let Ok(trailers) = frame.into_trailers() {
                    stream.send_trailers(trailers)?;
                    return Ok(true);
                }
                Ok(false)
            }
        },
    }
}

/// The rest of a streaming body, sent as the backend's flow control lets
/// it: frames go out while the stream has send capacity, and only when it
/// has none does this wait for more (`RESERVE` beyond what is buffered).
/// Asking for capacity before every frame instead would hand back what the
/// stream holds beyond that one frame, so each frame would wait for the
/// previous one to be written: one `writev` per 64 KiB of a streamed
/// `/infer` body (measured: 36 per 2×1 MiB request instead of 4).
async fn send_rest<B: SentBody>(mut body: B, mut stream: SendStream<Bytes>) {
    loop {
        if stream.capacity() == 0 {
            stream.reserve_capacity(RESERVE);
            match poll_fn(|cx| stream.poll_capacity(cx)).await {
                Some(Ok(_)) => {}
                // The stream is gone (reset or answered): nothing to send to.
                None | Some(Err(_)) => return,
            }
        }
        // A backend that reset the stream (its deadline passed, say) is not
        // waited on for a body that may never come.
        let next = poll_fn(|cx| match stream.poll_reset(cx) {
            Poll::Ready(_) => Poll::Ready(None),
            Poll::Pending => Pin::new(&mut body).poll_frame(cx).map(Some),
        });
        let Some(frame) = next.await else {
            return;
        };
        match send_frame(frame, &body, &mut stream) {
            Ok(false) => {}
            Ok(true) | Err(_) => return,
        }
    }
}

/// The send capacity a streaming body asks for beyond what it buffered:
/// the stream window we grant backends ourselves, so a backend with the
/// same window is kept full, while a slow one holds the body back after
/// at most this much plus one frame.
const RESERVE: usize = 1 << 20;

/// A response body as tonic reads it: the DATA frames (their flow-control
/// credit returned as they are handed on), then the trailers.
struct Received {
    recv: RecvStream,
    data_done: bool,
}

impl http_body::Body for Received {
    type Data = Bytes;
    type Error = h2::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, h2::Error>>> {
        let this = self.get_mut();
        if !this.data_done {
            match ready!(this.recv.poll_data(cx)) {
                Some(Ok(data)) => {
                    let _ = this.recv.flow_control().release_capacity(data.len());
                    return Poll::Ready(Some(Ok(Frame::data(data))));
                }
                Some(Err(error)) => return Poll::Ready(Some(Err(error))),
                None => this.data_done = true,
            }
        }
        Poll::Ready(match ready!(this.recv.poll_trailers(cx)) {
            Ok(Some(trailers)) => Some(Ok(Frame::trailers(trailers))),
            Ok(None) => None,
            Err(error) => Some(Err(error)),
        })
    }

    fn is_end_stream(&self) -> bool {
        self.recv.is_end_stream()
    }
}

impl tower_service::Service<http::Request<Body>> for H2Transport {
    type Response = http::Response<Body>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<http::Response<Body>, BoxError>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        // Readiness (a connection, room for one more stream) is awaited
        // inside the call, under its deadline.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        Box::pin(self.clone().send(request))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::inference::grpc_inference_service_client::GrpcInferenceServiceClient;
    use crate::proto::inference::ServerLiveRequest;
    use crate::upstream::backend::origin;
    use crate::upstream::call::never_reached;
    use crate::upstream::transport::Transport;
    use tensorgate_demo::DemoUpstream;

    const SETTINGS: H2Settings = H2Settings {
        connect_timeout: Duration::from_secs(5),
        stream_window: 1 << 20,
        connection_window: 8 << 20,
    };

    fn live(transport: &H2Transport, addr: SocketAddr) -> Result<bool, tonic::Status> {
        let mut client = GrpcInferenceServiceClient::with_origin(
            Transport::direct(transport.clone()),
            origin(addr, false),
        );
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        // The runtime, and with it a connection opened here, ends with
        // this call.
        runtime.block_on(async move {
            Ok(client
                .server_live(ServerLiveRequest {})
                .await?
                .into_inner()
                .live)
        })
    }

    #[test]
    fn a_connection_whose_runtime_ended_is_opened_again() {
        let demo = DemoUpstream::start_in_background("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = demo.local_addr();
        let transport = H2Transport::new(addr, SETTINGS);
        assert!(live(&transport, addr).expect("first call"));
        assert!(live(&transport, addr).expect("a call from another runtime"));
    }

    #[test]
    fn a_refused_connection_is_unavailable_and_never_reached() {
        // Bound but not listening: the port stays ours, and a connect to
        // it is refused.
        let bound =
            socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
        bound.bind(&any.into()).unwrap();
        let addr = bound.local_addr().unwrap().as_socket().unwrap();
        let status = live(&H2Transport::new(addr, SETTINGS), addr).unwrap_err();
        assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");
        assert!(never_reached(&status), "{status:?}");
    }
}
