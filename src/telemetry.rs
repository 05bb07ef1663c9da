//! Logging and (optionally) trace export: `tracing` to stderr as text or
//! JSON lines (through `buffer` when stderr is not a terminal), plus, with `log.otlp_endpoint`, every request's span sent to
//! an OpenTelemetry collector over OTLP/gRPC. The span joins the client's
//! trace (W3C `traceparent`) and its id is what the upstream receives as
//! parent, so client, gateway and server spans form one trace.

use std::io::IsTerminal;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

use crate::config::{Log, LogFormat};

pub(crate) mod access;
mod buffer;

/// The environment variable that overrides `log.level`.
const LOG_VARIABLE: &str = "TENSORGATE_LOG";

/// The `fmt` layer: text or JSON lines to `writer`, in colour if `ansi`;
/// with `fast`, access lines are written by `access::Fast` (the same text,
/// made in one pass), the rest by the stock formatter. The terminal keeps
/// the stock one for all lines: its colours are the stock formatter's.
fn log_layer<S, W>(
    format: LogFormat,
    ansi: bool,
    writer: W,
    fast: bool,
) -> Box<dyn Layer<S> + Send + Sync>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    W: for<'w> tracing_subscriber::fmt::MakeWriter<'w> + Send + Sync + 'static,
{
    let fmt = tracing_subscriber::fmt::layer()
        .with_ansi(ansi)
        .with_writer(writer);
    match (format, fast) {
        (LogFormat::Text, false) => fmt.boxed(),
        (LogFormat::Json, false) => fmt.json().boxed(),
        (LogFormat::Text, true) => fmt.map_event_format(access::Fast::text).boxed(),
        (LogFormat::Json, true) => fmt.json().map_event_format(access::Fast::json).boxed(),
    }
}

/// Keeps the exporter alive; flushes spans on [`Telemetry::flush`] and drop.
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
    /// The exporter's gRPC channel lives on this runtime.
    _runtime: Option<tokio::runtime::Runtime>,
}

impl Telemetry {
    /// Installs the global subscriber (once per process). `TENSORGATE_LOG`
    /// overrides `log.level`; an invalid one is an error naming it.
    pub fn init(log: &Log) -> Result<Telemetry, String> {
        let filter = match std::env::var(LOG_VARIABLE) {
            Ok(value) => EnvFilter::try_new(&value)
                .map_err(|e| format!("{LOG_VARIABLE}={value:?} is not a log filter: {e}"))?,
            Err(std::env::VarError::NotPresent) => EnvFilter::new(&log.level),
            Err(e) => return Err(format!("{LOG_VARIABLE}: {e}")),
        };
        let filter = quiet_health_flips(filter);
        // A person at a terminal gets each line at once, in colour; a
        // file, a pipe or a container's log collector gets plain text in
        // batches (`buffer`: no write per request on a serving thread).
        let terminal = std::io::stderr().is_terminal();
        let fmt = if terminal {
            log_layer(log.format, true, std::io::stderr, false)
        } else {
            buffer::start();
            log_layer(log.format, false, buffer::Buffered, true)
        };
        let (otel, provider, runtime) = match &log.otlp_endpoint {
            None => (None, None, None),
            Some(endpoint) => {
                let (provider, runtime) = exporter(endpoint)?;
                let tracer = provider.tracer("tensorgate");
                let layer = tracing_opentelemetry::layer().with_tracer(tracer);
                (Some(layer), Some(provider), Some(runtime))
            }
        };
        EXPORTS_SPANS.store(otel.is_some(), std::sync::atomic::Ordering::Relaxed);
        tracing_subscriber::registry()
            .with(filter)
            .with(fmt)
            .with(otel)
            .try_init()
            .map_err(|e| e.to_string())?;
        Ok(Telemetry {
            provider,
            _runtime: runtime,
        })
    }

    /// Sends every finished span now.
    pub fn flush(&self) {
        if let Some(provider) = &self.provider {
            let _ = provider.force_flush();
        }
    }
}

impl Drop for Telemetry {
    fn drop(&mut self) {
        if let Some(provider) = self.provider.take() {
            let _ = provider.shutdown();
        }
    }
}

/// Whether an OTLP exporter takes spans (`log.otlp_endpoint`): the
/// request span is at `info` level then, at `debug` otherwise.
static EXPORTS_SPANS: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

pub(crate) fn exports_spans() -> bool {
    EXPORTS_SPANS.load(std::sync::atomic::Ordering::Relaxed)
}

/// Writes the log lines still buffered: before the process ends, and
/// before a message written to stderr directly, so it follows them.
pub fn flush_log() {
    buffer::flush();
}

/// Ends the process with `code` once the buffered log lines are written
/// (`std::process::exit` runs no destructors, so nothing else would).
pub fn exit(code: i32) -> ! {
    buffer::flush();
    std::process::exit(code)
}

/// An OTLP/gRPC span exporter with a batch processor; its channel is made
/// on a small runtime of its own (the serving runtimes belong to pingora).
fn exporter(endpoint: &str) -> Result<(SdkTracerProvider, tokio::runtime::Runtime), String> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("otlp")
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let exporter = runtime
        .block_on(async {
            opentelemetry_otlp::SpanExporter::builder()
                .with_tonic()
                .with_endpoint(endpoint)
                .build()
        })
        .map_err(|e| format!("log.otlp_endpoint {endpoint}: {e}"))?;
    let resource = opentelemetry_sdk::Resource::builder()
        .with_service_name("tensorgate")
        .build();
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource)
        .build();
    Ok((provider, runtime))
}

/// pingora's load balancer warns on every health flip without the reason;
/// tensorgate warns once per change itself, with the address and the
/// error (`upstream::backend`). Its lines stay available when the filter
/// names the crate.
fn quiet_health_flips(filter: EnvFilter) -> EnvFilter {
    if filter.to_string().contains("pingora_load_balancing") {
        return filter;
    }
    match "pingora_load_balancing=error".parse() {
        Ok(directive) => filter.add_directive(directive),
        Err(_) => filter,
    }
}
