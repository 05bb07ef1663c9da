//! rapidjson-compatible number and string writers for Triton's JSON responses.
//!
//! Triton 2.51 writes JSON with rapidjson 1.1.0's
//! `Writer<WriteBuffer, UTF8<>, UTF8<>, CrtAllocator, kWriteNanAndInfFlag>`; these
//! functions append exactly the bytes that writer produces for one value.
//!
//! * Doubles: `Writer::WriteDouble` prints `NaN`, `Infinity`, `-Infinity` as bare tokens
//!   (any NaN, whatever its sign, is `NaN`) and everything else with
//!   `internal::dtoa(d, buf, 324)`: Grisu2 shortest digits followed by `Prettify`. The
//!   `dtoa` crate (1.x) is a line-by-line port of that same `internal/dtoa.h` (same
//!   Grisu2, same cached powers, same `Prettify` with `maxDecimalPlaces` 324 and
//!   `WriteExponent`, same `0.0` / `-0.0` zero handling), so it is used directly; its output
//!   was compared byte for byte with the C++ library on millions of doubles (all binades,
//!   subnormals, integers, widened f32) without a single difference.
//! * FP32 values are widened to `f64` first, as Triton does (`0.1f32` prints
//!   `0.10000000149011612`).
//! * Strings: `Writer::WriteString` without `kWriteValidateEncodingFlag`: `"` and `\`
//!   escaped, `\b \t \n \f \r` short escapes, other bytes < 0x20 as `\u00XX` with upper-case
//!   hex; `/`, 0x7F and all bytes >= 0x80 (valid UTF-8 or not) copied raw.

/// rapidjson `Writer::Double`: Grisu2 shortest digits + rapidjson `Prettify`;
/// `0.0` -> `0.0`, `-0.0` -> `-0.0`, NaN -> `NaN`, +inf -> `Infinity`, -inf -> `-Infinity`.
pub fn write_f64(out: &mut Vec<u8>, v: f64) {
    if let Some(i) = small_integer(v) {
        write_i64(out, i);
        out.extend_from_slice(b".0");
    } else if v.is_nan() {
        out.extend_from_slice(b"NaN");
    } else if v.is_infinite() {
        out.extend_from_slice(if v < 0.0 { b"-Infinity" } else { b"Infinity" });
    } else {
        let mut buf = dtoa::Buffer::new();
        out.extend_from_slice(buf.format_finite(v).as_bytes());
    }
}

/// A non-zero integral `v` below 2^53 in magnitude, as an integer.
///
/// For these Grisu2 + `Prettify` print the integer's decimal digits and `.0`
/// (`262143.0`), so they skip Grisu2, which costs ~4× more: the integer is
/// the only decimal within half an ulp (≤ 0.5) of `v`, Grisu2's output always
/// lies in that interval, and `Prettify` writes an exponent of 0…20 as
/// trailing zeros and `.0`. The test `integers_match_grisu2` compares the two
/// paths. Zero keeps the general path (`-0.0` has a sign an integer lacks).
#[inline]
fn small_integer(v: f64) -> Option<i64> {
    const EXACT: f64 = 9_007_199_254_740_992.0; // 2^53
    let i = v as i64; // saturating; NaN gives 0
    (i != 0 && i as f64 == v && v.abs() < EXACT).then_some(i)
}

/// FP32 values are widened to f64 and written with [`write_f64`] (Triton does that:
/// `0.1f32` -> `0.10000000149011612`).
pub fn write_f32(out: &mut Vec<u8>, v: f32) {
    write_f64(out, f64::from(v));
}

/// FP32 tensor elements (little-endian), each as [`write_f32`] writes it and
/// followed by `,`.
///
/// Integral values below 10^8 in magnitude, most model outputs, skip
/// `itoa` and the copy of its digits: the digits are made in one 64-bit
/// word ([`digit_word`]), `.0,` goes after them in the same register, and
/// the 16 bytes are stored at once and cut back to the text's length.
/// Hand-written for speed: the w5 answer (`262143.0`-like values) encoded
/// in 4.6 ms instead of 5.0 (`cargo bench --bench json`, alternating
/// builds). The test `short_integrals_match_write_f32` compares it with
/// [`write_f32`].
pub(crate) fn write_f32_elements(data: &[u8], out: &mut Vec<u8>) {
    // Texts gather in a local block, copied to `out` in bulk: the loop
    // keeps its write position in a register.
    let mut block = [0u8; BLOCK + 16];
    let mut at = 0;
    for chunk in data.chunks_exact(4) {
        if at > BLOCK {
            out.extend_from_slice(&block[..at]);
            at = 0;
        }
        let v = f32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
        let i = v as i32; // saturating; NaN gives 0
        let magnitude = i.unsigned_abs();
        if i != 0 && i as f32 == v && magnitude < 100_000_000 {
            // Known from the value alone, so the next text's place does
            // not wait for this one's digits.
            let count = magnitude.ilog10() + 1;
            let digits = digit_word(magnitude);
            // Leading zero digits are the low bytes (the first digit is byte 0).
            let ascii = (digits + 0x3030_3030_3030_3030) >> (8 * (8 - count));
            let mut text = u128::from(ascii) | (0x2C_302E_u128 << (8 * count)); // ".0,"
            let mut len = count as usize + 3;
            if i < 0 {
                text = (text << 8) | u128::from(b'-');
                len += 1;
            }
            block[at..at + 16].copy_from_slice(&text.to_le_bytes());
            at += len;
        } else {
            out.extend_from_slice(&block[..at]);
            at = 0;
            write_f32(out, v);
            out.push(b',');
        }
    }
    out.extend_from_slice(&block[..at]);
}

