//! HTTP body compression for `/infer`, as Triton 2.51 does it (v2 §4.1,
//! v2 §3.7, and the decompressed-size limit of v2 §4.2). Pure functions, no I/O.
//!
//! * Request side: [`request_encoding`] classifies `Content-Encoding` and
//!   [`inflate`] decodes the body the way Triton's `inflateInit2(15 | 32)`
//!   loop does (gzip or zlib wrapper auto-detected for either name, raw
//!   RFC 1951 deflate rejected at the header, data errors not reported:
//!   whatever inflated before the error is the body). Unlike 2.51, the
//!   output is bounded by a limit (the later `--http-max-input-size`).
//! * Response side: [`negotiate`] picks the encoding from `Accept-Encoding`
//!   with Triton's `CompressionTypeUsed` rules, and [`compress`] produces
//!   one gzip- or zlib-wrapped stream at the default level.
//!
//! Header values are handled like the C strings Triton reads them as: the
//! text ends at the first NUL byte (unreachable over HTTP, where header
//! values cannot contain NUL).
//!
//! Byte-level notes:
//! * Compressed bytes come from flate2's encoders over its backend (zlib-ng
//!   in the gateway, enabled by pingora; miniz_oxide when flate2 is built
//!   alone), so the deflate payload can differ from Triton's system zlib at
//!   level 6. The wrappers equal zlib's: gzip header
//!   `1f 8b 08 00 00000000 00 03` (no name, mtime 0, XFL 0, OS unix: flate2
//!   writes XFL 0 at the default level as zlib does, and is told the OS),
//!   zlib header `78 9c`; the trailers are CRC-32 + ISIZE (gzip) and
//!   Adler-32 (zlib). Any conforming decoder gets the same data back.
//! * Inflate parses the gzip/zlib header itself, exactly like zlib's
//!   `inflate()` with `windowBits 15|32`, then decodes the raw deflate data
//!   with flate2 in bounded steps. The trailer is never looked at: zlib
//!   checks it only after every byte was already output, and Triton ignores
//!   the error, so it cannot change the result. Decoding stops at the end of
//!   the first deflate stream (bytes after it, such as a second gzip member,
//!   are ignored exactly as zlib's `inflate()` ignores them).
//! * With the zlib-ng backend, inflate output (including the partial output
//!   of corrupt and truncated streams) was byte-identical to system zlib
//!   running Triton's loop on 40,000 generated valid and damaged streams.
//!   With miniz_oxide (flate2 alone, not the gateway build) two kinds of
//!   damage decode further than zlib: a back-reference before the start of
//!   the output yields zeros (zlib: "invalid distance too far back") and a
//!   dynamic block without an end-of-block code is decoded (zlib stops at
//!   its header).

use std::fmt;
use std::io::{self, Write};
use std::sync::LazyLock;

use flate2::write::ZlibEncoder;
use flate2::{Compression, Crc, Decompress, FlushDecompress, GzBuilder, Status};
use regex::bytes::Regex;

/// The gzip header's OS byte zlib writes on Unix (flate2's default is 255,
/// "unknown"), so the header equals Triton's.
const OS_UNIX: u8 = 3;

/// A body encoding Triton knows about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    Identity,
    Gzip,
    Deflate,
}

impl Encoding {
    /// The `Content-Encoding` value for a response body in this encoding
    /// (`None` for identity: no header is sent).
    pub fn header_value(self) -> Option<&'static str> {
        match self {
            Encoding::Identity => None,
            Encoding::Gzip => Some("gzip"),
            Encoding::Deflate => Some("deflate"),
        }
    }
}

/// The header value as Triton sees it: a C string, cut at the first NUL.
fn c_str(value: &[u8]) -> &[u8] {
    match value.iter().position(|&b| b == 0) {
        Some(end) => &value[..end],
        None => value,
    }
}

/// Request side: classify the `Content-Encoding` header value (exact,
/// case-sensitive; absent, empty or `identity` => `Identity`; `gzip` /
/// `deflate` => those; anything else, e.g. `br`, `GZIP`, `gzip, deflate`,
/// => `Err(())`, which the caller answers with 501 `Unsupported compression
/// type` plus `Accept-Encoding: gzip, deflate`).
#[allow(clippy::result_unit_err)] // the error carries no data: there is one answer
pub fn request_encoding(value: Option<&[u8]>) -> Result<Encoding, ()> {
    let Some(value) = value else {
        return Ok(Encoding::Identity);
    };
    match c_str(value) {
        // An empty value is not "identity": real Triton answers 501 (observed).
        b"identity" => Ok(Encoding::Identity),
        b"gzip" => Ok(Encoding::Gzip),
        b"deflate" => Ok(Encoding::Deflate),
        _ => Err(()),
    }
}

