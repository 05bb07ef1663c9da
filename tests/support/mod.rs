//! Test support: the embedded demo upstream on an ephemeral port and a
//! gateway in front of it, in-process (no sockets on the HTTP side), plus a
//! launcher for the real `tensorgate` binary for tests of the pingora glue.
#![allow(dead_code)]

pub(crate) mod raw;

use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::Method;
use tensorgate::config::Config;
use tensorgate::front::http::{HttpRequest, HttpResponse};
use tensorgate::Gateway;
use tensorgate_demo::DemoUpstream;

pub(crate) struct Harness {
    pub demo: DemoUpstream,
    pub gateway: std::sync::Arc<Gateway>,
}

impl Harness {
    pub(crate) async fn start() -> Harness {
        Harness::start_with(|_| {}).await
    }

    /// Starts with a config tweak (limits, header forwarding...).
    pub(crate) async fn start_with(tweak: impl FnOnce(&mut Config)) -> Harness {
        let demo = DemoUpstream::start("127.0.0.1:0".parse().unwrap())
            .await
            .expect("demo upstream starts");
        let mut config = Config::default();
        config.upstream.addresses = vec![demo.local_addr().to_string()];
        tweak(&mut config);
        let gateway = std::sync::Arc::new(Gateway::new(config).expect("valid config"));
        Harness { demo, gateway }
    }

    pub(crate) async fn send(
        &self,
        method: Method,
        path: &str,
        headers: &[(&str, &str)],
        body: impl Into<Bytes>,
    ) -> HttpResponse {
        send(&self.gateway, method, path, headers, body.into()).await
    }

    pub(crate) async fn get(&self, path: &str) -> HttpResponse {
        self.send(Method::GET, path, &[], Bytes::new()).await
    }

    pub(crate) async fn post(&self, path: &str, body: impl Into<Bytes>) -> HttpResponse {
        self.send(Method::POST, path, &[], body).await
    }

    /// POST with a JSON header and binary tail (binary tensor extension).
    pub(crate) async fn post_binary(&self, path: &str, json: &str, tail: &[u8]) -> HttpResponse {
        let mut body = json.as_bytes().to_vec();
        body.extend_from_slice(tail);
        let ihcl = json.len().to_string();
        self.send(
            Method::POST,
            path,
            &[("Inference-Header-Content-Length", &ihcl)],
            body,
        )
        .await
    }
}

/// One request through the gateway's HTTP pipeline (no sockets on the
/// HTTP side).
pub(crate) async fn send(
    gateway: &std::sync::Arc<Gateway>,
    method: Method,
    path: &str,
    headers: &[(&str, &str)],
    body: Bytes,
) -> HttpResponse {
    let headers = headers
        .iter()
        .map(|(n, v)| (n.to_string(), Bytes::copy_from_slice(v.as_bytes())))
        .collect();
    let request = HttpRequest::new(method, path, headers, body);
    tensorgate::front::http::handle(gateway, request).await
}

/// Several demo upstreams, each on its own runtime (so one can be killed
/// like a crashed server), behind one in-process gateway whose health
/// checks run every 20 ms.
pub(crate) struct Fleet {
    pub demos: Vec<Option<DemoUpstream>>,
    pub addrs: Vec<SocketAddr>,
    pub gateway: std::sync::Arc<Gateway>,
}

impl Fleet {
    pub(crate) async fn start(n: usize, tweak: impl FnOnce(&mut Config)) -> Fleet {
        let demos: Vec<DemoUpstream> = (0..n)
            .map(|_| DemoUpstream::start_in_background("127.0.0.1:0".parse().unwrap()).unwrap())
            .collect();
        let addrs: Vec<SocketAddr> = demos.iter().map(DemoUpstream::local_addr).collect();
        let mut config = Config::default();
        config.upstream.addresses = addrs.iter().map(|a| a.to_string()).collect();
        config.upstream.health.interval_ms = 20;
        config.upstream.health.timeout_ms = 200;
        tweak(&mut config);
        let gateway = std::sync::Arc::new(Gateway::new(config).expect("valid config"));
        let fleet = Fleet {
            demos: demos.into_iter().map(Some).collect(),
            addrs,
            gateway,
        };
        fleet.gateway.started().await;
        fleet
    }

