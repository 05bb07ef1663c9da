//! The direct reader: the JSON header of a binary request, in the shapes
//! perf_analyzer and tritonclient write, read in one pass straight into
//! the request, without the DOM the general reader (module `json`, then
//! the parent's walk over it) builds.
//!
//! Why hand-written: that DOM allocates every key, string and container
//! (~40 allocations for perf_analyzer's 290-byte header) and then is
//! walked and freed; it was the small request's "request JSON decode"
//! stage, ~12 µs of user CPU per request in the gateway
//! (docs/performance.md, "The cost budget of a small request").
//!
//! It reads a strict subset of what the general reader accepts, and
//! declines (`None`) everything else; the general reader then reads the
//! header from the start and gives every answer, so every error (text,
//! offset) stays the general reader's. The subset:
//! - the root: an object of `inputs` (an array, required), `outputs` (an
//!   array), `id` (a string), `parameters` (an object of only
//!   `binary_data_output`: a boolean);
//! - an input: an object of exactly `name`, `datatype` (strings), `shape`
//!   (an array of integers) and `parameters` (an object of exactly
//!   `binary_data_size`: an integer);
//! - an output: an object of `name` and optionally `parameters` (an object
//!   of at most `binary_data`: a boolean);
//! - members in any order, none twice in one object; strings of printable
//!   ASCII without escapes; integers of at most 18 digits, no sign,
//!   fraction or exponent; JSON whitespace between tokens; nothing after
//!   the root; nesting within the depth limit.
//!
//! A request that breaks a rule of the decoder (a repeated input name,
//! sizes the tail does not hold, a shape too large) is declined too. Where
//! it reads, it builds what the general reader builds, through the same
//! functions of the parent module: `tests` hold the two readers equal over
//! generated headers, valid and broken, as does the fuzz target
//! `v2_request`.

use crate::model::{DeclaredType, InputTensor, OutputKind, RequestedOutput};

use super::{shape_of, Decoder};

/// The deepest the subset nests (root, `inputs`, an input, its `shape`).
const DEPTH: usize = 4;

/// The most dims a `shape` may have here (read into an array, not a
/// vector): clients' tensors have fewer; more decline.
const MAX_RANK: usize = 8;

/// Reads `header` into `decoder`'s request; `None` where it declines (the
/// request then is half-built: the caller starts again).
pub(super) fn read(header: &[u8], decoder: &mut Decoder<'_>) -> Option<()> {
    if decoder.limits.max_json_depth < DEPTH {
        return None;
    }
    let mut cursor = Cursor {
        input: header,
        pos: 0,
    };
    let mut seen = Seen::default();
    cursor.object(|cursor, key| match key {
        b"id" => {
            seen.first(key)?;
            decoder.request.id = cursor.bytes()?.to_vec();
            Some(())
        }
        b"inputs" => {
            seen.first(key)?;
            cursor.array(|cursor| input(cursor, decoder))
        }
        b"outputs" => {
            seen.first(key)?;
            cursor.array(|cursor| output(cursor, decoder))
        }
        b"parameters" => {
            seen.first(key)?;
            cursor.object(|cursor, key| {
                (key == b"binary_data_output").then_some(())?;
                let kind = match cursor.boolean()? {
                    true => OutputKind::Binary,
                    false => OutputKind::Json,
                };
                once(&mut decoder.request.unlisted_kind, kind)
            })
        }
        _ => None,
    })?;
    cursor.whitespace();
    let whole = cursor.pos == header.len();
    let tail_taken = decoder.tail.len().is_none_or(|len| decoder.consumed == len);
    (whole && seen.has(b"inputs") && tail_taken).then_some(())
}

