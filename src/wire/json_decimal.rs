//! The short decimals that fill most big JSON requests (`262143.0`, `-1`,
//! `0.25`), read in one straight step each: a sink's raw-bytes loop (module
//! `json`, "Sinks") uses it for FP32 tensor `data` arrays
//! (`v2_request::tensor_sink`).
//!
//! Hand-written because it is the hot loop of a big JSON request: the
//! general reader (`json::Parser::number`) follows every branch of
//! rapidjson's `ParseNumber` for every element. Parsing the w5 request
//! (`262143.0`-like elements) took 6.8 ms with it alone and 6.1 ms with
//! this path (`cargo bench --bench json`, alternating builds).
//!
//! [`short_decimal`] takes only literals whose value it can give exactly
//! as that reader would: an optional `-`, an integer part of 1 to 7 digits
//! without a leading zero, an optional fraction of 1 to 7 digits, no
//! exponent. Anything else (`None`) goes to
//! the general reader, which also reports every error, so this path never
//! has to. The test below checks it against the general reader.
//!
//! It also holds the digit arithmetic both readers share: the value of a
//! run of up to 8 digits read as one word, and rapidjson's powers of ten.

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

/// 10^n for runs of up to 8 digits (here and in `json`'s reader).
pub(crate) const TENS: [u64; 9] = [
    1,
    10,
    100,
    1_000,
    10_000,
    100_000,
    1_000_000,
    10_000_000,
    100_000_000,
];

/// The value of the `n` (1 to 8) digits in the low bytes of `values`, one
/// digit's value (0 to 9) per byte, the most significant first; the bytes
/// above them are ignored.
#[inline(always)]
pub(crate) fn digit_run_value(values: u64, n: usize) -> u32 {
    // The n digits moved to the top bytes (leading zeros below them), then
    // combined pairwise: 2-digit, then the 8-digit value.
    let v = values << (8 * (8 - n));
    let v = v.wrapping_mul(10).wrapping_add(v >> 8);
    let high = (v & 0x0000_00FF_0000_00FF).wrapping_mul(100 + (1_000_000 << 32));
    let low = ((v >> 16) & 0x0000_00FF_0000_00FF).wrapping_mul(1 + (10_000 << 32));
    ((high.wrapping_add(low)) >> 32) as u32
}

/// rapidjson `internal::Pow10` table: the correctly rounded doubles `1e0` .. `1e308`.
#[rustfmt::skip]
pub(crate) static POW10: [f64; 309] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7,
    1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
    1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22, 1e23,
    1e24, 1e25, 1e26, 1e27, 1e28, 1e29, 1e30, 1e31,
    1e32, 1e33, 1e34, 1e35, 1e36, 1e37, 1e38, 1e39,
    1e40, 1e41, 1e42, 1e43, 1e44, 1e45, 1e46, 1e47,
    1e48, 1e49, 1e50, 1e51, 1e52, 1e53, 1e54, 1e55,
    1e56, 1e57, 1e58, 1e59, 1e60, 1e61, 1e62, 1e63,
    1e64, 1e65, 1e66, 1e67, 1e68, 1e69, 1e70, 1e71,
    1e72, 1e73, 1e74, 1e75, 1e76, 1e77, 1e78, 1e79,
    1e80, 1e81, 1e82, 1e83, 1e84, 1e85, 1e86, 1e87,
    1e88, 1e89, 1e90, 1e91, 1e92, 1e93, 1e94, 1e95,
    1e96, 1e97, 1e98, 1e99, 1e100, 1e101, 1e102, 1e103,
    1e104, 1e105, 1e106, 1e107, 1e108, 1e109, 1e110, 1e111,
    1e112, 1e113, 1e114, 1e115, 1e116, 1e117, 1e118, 1e119,
    1e120, 1e121, 1e122, 1e123, 1e124, 1e125, 1e126, 1e127,
    1e128, 1e129, 1e130, 1e131, 1e132, 1e133, 1e134, 1e135,
    1e136, 1e137, 1e138, 1e139, 1e140, 1e141, 1e142, 1e143,
    1e144, 1e145, 1e146, 1e147, 1e148, 1e149, 1e150, 1e151,
    1e152, 1e153, 1e154, 1e155, 1e156, 1e157, 1e158, 1e159,
    1e160, 1e161, 1e162, 1e163, 1e164, 1e165, 1e166, 1e167,
    1e168, 1e169, 1e170, 1e171, 1e172, 1e173, 1e174, 1e175,
    1e176, 1e177, 1e178, 1e179, 1e180, 1e181, 1e182, 1e183,
    1e184, 1e185, 1e186, 1e187, 1e188, 1e189, 1e190, 1e191,
    1e192, 1e193, 1e194, 1e195, 1e196, 1e197, 1e198, 1e199,
    1e200, 1e201, 1e202, 1e203, 1e204, 1e205, 1e206, 1e207,
    1e208, 1e209, 1e210, 1e211, 1e212, 1e213, 1e214, 1e215,
    1e216, 1e217, 1e218, 1e219, 1e220, 1e221, 1e222, 1e223,
    1e224, 1e225, 1e226, 1e227, 1e228, 1e229, 1e230, 1e231,
    1e232, 1e233, 1e234, 1e235, 1e236, 1e237, 1e238, 1e239,
    1e240, 1e241, 1e242, 1e243, 1e244, 1e245, 1e246, 1e247,
    1e248, 1e249, 1e250, 1e251, 1e252, 1e253, 1e254, 1e255,
    1e256, 1e257, 1e258, 1e259, 1e260, 1e261, 1e262, 1e263,
    1e264, 1e265, 1e266, 1e267, 1e268, 1e269, 1e270, 1e271,
    1e272, 1e273, 1e274, 1e275, 1e276, 1e277, 1e278, 1e279,
    1e280, 1e281, 1e282, 1e283, 1e284, 1e285, 1e286, 1e287,
    1e288, 1e289, 1e290, 1e291, 1e292, 1e293, 1e294, 1e295,
    1e296, 1e297, 1e298, 1e299, 1e300, 1e301, 1e302, 1e303,
    1e304, 1e305, 1e306, 1e307, 1e308,
];

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