/// Why a compressed request body was refused (both are 400, INVALID_ARG).
#[derive(Debug, PartialEq, Eq)]
pub enum InflateError {
    /// compressed but empty body -> Triton: 400 `nothing to be decompressed`
    Empty,
    /// output would exceed `limit` bytes -> 400 `Decompressed data size
    /// exceeds the maximum allowed value of <limit> bytes. Use
    /// --http-max-input-size to increase the limit.`
    TooLarge { limit: usize },
}

impl fmt::Display for InflateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InflateError::Empty => f.write_str("nothing to be decompressed"),
            InflateError::TooLarge { limit } => write!(
                f,
                "Decompressed data size exceeds the maximum allowed value of {limit} bytes. \
                 Use --http-max-input-size to increase the limit."
            ),
        }
    }
}

impl std::error::Error for InflateError {}

/// Decoded in steps of this many bytes; at least the 32 KiB deflate window,
/// so a backend never has to hold back decoded bytes when an error stops it.
const STEP: usize = 64 * 1024;

/// Inflate a gzip- or zlib-wrapped stream, auto-detecting the wrapper
/// regardless of which of the two names was given (zlib `windowBits 15|32`).
///
/// * Empty `body` -> [`InflateError::Empty`].
/// * A header zlib rejects (raw RFC 1951 deflate, plain text, bad method,
///   window size, flags or header CRC, or a preset dictionary) or a
///   truncated header -> `Ok` with an empty body (Triton then takes the
///   raw-request path, `C06`).
/// * Corrupt or truncated deflate data -> `Ok` with whatever inflated
///   before the error. Checksums and lengths in the trailer are ignored.
/// * Concatenated gzip members: only the first is decoded (zlib's
///   `inflate()` returns `Z_STREAM_END` after one member and Triton never
///   resets it); any bytes after the first stream are ignored.
/// * Output larger than `limit` -> [`InflateError::TooLarge`] as soon as
///   the first byte past the limit is decoded; at most `limit` bytes of
///   output (plus one fixed 64 KiB step buffer) are ever allocated.
///   Exactly `limit` bytes is accepted.
pub fn inflate(body: &[u8], limit: usize) -> Result<Vec<u8>, InflateError> {
    if body.is_empty() {
        return Err(InflateError::Empty);
    }
    let mut out = Vec::new();
    if let Some(start) = wrapped_data_start(body) {
        inflate_raw(&body[start..], limit, &mut out)?;
    }
    Ok(out)
}

/// Offset of the raw deflate data after the gzip or zlib header, as zlib's
/// `inflate()` (`windowBits 15|32`) parses it; `None` when zlib would stop
/// in the header (bad or truncated header, or `Z_NEED_DICT`).
fn wrapped_data_start(body: &[u8]) -> Option<usize> {
    let (&b0, &b1) = (body.first()?, body.get(1)?);
    if b0 == 0x1f && b1 == 0x8b {
        return gzip_data_start(body);
    }
    // zlib header: CMF, FLG.
    if (u32::from(b0) * 256 + u32::from(b1)) % 31 != 0 {
        return None; // incorrect header check
    }
    if b0 & 0x0f != 8 {
        return None; // unknown compression method
    }
    if (b0 >> 4) + 8 > 15 {
        return None; // invalid window size
    }
    if b1 & 0x20 != 0 {
        return None; // FDICT: zlib returns Z_NEED_DICT, nothing is output
    }
    Some(2)
}

