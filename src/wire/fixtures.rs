//! Test support for the codec tests: the line-based fixture files under
//! `tests/fixtures/` (`<input> => <expected>` records, `\xNN` escapes) and
//! a deterministic generator for sweeps.

/// Where a record line splits into its input and its expected text.
#[derive(Clone, Copy)]
pub(crate) enum Split {
    /// At the first ` => ` (`tests/fixtures/json/`: the expected text may hold ` => `).
    First,
    /// At the last ` => ` (`tests/fixtures/compress/`: the input may hold ` => `).
    Last,
}

/// The escapes a fixture file uses.
#[derive(Clone, Copy)]
pub(crate) enum Escapes {
    /// `\xNN` is the byte NN; every other byte, a backslash not starting a
    /// valid `\xNN` included, stands for itself (`tests/fixtures/json/`).
    Hex,
    /// `\xHH` is the byte HH and `\\` a backslash; any other backslash is a
    /// broken fixture (`tests/fixtures/compress/`).
    HexAndBackslash,
}

/// `(line number, input, expected)` of every `<input> => <expected>` line of
/// `tests/fixtures/<file>`, skipping blank lines and `#` comments.
pub(crate) fn records(file: &str, split: Split) -> Vec<(usize, String, String)> {
    let path = format!("{}/tests/fixtures/{file}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.is_empty() && !l.starts_with('#'))
        .map(|(n, l)| {
            let parts = match split {
                Split::First => l.split_once(" => "),
                Split::Last => l.rsplit_once(" => "),
            };
            let (input, expected) = parts.unwrap_or_else(|| panic!("{file}:{}: no ` => `", n + 1));
            (n + 1, input.to_owned(), expected.to_owned())
        })
        .collect()
}

/// The bytes a fixture text stands for.
pub(crate) fn unescape(s: &str, escapes: Escapes) -> Vec<u8> {
    let b = s.as_bytes();
    let strict = matches!(escapes, Escapes::HexAndBackslash);
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' {
            match b.get(i + 1) {
                Some(b'x') if i + 4 <= b.len() => {
                    let hex = std::str::from_utf8(&b[i + 2..i + 4]).ok();
                    match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                        Some(v) => {
                            out.push(v);
                            i += 4;
                            continue;
                        }
                        None if strict => panic!("bad \\x escape in {s:?}"),
                        None => {}
                    }
                }
                Some(b'\\') if strict => {
                    out.push(b'\\');
                    i += 2;
                    continue;
                }
                _ if strict => panic!("unknown escape in {s:?}"),
                _ => {}
            }
        }
        out.push(b[i]);
        i += 1;
    }
    out
}

/// Cheap deterministic generator for the property and no-panic sweeps.
pub(crate) fn xorshift(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

/// Calls `check` with `count` inputs made of one of `seeds` by one to four
/// random byte changes (each also cut in half): the no-panic and
/// differential sweeps.
pub(crate) fn mutations(seeds: &[&[u8]], count: usize, mut check: impl FnMut(&[u8])) {
    let alphabet = b"[]{}\",:\\u0123456789.eE+-NaInfityrsl \t\x00\x01\xff";
    let mut st = 0x9E37_79B9_7F4A_7C15_u64;
    for _ in 0..count {
        let seed = seeds[(xorshift(&mut st) % seeds.len() as u64) as usize];
        let mut buf = seed.to_vec();
        for _ in 0..(xorshift(&mut st) % 4 + 1) {
            let r = xorshift(&mut st);
            let pos = (r >> 8) as usize % (buf.len() + 1);
            let c = alphabet[(r % alphabet.len() as u64) as usize];
            match r % 3 {
                0 if pos < buf.len() => buf[pos] = c,
                1 if pos < buf.len() => {
                    buf.remove(pos);
                }
                _ => buf.insert(pos, c),
            }
        }
        for cut in [buf.len(), buf.len() / 2] {
            check(&buf[..cut]);
        }
    }
}