/// One input (module doc), its data the binary tail's next bytes.
fn input(cursor: &mut Cursor<'_>, decoder: &mut Decoder<'_>) -> Option<()> {
    let (mut name, mut datatype, mut rank, mut size) = (None, None, None, None);
    let mut dims = [0; MAX_RANK];
    let mut seen = Seen::default();
    cursor.object(|cursor, key| {
        seen.first(key)?;
        match key {
            b"name" => name = Some(cursor.string()?),
            b"datatype" => datatype = Some(cursor.string()?),
            b"shape" => {
                let mut read = 0;
                cursor.array(|cursor| {
                    *dims.get_mut(read)? = cursor.integer()?;
                    read += 1;
                    Some(())
                })?;
                rank = Some(read);
            }
            b"parameters" => cursor.object(|cursor, key| {
                (key == b"binary_data_size").then_some(())?;
                once(&mut size, cursor.integer()?)
            })?,
            _ => return None,
        }
        Some(())
    })?;
    let name = name?.to_string();
    let shape = shape_of(&dims[..rank?], &name).ok()?;
    if decoder.request.inputs.iter().any(|i| i.name == name) {
        return None;
    }
    let data = decoder.take_binary(&name, size?).ok()?;
    decoder.request.inputs.push(InputTensor {
        datatype: DeclaredType::read(datatype?),
        name,
        shape,
        data,
    });
    Some(())
}

/// One requested output (module doc).
fn output(cursor: &mut Cursor<'_>, decoder: &mut Decoder<'_>) -> Option<()> {
    let (mut name, mut binary) = (None, None);
    let mut seen = Seen::default();
    cursor.object(|cursor, key| {
        seen.first(key)?;
        match key {
            b"name" => name = Some(cursor.string()?),
            b"parameters" => cursor.object(|cursor, key| {
                (key == b"binary_data").then_some(())?;
                once(&mut binary, cursor.boolean()?)
            })?,
            _ => return None,
        }
        Some(())
    })?;
    let name = name?.to_string();
    if decoder.request.outputs.iter().any(|o| o.name == name) {
        return None;
    }
    decoder.request.outputs.push(RequestedOutput {
        name,
        classification: 0,
        kind: match binary {
            Some(true) => OutputKind::Binary,
            _ => OutputKind::Json,
        },
        shared_memory: None,
    });
    Some(())
}

/// Fills an empty `slot`; `None` when it was filled (a repeated member).
fn once<T>(slot: &mut Option<T>, value: T) -> Option<()> {
    slot.replace(value).is_none().then_some(())
}

/// The member names one object has had (each may come once); the subset's
/// objects have at most four.
#[derive(Default)]
struct Seen<'a>([&'a [u8]; 4], usize);

impl<'a> Seen<'a> {
    /// `None` when `key` came before (or a fifth key comes).
    fn first(&mut self, key: &'a [u8]) -> Option<()> {
        if self.has(key) || self.1 == self.0.len() {
            return None;
        }
        self.0[self.1] = key;
        self.1 += 1;
        Some(())
    }

    fn has(&self, key: &[u8]) -> bool {
        self.0[..self.1].contains(&key)
    }
}