    pub(crate) fn demo(&self, i: usize) -> &DemoUpstream {
        self.demos[i].as_ref().expect("backend is running")
    }

    /// Waits for `n` more health passes (each checks every backend).
    pub(crate) async fn passes(&self, n: u64) {
        let gateway = &self.gateway;
        gateway.passes_reach(gateway.passes() + n).await;
    }

    /// Requests each backend has received so far.
    pub(crate) fn counts(&self) -> Vec<u64> {
        self.demos
            .iter()
            .map(|d| d.as_ref().map_or(0, DemoUpstream::infer_count))
            .collect()
    }

    /// Drops every connection and call of backend `i` at once.
    pub(crate) fn kill(&mut self, i: usize) {
        self.demos[i].take().expect("running").kill();
    }

    /// A fresh server on backend `i`'s old address.
    pub(crate) fn restart(&mut self, i: usize) {
        let demo = DemoUpstream::start_in_background(self.addrs[i]).expect("port free again");
        self.demos[i] = Some(demo);
    }

    pub(crate) async fn post(
        &self,
        path: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> HttpResponse {
        let body = Bytes::copy_from_slice(body.as_bytes());
        send(&self.gateway, Method::POST, path, headers, body).await
    }

    pub(crate) async fn get(&self, path: &str) -> HttpResponse {
        send(&self.gateway, Method::GET, path, &[], Bytes::new()).await
    }
}

/// The body as text (for JSON answers).
pub(crate) fn text(response: &HttpResponse) -> String {
    String::from_utf8(response.body_bytes()).expect("utf-8 body")
}

/// Asserts status, content type and exact body text.
#[track_caller]
pub(crate) fn assert_answer(response: &HttpResponse, status: u16, content_type: &str, body: &str) {
    assert_eq!(text(response), body, "body");
    assert_eq!(response.status, status, "status");
    assert_eq!(
        response.header("Content-Type"),
        Some(content_type),
        "content type"
    );
}

/// The `tensorgate` binary running `demo`, listening on port 0: the real
/// addresses are read from its `tensorgate listening` log line, so no other
/// process can take a port between choosing and binding it.
pub(crate) struct GatewayProcess {
    pub child: Child,
    pub addr: SocketAddr,
    /// The admin, gRPC and HTTPS listeners, when asked for with `127.0.0.1:0`.
    pub admin: Option<SocketAddr>,
    pub grpc: Option<SocketAddr>,
    pub https: Option<SocketAddr>,
    /// `openai.listen`'s address, when configured.
    pub openai: Option<SocketAddr>,
    log: std::path::PathBuf,
    own_log: bool,
}

impl GatewayProcess {
    /// Starts `tensorgate demo` with extra args.
    pub(crate) fn demo(extra: &[&str]) -> GatewayProcess {
        GatewayProcess::spawn(&[&["demo"], extra].concat(), None)
    }

    /// Like [`GatewayProcess::demo`], stderr (the logs) to `log` if given.
    pub(crate) fn demo_logging(extra: &[&str], log: Option<&std::path::Path>) -> GatewayProcess {
        GatewayProcess::spawn(&[&["demo"], extra].concat(), log)
    }

    /// Starts `tensorgate --upstream <upstream>` (e.g. a test's own
    /// [`DemoUpstream`], whose counters the test can then read).
    pub(crate) fn with_upstream(upstream: SocketAddr) -> GatewayProcess {
        GatewayProcess::spawn(&["--upstream", &upstream.to_string()], None)
    }

