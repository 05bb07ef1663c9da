//! The `tensorgate` binary: parse the command line, load and validate the
//! config, then run (the only place that exits the process).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use tensorgate::config::{Config, RestrictedApi};
use tensorgate::Gateway;

/// KServe v2 HTTP gateway in front of gRPC inference servers.
#[derive(Parser, Debug, Clone)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// Config file (TOML); see config/tensorgate.toml.
    #[arg(long, global = true)]
    config: Option<PathBuf>,
    /// Address to listen on (IP:PORT).
    #[arg(long, global = true)]
    listen: Option<String>,
    /// Upstream KServe v2 gRPC servers (HOST:PORT, comma-separated).
    #[arg(long, value_delimiter = ',')]
    upstream: Option<Vec<String>>,
    /// Address of the admin listener: /metrics, /health, /backends (IP:PORT).
    #[arg(long, global = true)]
    admin_listen: Option<String>,
    /// Address of the gRPC passthrough listener (IP:PORT).
    #[arg(long, global = true)]
    grpc_listen: Option<String>,
    /// Max JSON header / JSON input / raw input / decompressed size, bytes.
    #[arg(long, global = true)]
    http_max_input_size: Option<usize>,
    /// Max HTTP request body size, bytes.
    #[arg(long, global = true)]
    max_body_size: Option<usize>,
    /// Forward matching request headers as string parameters (regex).
    #[arg(long, global = true)]
    header_forward_pattern: Option<String>,
    /// Like Triton's: endpoint groups that need a header with a value,
    /// <group,...>:<header>=<value> (repeatable; replaces auth.restricted_api).
    #[arg(long, global = true, value_name = "GROUPS:HEADER=VALUE")]
    http_restricted_api: Vec<String>,
}

#[derive(Subcommand, Debug, Clone)]
enum Command {
    /// Run with the embedded demo upstream (no other server needed).
    Demo {
        /// How many demo upstreams to start (a small fleet).
        #[arg(long, default_value_t = 1)]
        backends: usize,
    },
    /// Run only the embedded demo upstream (a fake KServe v2 gRPC server on
    /// --listen), e.g. as a backend for tests and benchmarks.
    DemoUpstream,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let mut config = match load(&cli) {
        Ok(config) => config,
        Err(message) => {
            eprintln!("tensorgate: {message}");
            return ExitCode::from(2);
        }
    };
    let telemetry = match tensorgate::telemetry::Telemetry::init(&config.log) {
        Ok(telemetry) => telemetry,
        Err(message) => {
            eprintln!("tensorgate: {message}");
            return ExitCode::from(2);
        }
    };
    // Spans are exported until the process ends (pingora exits on its own).
    std::mem::forget(telemetry);
    if let Some(Command::DemoUpstream) = cli.command {
        return demo_upstream(&config.server.listen);
    }
    if let Some(Command::Demo { backends }) = cli.command {
        config.upstream.addresses.clear();
        for _ in 0..backends.max(1) {
            let addr = "127.0.0.1:0".parse().expect("literal address");
            match tensorgate_demo::DemoUpstream::start_in_background(addr) {
                Ok(demo) => {
                    config
                        .upstream
                        .addresses
                        .push(demo.local_addr().to_string());
                    tracing::info!(upstream = %demo.local_addr(), "embedded demo upstream started");
                    std::mem::forget(demo);
                }
                Err(e) => {
                    eprintln!("tensorgate: cannot start the demo upstream: {e}");
                    return ExitCode::from(1);
                }
            }
        }
    }
    let demo_addresses = config.upstream.addresses.clone();
    match Gateway::new(config) {
        Ok(gateway) => {
            let reload_cli = cli.clone();
            gateway.set_reload_source(Box::new(move || {
                let mut config = load(&reload_cli)?;
                // The demo's own upstreams are not in any file.
                if matches!(reload_cli.command, Some(Command::Demo { .. })) {
                    config.upstream.addresses = demo_addresses.clone();
                }
                Ok(config)
            }));
            match tensorgate::server::run(gateway) {
                Err(message) => {
                    eprintln!("tensorgate: {message}");
                    ExitCode::from(1)
                }
            }
        }
        Err(message) => {
            eprintln!("tensorgate: invalid configuration: {message}");
            ExitCode::from(2)
        }
    }
}

/// File (if any), then command-line overrides, then validation.
fn load(cli: &Cli) -> Result<Config, String> {
    let mut config = match &cli.config {
        Some(path) => Config::from_file(path)?,
        None => Config::default(),
    };
    if let Some(listen) = &cli.listen {
        config.server.listen = listen.clone();
    }
    if let Some(upstream) = &cli.upstream {
        config.upstream.addresses = upstream.clone();
    }
    if let Some(listen) = &cli.admin_listen {
        config.admin.listen = Some(listen.clone());
    }
    if let Some(listen) = &cli.grpc_listen {
        config.grpc.listen = Some(listen.clone());
    }
    if let Some(n) = cli.http_max_input_size {
        config.limits.max_input_size = n;
    }
    if let Some(n) = cli.max_body_size {
        config.limits.max_body_size = n;
    }
    if let Some(p) = &cli.header_forward_pattern {
        config.http.header_forward_pattern = Some(p.clone());
    }
    if !cli.http_restricted_api.is_empty() {
        config.auth.restricted_api = cli
            .http_restricted_api
            .iter()
            .map(|r| {
                RestrictedApi::try_from(r.clone())
                    .map_err(|e| format!("--http-restricted-api: {e}"))
            })
            .collect::<Result<_, _>>()?;
    }
    config.validate()?;
    Ok(config)
}

/// `tensorgate demo-upstream`: serves the demo models over gRPC until killed.
fn demo_upstream(listen: &str) -> ExitCode {
    let addr = match listen.parse() {
        Ok(addr) => addr,
        Err(_) => {
            eprintln!("tensorgate: --listen must be IP:PORT, got {listen:?}");
            return ExitCode::from(2);
        }
    };
    match tensorgate_demo::DemoUpstream::start_in_background(addr) {
        Ok(demo) => {
            tracing::info!(listen = %demo.local_addr(), "demo upstream serving");
            loop {
                std::thread::park();
            }
        }
        Err(e) => {
            eprintln!("tensorgate: cannot start the demo upstream: {e}");
            ExitCode::from(1)
        }
    }
}