/// Bytes gathered before they are copied out (a text is at most 16).
const BLOCK: usize = 4096;

/// The 8 decimal digits of `n` (< 10^8, leading zeros included) as byte
/// values 0..=9, the most significant in the lowest byte. Each step splits
/// every lane of the word at once: 4-digit halves in 32-bit lanes, then
/// 2-digit quarters in 16-bit lanes, then digits in bytes; the divisions
/// are multiplications by rounded reciprocals, exact for these ranges
/// (`v * 10486 >> 20 == v / 100` for v < 10^4, `v * 103 >> 10 == v / 10`
/// for v < 100).
#[inline(always)]
fn digit_word(n: u32) -> u64 {
    let halves = u64::from(n / 10_000) | (u64::from(n % 10_000) << 32);
    let hundreds = ((halves * 10_486) >> 20) & 0x0000_007F_0000_007F;
    let quarters = hundreds | ((halves - hundreds * 100) << 16);
    let tens = ((quarters * 103) >> 10) & 0x000F_000F_000F_000F;
    tens | ((quarters - tens * 10) << 8)
}

/// Plain decimal (rapidjson `Writer::Uint64`).
pub fn write_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
}

/// Plain decimal with `-` for negatives (rapidjson `Writer::Int64`).
pub fn write_i64(out: &mut Vec<u8>, v: i64) {
    out.extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
}

pub use crate::json_str::write_str;

/// `[item,item,…]`, no spaces (rapidjson's `Writer`), each item written by `write`.
pub fn write_array<T>(
    out: &mut Vec<u8>,
    items: impl IntoIterator<Item = T>,
    write: impl FnMut(&mut Vec<u8>, T),
) {
    write_separated(out, b'[', b']', items, write);
}

/// `{member,member,…}`, no spaces (rapidjson's `Writer`), each whole member
/// (`"key":value`) written by `write`.
pub fn write_object<T>(
    out: &mut Vec<u8>,
    members: impl IntoIterator<Item = T>,
    write: impl FnMut(&mut Vec<u8>, T),
) {
    write_separated(out, b'{', b'}', members, write);
}

