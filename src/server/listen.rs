//! The listeners. [`Bound::bind`] binds every socket before anything else
//! starts, so a taken port ends the process at once with the address and
//! the OS error (and `--listen 127.0.0.1:0` works: the real address is
//! logged). [`Edge`] then runs one accept loop per client listener on the
//! serving runtime; every accepted client connection first takes a slot
//! under the connection cap (`connections.max_connections`, lowered to what
//! the file limit allows), or is refused at once.

use std::future::Future;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use pingora_core::apps::http_app::HttpServer;
use pingora_core::apps::ServerApp;
use pingora_core::listeners::tls::{Acceptor, TlsSettings};
use pingora_core::protocols::l4::stream::Stream as L4Stream;
use pingora_core::protocols::{GetSocketDigest, SocketDigest, Stream, ALPN};
use pingora_core::server::ShutdownWatch;
use pingora_core::services::background::BackgroundService;
use tokio::net::{TcpListener, TcpStream};

use crate::app::Gateway;
use crate::connections::{
    accepted_or_backoff, refuse, sniff, Admission, OpenConnections, Protocol, Refusal, Slot,
};
use crate::front::http::admin::AdminApp;
use crate::front::http::conn::{self, H2App};
use crate::front::http::session::GatewayService;
use crate::front::http::tls::ReloadingCert;
use crate::front::http::write_buffer::WriteBuffered;
use crate::front::http::Routes;

/// Every listening socket of the process, bound and not yet serving.
pub(crate) struct Bound {
    clients: ClientListeners,
    admin: Option<std::net::TcpListener>,
}

/// The listeners clients connect to (HTTP, HTTPS, gRPC): one set per
/// serving thread, each a handle on the same sockets.
struct ClientListeners {
    http: std::net::TcpListener,
    https: Option<(std::net::TcpListener, Arc<Acceptor>)>,
    grpc: Option<std::net::TcpListener>,
    /// `openai.listen`: the OpenAI routes only.
    openai: Option<std::net::TcpListener>,
}

impl ClientListeners {
    /// `threads` sets: copies of the handles, then these very ones.
    fn per_thread(self, threads: usize) -> std::io::Result<Vec<ClientListeners>> {
        let mut sets = (1..threads)
            .map(|_| self.try_clone())
            .collect::<std::io::Result<Vec<_>>>()?;
        sets.push(self);
        Ok(sets)
    }

    fn try_clone(&self) -> std::io::Result<ClientListeners> {
        Ok(ClientListeners {
            http: self.http.try_clone()?,
            https: self
                .https
                .as_ref()
                .map(|(l, acceptor)| l.try_clone().map(|l| (l, acceptor.clone())))
                .transpose()?,
            grpc: self.grpc.as_ref().map(|l| l.try_clone()).transpose()?,
            openai: self.openai.as_ref().map(|l| l.try_clone()).transpose()?,
        })
    }
}

impl Bound {
    /// Binds the HTTP, HTTPS, gRPC and admin listeners the config names.
    pub(crate) fn bind(gateway: &Gateway) -> Result<Bound, String> {
        let config = gateway.config();
        let tls = &config.tls;
        // Certificates first: a broken pair stops start-up before any bind.
        let acceptor = match (&tls.listen, &tls.cert_file, &tls.key_file) {
            (Some(_), Some(cert), Some(key)) => {
                let check = std::time::Duration::from_millis(tls.reload_check_ms);
                let resolver =
                    ReloadingCert::new(cert, key, check).map_err(|e| format!("tls: {e}"))?;
                let mut settings = TlsSettings::intermediate("", "").map_err(|e| e.to_string())?;
                settings.set_cert_resolver(Arc::new(resolver));
                settings.enable_h2();
                Some(Arc::new(settings.build()))
            }
            _ => None,
        };
        if let (true, Some(cert), Some(key)) = (config.grpc.tls, &tls.cert_file, &tls.key_file) {
            ReloadingCert::new(cert, key, std::time::Duration::ZERO)
                .map_err(|e| format!("grpc.tls: {e}"))?;
        }
        let http = bind("server.listen", &config.server.listen)?;
        let https = match (&tls.listen, acceptor) {
            (Some(listen), Some(acceptor)) => Some((bind("tls.listen", listen)?, acceptor)),
            _ => None,
        };
        let optional = |key: &str, listen: &Option<String>| {
            listen.as_deref().map(|l| bind(key, l)).transpose()
        };
        let grpc = optional("grpc.listen", &config.grpc.listen)?;
        let admin = optional("admin.listen", &config.admin.listen)?;
        let openai = optional("openai.listen", &config.openai.listen)?;
        Ok(Bound {
            clients: ClientListeners {
                http,
                https,
                grpc,
                openai,
            },
            admin,
        })
    }

