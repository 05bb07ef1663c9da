//! The `tensorgate` binary: parse the command line, load and validate the
//! config (`check-config` stops there and prints it), then run. Errors
//! before serving become exit codes here; once serving, `server` ends the
//! process itself (pingora's stop, the drain's end).

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use tensorgate::config::{Config, RestrictedApi, DEFAULT_UPSTREAM};
use tensorgate::Gateway;

/// KServe v2 HTTP gateway in front of gRPC inference servers.
#[derive(Parser, Debug, Clone)]
#[command(version, about, after_help = ENVIRONMENT, args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    serve: ServeArgs,
    /// Upstream KServe v2 gRPC servers (HOST:PORT, comma-separated)
    /// [default: 127.0.0.1:8001, Triton's gRPC port, or upstream.addresses].
    #[arg(long, value_delimiter = ',')]
    upstream: Option<Vec<String>>,
}

/// mimalloc instead of glibc's malloc: less CPU per request (−15 % for
/// 2×1 MiB bodies, a few per cent for small ones); see Cargo.toml for the
/// measurement and its memory cost.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The environment the binary reads, shown by `--help`.
const ENVIRONMENT: &str = "Environment:
  TENSORGATE_LOG  log filter, overrides log.level [default: info], e.g.
                  TENSORGATE_LOG=tensorgate=debug,warn";

/// The gateway's flags (with or without the embedded demo upstream). Each
/// overrides its key in the config file.
#[derive(Args, Debug, Clone, Default)]
struct ServeArgs {
    /// Config file (TOML); see config/tensorgate.toml.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Address to listen on, IP:PORT or HOST:PORT (e.g. localhost:8500)
    /// [default: 127.0.0.1:8000, Triton's HTTP port, or server.listen].
    #[arg(long)]
    listen: Option<String>,
    /// Address of the admin listener: /metrics, /health, /backends
    /// (IP:PORT or HOST:PORT) [default: none, or admin.listen].
    #[arg(long)]
    admin_listen: Option<String>,
    /// Address of the gRPC passthrough listener (IP:PORT or HOST:PORT)
    /// [default: none, or grpc.listen].
    #[arg(long)]
    grpc_listen: Option<String>,
    /// Max JSON header / JSON input / raw input / decompressed size, bytes
    /// [default: 67108864 (64 MiB), or limits.max_input_size].
    #[arg(long)]
    http_max_input_size: Option<usize>,
    /// Max HTTP request body size, bytes [default: 268435456 (256 MiB), or
    /// limits.max_body_size].
    #[arg(long)]
    max_body_size: Option<usize>,
    /// Forward matching request headers as string parameters (regex)
    /// [default: none, or http.header_forward_pattern].
    #[arg(long)]
    header_forward_pattern: Option<String>,
    /// Like Triton's: endpoint groups that need a header with a value,
    /// <group,...>:<header>=<value> (repeatable; replaces auth.restricted_api).
    #[arg(long, value_name = "GROUPS:HEADER=VALUE")]
    http_restricted_api: Vec<String>,
}

#[derive(Subcommand, Debug, Clone)]
enum Command {
    /// Run with the embedded demo upstream (no other server needed).
    Demo {
        /// How many demo upstreams to start (a small fleet).
        #[arg(long, default_value_t = 1)]
        backends: usize,
        #[command(flatten)]
        serve: ServeArgs,
    },
    /// Run only the embedded demo upstream (a fake KServe v2 gRPC server),
    /// e.g. as a backend for tests and benchmarks.
    DemoUpstream {
        /// Address to serve gRPC on, IP:PORT or HOST:PORT (the gateway's
        /// default upstream, Triton's gRPC port).
        #[arg(long, default_value = DEFAULT_UPSTREAM)]
        listen: String,
    },
    /// Check a config file as the gateway would (parse, resolve the listen
    /// addresses, validate) and print the effective configuration: every
    /// section, defaults filled in. Exits 1 with the error if it is invalid.
    CheckConfig {
        /// The config file (TOML).
        file: PathBuf,
    },
}

impl Cli {
    /// The gateway's flags, wherever they were given.
    fn serve(&self) -> &ServeArgs {
        match &self.command {
            Some(Command::Demo { serve, .. }) => serve,
            _ => &self.serve,
        }
    }
}

fn main() -> ExitCode {
    let code = run();
    // The log's buffered lines (telemetry) are written before the end.
    tensorgate::telemetry::flush_log();
    code
}

/// Prints `tensorgate: MESSAGE` to stderr after the log lines before it.
fn say(message: std::fmt::Arguments) {
    tensorgate::telemetry::flush_log();
    eprintln!("tensorgate: {message}");
}

fn run() -> ExitCode {
    let cli = Cli::parse();
    match &cli.command {
        Some(Command::DemoUpstream { listen }) => return demo_upstream(listen),
        Some(Command::CheckConfig { file }) => return check_config(file),
        _ => {}
    }
    let mut config = match load(&cli) {
        Ok(config) => config,
        Err(message) => {
            say(format_args!("{message}"));
            return ExitCode::from(2);
        }
    };
    let telemetry = match tensorgate::telemetry::Telemetry::init(&config.log) {
        Ok(telemetry) => telemetry,
        Err(message) => {
            say(format_args!("{message}"));
            return ExitCode::from(2);
        }
    };
    // Spans are exported until the process ends (pingora exits on its own).
    std::mem::forget(telemetry);
    if let Some(Command::Demo { backends, .. }) = cli.command {
        config.upstream.addresses.clear();
        config.upstream_omitted = false;
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
                    say(format_args!("cannot start the demo upstream: {e}"));
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
                    config.upstream_omitted = false;
                }
                Ok(config)
            }));
            match tensorgate::server::run(gateway) {
                Err(message) => {
                    say(format_args!("{message}"));
                    ExitCode::from(1)
                }
            }
        }
        Err(message) => {
            say(format_args!("invalid configuration: {message}"));
            ExitCode::from(2)
        }
    }
}