/// RFC 1952 header, with zlib's checks (method 8, no reserved flag bits,
/// FHCRC verified against the CRC-32 of the header bytes before it).
fn gzip_data_start(body: &[u8]) -> Option<usize> {
    const FHCRC: u8 = 0x02;
    const FEXTRA: u8 = 0x04;
    const FNAME: u8 = 0x08;
    const FCOMMENT: u8 = 0x10;
    if *body.get(2)? != 8 {
        return None; // unknown compression method
    }
    let flags = *body.get(3)?;
    if flags & 0xe0 != 0 {
        return None; // unknown header flags set
    }
    let mut pos = 10; // ID1 ID2 CM FLG MTIME(4) XFL OS
    if flags & FEXTRA != 0 {
        let len = usize::from(*body.get(pos)?) | usize::from(*body.get(pos + 1)?) << 8;
        pos = pos + 2 + len;
    }
    for flag in [FNAME, FCOMMENT] {
        if flags & flag != 0 {
            let nul = body.get(pos..)?.iter().position(|&b| b == 0)?;
            pos += nul + 1;
        }
    }
    if pos > body.len() {
        return None; // truncated header
    }
    if flags & FHCRC != 0 {
        let stored = u32::from(*body.get(pos)?) | u32::from(*body.get(pos + 1)?) << 8;
        let mut crc = Crc::new();
        crc.update(&body[..pos]);
        if crc.sum() & 0xffff != stored {
            return None; // header crc mismatch
        }
        pos += 2;
    }
    Some(pos)
}

/// Decodes raw deflate data into `out` until its end, an error, or the end
/// of input. `out` never grows past `limit` bytes of capacity.
fn inflate_raw(data: &[u8], limit: usize, out: &mut Vec<u8>) -> Result<(), InflateError> {
    let mut decoder = Decompress::new(false);
    let mut step = vec![0u8; STEP];
    loop {
        let consumed_before = decoder.total_in();
        let produced_before = decoder.total_out();
        let offset = usize::try_from(consumed_before).map_or(data.len(), |n| n.min(data.len()));
        let result = decoder.decompress(&data[offset..], &mut step, FlushDecompress::None);
        let produced = usize::try_from(decoder.total_out() - produced_before)
            .map_or(step.len(), |n| n.min(step.len()));
        if produced > limit - out.len() {
            return Err(InflateError::TooLarge { limit });
        }
        if produced > 0 {
            if out.capacity() - out.len() < produced {
                // Grow geometrically, but never past the limit.
                let wanted = out
                    .capacity()
                    .saturating_mul(2)
                    .max(out.len() + produced)
                    .max(STEP);
                out.reserve_exact(wanted.min(limit) - out.len());
            }
            out.extend_from_slice(&step[..produced]);
        }
        let progressed = produced > 0 || decoder.total_in() != consumed_before;
        match result {
            Ok(Status::StreamEnd) | Err(_) => return Ok(()),
            Ok(Status::Ok | Status::BufError) if !progressed => return Ok(()),
            Ok(Status::Ok | Status::BufError) => {}
        }
    }
}

/// Response side: negotiate from the `Accept-Encoding` header value the way
/// Triton 2.51's `CompressionTypeUsed` does (v2 §4.1):
///
/// * split on `,`; strip leading spaces (only `' '`) of each item; an item
///   that is empty or all spaces is skipped;
/// * a weight is recognised only as the first literal `;q=`; an item whose
///   `;q=` comes right at its start is skipped; everything between the
///   spaces and `;q=` (or the end) is the token, so `gzip; q=0.5`,
///   `gzip ` or `gzip;level=1` are unknown tokens;
/// * tokens are compared exactly and case-sensitively with `identity`,
///   `deflate`, `gzip`; anything else is ignored;
/// * the weight is the decimal number at the start of the text after `;q=`
///   ([`parse_weight`]: `0`, `0.5`, `1.000`); text after the number is
///   ignored (`q=0.5abc` is 0.5, `q=1;x` is 1). No number (`q=`, `q=abc`,
///   `q=.`), or one too large for a double (`q=1e999`, which terminates
///   Triton 2.51), skips the item;
/// * a missing weight is 1; the first item with a weight strictly greater
///   than every earlier accepted one wins (ties -> first listed); weight 0
///   and negative weights never win;
/// * default (absent header or no winner) identity.
pub fn negotiate(accept_encoding: Option<&[u8]>) -> Encoding {
    let Some(value) = accept_encoding else {
        return Encoding::Identity;
    };
    let mut best = Encoding::Identity;
    let mut best_weight = 0.0_f64;
    for item in c_str(value).split(|&b| b == b',') {
        let Some(start) = item.iter().position(|&b| b != b' ') else {
            continue;
        };
        let weight_pos = item.windows(3).position(|w| w == b";q=");
        let (token, weight) = match weight_pos {
            Some(pos) if start >= pos => continue,
            Some(pos) => match parse_weight(&item[pos + 3..]) {
                Some(weight) => (&item[start..pos], weight),
                None => continue,
            },
            None => (&item[start..], 1.0),
        };
        let encoding = match token {
            b"identity" => Encoding::Identity,
            b"deflate" => Encoding::Deflate,
            b"gzip" => Encoding::Gzip,
            _ => continue,
        };
        if weight > best_weight {
            best = encoding;
            best_weight = weight;
        }
    }
    best
}

