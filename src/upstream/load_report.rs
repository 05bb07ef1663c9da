//! Load reported by the servers: each backend's own queue, read from its
//! metrics endpoint on an interval and kept in the backend (one atomic
//! word, [`Backend::record_report`]) for the picks to add to its in-flight
//! count (`select.rs`). Triton's queue is `nv_inference_pending_request_count`
//! (one sample per model and version), summed here over every model.
//!
//! A read is a plain HTTP/1.1 `GET` on the backend's IP at the configured
//! port, bounded in time (`timeout_ms`) and size ([`MAX_BODY_BYTES`]). A
//! failed read keeps the last report until it is stale; a stale or missing
//! report is not used, so that backend is picked as without reports.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};

use super::backend::Backend;
use crate::config;

/// The metric whose samples are summed: Triton's requests awaiting
/// execution, per model.
pub(crate) const PENDING_METRIC: &str = "nv_inference_pending_request_count";

/// The largest metrics body read. Triton writes about 30 lines of 100
/// bytes per model (4 KiB for two models, measured on 2.51); 4 MiB holds
/// a thousand models with GPU and cache metrics, and bounds what a
/// misconfigured port (a file server, a log stream) can cost.
pub(crate) const MAX_BODY_BYTES: usize = 4 << 20;

/// Settings of one group's reads (from `config::LoadReport`, when enabled).
#[derive(Debug, Clone)]
pub struct LoadReportSettings {
    pub metrics_port: u16,
    pub metrics_path: String,
    pub interval: Duration,
    pub timeout: Duration,
    pub stale_after: Duration,
}

impl LoadReportSettings {
    /// `None` when the group's reports are off.
    pub(super) fn from_config(c: &config::LoadReport) -> Option<LoadReportSettings> {
        c.enabled.then(|| LoadReportSettings {
            metrics_port: c.metrics_port,
            metrics_path: c.metrics_path.clone(),
            interval: c.interval(),
            timeout: c.timeout(),
            stale_after: c.stale_after(),
        })
    }
}

/// Why a report could not be had.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ReportError {
    /// The text has no sample (nor family) of the metric: not Triton, or
    /// its metrics are off.
    Missing,
    /// A sample of the metric that is not a number of requests.
    Malformed(String),
}

impl std::fmt::Display for ReportError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReportError::Missing => write!(f, "no {PENDING_METRIC} in the metrics"),
            ReportError::Malformed(why) => write!(f, "malformed {PENDING_METRIC}: {why}"),
        }
    }
}

/// The sum of every `nv_inference_pending_request_count` sample in a
/// Prometheus text exposition. A family declared (`# TYPE`) without
/// samples (no model loaded) is 0 requests.
pub(crate) fn pending_requests(text: &[u8]) -> Result<u64, ReportError> {
    let mut total: f64 = 0.0;
    let mut seen = false;
    for line in text.split(|&b| b == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if let Some(comment) = line.strip_prefix(b"#") {
            let mut words = comment
                .split(|b| b.is_ascii_whitespace())
                .filter(|w| !w.is_empty());
            if words.next() == Some(b"TYPE") && words.next() == Some(PENDING_METRIC.as_bytes()) {
                seen = true;
            }
            continue;
        }
        let Some(rest) = line.strip_prefix(PENDING_METRIC.as_bytes()) else {
            continue;
        };
        let rest = match rest.first() {
            Some(b'{') => after_labels(&rest[1..])?,
            Some(b' ' | b'\t') | None => rest,
            // Another metric whose name starts with this one's.
            _ => continue,
        };
        let value = rest
            .split(|b| b.is_ascii_whitespace())
            .find(|w| !w.is_empty())
            .ok_or_else(|| ReportError::Malformed("a sample without a value".into()))?;
        let value = std::str::from_utf8(value)
            .ok()
            .and_then(|v| v.parse::<f64>().ok())
            .filter(|v| v.is_finite() && *v >= 0.0)
            .ok_or_else(|| {
                ReportError::Malformed(format!(
                    "the value {:?} is not a count",
                    String::from_utf8_lossy(value)
                ))
            })?;
        total += value;
        seen = true;
    }
    if !seen {
        return Err(ReportError::Missing);
    }
    Ok(total.round().min(u64::MAX as f64) as u64)
}