/// File (if any), then command-line overrides (a bad one named by its
/// flag), listen addresses resolved, then validation.
fn load(cli: &Cli) -> Result<Config, String> {
    let flags = cli.serve();
    let mut config = match &flags.config {
        Some(path) => Config::from_file(path)?,
        None => Config::default(),
    };
    settle(&mut config, flags, cli.upstream.as_deref())?;
    Ok(config)
}

/// `tensorgate check-config FILE`: the file through the same steps as
/// `--config FILE` (without flags), then the effective configuration on
/// stdout; exit 1 with the error on stderr.
fn check_config(path: &std::path::Path) -> ExitCode {
    let checked = Config::from_file(path).and_then(|mut config| {
        settle(&mut config, &ServeArgs::default(), None)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        config.without_secrets().to_toml()
    });
    match checked {
        Ok(text) => {
            println!(
                "# The effective configuration of {}:\n\
                 # every section, defaults filled in, listen addresses resolved;\n\
                 # optional keys that are unset are left out, secrets shown as ***.\n\n{text}",
                path.display()
            );
            ExitCode::SUCCESS
        }
        Err(message) => {
            say(format_args!("invalid configuration: {message}"));
            ExitCode::from(1)
        }
    }
}

/// The command-line overrides applied to `config`, its listen addresses
/// resolved (each named by its flag or key in errors), then validation.
fn settle(
    config: &mut Config,
    flags: &ServeArgs,
    upstream: Option<&[String]>,
) -> Result<(), String> {
    // Each listen address: the flag's (named by the flag) or the file's
    // (named by its key).
    let listen =
        |flag: &str, given: &Option<String>, key: &str, configured: &mut Option<String>| {
            match given {
                Some(value) => *configured = Some(listen_address(flag, value)?),
                None => {
                    if let Some(value) = configured.as_deref() {
                        *configured = Some(listen_address(key, value)?);
                    }
                }
            }
            Ok::<(), String>(())
        };
    let mut server_listen = Some(config.server.listen.clone());
    listen(
        "--listen",
        &flags.listen,
        "server.listen",
        &mut server_listen,
    )?;
    config.server.listen = server_listen.unwrap_or_default();
    listen(
        "--admin-listen",
        &flags.admin_listen,
        "admin.listen",
        &mut config.admin.listen,
    )?;
    listen(
        "--grpc-listen",
        &flags.grpc_listen,
        "grpc.listen",
        &mut config.grpc.listen,
    )?;
    listen("", &None, "tls.listen", &mut config.tls.listen)?;
    if let Some(upstream) = upstream {
        config.upstream.addresses = upstream.to_vec();
        config.upstream_omitted = false;
    }
    if let Some(n) = flags.http_max_input_size {
        config.limits.max_input_size = n;
    }
    if let Some(n) = flags.max_body_size {
        config.limits.max_body_size = n;
    }
    if let Some(p) = &flags.header_forward_pattern {
        config.http.header_forward_pattern = Some(p.clone());
    }
    if !flags.http_restricted_api.is_empty() {
        config.auth.restricted_api = flags
            .http_restricted_api
            .iter()
            .map(|r| {
                RestrictedApi::try_from(r.clone())
                    .map_err(|e| format!("--http-restricted-api: {e}"))
            })
            .collect::<Result<_, _>>()?;
    }
    config.validate()
}

/// A listen address as `IP:PORT`: given so, or a `HOST:PORT` the OS
/// resolves once, now (`localhost:8500`; its first IPv4 address, else its
/// first). `what` (the flag or config key) names it in errors.
fn listen_address(what: &str, value: &str) -> Result<String, String> {
    if value.parse::<SocketAddr>().is_ok() {
        return Ok(value.to_string());
    }
    let form = |why: String| format!("{what} must be IP:PORT or HOST:PORT, got {value:?}: {why}");
    let addrs: Vec<SocketAddr> = value
        .to_socket_addrs()
        .map_err(|e| form(e.to_string()))?
        .collect();
    addrs
        .iter()
        .find(|a| a.is_ipv4())
        .or(addrs.first())
        .map(SocketAddr::to_string)
        .ok_or_else(|| form("the name resolves to no address".into()))
}

/// `tensorgate demo-upstream`: serves the demo models over gRPC until killed.
fn demo_upstream(listen: &str) -> ExitCode {
    let addr = match listen_address("--listen", listen)
        .and_then(|a| a.parse::<SocketAddr>().map_err(|e| e.to_string()))
    {
        Ok(addr) => addr,
        Err(message) => {
            say(format_args!("{message}"));
            return ExitCode::from(2);
        }
    };
    let telemetry = match tensorgate::telemetry::Telemetry::init(&Default::default()) {
        Ok(telemetry) => telemetry,
        Err(message) => {
            say(format_args!("{message}"));
            return ExitCode::from(2);
        }
    };
    std::mem::forget(telemetry);
    match tensorgate_demo::DemoUpstream::start_in_background(addr) {
        Ok(demo) => {
            tracing::info!(listen = %demo.local_addr(), "demo upstream serving");
            loop {
                std::thread::park();
            }
        }
        Err(e) => {
            say(format_args!(
                "cannot start the demo upstream on {addr}: {e}"
            ));
            ExitCode::from(1)
        }
    }
}