    /// `what=address` for each bound listener (with real ports), for the log.
    pub(crate) fn describe(&self) -> String {
        let addr =
            |l: &std::net::TcpListener| l.local_addr().map(|a| a.to_string()).unwrap_or_default();
        let clients = &self.clients;
        let mut parts = vec![format!("http={}", addr(&clients.http))];
        if let Some((l, _)) = &clients.https {
            parts.push(format!("https={}", addr(l)));
        }
        if let Some(l) = &clients.grpc {
            parts.push(format!("grpc={}", addr(l)));
        }
        if let Some(l) = &clients.openai {
            parts.push(format!("openai={}", addr(l)));
        }
        if let Some(l) = &self.admin {
            parts.push(format!("admin={}", addr(l)));
        }
        parts.join(" ")
    }
}

fn bind(key: &str, listen: &str) -> Result<std::net::TcpListener, String> {
    use socket2::{Domain, Protocol, Socket, Type};
    let addr: SocketAddr = listen
        .parse()
        .map_err(|_| format!("{key} must be IP:PORT, got {listen:?}"))?;
    let failed = |e: std::io::Error| format!("cannot listen on {addr} ({key}): {e}");
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))
        .map_err(failed)?;
    // SO_REUSEADDR: a restart does not wait for TIME_WAIT sockets.
    socket.set_reuse_address(true).map_err(failed)?;
    socket.bind(&addr.into()).map_err(failed)?;
    socket.listen(LISTEN_BACKLOG).map_err(failed)?;
    socket.set_nonblocking(true).map_err(failed)?;
    Ok(socket.into())
}

/// Connections the kernel completes before they are accepted. A burst of
/// thousands of connects must queue, not have its handshakes dropped (std's
/// 128 loses some under a 2000-connection burst); the kernel caps it at
/// `net.core.somaxconn`.
const LISTEN_BACKLOG: i32 = 4096;

/// The serving side of the process, as one pingora background service:
/// the accept loops, the connections they spawn, the gRPC passthrough,
/// the admin listener, and the pool's first pass at boot.
pub(crate) struct Edge {
    gateway: Arc<Gateway>,
    open: Arc<OpenConnections>,
    bound: Mutex<Option<Bound>>,
}

impl Edge {
    pub(crate) fn new(gateway: Arc<Gateway>, bound: Bound, open: Arc<OpenConnections>) -> Edge {
        Edge {
            gateway,
            open,
            bound: Mutex::new(Some(bound)),
        }
    }
}

#[async_trait]
impl BackgroundService for Edge {
    async fn start(&self, mut shutdown: ShutdownWatch) {
        let taken = self.bound.lock().ok().and_then(|mut b| b.take());
        let Some(bound) = taken else { return };
        // The pool's first discovery and health pass starts now, not with
        // the first request (its warnings name unreachable backends).
        let gateway = self.gateway.clone();
        tokio::spawn(async move { gateway.started().await });
        let clients = Clients::new(&self.gateway, Routes::All, &self.open, &shutdown);
        let openai_clients = Clients::new(&self.gateway, Routes::OpenAi, &self.open, &shutdown);
        let threads = self.gateway.config().server.threads;
        let (gateway, open) = (self.gateway.clone(), self.open.clone());
        // Each serving thread owns its handles on the client listeners
        // (the last thread takes the originals): when every thread's
        // accept loops stop at SIGTERM, no handle is left, the sockets
        // close and new connections are refused by the kernel.
        let own = match ClientListeners::per_thread(bound.clients, threads) {
            Ok(own) => Mutex::new(own),
            Err(error) => {
                tracing::error!(%error, "a serving thread cannot share the listening sockets");
                return;
            }
        };
        let serve = move |_index: usize| {
            let clients = clients.clone();
            let openai_clients = openai_clients.clone();
            let (gateway, open) = (gateway.clone(), open.clone());
            let listeners = own.lock().ok().and_then(|mut own| own.pop());
            let shutdown = clients.shutdown.clone();
            async move {
                let Some(listeners) = listeners else { return };
                spawn_accept(&clients, listeners.http, None);
                if let Some((listener, acceptor)) = listeners.https {
                    spawn_accept(&clients, listener, Some(acceptor));
                }
                if let Some(listener) = listeners.grpc {
                    spawn_grpc(gateway, listener, open, shutdown);
                }
                if let Some(listener) = listeners.openai {
                    spawn_accept(&openai_clients, listener, None);
                }
            }
        };
        if let Err(error) = super::workers::spawn(threads, serve) {
            tracing::error!(%error, "cannot start the serving threads");
        }
        if let Some(listener) = bound.admin {
            let app = Arc::new(HttpServer::new_app(AdminApp {
                gateway: self.gateway.clone(),
            }));
            spawn_admin(app, listener, shutdown.clone());
        }
        let _ = shutdown.wait_for(|stop| *stop).await;
    }
}

