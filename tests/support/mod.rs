//! Test support: the embedded demo upstream on an ephemeral port and a
//! gateway in front of it, in-process (no sockets on the HTTP side), plus a
//! launcher for the real `tensorgate` binary for tests of the pingora glue.
#![allow(dead_code)]

pub mod raw;

use std::net::{SocketAddr, TcpListener};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::Method;
use tensorgate::config::Config;
use tensorgate::front::http::{HttpRequest, HttpResponse};
use tensorgate::Gateway;
use tensorgate_demo::DemoUpstream;

pub struct Harness {
    pub demo: DemoUpstream,
    pub gateway: Gateway,
}

impl Harness {
    pub async fn start() -> Harness {
        Harness::start_with(|_| {}).await
    }

    /// Starts with a config tweak (limits, header forwarding...).
    pub async fn start_with(tweak: impl FnOnce(&mut Config)) -> Harness {
        let demo = DemoUpstream::start("127.0.0.1:0".parse().unwrap())
            .await
            .expect("demo upstream starts");
        let mut config = Config::default();
        config.upstream.addresses = vec![demo.local_addr().to_string()];
        tweak(&mut config);
        let gateway = Gateway::new(config).expect("valid config");
        Harness { demo, gateway }
    }

    pub async fn send(
        &self,
        method: Method,
        path: &str,
        headers: &[(&str, &str)],
        body: impl Into<Bytes>,
    ) -> HttpResponse {
        send(&self.gateway, method, path, headers, body.into()).await
    }

    pub async fn get(&self, path: &str) -> HttpResponse {
        self.send(Method::GET, path, &[], Bytes::new()).await
    }

    pub async fn post(&self, path: &str, body: impl Into<Bytes>) -> HttpResponse {
        self.send(Method::POST, path, &[], body).await
    }