/// What follows a sample's label set (`rest` starts inside the braces):
/// label values are quoted, with `\"` and `\\` escapes, and may hold `}`.
fn after_labels(rest: &[u8]) -> Result<&[u8], ReportError> {
    let mut quoted = false;
    let mut escaped = false;
    for (i, &b) in rest.iter().enumerate() {
        match (quoted, escaped, b) {
            (true, true, _) => escaped = false,
            (true, false, b'\\') => escaped = true,
            (_, false, b'"') => quoted = !quoted,
            (false, _, b'}') => return Ok(&rest[i + 1..]),
            _ => {}
        }
    }
    Err(ReportError::Malformed(
        "a label set that does not end".into(),
    ))
}

/// Reads one backend's metrics now: `Ok` is its pending requests.
pub(crate) async fn read(addr: SocketAddr, settings: &LoadReportSettings) -> Result<u64, String> {
    let target = SocketAddr::new(addr.ip(), settings.metrics_port);
    let body = tokio::time::timeout(settings.timeout, fetch(target, &settings.metrics_path))
        .await
        .map_err(|_| {
            format!(
                "metrics at {target} gave no answer within {}",
                crate::error::duration_text(settings.timeout)
            )
        })??;
    pending_requests(&body).map_err(|e| format!("metrics at {target}: {e}"))
}