/// A weight: optional white space, then a decimal number (sign, digits,
/// fraction, exponent all as in `0`, `0.5`, `.5`, `+1.0e0`); what follows
/// it is ignored. `None` without a number or beyond the range of a double
/// (a value too small rounds, to 0 at worst).
fn parse_weight(text: &[u8]) -> Option<f64> {
    static NUMBER: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(
            r"^[ \t\n\x0B\x0C\r]*([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)",
        )
        .expect("a valid pattern")
    });
    let number = NUMBER.captures(text)?.get(1)?.as_bytes();
    let weight: f64 = std::str::from_utf8(number).ok()?.parse().ok()?;
    weight.is_finite().then_some(weight)
}

/// Compress the given chunks (the JSON header then binary tails, in order)
/// as one stream at the default level with flate2's encoders: `Gzip` = gzip
/// wrapper (header `1f 8b 08 00 00000000 00 03` as zlib's `deflateInit2`
/// writes it on Unix: no name, mtime 0, XFL 0 at the default level, OS 3),
/// `Deflate` = zlib wrapper (starts `78 9c`).
///
/// `Identity` returns the chunks concatenated. As in Triton's
/// `CompressData`, an empty body cannot be compressed: `Gzip`/`Deflate` of
/// no bytes is an error ("nothing to be compressed"); on any error the
/// caller sends the body uncompressed, without `Content-Encoding`.
pub fn compress(encoding: Encoding, chunks: &[&[u8]]) -> io::Result<Vec<u8>> {
    fn feed<W: Write>(mut encoder: W, chunks: &[&[u8]]) -> io::Result<W> {
        chunks.iter().try_for_each(|c| encoder.write_all(c))?;
        Ok(encoder)
    }
    if encoding == Encoding::Identity {
        return Ok(chunks.concat());
    }
    let total = chunks.iter().fold(0usize, |n, c| n.saturating_add(c.len()));
    if total == 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "nothing to be compressed",
        ));
    }
    let out = Vec::with_capacity(total / 2 + 64);
    let level = Compression::default();
    match encoding {
        Encoding::Gzip => {
            let gzip = GzBuilder::new().operating_system(OS_UNIX).write(out, level);
            feed(gzip, chunks)?.finish()
        }
        _ => feed(ZlibEncoder::new(out, level), chunks)?.finish(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flate2::{Compress, FlushCompress};
    use std::io::Read;

    use crate::wire::fixtures::{records, unescape, Escapes, Split};

    /// `(line number, header value or None for <absent>, expected)` per case.
    fn cases(file: &str) -> Vec<(usize, Option<Vec<u8>>, String)> {
        let cases: Vec<_> = records(&format!("compress/{file}"), Split::Last)
            .into_iter()
            .map(|(line, value, expected)| {
                let value =
                    (value != "<absent>").then(|| unescape(&value, Escapes::HexAndBackslash));
                (line, value, expected)
            })
            .collect();
        assert!(cases.len() > 10, "{file}: too few cases");
        cases
    }

    fn name(encoding: Encoding) -> &'static str {
        encoding.header_value().unwrap_or("identity")
    }

    #[test]
    fn negotiate_fixtures() {
        for (line, value, expected) in cases("negotiate.txt") {
            let got = name(negotiate(value.as_deref()));
            assert_eq!(
                got,
                expected,
                "negotiate.txt:{line}: {:?}",
                value.as_deref().map(String::from_utf8_lossy)
            );
        }
    }

    #[test]
    fn request_encoding_fixtures() {
        for (line, value, expected) in cases("request_encoding.txt") {
            let got = match request_encoding(value.as_deref()) {
                Ok(encoding) => name(encoding),
                Err(()) => "501",
            };
            assert_eq!(
                got,
                expected,
                "request_encoding.txt:{line}: {:?}",
                value.as_deref().map(String::from_utf8_lossy)
            );
        }
    }

    #[test]
    fn header_values() {
        assert_eq!(Encoding::Identity.header_value(), None);
        assert_eq!(Encoding::Gzip.header_value(), Some("gzip"));
        assert_eq!(Encoding::Deflate.header_value(), Some("deflate"));
    }

    #[test]
    fn weights_are_leading_decimal_numbers() {
        let cases: &[(&str, Option<f64>)] = &[
            ("0", Some(0.0)),
            ("0.5", Some(0.5)),
            ("1.000", Some(1.0)),
            ("0.5abc", Some(0.5)),
            ("", None),
            ("abc", None),
            (".", None),
            ("-.", None),
            (" \t\x0b\x0c\r\n.25", Some(0.25)),
            ("+1e+2x", Some(100.0)),
            ("1e", Some(1.0)),
            ("1e+", Some(1.0)),
            ("5.", Some(5.0)),
            ("-0", Some(-0.0)),
            ("0x", Some(0.0)),
            ("0x.", Some(0.0)),
            ("0xg", Some(0.0)),
            ("0x1p3", Some(0.0)),
            ("1e309", None),
            ("-1e309", None),
            ("1.7976931348623157e308", Some(f64::MAX)),
            ("1e-400", Some(0.0)),
            ("inf", None),
            ("-Infinity", None),
            ("nan", None),
            ("in", None),
            ("0.1000000000000000055511151231257827", Some(0.1)),
        ];
        for &(text, expected) in cases {
            let got = parse_weight(text.as_bytes());
            assert_eq!(
                got.map(f64::to_bits),
                expected.map(f64::to_bits),
                "{text:?}: {got:?}"
            );
        }
    }

    const JSON: &[u8] = br#"{"inputs":[{"name":"INPUT0","datatype":"INT32","shape":[1,16],"data":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16]}]}"#;

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), Compression::default());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    fn zlib(data: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::ZlibEncoder::new(Vec::new(), Compression::default());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    fn raw(data: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::DeflateEncoder::new(Vec::new(), Compression::default());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    /// Some binary data that compresses, but not trivially.
    fn sample(len: usize) -> Vec<u8> {
        let mut x: u32 = 0x1234_5678;
        (0..len)
            .map(|i| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                if i % 3 == 0 {
                    (x & 0x0f) as u8
                } else {
                    (i / 7) as u8
                }
            })
            .collect()
    }

    #[test]
    fn gzip_and_zlib_are_accepted_under_both_names() {
        let data = sample(200_000);
        for name in ["gzip", "deflate"] {
            assert!(request_encoding(Some(name.as_bytes())).is_ok());
            for (wrapper, body) in [("gzip", gzip(&data)), ("zlib", zlib(&data))] {
                let out = inflate(&body, usize::MAX);
                assert!(out == Ok(data.clone()), "{wrapper} stream named {name}");
            }
            assert_eq!(inflate(&gzip(JSON), 1 << 20).as_deref(), Ok(JSON));
            assert_eq!(inflate(&zlib(b""), 1 << 20).as_deref(), Ok(&b""[..]));
        }
    }

    #[test]
    fn gzip_header_fields_are_skipped_and_checked_like_zlib() {
        let deflated = raw(JSON);
        // FEXTRA, FNAME, FCOMMENT, FHCRC.
        let mut header = vec![0x1f, 0x8b, 8, 0x1e, 1, 2, 3, 4, 0, 255];
        header.extend_from_slice(&[3, 0, b'a', b'b', b'c']);
        header.extend_from_slice(b"req.json\0");
        header.extend_from_slice(b"a comment\0");
        let mut crc = Crc::new();
        crc.update(&header);
        let hcrc = (crc.sum() as u16).to_le_bytes();
        let trailer = [0u8; 8]; // wrong CRC and ISIZE: never looked at
        let body = [&header[..], &hcrc, &deflated, &trailer].concat();
        assert_eq!(inflate(&body, 1 << 20).as_deref(), Ok(JSON));
        // A wrong header CRC stops zlib in the header: nothing inflates.
        let bad = [&header[..], &[hcrc[0] ^ 1, hcrc[1]], &deflated].concat();
        assert_eq!(inflate(&bad, 1 << 20), Ok(Vec::new()));
        // Reserved flag bits, or a method other than 8.
        let mut reserved = body.clone();
        reserved[3] |= 0x20;
        assert_eq!(inflate(&reserved, 1 << 20), Ok(Vec::new()));
        let mut method = body.clone();
        method[2] = 7;
        assert_eq!(inflate(&method, 1 << 20), Ok(Vec::new()));
        // Every truncation inside the header inflates nothing.
        for cut in 1..header.len() + 2 {
            assert_eq!(
                inflate(&body[..cut], 1 << 20),
                Ok(Vec::new()),
                "cut at {cut}"
            );
        }
    }

    #[test]
    fn zlib_header_is_checked_like_zlib() {
        let deflated = raw(JSON);
        let with = |cmf: u8, flg: u8| [&[cmf, flg][..], &deflated].concat();
        // Any window size up to 32K (CINFO 0..=7) and any FLEVEL.
        for cinfo in 0..8u8 {
            for flevel in 0..4u8 {
                let cmf = cinfo << 4 | 8;
                let mut flg = flevel << 6;
                flg += (31 - ((u16::from(cmf) * 256 + u16::from(flg)) % 31) as u8) % 31;
                assert_eq!(
                    inflate(&with(cmf, flg), 1 << 20).as_deref(),
                    Ok(JSON),
                    "{cmf:x} {flg:x}"
                );
            }
        }
        // Bad check bits, CINFO 8, method 7, preset dictionary (Z_NEED_DICT).
        for (cmf, flg) in [(0x78, 0x9d), (0x88, 0x1c), (0x77, 0x09), (0x78, 0xbb)] {
            assert_eq!(
                (u16::from(cmf) * 256 + u16::from(flg)) % 31 == 0,
                (cmf, flg) != (0x78, 0x9d)
            );
            assert_eq!(
                inflate(&with(cmf, flg), 1 << 20),
                Ok(Vec::new()),
                "{cmf:x} {flg:x}"
            );
        }
        // A single byte is a truncated header.
        assert_eq!(inflate(&[0x78], 1 << 20), Ok(Vec::new()));
    }

    #[test]
    fn raw_deflate_and_plain_text_inflate_to_nothing() {
        // windowBits 15|32 wants a gzip or zlib header: raw RFC 1951 data
        // fails zlib's header check, so Triton inflates 0 bytes and takes
        // the raw-request path (v2 §4.1, `C06`). Same for plain JSON.
        let body = raw(JSON);
        assert_ne!((u16::from(body[0]) * 256 + u16::from(body[1])) % 31, 0);
        assert_eq!(inflate(&body, 1 << 20), Ok(Vec::new()));
        assert_eq!(inflate(JSON, 1 << 20), Ok(Vec::new()));
        assert_eq!(inflate(b"\x1f", 1 << 20), Ok(Vec::new()));
    }

    #[test]
    fn corrupt_or_truncated_data_keeps_what_inflated() {
        let data = sample(100_000);
        // A sync-flushed zlib stream followed by an invalid block type (3).
        let mut encoder = Compress::new(Compression::default(), false);
        let mut deflated = Vec::with_capacity(200_000);
        encoder
            .compress_vec(&data, &mut deflated, FlushCompress::Sync)
            .unwrap();
        assert!(encoder.total_in() == data.len() as u64);
        let body = [&[0x78, 0x9c][..], &deflated, &[0x07, 0xff, 0xff]].concat();
        assert!(inflate(&body, usize::MAX) == Ok(data.clone()));
        let body = [&gzip(b"")[..10], &deflated, &[0x07]].concat();
        assert!(inflate(&body, usize::MAX) == Ok(data.clone()));
        // Wrong trailers: all data was output before zlib checks them.
        for (mut body, trailer) in [(gzip(&data), 8), (zlib(&data), 4)] {
            let n = body.len();
            body[n - trailer] ^= 0xff; // CRC-32 / Adler-32
            body[n - 1] ^= 0xff; // ISIZE / Adler-32
            assert!(inflate(&body, usize::MAX) == Ok(data.clone()));
        }
        // Truncated streams give a prefix; every cut point is safe.
        let body = gzip(&data);
        let half = inflate(&body[..body.len() / 2], usize::MAX).unwrap();
        assert!(!half.is_empty() && half.len() < data.len());
        assert_eq!(half, data[..half.len()]);
        let body = zlib(&sample(3000));
        for cut in 0..body.len() {
            match inflate(&body[..cut], usize::MAX) {
                Ok(out) => assert_eq!(out, sample(3000)[..out.len()]),
                Err(e) => assert_eq!((cut, e), (0, InflateError::Empty)),
            }
        }
    }

    #[test]
    fn only_the_first_gzip_member_is_inflated() {
        // zlib's inflate() (windowBits 15|32) returns Z_STREAM_END after the
        // first member and Triton never resets it: the rest is ignored.
        let body = [gzip(b"first"), gzip(b"second")].concat();
        assert_eq!(inflate(&body, 1 << 20).as_deref(), Ok(&b"first"[..]));
        let body = [zlib(b"first"), b"trailing garbage".to_vec()].concat();
        assert_eq!(inflate(&body, 1 << 20).as_deref(), Ok(&b"first"[..]));
        // The flate2 multi-member reader, for contrast, would read both.
        let mut both = String::new();
        flate2::read::MultiGzDecoder::new(&[gzip(b"first"), gzip(b"second")].concat()[..])
            .read_to_string(&mut both)
            .unwrap();
        assert_eq!(both, "firstsecond");
    }

    #[test]
    fn empty_body_is_an_error() {
        assert_eq!(inflate(b"", 1 << 20), Err(InflateError::Empty));
        assert_eq!(inflate(b"", 0), Err(InflateError::Empty));
        assert_eq!(
            InflateError::Empty.to_string(),
            "nothing to be decompressed"
        );
    }

    #[test]
    fn limit_is_inclusive() {
        let data = sample(300_000);
        let body = gzip(&data);
        assert!(inflate(&body, data.len()) == Ok(data.clone()));
        let limit = data.len() - 1;
        assert_eq!(inflate(&body, limit), Err(InflateError::TooLarge { limit }));
        assert_eq!(inflate(&body, 0), Err(InflateError::TooLarge { limit: 0 }));
        assert_eq!(inflate(&gzip(b""), 0), Ok(Vec::new()));
        assert_eq!(
            InflateError::TooLarge { limit: 67108864 }.to_string(),
            "Decompressed data size exceeds the maximum allowed value of 67108864 bytes. \
             Use --http-max-input-size to increase the limit."
        );
    }

    /// LSB-first bit writer for hand-made deflate streams.
    struct Bits {
        out: Vec<u8>,
        len: usize,
    }

    impl Bits {
        fn put(&mut self, value: u32, count: usize) {
            for i in 0..count {
                if self.len.is_multiple_of(8) {
                    self.out.push(0);
                }
                if value >> i & 1 == 1 {
                    *self.out.last_mut().unwrap() |= 1 << (self.len % 8);
                }
                self.len += 1;
            }
        }

        /// A Huffman code, most significant bit first.
        fn code(&mut self, code: u32, len: usize) {
            for i in (0..len).rev() {
                self.put(code >> i & 1, 1);
            }
        }

        fn zeros(&mut self, count: usize) {
            self.len += count;
            self.out.resize(self.len.div_ceil(8), 0);
        }
    }

    /// Raw deflate: one dynamic block whose output is a literal 0 then
    /// `matches` copies of 258 bytes at distance 1 (1 + 258 * matches zero
    /// bytes) at 2 bits per match: about 1 MB of input per GiB of output.
    fn zip_bomb(matches: usize) -> Vec<u8> {
        let mut b = Bits {
            out: Vec::new(),
            len: 0,
        };
        b.put(1, 1); // BFINAL
        b.put(2, 2); // dynamic Huffman
        b.put(29, 5); // HLIT: 286 literal/length codes
        b.put(1, 5); // HDIST: 2 distance codes
        b.put(14, 4); // HCLEN: 18 code length codes
                      // Order 16 17 18 0 8 7 9 6 10 5 11 4 12 3 13 2 14 1: 18 -> 1 bit,
                      // 2 and 1 -> 2 bits. Codes: 18 = 0, 1 = 10, 2 = 11.
        for len in [0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 2] {
            b.put(len, 3);
        }
        // Literal/length lengths: 0 -> 2, 1..=255 -> 0, 256 -> 2,
        // 257..=284 -> 0, 285 -> 1; distance lengths 0 -> 1, 1 -> 1.
        b.code(0b11, 2);
        b.code(0, 1);
        b.put(138 - 11, 7);
        b.code(0, 1);
        b.put(117 - 11, 7);
        b.code(0b11, 2);
        b.code(0, 1);
        b.put(28 - 11, 7);
        for _ in 0..3 {
            b.code(0b10, 2);
        }
        // Codes: 285 = 0, literal 0 = 10, end of block = 11; distance 1 = 0.
        b.code(0b10, 2);
        b.zeros(2 * matches);
        b.code(0b11, 2);
        b.out
    }

    #[test]
    fn zip_bomb_stops_at_the_limit() {
        // The hand-made stream is valid: check a small one exactly.
        let small = zip_bomb(1000);
        let out = inflate(&[&[0x78, 0x9c][..], &small].concat(), usize::MAX).unwrap();
        assert_eq!(out.len(), 1 + 258 * 1000);
        assert!(out.iter().all(|&b| b == 0));

        let matches = (1usize << 30).div_ceil(258); // >= 1 GiB of output
        let bomb = zip_bomb(matches);
        assert!(bomb.len() < 1_100_000);
        let limit = 1 << 20;
        for body in [
            [&[0x78, 0x9c][..], &bomb].concat(),
            [&gzip(b"")[..10], &bomb].concat(),
        ] {
            let started = std::time::Instant::now();
            assert_eq!(inflate(&body, limit), Err(InflateError::TooLarge { limit }));
            assert!(
                started.elapsed().as_secs() < 10,
                "took {:?}",
                started.elapsed()
            );
        }
        // The only growing allocation is the output, bounded by the limit.
        for limit in [0, 1, 1000, 65_536, 65_537, 1 << 20, 3 << 20] {
            let mut out = Vec::new();
            assert_eq!(
                inflate_raw(&bomb, limit, &mut out),
                Err(InflateError::TooLarge { limit })
            );
            assert!(
                out.capacity() <= limit,
                "limit {limit}: capacity {}",
                out.capacity()
            );
            assert!(out.len() <= limit);
        }
        // Exactly at the limit is fine.
        let exact = 1 + 258 * 5000;
        let mut out = Vec::new();
        assert_eq!(inflate_raw(&zip_bomb(5000), exact, &mut out), Ok(()));
        assert_eq!((out.len(), out.capacity()), (exact, exact));
    }

    #[test]
    fn compress_round_trips() {
        let header = JSON;
        let tail = sample(150_000);
        let chunks: [&[u8]; 4] = [header, &tail, b"", b"end"];
        let whole = chunks.concat();
        for encoding in [Encoding::Gzip, Encoding::Deflate] {
            let body = compress(encoding, &chunks).unwrap();
            assert!(body.len() < whole.len());
            assert!(inflate(&body, whole.len()) == Ok(whole.clone()));
            // Checksums and lengths verified by flate2's own decoders.
            let mut decoded = Vec::new();
            match encoding {
                Encoding::Gzip => {
                    assert_eq!(&body[..10], b"\x1f\x8b\x08\0\0\0\0\0\0\x03");
                    flate2::read::GzDecoder::new(&body[..])
                        .read_to_end(&mut decoded)
                        .unwrap();
                }
                _ => {
                    assert_eq!(&body[..2], b"\x78\x9c");
                    flate2::read::ZlibDecoder::new(&body[..])
                        .read_to_end(&mut decoded)
                        .unwrap();
                }
            }
            assert!(decoded == whole);
            // Splitting the input differently gives a stream of the same data.
            let one = compress(encoding, &[&whole]).unwrap();
            assert!(inflate(&one, usize::MAX) == Ok(whole.clone()));
            // A single byte, and a JSON-only response.
            let body = compress(encoding, &[b"x"]).unwrap();
            assert_eq!(inflate(&body, 1).as_deref(), Ok(&b"x"[..]));
            let body = compress(encoding, &[header]).unwrap();
            assert_eq!(inflate(&body, 1 << 20).as_deref(), Ok(header));
            // Nothing to compress: the caller sends the body as is.
            let err = compress(encoding, &[b"", b""]).unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
            assert!(compress(encoding, &[]).is_err());
        }
        assert!(compress(Encoding::Identity, &chunks).unwrap() == whole);
        assert_eq!(compress(Encoding::Identity, &[]).unwrap(), b"");
    }

    #[test]
    fn arbitrary_input_never_panics() {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move || {
            x ^= x << 7;
            x ^= x >> 9;
            x
        };
        let valid = [gzip(&sample(5000)), zlib(&sample(5000))];
        for i in 0..3000 {
            let mut body = match i % 3 {
                0 => (0..next() % 64).map(|_| next() as u8).collect::<Vec<u8>>(),
                n => valid[n - 1].clone(),
            };
            let flips = next() % 4;
            for _ in 0..flips {
                if !body.is_empty() {
                    let at = (next() % body.len() as u64) as usize;
                    body[at] ^= 1 << (next() % 8);
                }
            }
            let _ = inflate(&body, (next() % 10_000) as usize);
            let _ = negotiate(Some(&body));
            let _ = request_encoding(Some(&body));
        }
    }
}