    /// POST with a JSON header and binary tail (binary tensor extension).
    pub async fn post_binary(&self, path: &str, json: &str, tail: &[u8]) -> HttpResponse {
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

/// One request through the gateway's pipeline (no sockets on the HTTP side).
pub async fn send(
    gateway: &Gateway,
    method: Method,
    path: &str,
    headers: &[(&str, &str)],
    body: Bytes,
) -> HttpResponse {
    let request = HttpRequest {
        method,
        path: path.to_string(),
        headers: headers
            .iter()
            .map(|(n, v)| (n.to_string(), Bytes::copy_from_slice(v.as_bytes())))
            .collect(),
        body,
        peer: None,
    };
    gateway.handle(request).await
}

/// Several demo upstreams, each on its own runtime (so one can be killed
/// like a crashed server), behind one in-process gateway whose health
/// checks run every 20 ms.
pub struct Fleet {
    pub demos: Vec<Option<DemoUpstream>>,
    pub addrs: Vec<SocketAddr>,
    pub gateway: std::sync::Arc<Gateway>,
}

impl Fleet {
    pub async fn start(n: usize, tweak: impl FnOnce(&mut Config)) -> Fleet {
        let demos: Vec<DemoUpstream> = (0..n)
            .map(|_| DemoUpstream::start_in_background("127.0.0.1:0".parse().unwrap()).unwrap())
            .collect();
        let addrs: Vec<SocketAddr> = demos.iter().map(DemoUpstream::local_addr).collect();
        let mut config = Config::default();
        config.upstream.addresses = addrs.iter().map(|a| a.to_string()).collect();
        config.upstream.health.interval_ms = 20;
        config.upstream.health.timeout_ms = 200;
        tweak(&mut config);
        let fleet = Fleet {
            demos: demos.into_iter().map(Some).collect(),
            addrs,
            gateway: std::sync::Arc::new(Gateway::new(config).expect("valid config")),
        };
        fleet.gateway.pool().started().await;
        fleet
    }

    pub fn demo(&self, i: usize) -> &DemoUpstream {
        self.demos[i].as_ref().expect("backend is running")
    }

    /// Waits for `n` more health passes (each checks every backend).
    pub async fn passes(&self, n: u64) {
        let pool = self.gateway.pool();
        pool.passes_reach(pool.passes() + n).await;
    }

    /// Requests each backend has received so far.
    pub fn counts(&self) -> Vec<u64> {
        self.demos
            .iter()
            .map(|d| d.as_ref().map_or(0, DemoUpstream::infer_count))
            .collect()
    }

    /// Drops every connection and call of backend `i` at once.
    pub fn kill(&mut self, i: usize) {
        self.demos[i].take().expect("running").kill();
    }

    /// A fresh server on backend `i`'s old address.
    pub fn restart(&mut self, i: usize) {
        let demo = DemoUpstream::start_in_background(self.addrs[i]).expect("port free again");
        self.demos[i] = Some(demo);
    }

    pub async fn post(&self, path: &str, headers: &[(&str, &str)], body: &str) -> HttpResponse {
        let body = Bytes::copy_from_slice(body.as_bytes());
        send(&self.gateway, Method::POST, path, headers, body).await
    }

    pub async fn get(&self, path: &str) -> HttpResponse {
        send(&self.gateway, Method::GET, path, &[], Bytes::new()).await
    }
}

/// The body as text (for JSON answers).
pub fn text(response: &HttpResponse) -> String {
    String::from_utf8(response.body_bytes()).expect("utf-8 body")
}

/// Asserts status, content type and exact body text.
#[track_caller]
pub fn assert_answer(response: &HttpResponse, status: u16, content_type: &str, body: &str) {
    assert_eq!(text(response), body, "body");
    assert_eq!(response.status, status, "status");
    assert_eq!(
        response.header("Content-Type"),
        Some(content_type),
        "content type"
    );
}

/// The `tensorgate` binary running `demo` on a free loopback port.
pub struct GatewayProcess {
    pub child: Child,
    pub addr: SocketAddr,
}

impl GatewayProcess {
    /// Starts `tensorgate demo` with extra args; retries on a port race.
    pub fn demo(extra: &[&str]) -> GatewayProcess {
        GatewayProcess::spawn(&[&["demo"], extra].concat(), None)
    }

    /// Like [`GatewayProcess::demo`], stderr (the logs) to `log` if given.
    pub fn demo_logging(extra: &[&str], log: Option<&std::path::Path>) -> GatewayProcess {
        GatewayProcess::spawn(&[&["demo"], extra].concat(), log)
    }

    /// Starts `tensorgate --upstream <upstream>` (e.g. a test's own
    /// [`DemoUpstream`], whose counters the test can then read).
    pub fn with_upstream(upstream: SocketAddr) -> GatewayProcess {
        GatewayProcess::spawn(&["--upstream", &upstream.to_string()], None)
    }

    /// Starts the binary with `args` and `--listen` on a free port.
    fn spawn(args: &[&str], log: Option<&std::path::Path>) -> GatewayProcess {
        for _ in 0..5 {
            let stderr = match log {
                Some(path) => Stdio::from(std::fs::File::create(path).expect("log file")),
                None => Stdio::null(),
            };
            let addr = free_port();
            let mut child = Command::new(env!("CARGO_BIN_EXE_tensorgate"))
                .args(args)
                .arg("--listen")
                .arg(addr.to_string())
                .stdout(Stdio::null())
                .stderr(stderr)
                .spawn()
                .expect("tensorgate starts");
            if wait_until_serving(&mut child, addr) {
                return GatewayProcess { child, addr };
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!("tensorgate did not start serving");
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }
}

impl Drop for GatewayProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn free_port() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind port 0");
    listener.local_addr().expect("local addr")
}

/// Polls until the port accepts connections, the child exits, or 20 s pass.
fn wait_until_serving(child: &mut Child, addr: SocketAddr) -> bool {
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return false;
        }
        if std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}
