//! rapidjson's string escaping, the one way a JSON string is written: by
//! the error bodies (`error.rs`) and by the JSON writer (`wire::json_write`).
//! Hand-written because the bytes must equal Triton's (rapidjson's `Writer`
//! copies invalid UTF-8 and `/` raw and escapes controls as upper-case
//! `\u00XX`), which serde_json's escaping does not.

/// Escape class of each byte: 0 = copied raw, `u` = `\u00XX`, anything else = the letter
/// of a two-byte escape (`\"`, `\\`, `\b`, ...). Same table as rapidjson's writer.
static ESCAPE: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < 0x20 {
        t[i] = b'u';
        i += 1;
    }
    t[0x08] = b'b';
    t[0x09] = b't';
    t[0x0A] = b'n';
    t[0x0C] = b'f';
    t[0x0D] = b'r';
    t[b'"' as usize] = b'"';
    t[b'\\' as usize] = b'\\';
    t
};

const HEX_UPPER: &[u8; 16] = b"0123456789ABCDEF";

/// Quoted, escaped string as rapidjson writes it without encoding validation: `"` `\` and
/// `\b \t \n \f \r`, other bytes < 0x20 as `\u00XX` (upper-case hex); `/` and bytes >= 0x7F
/// raw (invalid UTF-8 included).
pub fn write_str(out: &mut Vec<u8>, s: &[u8]) {
    out.reserve(s.len() + 2);
    out.push(b'"');
    let mut run_start = 0;
    for (i, &b) in s.iter().enumerate() {
        let e = ESCAPE[usize::from(b)];
        if e == 0 {
            continue;
        }
        out.extend_from_slice(&s[run_start..i]);
        run_start = i + 1;
        if e == b'u' {
            out.extend_from_slice(&[
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX_UPPER[usize::from(b >> 4)],
                HEX_UPPER[usize::from(b & 0xF)],
            ]);
        } else {
            out.extend_from_slice(&[b'\\', e]);
        }
    }
    out.extend_from_slice(&s[run_start..]);
    out.push(b'"');
}