    /// Starts `program` (the binary, or a wrapper such as `prlimit` whose
    /// arguments come first) with `args` and `--listen 127.0.0.1:0` (unless
    /// `args` has a `--listen` of its own).
    pub(crate) fn spawn_with(
        program: &[&str],
        args: &[&str],
        log: Option<&std::path::Path>,
    ) -> GatewayProcess {
        static LOGS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let (log, own_log) = match log {
            Some(path) => (path.to_path_buf(), false),
            None => {
                let n = LOGS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let name = format!("tensorgate-test-{}-{n}.log", std::process::id());
                (std::env::temp_dir().join(name), true)
            }
        };
        let stderr = std::fs::File::create(&log).expect("log file");
        let (first, rest) = program.split_first().expect("a program");
        let listen: &[&str] = if args.contains(&"--listen") {
            &[]
        } else {
            &["--listen", "127.0.0.1:0"]
        };
        let mut child = Command::new(first)
            .args(rest)
            .args(args)
            .args(listen)
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .expect("tensorgate starts");
        let Some(listening) = wait_listening(&mut child, &log) else {
            let _ = child.kill();
            let _ = child.wait();
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            panic!("tensorgate did not start serving: {text}");
        };
        GatewayProcess {
            child,
            addr: listening.http,
            admin: listening.admin,
            grpc: listening.grpc,
            https: listening.https,
            openai: listening.openai,
            log,
            own_log,
        }
    }

    fn spawn(args: &[&str], log: Option<&std::path::Path>) -> GatewayProcess {
        GatewayProcess::spawn_with(&[env!("CARGO_BIN_EXE_tensorgate")], args, log)
    }

    /// What the process has logged so far.
    pub(crate) fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }
}

impl Drop for GatewayProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if self.own_log {
            let _ = std::fs::remove_file(&self.log);
        }
    }
}

/// The listeners a gateway's `tensorgate listening` line names.
struct Listening {
    http: SocketAddr,
    admin: Option<SocketAddr>,
    grpc: Option<SocketAddr>,
    https: Option<SocketAddr>,
    openai: Option<SocketAddr>,
}

/// Waits (at most 20 s) for the log line that says every listener is
/// bound; `None` if the process exits first.
fn wait_listening(child: &mut Child, log: &std::path::Path) -> Option<Listening> {
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if let Some(line) = text.lines().find(|l| l.contains("tensorgate listening")) {
            let addr = |key: &str| -> Option<SocketAddr> {
                let at = line.find(key)? + key.len();
                let value: String = line[at..]
                    .chars()
                    .take_while(|c| c.is_ascii_digit() || *c == '.' || *c == ':')
                    .collect();
                value.parse().ok()
            };
            return Some(Listening {
                http: addr("http=")?,
                admin: addr("admin="),
                grpc: addr("grpc="),
                https: addr("https="),
                openai: addr("openai="),
            });
        }
        if let Ok(Some(_)) = child.try_wait() {
            return None;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    None
}

/// `n` distinct loopback addresses where connections are refused, held
/// until the returned sockets drop: each is bound but not listening, so no
/// other process can take the port meanwhile (as it could between
/// choosing a free port and using it) and no two are alike.
pub(crate) fn refused_addrs(n: usize) -> (Vec<socket2::Socket>, Vec<String>) {
    use socket2::{Domain, Socket, Type};
    let held: Vec<Socket> = (0..n)
        .map(|_| {
            let socket = Socket::new(Domain::IPV4, Type::STREAM, None).expect("socket");
            let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
            socket.bind(&any.into()).expect("bind port 0");
            socket
        })
        .collect();
    let addrs = held
        .iter()
        .map(|s| s.local_addr().unwrap().as_socket().unwrap().to_string())
        .collect();
    (held, addrs)
}

/// Polls `condition` (every 10 ms, for at most 10 s) until it holds.
pub(crate) fn eventually(mut condition: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if condition() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    false
}
