//! W3C trace context (`traceparent`, `tracestate`) of one request, a plain
//! value: parsed once from the client's headers (a new trace when absent
//! or malformed), passed by the caller to whatever calls the upstream, and
//! injected into each upstream call's gRPC metadata: the client's trace
//! id, the gateway's own span id as parent, the client's `tracestate`.
//!
//! The version-00 `traceparent` is read and written here rather than by
//! opentelemetry's `TraceContextPropagator`: its generic path (a header
//! map of `String`s to extract from, a `Context` and an injector per call)
//! cost about 3 µs of every request's CPU (docs/performance.md, "The cost
//! budget"), for a fixed 55-character form. opentelemetry's types still
//! hold the ids and parse `tracestate`.

use std::str::FromStr;

use opentelemetry::trace::{SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState};
use opentelemetry::Context;
use opentelemetry_sdk::trace::{IdGenerator, RandomIdGenerator};
use tonic::metadata::{MetadataMap, MetadataValue};

/// Only the exact version-00 form (the one sent upstream) is passed to the
/// propagator, which also takes later versions, short ids and a `+` sign.
fn version_00(value: &str) -> bool {
    value.len() == 55
        && value.bytes().enumerate().all(|(i, b)| match i {
            0 | 1 => b == b'0',
            2 | 35 | 52 => b == b'-',
            _ => b.is_ascii_digit() || (b'a'..=b'f').contains(&b),
        })
}

/// One request's trace context.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TraceContext {
    /// What the upstream receives: the trace id, the gateway's span id,
    /// the sampled flag, the client's `tracestate`.
    ours: SpanContext,
    /// The client's span, when it sent a valid `traceparent`.
    client: Option<SpanContext>,
}

/// Writes `bytes` into `out` (twice as long) as lower-case hex, the text
/// the ids' own `Display` gives (`{:032x}`, `{:016x}`), without going
/// through its padding (~100 ns a trace id).
pub(crate) fn hex_into(bytes: &[u8], out: &mut [u8]) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for (pair, byte) in out.chunks_exact_mut(2).zip(bytes) {
        pair[0] = DIGITS[usize::from(byte >> 4)];
        pair[1] = DIGITS[usize::from(byte & 0xf)];
    }
}

/// The client's span from a version-00 `traceparent` (`00-` 32 hex digits
/// `-` 16 hex digits `-` 2 hex digits, checked by [`version_00`]) and its
/// `tracestate` (dropped when invalid); `None` for all-zero ids. Of the
/// flags, only "sampled" is kept, as the propagator keeps it.
fn client_span(traceparent: &str, tracestate: Option<&str>) -> Option<SpanContext> {
    let trace_id = TraceId::from_hex(traceparent.get(3..35)?).ok()?;
    let span_id = SpanId::from_hex(traceparent.get(36..52)?).ok()?;
    let flags = u8::from_str_radix(traceparent.get(53..55)?, 16).ok()?;
    let state = tracestate
        .and_then(|s| TraceState::from_str(s).ok())
        .unwrap_or_default();
    let flags = TraceFlags::new(flags) & TraceFlags::SAMPLED;
    Some(SpanContext::new(trace_id, span_id, flags, true, state)).filter(SpanContext::is_valid)
}

impl TraceContext {
    /// From the client's `traceparent` / `tracestate`: a valid version-00
    /// `traceparent` continues the client's trace (with its `tracestate`,
    /// as far as it is valid); anything else starts a new, sampled trace.
    /// The gateway's span id is new either way.
    pub(crate) fn from_headers(
        traceparent: Option<&[u8]>,
        tracestate: Option<&[u8]>,
    ) -> TraceContext {
        fn text(v: Option<&[u8]>) -> Option<&str> {
            Some(std::str::from_utf8(v?).ok()?.trim())
        }
        let client = text(traceparent)
            .filter(|v| version_00(v))
            .and_then(|v| client_span(v, text(tracestate)));
        let ids = RandomIdGenerator::default();
        let ours = match &client {
            Some(c) => (c.trace_id(), c.trace_flags(), c.trace_state().clone()),
            None => (ids.new_trace_id(), TraceFlags::SAMPLED, TraceState::NONE),
        };
        TraceContext {
            ours: SpanContext::new(ours.0, ids.new_span_id(), ours.1, false, ours.2),
            client,
        }
    }

    /// Ties the request's `tracing` span to this trace: with the OTLP
    /// exporter on, the span gets the client's span as remote parent and
    /// its own (exported) ids become the ones sent upstream, so the trace
    /// reads client → tensorgate → server. Without it, nothing changes.
    pub(crate) fn joined(mut self, span: &tracing::Span) -> TraceContext {
        use tracing_opentelemetry::OpenTelemetrySpanExt;
        if let Some(client) = &self.client {
            let _ = span.set_parent(Context::new().with_remote_span_context(client.clone()));
        }
        let exported = span.context().span().span_context().clone();
        if exported.is_valid() {
            let (flags, state) = (self.ours.trace_flags(), self.ours.trace_state().clone());
            self.ours =
                SpanContext::new(exported.trace_id(), exported.span_id(), flags, false, state);
        }
        self
    }

