//! The short decimals that fill most big JSON requests (`262143.0`, `-1`,
//! `0.25`), read in one straight step each for FP32 tensor `data` arrays.
//!
//! Hand-written because it is the hot loop of a big JSON request: the
//! general reader (`json::Parser::number`) follows every branch of
//! rapidjson's `ParseNumber` for every element. Parsing the w5 request
//! (`262143.0`-like elements) took 6.8 ms with it alone and 6.1 ms with
//! this path (`cargo bench --bench json`, alternating builds). [`short_decimal`] takes only literals
//! whose value it can give exactly as that reader would: an optional `-`,
//! an integer part of 1 to 7 digits without a leading zero, an optional
//! fraction of 1 to 7 digits, no exponent. Anything else (`None`) goes to
//! the general reader, which also reports every error, so this path never
//! has to. The test below checks it against the general reader.

use crate::wire::json::{digit_run_value, POW10, TENS};

/// `0x01` in every byte of a 16-byte word.
const ONES: u128 = u128::MAX / 0xFF;
/// The top bit of every byte.
const TOPS: u128 = ONES * 0x80;

/// The value of the short decimal literal at the start of `s` and its
/// length, or `None` when it is not one (module doc) or fewer than 16
/// bytes are left. The value is the double rapidjson 1.1.0 makes of the
/// literal:
/// - integers (`-0` is the integer 0, so `+0.0`) convert exactly;
/// - a fraction of zeros gives the integer part (the division by 10^k is
///   exact there, and rapidjson's result is the same);
/// - other fractions: all digits as one integer (below 10^14, so exact),
///   divided by 10^k once (`StrtodNormalPrecision`'s fast path).
///
/// The literal's 16 bytes are read as one word and every boundary (end of
/// the integer part, of the fraction) is found in that word.
#[inline(always)]
pub(crate) fn short_decimal(s: &[u8]) -> Option<(f64, usize)> {
    let word = u128::from_le_bytes(s.get(..16)?.try_into().ok()?);
    let minus = word as u8 == b'-';
    let sign = usize::from(minus);
    let body = word >> (8 * sign);
    let stops = non_digits(body);
    // Digits before the first non-digit; fewer than 8 fit the u32 reader.
    let n = (stops.trailing_zeros() / 8) as usize;
    if n == 0 || n > 7 || (n > 1 && body as u8 == b'0') {
        return None;
    }
    let whole = digit_run_value(body as u64 & DIGIT_VALUES, n);
    let mut value = f64::from(whole);
    let mut negative = minus && whole != 0;
    let mut end = n;
    if (body >> (8 * n)) as u8 == b'.' {
        // The next non-digit ends the fraction.
        end = ((stops & (stops - 1)).trailing_zeros() / 8) as usize;
        let k = end - n - 1;
        if k == 0 || k > 7 {
            return None;
        }
        let fraction = digit_run_value((body >> (8 * (n + 1))) as u64 & DIGIT_VALUES, k);
        negative = minus;
        if fraction != 0 {
            let digits = u64::from(whole) * TENS[k] + u64::from(fraction);
            value = digits as f64 / POW10[k];
        }
    }
    if matches!((body >> (8 * end)) as u8, b'e' | b'E') {
        return None;
    }
    Some((if negative { -value } else { value }, sign + end))
}

/// An ASCII digit's value is its low four bits.
const DIGIT_VALUES: u64 = 0x0F0F_0F0F_0F0F_0F0F;

/// The top bit of each byte of `word` that is not an ASCII digit. Each
/// byte is tested on its own (no borrow crosses bytes, unlike `b - '0'`):
/// its low seven bits are at least `0x30` and at most `0x39`, and its top
/// bit is clear.
#[inline(always)]
fn non_digits(word: u128) -> u128 {
    let low7 = word & (ONES * 0x7F);
    let from_zero = (low7 | TOPS) - ONES * 0x30;
    let to_nine = ONES * 0xB9 - low7;
    !(from_zero & to_nine & !word) & TOPS
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::fixtures::xorshift;
    use crate::wire::json::parse;

    /// What the general reader makes of `literal` (as an array's only element).
    fn general(literal: &str) -> Option<f64> {
        let text = format!("[{literal}]");
        let value = parse(text.as_bytes(), 4).ok()?;
        let first = value.as_array()?.iter().next()?.as_f64();
        first
    }

    /// Every literal this path takes has the general reader's value, to the
    /// bit, and the right length (followed by `,`, `]` or padding).
    fn check(literal: &str) -> bool {
        let padded = format!("{literal},{:16}", "");
        let Some((value, len)) = short_decimal(padded.as_bytes()) else {
            return false;
        };
        assert_eq!(len, literal.len(), "{literal}");
        let expected = general(literal).unwrap_or_else(|| panic!("{literal} does not parse"));
        assert_eq!(value.to_bits(), expected.to_bits(), "{literal}");
        true
    }

    #[test]
    fn short_literals_read_as_the_general_reader_reads_them() {
        for literal in [
            "0",
            "-0",
            "0.0",
            "-0.0",
            "1",
            "-1",
            "1.0",
            "262143.0",
            "9999999.9999999",
            "0.1",
            "-0.5",
            "0.0000001",
            "1234567.1234567",
            "3.1415927",
            "0.3000001",
        ] {
            assert!(check(literal), "{literal} not taken");
        }
        let mut st = 0x5DEE_CE66_D1CE_4E5B_u64;
        for _ in 0..300_000 {
            let r = xorshift(&mut st);
            let whole = (r % 10_000_000) >> (r >> 60);
            let k = ((r >> 24) % 8) as usize;
            let fraction = (r >> 32) % TENS[k];
            let sign = if r & (1 << 23) == 0 { "" } else { "-" };
            let literal = if k == 0 {
                format!("{sign}{whole}")
            } else {
                format!("{sign}{whole}.{fraction:0k$}")
            };
            assert!(check(&literal), "{literal} not taken");
        }
    }

    #[test]
    fn everything_else_is_left_to_the_general_reader() {
        for literal in [
            "01",
            "00.5",
            "12345678",
            "1.12345678",
            "1e5",
            "1.5E-3",
            "-",
            "-x",
            "1.",
            ".5",
            "NaN",
            "-Infinity",
            "+1",
            "",
        ] {
            let padded = format!("{literal},{:16}", "");
            assert_eq!(short_decimal(padded.as_bytes()), None, "{literal}");
        }
        // Fewer than 16 bytes left: the general reader reads the end.
        assert_eq!(short_decimal(b"1.5]}]}        "), None);
    }
}