/// What every client connection of one kind of listener needs.
struct Clients {
    service: Arc<GatewayService>,
    h2: Arc<H2App>,
    open: Arc<OpenConnections>,
    shutdown: ShutdownWatch,
}

/// Accepts clients on `listener`: each is admitted under the cap and
/// served, or refused with a `503` it can read.
fn spawn_accept(
    clients: &Arc<Clients>,
    listener: std::net::TcpListener,
    tls: Option<Arc<Acceptor>>,
) {
    let accepting = clients.clone();
    let gateway = clients.service.gateway().clone();
    // Readiness turns false before the listener closes (the drain service
    // turns it too, perhaps a moment later).
    let stopping = move || gateway.start_draining();
    let shutdown = clients.shutdown.clone();
    accept_loop("client", listener, shutdown, stopping, move |tcp| {
        let (clients, tls) = (accepting.clone(), tls.clone());
        async move {
            match clients.open.admit().await {
                Admission::Serve(slot) => {
                    tokio::spawn(async move { clients.serve(tcp, slot, tls).await });
                }
                Admission::Refuse(refusal) => {
                    let metrics = clients.service.gateway().metrics();
                    metrics.rejected.with_label_values(&["connections"]).inc();
                    let linger = clients.service.gateway().config().connections.linger();
                    let cap = clients.open.cap();
                    tokio::spawn(refuse_over_cap(tcp, cap, linger, refusal));
                }
            }
        }
    });
}

/// The gRPC passthrough on this thread's handle of its listener.
fn spawn_grpc(
    gateway: Arc<Gateway>,
    listener: std::net::TcpListener,
    open: Arc<OpenConnections>,
    mut shutdown: ShutdownWatch,
) {
    let listener = match TcpListener::from_std(listener) {
        Ok(listener) => listener,
        Err(error) => {
            tracing::error!(%error, "gRPC passthrough cannot use its socket");
            return;
        }
    };
    let stop = async move {
        let _ = shutdown.wait_for(|stop| *stop).await;
    };
    tokio::spawn(async move {
        let served = crate::front::grpc::serve_capped(gateway, listener, open, stop).await;
        if let Err(error) = served {
            tracing::error!(%error, "gRPC passthrough stopped");
        }
    });
}

/// Accepts on `listener` until shutdown, handing each socket to
/// `on_accept` (the next accept waits for it). At shutdown `on_stop` runs,
/// the connections the kernel has already completed are accepted too,
/// then the handle drops: closing a listener resets the connections still
/// queued on it.
fn accept_loop<F, Fut>(
    what: &'static str,
    listener: std::net::TcpListener,
    mut shutdown: ShutdownWatch,
    on_stop: impl FnOnce() + Send + 'static,
    on_accept: F,
) where
    F: Fn(TcpStream) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send,
{
    let listener = match TcpListener::from_std(listener) {
        Ok(listener) => listener,
        Err(error) => {
            tracing::error!(%error, listener = what, "a listener cannot use its socket");
            return;
        }
    };
    tokio::spawn(async move {
        loop {
            let accepted = tokio::select! {
                accepted = listener.accept() => accepted,
                _ = shutdown.wait_for(|stop| *stop) => break,
            };
            if let Some(tcp) = accepted_or_backoff(accepted).await {
                on_accept(tcp).await;
            }
        }
        on_stop();
        // A zero timeout polls the accept once: queued connections only.
        let queued = || tokio::time::timeout(Duration::ZERO, listener.accept());
        while let Ok(Ok((tcp, _))) = queued().await {
            on_accept(tcp).await;
        }
    });
}