    /// The trace id (shown as 32 lowercase hex digits).
    pub(crate) fn trace_id(&self) -> TraceId {
        self.ours.trace_id()
    }

    /// Adds `traceparent` (the gateway's span as parent) and a non-empty
    /// `tracestate` to an outgoing call's metadata.
    pub(crate) fn inject(&self, metadata: &mut MetadataMap) {
        let ours = &self.ours;
        if !ours.is_valid() {
            return;
        }
        let mut traceparent = *b"00-00000000000000000000000000000000-0000000000000000-00";
        hex_into(&ours.trace_id().to_bytes(), &mut traceparent[3..35]);
        hex_into(&ours.span_id().to_bytes(), &mut traceparent[36..52]);
        hex_into(&[ours.trace_flags().to_u8()], &mut traceparent[53..55]);
        let Ok(traceparent) = std::str::from_utf8(&traceparent) else {
            return; // ASCII by construction
        };
        // New with every request: marked never to be indexed, so HPACK
        // sends it as a literal rather than filling its table with values
        // that never come again.
        if let Ok(mut value) = MetadataValue::try_from(traceparent) {
            value.set_sensitive(true);
            metadata.insert("traceparent", value);
        }
        let state = ours.trace_state().header();
        if !state.is_empty() {
            if let Ok(value) = MetadataValue::try_from(state) {
                metadata.insert("tracestate", value);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the upstream receives: `traceparent` and `tracestate`.
    fn sent(ctx: &TraceContext) -> (String, Option<String>) {
        let mut metadata = MetadataMap::new();
        ctx.inject(&mut metadata);
        let text = |name| Some(metadata.get(name)?.to_str().ok()?.to_string());
        (
            text("traceparent").expect("always sent"),
            text("tracestate"),
        )
    }

    #[test]
    fn hex_is_the_ids_own_display() {
        let trace_id =
            TraceId::from_bytes([0, 1, 0x2a, 0xff, 9, 0x10, 0, 0, 0, 0, 0, 0, 0, 0, 0xab, 7]);
        let mut text = [0u8; 32];
        hex_into(&trace_id.to_bytes(), &mut text);
        assert_eq!(std::str::from_utf8(&text).unwrap(), trace_id.to_string());
        let span_id = SpanId::from_bytes([0, 0, 0, 1, 0xfe, 0, 0x0c, 0x80]);
        let mut text = [0u8; 16];
        hex_into(&span_id.to_bytes(), &mut text);
        assert_eq!(std::str::from_utf8(&text).unwrap(), span_id.to_string());
    }

    #[test]
    fn a_valid_traceparent_keeps_the_trace_and_gets_our_span() {
        let ctx = TraceContext::from_headers(
            Some(b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
            Some(b"vendor=x"),
        );
        assert_eq!(
            ctx.trace_id().to_string(),
            "4bf92f3577b34da6a3ce929d0e0e4736"
        );
        let client = ctx.client.as_ref().map(|c| c.span_id().to_string());
        assert_eq!(client.as_deref(), Some("00f067aa0ba902b7"));
        assert_ne!(ctx.ours.span_id().to_string(), "00f067aa0ba902b7");
        let (traceparent, tracestate) = sent(&ctx);
        assert_eq!(
            traceparent,
            format!(
                "00-4bf92f3577b34da6a3ce929d0e0e4736-{}-01",
                ctx.ours.span_id()
            )
        );
        assert_eq!(tracestate.as_deref(), Some("vendor=x"));
        let unsampled = TraceContext::from_headers(
            Some(b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"),
            None,
        );
        assert!(sent(&unsampled).0.ends_with("-00"));
    }

    #[test]
    fn malformed_or_absent_starts_a_new_trace() {
        for bad in [
            None,
            Some(&b"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"[..]),
            Some(b"00-00000000000000000000000000000000-00f067aa0ba902b7-01"),
            Some(b"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01"),
            Some(b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7"),
            Some(b"00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01x"),
            Some(b"00-1-2-01"),
            Some(b"00-+bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
            Some(b"00-4bf92f3577b34da6a3ce929d0e0e473-000f067aa0ba902b7-01"),
            Some(b"garbage"),
        ] {
            let ctx = TraceContext::from_headers(bad, Some(b"dropped=1"));
            assert!(ctx.client.is_none());
            let (traceparent, tracestate) = sent(&ctx);
            assert_eq!(traceparent.len(), 55);
            assert!(traceparent.ends_with("-01"), "a new trace is sampled");
            assert_eq!(tracestate, None);
        }
        let a = TraceContext::from_headers(None, None);
        let b = TraceContext::from_headers(None, None);
        assert_ne!(a.trace_id(), b.trace_id());
        assert_ne!(a.ours.span_id(), b.ours.span_id());
    }

    #[test]
    fn an_invalid_tracestate_is_not_forwarded() {
        let parent = Some(&b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"[..]);
        let ctx = TraceContext::from_headers(parent, Some(b"no equals sign"));
        assert!(ctx.client.is_some());
        assert_eq!(sent(&ctx).1, None);
        let ctx = TraceContext::from_headers(parent, Some(b"a=1 , b=2"));
        assert_eq!(sent(&ctx).1.as_deref(), Some("a=1,b=2"));
    }
}
