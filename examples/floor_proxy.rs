//! The floor of the stack: a bare pingora proxy, for `docs/performance.md`'s
//! "What the stack costs before our code runs".
//!
//! It forwards every request unchanged to one upstream, with pingora's
//! defaults and nothing else: no routing, no translation, no logs, no
//! metrics. Measured beside nginx and tensorgate it shows what pingora,
//! tokio and h2 cost per request before any of tensorgate's own work.
//!
//! ```text
//! cargo run --release --example floor_proxy -- LISTEN UPSTREAM [h2c] [THREADS]
//! cargo run --release --example floor_proxy -- 127.0.0.1:9000 127.0.0.1:8000
//! cargo run --release --example floor_proxy -- 127.0.0.1:9001 127.0.0.1:8001 h2c
//! ```
//!
//! `h2c`: HTTP/2 without TLS on both sides (gRPC, like `grpc_pass`);
//! otherwise HTTP/1.1 with upstream keep-alive (like nginx `proxy_pass`).
//! THREADS: pingora's worker threads (default 2, tensorgate's default).

use async_trait::async_trait;
use pingora::apps::HttpServerOptions;
use pingora::proxy::{http_proxy_service, ProxyHttp, Session};
use pingora::server::configuration::{Opt, ServerConf};
use pingora::server::Server;
use pingora::upstreams::peer::HttpPeer;

/// Where every request goes, and in which HTTP version.
struct Floor {
    upstream: String,
    h2c: bool,
}

#[async_trait]
impl ProxyHttp for Floor {
    type CTX = ();

    fn new_ctx(&self) {}

    async fn upstream_peer(
        &self,
        _session: &mut Session,
        _ctx: &mut (),
    ) -> pingora::Result<Box<HttpPeer>> {
        let mut peer = HttpPeer::new(self.upstream.as_str(), false, String::new());
        if self.h2c {
            peer.options.set_http_version(2, 2);
        }
        Ok(Box::new(peer))
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(listen), Some(upstream)) = (args.first(), args.get(1)) else {
        eprintln!("usage: floor_proxy LISTEN UPSTREAM [h2c] [THREADS]");
        std::process::exit(2);
    };
    let h2c = args.get(2).is_some_and(|a| a == "h2c");
    let threads = args
        .iter()
        .skip(2)
        .find_map(|a| a.parse().ok())
        .unwrap_or(2);
    let conf = ServerConf {
        threads,
        ..ServerConf::default()
    };
    let mut server = Server::new_with_opt_and_conf(Opt::default(), conf);
    server.bootstrap();
    let mut service = http_proxy_service(
        &server.configuration,
        Floor {
            upstream: upstream.clone(),
            h2c,
        },
    );
    if h2c {
        if let Some(proxy) = service.app_logic_mut() {
            let mut options = HttpServerOptions::default();
            options.h2c = true;
            proxy.server_options = Some(options);
        }
    }
    service.add_tcp(listen);
    server.add_service(service);
    server.run_forever();
}