impl Clients {
    /// The clients of a listener serving `routes` (one cap for all).
    fn new(
        gateway: &Arc<Gateway>,
        routes: Routes,
        open: &Arc<OpenConnections>,
        shutdown: &ShutdownWatch,
    ) -> Arc<Clients> {
        let service = Arc::new(GatewayService::new(gateway.clone(), routes));
        Arc::new(Clients {
            h2: Arc::new(H2App::new(service.clone())),
            service,
            open: open.clone(),
            shutdown: shutdown.clone(),
        })
    }

    /// One client connection: TLS or first bytes within the handshake
    /// deadline, then HTTP/1 or h2 until it closes. The TLS handshake and
    /// the h2 server are boxed: their futures are large, and inline they
    /// would make every connection's task as large, HTTP/1 ones too.
    async fn serve(&self, tcp: TcpStream, _slot: Slot, tls: Option<Arc<Acceptor>>) {
        let timeouts = &self.service.gateway().config().connections;
        let _ = tcp.set_nodelay(true);
        let Some(acceptor) = tls else {
            let mut tcp = tcp;
            let sniffed = tokio::time::timeout(timeouts.handshake_timeout(), async {
                // Readiness first: a connection that has not spoken yet
                // holds no buffer.
                tcp.readable().await?;
                sniff(&mut tcp).await
            });
            // Silent past the deadline, closed or broken: nothing was
            // asked, nothing is answered.
            let Ok(Ok(Some((protocol, seen)))) = sniffed.await else {
                return;
            };
            if protocol == Protocol::H2c {
                let mut l4 = pingora_stream(tcp);
                l4.rewind(&seen);
                return Box::pin(self.h2.serve(Box::new(l4), &self.shutdown)).await;
            }
            // The socket itself, not pingora's stream around it: waiting
            // for the next request then needs no buffer (`conn`).
            let stream = WriteBuffered::plain(tcp);
            return conn::serve_http1(&self.service, stream, seen, &self.shutdown, &self.open)
                .await;
        };
        let handshake = tokio::time::timeout(
            timeouts.handshake_timeout(),
            acceptor.tls_handshake(pingora_stream(tcp)),
        );
        let Ok(Ok(stream)) = Box::pin(handshake).await else {
            return;
        };
        let stream: Stream = Box::new(stream);
        if matches!(stream.selected_alpn_proto(), Some(ALPN::H2)) {
            return Box::pin(self.h2.serve(stream, &self.shutdown)).await;
        }
        let stream = WriteBuffered::wrap(stream);
        let first = bytes::BytesMut::new();
        conn::serve_http1(&self.service, stream, first, &self.shutdown, &self.open).await
    }
}

/// pingora's stream over an accepted socket, with the socket's addresses.
fn pingora_stream(tcp: TcpStream) -> L4Stream {
    let fd = tcp.as_raw_fd();
    let mut l4 = L4Stream::from(tcp);
    l4.set_socket_digest(SocketDigest::from_raw_fd(fd));
    l4
}

/// Over the cap: the HTTP front's `503` (`Connection: close`), written
/// at once (before the request: a client reads it after writing its
/// request), then a lingering close, which lets the client write its
/// request without a reset. The refusal holds a place in the refusal
/// budget until the connection is closed, or a newer refusal needs the
/// place.
async fn refuse_over_cap(tcp: TcpStream, cap: usize, linger: Duration, refusal: Refusal) {
    let answer = conn::over_cap_answer(cap);
    tokio::select! {
        () = refuse(tcp, &answer, linger) => {}
        () = refusal.preempted() => {}
    }
}

/// The admin listener: pingora's HTTP server app per connection, outside
/// the client cap (it is the operator's way in when clients fill it).
fn spawn_admin(
    app: Arc<HttpServer<AdminApp>>,
    listener: std::net::TcpListener,
    shutdown: ShutdownWatch,
) {
    let watch = shutdown.clone();
    accept_loop(
        "admin",
        listener,
        watch,
        || {},
        move |tcp| {
            let (app, shutdown) = (app.clone(), shutdown.clone());
            tokio::spawn(async move {
                let l4 = pingora_stream(tcp);
                let _ = app.process_new(Box::new(l4), &shutdown).await;
            });
            std::future::ready(())
        },
    );
}
