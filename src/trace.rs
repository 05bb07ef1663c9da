//! W3C trace context (`traceparent`, `tracestate`). A request's context is
//! taken from the client's headers (a new trace id when absent or
//! malformed), carried in a task-local while the request is answered, and
//! sent to the upstream as gRPC metadata on every call it makes: the
//! gateway's own span id, the client's trace id, the client's `tracestate`.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{SystemTime, UNIX_EPOCH};

/// One request's trace context.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceContext {
    /// 32 lowercase hex digits.
    pub trace_id: String,
    /// The gateway's span: 16 lowercase hex digits.
    pub span_id: String,
    /// The client's span, when it sent one.
    pub parent_id: Option<String>,
    pub sampled: bool,
    pub tracestate: Option<String>,
}

tokio::task_local! {
    static CURRENT: TraceContext;
}

impl TraceContext {
    /// From the client's `traceparent` / `tracestate` (version 00 form;
    /// anything malformed starts a new trace, as the spec says).
    pub fn from_headers(traceparent: Option<&[u8]>, tracestate: Option<&[u8]>) -> TraceContext {
        let parsed = traceparent.and_then(parse_traceparent);
        let span_id = hex(random_u64(), 16);
        match parsed {
            Some((trace_id, parent, flags)) => TraceContext {
                trace_id,
                span_id,
                parent_id: Some(parent),
                sampled: flags & 1 == 1,
                tracestate: tracestate
                    .and_then(|v| std::str::from_utf8(v).ok())
                    .map(str::to_string),
            },
            None => TraceContext {
                trace_id: format!("{}{}", hex(random_u64(), 16), hex(random_u64(), 16)),
                span_id,
                parent_id: None,
                sampled: true,
                tracestate: None,
            },
        }
    }

    /// Ties the request's `tracing` span to this trace: with the OTLP
    /// exporter on, the span gets the client's span as remote parent and
    /// its own (exported) ids become the ones sent upstream, so the trace
    /// reads client → tensorgate → server. Without it, nothing changes.
    pub fn joined(mut self, span: &tracing::Span) -> TraceContext {
        use opentelemetry::trace::{
            SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState,
        };
        use tracing_opentelemetry::OpenTelemetrySpanExt;
        let parent = self
            .parent_id
            .as_deref()
            .and_then(|p| SpanId::from_hex(p).ok());
        if let (Ok(trace_id), Some(parent)) = (TraceId::from_hex(&self.trace_id), parent) {
            let flags = if self.sampled {
                TraceFlags::SAMPLED
            } else {
                TraceFlags::default()
            };
            let remote = SpanContext::new(trace_id, parent, flags, true, TraceState::default());
            let _ = span.set_parent(opentelemetry::Context::new().with_remote_span_context(remote));
        }
        let context = span.context();
        let ours = context.span().span_context().clone();
        if ours.is_valid() {
            self.trace_id = ours.trace_id().to_string();
            self.span_id = ours.span_id().to_string();
        }
        self
    }

    /// The `traceparent` the upstream receives (our span as its parent).
    pub fn traceparent(&self) -> String {
        let flags = if self.sampled { "01" } else { "00" };
        format!("00-{}-{}-{flags}", self.trace_id, self.span_id)
    }

    /// Runs `f` with this context as the current one.
    pub async fn scope<F: std::future::Future>(self, f: F) -> F::Output {
        CURRENT.scope(self, f).await
    }

    /// Adds the current context (if any) to an outgoing gRPC request.
    pub fn inject<T>(request: &mut tonic::Request<T>) {
        let _ = CURRENT.try_with(|ctx| {
            let metadata = request.metadata_mut();
            if let Ok(v) = ctx.traceparent().parse() {
                metadata.insert("traceparent", v);
            }
            if let Some(Ok(v)) = ctx.tracestate.as_deref().map(str::parse) {
                metadata.insert("tracestate", v);
            }
        });
    }
}

/// `00-<32 hex>-<16 hex>-<2 hex>`, ids not all zero.
fn parse_traceparent(value: &[u8]) -> Option<(String, String, u8)> {
    let text = std::str::from_utf8(value).ok()?.trim();
    let mut parts = text.split('-');
    let (version, trace, parent, flags) =
        (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    let lower_hex = |s: &str, n: usize| {
        s.len() == n
            && s.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    };
    let valid = version == "00"
        && parts.next().is_none()
        && lower_hex(trace, 32)
        && lower_hex(parent, 16)
        && lower_hex(flags, 2)
        && trace.bytes().any(|b| b != b'0')
        && parent.bytes().any(|b| b != b'0');
    valid.then(|| {
        let flags = u8::from_str_radix(flags, 16).unwrap_or(0);
        (trace.to_string(), parent.to_string(), flags)
    })
}

fn hex(v: u64, digits: usize) -> String {
    format!("{v:0digits$x}")
}

/// Unique enough for trace ids: splitmix64 over the clock and a counter.
fn random_u64() -> u64 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let mut z = nanos ^ COUNTER.fetch_add(0x9E37_79B9_7F4A_7C15, Relaxed);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    (z ^ (z >> 31)).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_valid_traceparent_keeps_the_trace_and_gets_our_span() {
        let ctx = TraceContext::from_headers(
            Some(b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
            Some(b"vendor=x"),
        );
        assert_eq!(ctx.trace_id, "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(ctx.parent_id.as_deref(), Some("00f067aa0ba902b7"));
        assert_ne!(ctx.span_id, "00f067aa0ba902b7");
        assert!(ctx
            .traceparent()
            .starts_with("00-4bf92f3577b34da6a3ce929d0e0e4736-"));
        assert!(ctx.traceparent().ends_with("-01"));
        assert_eq!(ctx.tracestate.as_deref(), Some("vendor=x"));
    }

    #[test]
    fn malformed_or_absent_starts_a_new_trace() {
        for bad in [
            None,
            Some(&b"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"[..]),
            Some(b"00-00000000000000000000000000000000-00f067aa0ba902b7-01"),
            Some(b"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01"),
            Some(b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7"),
            Some(b"garbage"),
        ] {
            let ctx = TraceContext::from_headers(bad, Some(b"dropped=1"));
            assert_eq!(ctx.trace_id.len(), 32);
            assert!(ctx.parent_id.is_none());
            assert!(ctx.tracestate.is_none());
        }
        let a = TraceContext::from_headers(None, None);
        let b = TraceContext::from_headers(None, None);
        assert_ne!(a.trace_id, b.trace_id);
    }
}