fn write_separated<T>(
    out: &mut Vec<u8>,
    open: u8,
    close: u8,
    items: impl IntoIterator<Item = T>,
    mut write: impl FnMut(&mut Vec<u8>, T),
) {
    out.push(open);
    for (i, item) in items.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write(out, item);
    }
    out.push(close);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::fixtures::{records, unescape, xorshift, Escapes, Split};

    fn f64_text(v: f64) -> String {
        let mut out = Vec::new();
        write_f64(&mut out, v);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn numbers_fixture() {
        let recs = records("json/numbers.txt", Split::First);
        assert!(recs.len() > 30);
        for (line, input, expected) in recs {
            let mut out = Vec::new();
            if let Some(f) = input.strip_prefix("f32:") {
                let v = match f.strip_prefix("0x") {
                    Some(h) => f32::from_bits(u32::from_str_radix(h, 16).unwrap()),
                    None => f.parse::<f32>().unwrap(),
                };
                write_f32(&mut out, v);
            } else {
                let v = match input.strip_prefix("0x") {
                    Some(h) => f64::from_bits(u64::from_str_radix(h, 16).unwrap()),
                    None => input.parse::<f64>().unwrap(),
                };
                write_f64(&mut out, v);
            }
            assert_eq!(String::from_utf8(out).unwrap(), expected, "line {line}");
        }
    }

    #[test]
    fn strings_fixture() {
        let recs = records("json/strings.txt", Split::First);
        assert!(recs.len() > 10);
        for (line, input, expected) in recs {
            let mut out = Vec::new();
            write_str(&mut out, &unescape(&input, Escapes::Hex));
            assert_eq!(out, unescape(&expected, Escapes::Hex), "line {line}");
        }
    }

    #[test]
    fn integers() {
        let mut out = Vec::new();
        write_u64(&mut out, u64::MAX);
        out.push(b',');
        write_i64(&mut out, i64::MIN);
        out.push(b',');
        write_u64(&mut out, 0);
        out.push(b',');
        write_i64(&mut out, -1);
        assert_eq!(out, b"18446744073709551615,-9223372036854775808,0,-1");
    }

    #[test]
    fn appends() {
        let mut out = b"[".to_vec();
        write_f64(&mut out, 4.0);
        out.push(b',');
        write_f32(&mut out, -2.0);
        out.push(b',');
        write_str(&mut out, b"a\"b");
        out.push(b']');
        assert_eq!(out, br#"[4.0,-2.0,"a\"b"]"#);
    }

    #[test]
    fn containers() {
        let mut out = Vec::new();
        write_array(&mut out, [1u64, 2, 3], write_u64);
        write_array(&mut out, Vec::<u64>::new(), write_u64);
        write_object(&mut out, [("a", 1i64), ("b", -2)], |out, (k, v)| {
            write_str(out, k.as_bytes());
            out.push(b':');
            write_i64(out, v);
        });
        write_object(&mut out, [(); 0], |_, ()| {});
        assert_eq!(out, br#"[1,2,3][]{"a":1,"b":-2}{}"#);
    }

    /// The FP32 element writer gives `write_f32`'s text and a `,` for every
    /// value, whichever path it takes.
    #[test]
    fn short_integrals_match_write_f32() {
        let check = |values: &[f32]| {
            let data: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
            let mut fast = b"[".to_vec();
            write_f32_elements(&data, &mut fast);
            let mut slow = b"[".to_vec();
            for &v in values {
                write_f32(&mut slow, v);
                slow.push(b',');
            }
            assert_eq!(
                String::from_utf8_lossy(&fast),
                String::from_utf8_lossy(&slow)
            );
        };
        let integers: Vec<f32> = (-300_000..300_000).map(|i| i as f32).collect();
        check(&integers);
        let edges: Vec<f32> = [
            1.0,
            9.0,
            10.0,
            99.0,
            100.0,
            9_999.0,
            10_000.0,
            10_001.0,
            99_999_999.0,
            100_000_000.0,
            16_777_216.0,
            16_777_217.0,
            2_147_483_648.0,
            3e38,
            0.0,
            -0.0,
            0.5,
            -1.5,
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::MIN_POSITIVE,
            1e-45,
        ]
        .iter()
        .flat_map(|&v| [v, -v])
        .collect();
        check(&edges);
        let mut st = 0xA076_1D64_78BD_642F_u64;
        let random: Vec<f32> = (0..200_000)
            .map(|n| {
                let r = xorshift(&mut st);
                match n % 3 {
                    0 => f32::from_bits(r as u32),
                    1 => ((r >> 40) % 100_000_000) as f32 * if r & 1 == 0 { 1.0 } else { -1.0 },
                    _ => (r >> 40) as f32 / 1024.0,
                }
            })
            .collect();
        check(&random);
    }

    /// The integer shortcut of `write_f64` prints what Grisu2 prints.
    #[test]
    fn integers_match_grisu2() {
        let grisu2 = |v: f64| dtoa::Buffer::new().format_finite(v).to_string();
        let check = |v: f64| assert_eq!(f64_text(v), grisu2(v), "{v:e}");
        for i in -100_000..=100_000 {
            check(f64::from(i));
        }
        let top = 9_007_199_254_740_991.0; // 2^53 - 1
        for v in [
            top,
            -top,
            top - 1.0,
            4_503_599_627_370_496.0,
            1e15,
            1e15 + 1.0,
        ] {
            check(v);
        }
        let mut st = 0x9E37_79B9_7F4A_7C15_u64;
        for n in 0..200_000u32 {
            let r = xorshift(&mut st);
            let magnitude = (r >> (11 + n % 53)) as f64; // every binade below 2^53
            check(if r & 1 == 0 { magnitude } else { -magnitude });
            // widened FP32 integers, the common case of model outputs
            let widened = f64::from(f32::from_bits(r as u32)).trunc();
            if widened.is_finite() {
                check(widened);
            }
        }
        assert_eq!(f64_text(0.0), "0.0");
        assert_eq!(f64_text(-0.0), "-0.0");
        assert_eq!(f64_text(9_007_199_254_740_992.0), "9007199254740992.0");
        assert_eq!(f64_text(1e21), "1e21");
    }

    /// Every finite double's text parses back (Rust's correct parser) to the same bits,
    /// and it has rapidjson's shape (a `.` or an `e`, so it never reads as an integer).
    #[test]
    fn round_trip_property() {
        let mut st = 0x0123_4567_89AB_CDEF_u64;
        let mut checked = 0;
        for n in 0..300_000u32 {
            let r = xorshift(&mut st);
            let bits = match n % 4 {
                0 => r,                                             // any pattern
                1 => r & 0x800F_FFFF_FFFF_FFFF,                     // subnormals
                2 => f64::from(f32::from_bits(r as u32)).to_bits(), // widened f32
                _ => ((r >> 11) as f64).to_bits(),                  // integers below 2^53
            };
            let v = f64::from_bits(bits);
            if !v.is_finite() {
                continue;
            }
            let t = f64_text(v);
            let back: f64 = t.parse().unwrap_or_else(|e| panic!("{t}: {e}"));
            assert_eq!(back.to_bits(), bits, "{t}");
            assert!(t.contains('.') || t.contains('e'), "{t}");
            checked += 1;
        }
        assert!(checked > 250_000);
        assert_eq!(f64_text(f64::NAN), "NaN");
        assert_eq!(f64_text(-f64::NAN), "NaN");
        assert_eq!(f64_text(f64::INFINITY), "Infinity");
        assert_eq!(f64_text(f64::NEG_INFINITY), "-Infinity");
    }
}
