//! Test support: the embedded demo upstream on an ephemeral port and a
//! gateway in front of it, in-process (no sockets on the HTTP side), plus a
//! launcher for the real `tensorgate` binary for tests of the pingora glue.
#![allow(dead_code)]

use std::net::{SocketAddr, TcpListener};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::Method;
use tensorgate::config::Config;
use tensorgate::demo::DemoUpstream;
use tensorgate::front::http::{HttpRequest, HttpResponse};
use tensorgate::Gateway;

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
        config.upstream.address = demo.local_addr().to_string();
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
        let request = HttpRequest {
            method,
            path: path.to_string(),
            headers: headers
                .iter()
                .map(|(n, v)| (n.to_string(), Bytes::copy_from_slice(v.as_bytes())))
                .collect(),
            body: body.into(),
        };
        self.gateway.handle(request).await
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
        let mut args = vec!["demo"];
        args.extend_from_slice(extra);
        GatewayProcess::spawn(&args)
    }

    /// Starts `tensorgate --upstream <upstream>` (e.g. a test's own
    /// [`DemoUpstream`], whose counters the test can then read).
    pub fn with_upstream(upstream: SocketAddr) -> GatewayProcess {
        GatewayProcess::spawn(&["--upstream", &upstream.to_string()])
    }

    /// Starts the binary with `args` and `--listen` on a free port.
    fn spawn(args: &[&str]) -> GatewayProcess {
        for _ in 0..5 {
            let addr = free_port();
            let mut child = Command::new(env!("CARGO_BIN_EXE_tensorgate"))
                .args(args)
                .arg("--listen")
                .arg(addr.to_string())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
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

fn free_port() -> SocketAddr {
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