/// `GET path` on `target` over a connection of its own, the body at most
/// [`MAX_BODY_BYTES`].
async fn fetch(target: SocketAddr, path: &str) -> Result<Bytes, String> {
    use http_body::Body as _;
    let fail = |what: &str, e: &dyn std::fmt::Display| format!("metrics at {target}: {what}: {e}");
    let stream = tokio::net::TcpStream::connect(target)
        .await
        .map_err(|e| fail("cannot connect", &e))?;
    let _ = stream.set_nodelay(true);
    let (mut send, connection) =
        hyper::client::conn::http1::handshake::<_, String>(hyper_util::rt::TokioIo::new(stream))
            .await
            .map_err(|e| fail("handshake", &e))?;
    let request = http::Request::get(path)
        .header(http::header::HOST, target.to_string())
        .header(http::header::ACCEPT, "text/plain")
        .header(http::header::CONNECTION, "close")
        .body(String::new())
        .map_err(|e| fail("request", &e))?;
    let exchange = async {
        let response = send
            .send_request(request)
            .await
            .map_err(|e| fail("request", &e))?;
        if response.status() != http::StatusCode::OK {
            return Err(format!(
                "metrics at {target}: answered {}",
                response.status()
            ));
        }
        let declared = response
            .headers()
            .get(http::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
        if declared.is_some_and(|n| n > MAX_BODY_BYTES as u64) {
            return Err(too_large(target));
        }
        let mut body = std::pin::pin!(response.into_body());
        let mut bytes = BytesMut::new();
        while let Some(frame) = std::future::poll_fn(|cx| body.as_mut().poll_frame(cx)).await {
            let frame = frame.map_err(|e| fail("body", &e))?;
            if let Ok(data) = frame.into_data() {
                if bytes.len() + data.len() > MAX_BODY_BYTES {
                    return Err(too_large(target));
                }
                bytes.extend_from_slice(&data);
            }
        }
        Ok(bytes.freeze())
    };
    let mut exchange = std::pin::pin!(exchange);
    let mut connection = std::pin::pin!(connection);
    // The connection is driven beside the exchange; once it ends, what it
    // delivered is still read (or its failure reported) by the exchange.
    tokio::select! {
        biased;
        result = &mut exchange => return result,
        _ = &mut connection => {}
    }
    exchange.await
}

fn too_large(target: SocketAddr) -> String {
    format!("metrics at {target}: the body is over {MAX_BODY_BYTES} bytes")
}

/// Reads one backend and records the outcome (each interval, for every
/// member: `Pool::read_reports`).
pub(super) async fn report(backend: Arc<Backend>, settings: Arc<LoadReportSettings>) {
    match read(backend.addr, &settings).await {
        Ok(pending) => backend.record_report(pending),
        Err(why) => backend.report_failed(why),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Triton 2.51's own metrics (CPU), two models loaded, five requests
    /// waiting for `slow_identity`'s one instance (captured with curl).
    const TRITON: &str = include_str!("../../tests/fixtures/triton_metrics/pending-5.txt");

    fn sum(text: &str) -> Result<u64, ReportError> {
        pending_requests(text.as_bytes())
    }

    #[test]
    fn tritons_own_text_sums_over_its_models() {
        assert_eq!(sum(TRITON), Ok(5));
        let idle = TRITON.replace(
            "nv_inference_pending_request_count{model=\"slow_identity\",version=\"1\"} 5",
            "nv_inference_pending_request_count{model=\"slow_identity\",version=\"1\"} 0",
        );
        assert_eq!(sum(&idle), Ok(0));
    }

    #[test]
    fn samples_are_read_whatever_their_labels_and_layout() {
        let text = "# TYPE nv_inference_pending_request_count gauge\r\n\
                    nv_inference_pending_request_count{model=\"a}b\",version=\"1\"} 2\r\n\
                    nv_inference_pending_request_count{model=\"q\\\"}\"} 3 1700000000000\n\
                    nv_inference_pending_request_count 1e1\n\
                    nv_inference_pending_request_count_total{model=\"x\"} 100\n\
                    other_metric{model=\"nv_inference_pending_request_count\"} 100\n";
        assert_eq!(sum(text), Ok(15));
        // A family without samples: no model is loaded, nothing waits.
        assert_eq!(
            sum("# HELP nv_inference_pending_request_count x\n# TYPE nv_inference_pending_request_count gauge\n"),
            Ok(0)
        );
    }

    #[test]
    fn a_text_without_the_metric_is_missing() {
        assert_eq!(sum(""), Err(ReportError::Missing));
        assert_eq!(
            sum("# HELP mlserver_requests x\nmlserver_queue_requests 7\n"),
            Err(ReportError::Missing)
        );
        assert_eq!(sum("<html>not found</html>"), Err(ReportError::Missing));
    }

    #[test]
    fn malformed_samples_are_refused_not_guessed() {
        for text in [
            "nv_inference_pending_request_count{model=\"a\"}\n",
            "nv_inference_pending_request_count{model=\"a\" 3\n",
            "nv_inference_pending_request_count{model=\"a\"} three\n",
            "nv_inference_pending_request_count{model=\"a\"} -1\n",
            "nv_inference_pending_request_count{model=\"a\"} NaN\n",
            "nv_inference_pending_request_count{model=\"a\"} +Inf\n",
            "nv_inference_pending_request_count\n",
        ] {
            assert!(
                matches!(sum(text), Err(ReportError::Malformed(_))),
                "{text:?}: {:?}",
                sum(text)
            );
        }
    }

    #[test]
    fn a_huge_or_binary_text_is_read_in_one_pass_without_panic() {
        let mut huge = "nv_inference_pending_request_count{model=\"m\"} 1\n".repeat(100_000);
        assert_eq!(sum(&huge), Ok(100_000));
        huge.push_str("nv_inference_pending_request_count{model=\"");
        assert!(matches!(sum(&huge), Err(ReportError::Malformed(_))));
        let binary: Vec<u8> = (0..=255u8).cycle().take(1 << 16).collect();
        assert!(pending_requests(&binary).is_err());
        assert_eq!(
            sum("nv_inference_pending_request_count 1e300\n"),
            Ok(u64::MAX)
        );
    }
}
