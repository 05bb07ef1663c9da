//! What crosses the gateway besides the message: the client's deadline
//! (`grpc-timeout`) and its custom metadata one way, the upstream's
//! response metadata the other. Transport headers stay on their hop:
//! tonic writes its own on each side.

use std::time::Duration;

use http::HeaderMap;
use tonic::metadata::MetadataMap;

/// Headers of one HTTP/2 hop or of gRPC framing, never relayed.
const HOP_HEADERS: [&str; 17] = [
    "content-type",
    "content-length",
    "te",
    "host",
    "connection",
    "keep-alive",
    "transfer-encoding",
    "upgrade",
    "user-agent",
    "grpc-timeout",
    "grpc-encoding",
    "grpc-accept-encoding",
    "grpc-status",
    "grpc-message",
    "grpc-message-type",
    "grpc-status-details-bin",
    "date",
];

/// At most this much of the client's deadline is kept back, so that our
/// `DEADLINE_EXCEEDED` reaches the client before its own timer fires
/// (tonic clients then report `CANCELLED`, and tonic's server timer would
/// answer that too).
const DEADLINE_MARGIN_MAX: Duration = Duration::from_millis(50);

/// The client's deadline less a margin (a twentieth, at most 50 ms);
/// `None` without (or with an unreadable) `grpc-timeout`.
pub(super) fn deadline(metadata: &MetadataMap) -> Option<Duration> {
    let timeout = parse_timeout(metadata.get("grpc-timeout")?.to_str().ok()?)?;
    Some(timeout - (timeout / 20).min(DEADLINE_MARGIN_MAX))
}

/// `grpc-timeout`: 1 to 8 ASCII digits and a unit (`H M S m u n`), as
/// gRPC's PROTOCOL-HTTP2.md defines it. Written out because tonic parses
/// it only inside its server's timeout layer (private to tonic), and the
/// passthrough must read it to keep a margin (see `deadline`).
fn parse_timeout(value: &str) -> Option<Duration> {
    let (digits, unit) = value.split_at_checked(value.len().checked_sub(1)?)?;
    if digits.is_empty() || digits.len() > 8 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: u64 = digits.parse().ok()?;
    match unit {
        "H" => Some(Duration::from_secs(n * 3600)),
        "M" => Some(Duration::from_secs(n * 60)),
        "S" => Some(Duration::from_secs(n)),
        "m" => Some(Duration::from_millis(n)),
        "u" => Some(Duration::from_micros(n)),
        "n" => Some(Duration::from_nanos(n)),
        _ => None,
    }
}

/// The client's custom metadata, for the upstream request.
pub(super) fn forwarded(metadata: &MetadataMap) -> MetadataMap {
    MetadataMap::from_headers(kept(metadata.as_ref(), &[]))
}

/// The upstream's response metadata, for the client.
pub(super) fn returned(metadata: MetadataMap) -> MetadataMap {
    MetadataMap::from_headers(kept(metadata.as_ref(), &[]))
}

/// The value of the metadata key `name` (lower-case, as the routes keep
/// their header names) for the routes (`Gateway::route_headers`). A walk
/// over the call's few keys: `HeaderMap::get` with a `&str` first parses
/// and hashes the name, ~370 instructions a lookup against ~100
/// (docs/performance.md, the routes' cost).
pub(super) fn route_value(headers: &HeaderMap, name: &str) -> Option<bytes::Bytes> {
    let (_, value) = headers.iter().find(|(key, _)| key.as_str() == name)?;
    Some(bytes::Bytes::copy_from_slice(value.as_bytes()))
}

/// A relayed reply's head for the client: the upstream's custom metadata
/// and the gRPC headers that describe the relayed body (`RELAYED`).
pub(super) fn relayed_head(headers: &HeaderMap) -> HeaderMap {
    kept(headers, &RELAYED)
}

/// Of the hop's headers, those a relayed body keeps: its type, its
/// encoding and, in a trailers-only reply, its status.
const RELAYED: [&str; 4] = [
    "content-type",
    "grpc-encoding",
    "grpc-status",
    "grpc-message",
];

/// `headers` less the hop's own, except `also`. One pass over the headers
/// there are (usually a handful): removing each of the 17 hop names
/// parsed and hashed every name twice per call, ~10,000 instructions of a
/// small passthrough request (callgrind).
fn kept(headers: &HeaderMap, also: &[&str]) -> HeaderMap {
    let mut kept = HeaderMap::new();
    for (name, value) in headers {
        let name_text = name.as_str();
        if !HOP_HEADERS.contains(&name_text) || also.contains(&name_text) {
            kept.append(name.clone(), value.clone());
        }
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_parse_in_every_unit() {
        let cases = [
            ("1H", Duration::from_secs(3600)),
            ("2M", Duration::from_secs(120)),
            ("3S", Duration::from_secs(3)),
            ("250m", Duration::from_millis(250)),
            ("99999999u", Duration::from_micros(99_999_999)),
            ("7n", Duration::from_nanos(7)),
        ];
        for (text, expected) in cases {
            assert_eq!(parse_timeout(text), Some(expected), "{text}");
        }
    }

    #[test]
    fn malformed_timeouts_are_ignored() {
        for text in [
            "",
            "m",
            "100",
            "123456789m",
            "1x",
            "-1S",
            "1.5S",
            " 1S",
            "1é",
        ] {
            assert_eq!(parse_timeout(text), None, "{text:?}");
        }
    }

    #[test]
    fn the_deadline_keeps_a_margin() {
        let mut metadata = MetadataMap::new();
        assert_eq!(deadline(&metadata), None);
        metadata.insert("grpc-timeout", "50m".parse().unwrap());
        assert_eq!(deadline(&metadata), Some(Duration::from_micros(47_500)));
        metadata.insert("grpc-timeout", "10S".parse().unwrap());
        assert_eq!(deadline(&metadata), Some(Duration::from_millis(9_950)));
    }

    #[test]
    fn only_custom_metadata_crosses() {
        let mut metadata = MetadataMap::new();
        for (name, value) in [
            ("content-type", "application/grpc"),
            ("te", "trailers"),
            ("grpc-timeout", "1S"),
            ("grpc-encoding", "gzip"),
            ("user-agent", "grpc-python"),
            ("x-request-id", "abc"),
            ("triton-trace", "1"),
        ] {
            metadata.insert(name, value.parse().unwrap());
        }
        metadata.insert_bin(
            "token-bin",
            tonic::metadata::MetadataValue::from_bytes(b"\0\x01"),
        );
        let out = forwarded(&metadata);
        let mut names: Vec<String> = out
            .clone()
            .into_headers()
            .keys()
            .map(|k| k.to_string())
            .collect();
        names.sort();
        assert_eq!(names, ["token-bin", "triton-trace", "x-request-id"]);
        assert_eq!(out.get("x-request-id").unwrap(), "abc");
    }
}