/// The reader's place in the header.
struct Cursor<'a> {
    input: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    /// rapidjson's whitespace: space, tab, line feed, carriage return.
    fn whitespace(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.input.get(self.pos) {
            self.pos += 1;
        }
    }

    /// Whether the next token is `byte` (then taken).
    fn token(&mut self, byte: u8) -> bool {
        self.whitespace();
        let found = self.input.get(self.pos) == Some(&byte);
        self.pos += usize::from(found);
        found
    }

    /// An object, `member` called at each member's value with its name.
    fn object(&mut self, mut member: impl FnMut(&mut Self, &'a [u8]) -> Option<()>) -> Option<()> {
        self.token(b'{').then_some(())?;
        if self.token(b'}') {
            return Some(());
        }
        loop {
            let key = self.bytes()?;
            self.token(b':').then_some(())?;
            member(self, key)?;
            if !self.token(b',') {
                return self.token(b'}').then_some(());
            }
        }
    }

    /// An array, `element` called at each element.
    fn array(&mut self, mut element: impl FnMut(&mut Self) -> Option<()>) -> Option<()> {
        self.token(b'[').then_some(())?;
        if self.token(b']') {
            return Some(());
        }
        loop {
            element(self)?;
            if !self.token(b',') {
                return self.token(b']').then_some(());
            }
        }
    }

    /// A string of printable ASCII without escapes (module doc).
    fn bytes(&mut self) -> Option<&'a [u8]> {
        self.token(b'"').then_some(())?;
        let rest = &self.input[self.pos..];
        for (len, &byte) in rest.iter().enumerate() {
            match byte {
                b'"' => {
                    self.pos += len + 1;
                    return Some(&rest[..len]);
                }
                b'\\' => return None,
                b' '..=b'~' => {}
                _ => return None,
            }
        }
        None
    }

    /// [`Cursor::bytes`] as text: the text the general reader's lossy
    /// conversion gives.
    fn string(&mut self) -> Option<&'a str> {
        std::str::from_utf8(self.bytes()?).ok()
    }

    /// An integer of at most 18 digits (below 2^63: no overflow to
    /// check); a leading `0` is the whole number, as in JSON, so `01`
    /// declines at the `1` that follows it.
    fn integer(&mut self) -> Option<u64> {
        self.whitespace();
        let rest = &self.input[self.pos..];
        let digits = match rest.first()? {
            b'0' => 1,
            b'1'..=b'9' => rest.iter().take_while(|b| b.is_ascii_digit()).count(),
            _ => return None,
        };
        if digits > 18 {
            return None;
        }
        self.pos += digits;
        Some(
            rest[..digits]
                .iter()
                .fold(0, |n, &d| n * 10 + u64::from(d - b'0')),
        )
    }

    /// `true` or `false`.
    fn boolean(&mut self) -> Option<bool> {
        self.whitespace();
        let rest = &self.input[self.pos..];
        let (value, len) = match rest {
            [b't', b'r', b'u', b'e', ..] => (true, 4),
            [b'f', b'a', b'l', b's', b'e', ..] => (false, 5),
            _ => return None,
        };
        self.pos += len;
        Some(value)
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;
    use crate::error::Result;
    use crate::model::InferRequest;
    use crate::wire::fixtures::{mutations, xorshift};
    use crate::wire::v2_request::{decode_header, DecodeLimits, Readers, Tail};

    const LIMITS: DecodeLimits = DecodeLimits {
        max_input_size: 1 << 20,
        max_json_depth: 100,
    };

    /// perf_analyzer 2.41's header (2×16 FP32, as sent to Triton).
    const PERF_ANALYZER: &str = r#"{"id":"","inputs":[{"name":"INPUT0","datatype":"FP32","shape":[16],"parameters":{"binary_data_size":64}},{"name":"INPUT1","datatype":"FP32","shape":[16],"parameters":{"binary_data_size":64}}],"outputs":[{"name":"OUTPUT0","parameters":{"binary_data":true}},{"name":"OUTPUT1","parameters":{"binary_data":true}}]}"#;
    /// tritonclient.http 2.51's, no outputs listed.
    const TRITONCLIENT: &str = r#"{"inputs":[{"name":"INPUT0","shape":[1,16],"datatype":"FP32","parameters":{"binary_data_size":64}},{"name":"INPUT1","shape":[1,16],"datatype":"FP32","parameters":{"binary_data_size":64}}],"parameters":{"binary_data_output":true}}"#;

    /// The direct reader's request for `header`, or `None` where it declines.
    fn direct(header: &[u8], tail: Tail, limits: DecodeLimits) -> Option<InferRequest> {
        let mut decoder = Decoder::new("m", "1", tail, limits);
        read(header, &mut decoder).map(|()| decoder.request)
    }

    fn general(header: &[u8], tail: Tail, limits: DecodeLimits) -> Result<InferRequest> {
        decode_header(Readers::General, "m", "1", header, tail, limits)
    }

    /// The tails a header is checked with: in hand (`len` bytes), or still
    /// coming (`len` declared, or not).
    fn tails(len: usize) -> [Tail; 3] {
        [
            Tail::Whole(Bytes::from(vec![7; len])),
            Tail::Coming(Some(len as u64)),
            Tail::Coming(None),
        ]
    }

    /// Whether the direct reader took `header` with a tail of `len`
    /// bytes; where it did, its request is the general reader's. Either
    /// way, decoding with both readers (the direct one declining
    /// half-way, say) answers as the general reader alone does.
    fn agrees(header: &[u8], len: usize) -> bool {
        let mut took = false;
        let text = String::from_utf8_lossy(header);
        for ((tail, again), both) in tails(len).into_iter().zip(tails(len)).zip(tails(len)) {
            let general = general(header, again, LIMITS);
            if let Some(request) = direct(header, tail, LIMITS) {
                assert_eq!(Ok(request), general, "{text} ({len})");
                took = true;
            }
            let both = decode_header(Readers::Both, "m", "1", header, both, LIMITS);
            assert_eq!(both, general, "{text} ({len})");
        }
        took
    }

    #[test]
    fn the_clients_headers_are_read_as_the_general_reader_reads_them() {
        for header in [PERF_ANALYZER, TRITONCLIENT] {
            assert!(agrees(header.as_bytes(), 128), "{header}");
            // A tail of another length is the general reader's to refuse.
            for len in [127, 129] {
                let tail = Tail::Whole(Bytes::from(vec![0; len]));
                assert_eq!(direct(header.as_bytes(), tail, LIMITS), None);
            }
        }
        let shallow = DecodeLimits {
            max_json_depth: DEPTH - 1,
            ..LIMITS
        };
        let tail = Tail::Coming(None);
        assert_eq!(direct(PERF_ANALYZER.as_bytes(), tail, shallow), None);
    }

    /// A random header near the subset: members in any order, some
    /// outside the subset, repeated names, shapes that overflow, sizes
    /// and datatypes of every kind, whitespace; and its tail's length.
    fn header(st: &mut u64) -> (String, usize) {
        let mut inputs = Vec::new();
        let mut tail = 0;
        for _ in 0..pick(st, &["0", "1", "2", "2", "3"]).parse().unwrap_or(0) {
            let size = pick(
                st,
                &[
                    "0",
                    "4",
                    "64",
                    "64",
                    "64",
                    "64",
                    "1000000000000000000",
                    "07",
                ],
            );
            tail += size.parse::<usize>().unwrap_or(0).min(256);
            let mut members = vec![
                format!(
                    r#""name":"{}""#,
                    pick(
                        st,
                        &["INPUT0", "INPUT1", "INPUT2", "INPUT3", "INPUT1", "", "a b~"]
                    )
                ),
                format!(
                    r#""datatype":"{}""#,
                    pick(st, &["FP32", "FP32", "BYTES", "INT8", "fp32", "X"])
                ),
                format!(
                    r#""shape":[{}]"#,
                    pick(
                        st,
                        &[
                            "16",
                            "16",
                            "1,16",
                            "1,16",
                            "",
                            "0",
                            "1, 2 ,3",
                            "9223372036854775808",
                            "4294967296,4294967296",
                            "1,1,1,1,1,1,1,2",
                            "1,1,1,1,1,1,1,1,1",
                            "-1",
                            "1.0"
                        ],
                    )
                ),
                format!(
                    r#""parameters":{}"#,
                    pick(
                        st,
                        &[
                            &format!(r#"{{"binary_data_size":{size}}}"#),
                            &format!(r#"{{"binary_data_size":{size}}}"#),
                            &format!(r#"{{"binary_data_size":{size}}}"#),
                            &format!(r#"{{"binary_data_size":{size}}}"#),
                            &format!(r#"{{"binary_data_size":{size}}}"#),
                            &format!(r#"{{ "binary_data_size" : {size} }}"#),
                            "{}",
                            r#"{"binary_data_size":4,"x":1}"#,
                            r#"{"shared_memory_region":"r"}"#,
                        ]
                    )
                ),
            ];
            members.extend(
                [r#""data":[1,2]"#, r#""x":null"#, r#""name":"B""#]
                    .into_iter()
                    .filter(|_| xorshift(st).is_multiple_of(16))
                    .map(String::from),
            );
            inputs.push(object(members, st));
        }
        let mut root = vec![format!("\"inputs\":[{}]", inputs.join(","))];
        let outputs: Vec<String> = (0..xorshift(st) % 3)
            .map(|_| {
                let name = format!(
                    r#""name":"{}""#,
                    pick(st, &["OUTPUT0", "OUTPUT1", "OUTPUT2", "OUTPUT1"])
                );
                let params = pick(
                    st,
                    &[
                        r#""parameters":{"binary_data":true}"#,
                        r#""parameters":{"binary_data":true}"#,
                        r#""parameters":{"binary_data":false}"#,
                        r#""parameters":{}"#,
                        r#""parameters":{"binary_data":1}"#,
                        r#""parameters":{"classification":2}"#,
                        r#""parameters":{"binary_data":true,"binary_data":false}"#,
                        "",
                    ],
                );
                let members = [name, params]
                    .into_iter()
                    .filter(|m| !m.is_empty())
                    .collect();
                object(members, st)
            })
            .collect();
        // Each with one chance in the number beside it.
        let extras = [
            (format!("\"outputs\":[{}]", outputs.join(",")), 2),
            (r#""id":"42""#.to_string(), 3),
            (r#""id":"""#.to_string(), 6),
            (r#""parameters":{"binary_data_output":true}"#.to_string(), 3),
            (
                r#""parameters":{"binary_data_output":false}"#.to_string(),
                6,
            ),
            (
                r#""parameters":{"binary_data_output":false,"priority":1}"#.to_string(),
                12,
            ),
            (r#""model_name":"m""#.to_string(), 12),
            (r#""inputs":[]"#.to_string(), 12),
        ];
        root.extend(
            extras
                .into_iter()
                .filter(|(_, chance)| xorshift(st).is_multiple_of(*chance))
                .map(|(member, _)| member),
        );
        (object(root, st), tail)
    }

    fn pick(st: &mut u64, options: &[&str]) -> String {
        options[(xorshift(st) % options.len() as u64) as usize].to_string()
    }

    /// `{...}` of `members` shuffled, with whitespace between some tokens.
    fn object(mut members: Vec<String>, st: &mut u64) -> String {
        for i in (1..members.len()).rev() {
            members.swap(i, (xorshift(st) % (i as u64 + 1)) as usize);
        }
        let space = |st: &mut u64| ["", "", "", " ", "\n\t"][(xorshift(st) % 5) as usize];
        let members: Vec<String> = members
            .iter()
            .map(|m| {
                format!(
                    "{}{}",
                    space(st),
                    m.replacen(':', &format!("{}:{}", space(st), space(st)), 1)
                )
            })
            .collect();
        format!("{{{}{}}}", members.join(","), space(st))
    }

    /// The two readers over generated headers and byte mutations of them
    /// (the fuzz target `v2_request` does the same over its corpus).
    #[test]
    fn where_the_direct_reader_reads_it_builds_what_the_general_reader_builds() {
        let mut st = 0x2545_F491_4F6C_DD1D_u64;
        let generated: Vec<(String, usize)> = (0..3000).map(|_| header(&mut st)).collect();
        let took = generated
            .iter()
            .filter(|(h, len)| agrees(h.as_bytes(), *len))
            .count();
        // Enough of them valid and in the subset for the check to mean something.
        assert!(took > generated.len() / 10, "{took} of {}", generated.len());
        let seeds: Vec<&[u8]> = [PERF_ANALYZER, TRITONCLIENT]
            .into_iter()
            .chain(
                generated
                    .iter()
                    .filter(|(_, len)| *len == 128)
                    .take(200)
                    .map(|(h, _)| h.as_str()),
            )
            .map(str::as_bytes)
            .collect();
        let mut mutated_took = 0;
        mutations(&seeds, 10_000, |header| {
            mutated_took += usize::from(agrees(header, 128));
        });
        // Most mutations break the JSON; some keep it in the subset.
        assert!(mutated_took > 20, "{mutated_took}");
    }
}
