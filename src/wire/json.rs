//! rapidjson-compatible JSON parser (DOM) for Triton's HTTP request headers.
//!
//! Triton 2.51 parses the JSON inference header with
//! `Document::Parse<kParseNanAndInfFlag>(base, size)` of **rapidjson 1.1.0** (the
//! Ubuntu/Debian `rapidjson-dev` package, `1.1.0+dfsg2`). This module reproduces that
//! parser byte for byte where a client can notice: which inputs are accepted, the DOM
//! that results (including how numbers are classified and converted), and the error
//! message and byte offset of every rejection. It is pure (no I/O) and iterative (no
//! native recursion, so arbitrarily deep input cannot overflow the stack).
//!
//! Behaviour reproduced from rapidjson 1.1.0 (`reader.h`, `encodedstream.h`,
//! `memorystream.h`, `internal/strtod.h`, `error/en.h`), checked against the real library:
//!
//! * **NUL-terminated view.** rapidjson reads a `MemoryStream` whose `Peek()` returns `'\0'`
//!   at the end, and it never consumes a `'\0'`; so a NUL byte behaves exactly like the end
//!   of the input: `{"a":1}\0garbage` parses (trailing data after the NUL is ignored), a
//!   NUL inside a string is "Missing a closing quotation mark in string.", a NUL where a
//!   value is expected is "Invalid value.", a NUL right at the start is "The document is
//!   empty.".
//! * **BOM.** The UTF-8 `MemoryStream` wrapper skips a leading `EF`, then a `BB`, then a
//!   `BF`, each one only if present (so a lone leading `BB` is skipped too). Offsets still
//!   count the skipped bytes.
//! * **Whitespace** is exactly space, `\t`, `\n`, `\r`. No comments, no trailing commas.
//! * **Strings** are not UTF-8 validated: raw bytes >= 0x80 are copied verbatim. Raw
//!   control characters (< 0x20) are rejected with "Invalid escape character in string."
//!   at the control character's offset (this does not depend on
//!   `kParseValidateEncodingFlag`). Escape and `\u` errors are reported at the offset of the
//!   backslash that starts the escape (for a surrogate pair: of the first `\u`). A lone low
//!   surrogate (`\uDC00`..`\uDFFF`) is accepted and encoded as 3 bytes (CESU-style); a high
//!   surrogate must be followed by `\u` + a low surrogate.
//! * **Numbers** (`ParseNumber` without `kParseFullPrecisionFlag`, 64-bit build):
//!   - an integer literal without fraction/exponent is an unsigned integer if it fits
//!     `u64`, a signed one if negative and it fits `i64` (`-0` is the integer 0, i.e.
//!     [`Value::Uint`]`(0)`: rapidjson stores it as `Int(0)`, which also answers
//!     `IsUint64`); larger integers become doubles;
//!   - doubles use rapidjson's "normal precision" conversion, reproduced operation by
//!     operation in IEEE double arithmetic: significand accumulated as `u64` while it is
//!     below 2^53, then as `d = d * 10 + digit` for at most 17 significant digits (further
//!     fraction digits are ignored), then one multiplication or division by an exact power
//!     of ten from a table `1e0..1e308` (two steps below `1e-308`). This is **not**
//!     always the correctly rounded value: about a quarter of random 16-17 digit literals
//!     come out one ulp away from Rust's `str::parse` (`-906545.7626021169` becomes the
//!     double that prints as `-906545.7626021168`). Triton stores exactly these values,
//!     so this module deliberately does not use a correctly rounding parser. The port
//!     assumes Triton's x86-64 build, where `d * 10 + digit` is two rounded operations
//!     (no FMA contraction), as in Rust; an aarch64 build of the C++ code could fuse them
//!     and differ in the last bit in rare cases;
//!   - `NaN`, `Inf`, `Infinity`, `-Inf`, `-Infinity` are accepted (`-NaN` too, giving a
//!     positive quiet NaN), with rapidjson's exact matching quirks (e.g. `NaInf` is
//!     `+Infinity`); a fraction or exponent after them is parsed and replaces the value
//!     (`NaN.5` is 0.5), as rapidjson does;
//!   - a positive exponent beyond `308 - fraction digits` is "Number too big to be stored
//!     in double." at the number's start offset (even for `0e400`); an integer literal of
//!     more than ~309 digits likewise. `10e308` and friends give `inf`, as in rapidjson.
//!   - A negative exponent with billions of digits or > 2^31 fraction digits would
//!     overflow a C++ `int` in rapidjson (undefined behaviour); here the arithmetic is
//!     done in `i64`, which yields 0 for such absurd inputs.
//! * **Objects** keep every member in document order, duplicates included; [`Value::get`]
//!   returns the first one, like rapidjson's `FindMember`.
//!
//! **Depth limit (gateway addition).** rapidjson 1.1.0 recurses without a limit (Triton
//! 2.51 can overflow its stack on very deep input). [`parse`] rejects nesting deeper than
//! `max_depth` with [`ParseError::TooDeep`]: the root array/object is depth 1, so with
//! `max_depth == 100` one hundred nested arrays parse and the 101st opening bracket fails,
//! at the moment it is read (a syntax error later in the input is not reported then).
//! Scalars do not count. Later Triton releases instead limit only the nesting below an
//! input's `data` while flattening it (`JSON nesting depth exceeds maximum allowed limit
//! (100)` as soon as a leaf or an array sits 100 levels below `data` itself), which
//! callers may want to mirror separately. `max_depth` also bounds the native recursion of
//! `Value`'s derived `Drop`, `Clone`, `PartialEq` and `Debug`, so keep it modest (a few
//! thousand at most).
//!
//! **Sinks.** The parser knows no schema. A caller that wants some arrays' numbers in
//! another form than a DOM (a v2 request's tensor `data`, module
//! `v2_request::tensor_sink`) passes a [`Sink`] to [`parse_with`]. The contract:
//!
//! * the parser offers the sink every non-empty array at its `[`, with the containers
//!   around it ([`Path`]), and reads each array once, front to back: it never goes back;
//! * an array the sink takes has its number elements handed to the sink as they are
//!   read ([`Sink::number`]), or read by the sink itself straight from the input
//!   ([`Sink::run`], which must read a literal as the parser would); once it closes,
//!   the DOM keeps, in its place, the bytes the sink made of them ([`Array::sink_bytes`]);
//! * at an element the sink refuses, or one that is not a number, the sink gives back
//!   the elements it took as values ([`Sink::spill`]) and the parser goes on reading the
//!   array as plain values after them;
//! * everything else is [`parse`]'s: the same grammar is read position for position, so
//!   every error (text and offset) and every value outside the taken arrays is the one
//!   [`parse`] gives (`tests::a_sink_changes_no_error_and_no_other_value`).

use std::convert::Infallible;
use std::fmt;

use bytes::Bytes;

use crate::wire::json_decimal::{digit_run_value, POW10, TENS};
pub(crate) use crate::wire::json_value::Number;
pub use crate::wire::json_value::{Array, Value};

/// Default nesting limit used by the gateway (the root container is depth 1).
pub const MAX_DEPTH: usize = 100;

/// Why [`parse`] rejected its input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParseError {
    /// rapidjson error: `message` is rapidjson's English text (GetParseError_En), `offset`
    /// its byte offset.
    Syntax {
        /// rapidjson's `GetParseError_En` text.
        message: &'static str,
        /// rapidjson's `GetErrorOffset`.
        offset: usize,
    },
    /// Nesting deeper than the limit.
    TooDeep {
        /// The limit that was exceeded.
        limit: usize,
    },
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParseError::Syntax { message, offset } => write!(
                f,
                "failed to parse the request JSON buffer: {message} at {offset}"
            ),
            ParseError::TooDeep { limit } => write!(
                f,
                "JSON nesting depth exceeds maximum allowed limit ({limit})"
            ),
        }
    }
}

impl std::error::Error for ParseError {}

// rapidjson 1.1.0 `GetParseError_En` texts for the errors this parser can raise.
const DOCUMENT_EMPTY: &str = "The document is empty.";
const ROOT_NOT_SINGULAR: &str = "The document root must not be followed by other values.";
const VALUE_INVALID: &str = "Invalid value.";
const OBJECT_MISS_NAME: &str = "Missing a name for object member.";
const OBJECT_MISS_COLON: &str = "Missing a colon after a name of object member.";
const OBJECT_MISS_COMMA_OR_CURLY: &str = "Missing a comma or '}' after an object member.";
const ARRAY_MISS_COMMA_OR_SQUARE: &str = "Missing a comma or ']' after an array element.";
const STRING_UNICODE_ESCAPE_INVALID_HEX: &str = "Incorrect hex digit after \\u escape in string.";
const STRING_UNICODE_SURROGATE_INVALID: &str = "The surrogate pair in string is invalid.";
const STRING_ESCAPE_INVALID: &str = "Invalid escape character in string.";
const STRING_MISS_QUOTATION_MARK: &str = "Missing a closing quotation mark in string.";
const NUMBER_TOO_BIG: &str = "Number too big to be stored in double.";
const NUMBER_MISS_FRACTION: &str = "Miss fraction part in number.";
const NUMBER_MISS_EXPONENT: &str = "Miss exponent in number.";

/// Parses `input` like Triton 2.51 (rapidjson 1.1.0, `kParseNanAndInfFlag`), rejecting
/// containers nested deeper than `max_depth` (root container = depth 1).
pub fn parse(input: &[u8], max_depth: usize) -> Result<Value, ParseError> {
    parse_with(input, max_depth, &mut Plain)
}

/// [`parse`], offering every non-empty array to `sink` (module doc, "Sinks").
pub(crate) fn parse_with<S: Sink>(
    input: &[u8],
    max_depth: usize,
    sink: &mut S,
) -> Result<Value, ParseError> {
    Parser::new(input, sink).document(max_depth)
}

/// Takes the elements of the arrays it chooses while the parser reads them.
///
/// The parser calls it from its hot loop with static dispatch (a generic
/// parameter, so each sink gets its own copy of the loop): keep the
/// per-element methods small and `#[inline(always)]`.
pub(crate) trait Sink {
    /// What the sink keeps while it takes one array's elements.
    type Array;

    /// At the `[` of a non-empty array inside `path`: `Some` to take its
    /// elements. `rest` is the input after the `[` (an array cannot have
    /// more elements than half its length, plus one).
    fn open(&mut self, path: Path<'_>, rest: &[u8]) -> Option<Self::Array>;

    /// An element that is a number: `false` (the sink wrote nothing of it)
    /// refuses it, and with it the rest of the array ([`Sink::spill`]).
    fn number(&mut self, array: &mut Self::Array, n: Number) -> bool;

    /// Elements the sink reads itself, straight from the input: `input[pos..]`
    /// starts with an element. It may read number literals, each one the
    /// parser would read with the value the parser would give, and the
    /// single `,` between two of them; where it stopped is the [`Run`].
    #[inline(always)]
    fn run(&mut self, array: &mut Self::Array, input: &[u8], pos: usize) -> Run {
        let _ = (array, input);
        Run::AtElement(pos)
    }

    /// The array closed: the bytes the DOM keeps in its place.
    fn close(&mut self, array: Self::Array) -> Bytes;

    /// The sink refused an element, or met one that is not a number: the
    /// elements it took, as the values the DOM keeps for them (the parser
    /// appends the rest of the array as it reads it). A sink that gives back
    /// the numbers it was handed leaves the document exactly as [`parse`]'s.
    fn spill(&mut self, array: Self::Array) -> Array;
}

/// Where [`Sink::run`] stopped (an offset into the input).
pub(crate) enum Run {
    /// Just after an element: its separator or the `]` comes next.
    AfterElement(usize),
    /// At the first byte of an element it leaves to the parser (where it
    /// started, if it read none).
    AtElement(usize),
}

/// The sink of [`parse`]: takes no array.
struct Plain;

impl Sink for Plain {
    type Array = Infallible;

    #[inline(always)]
    fn open(&mut self, _: Path<'_>, _: &[u8]) -> Option<Infallible> {
        None
    }

    fn number(&mut self, array: &mut Infallible, _: Number) -> bool {
        match *array {}
    }

    fn close(&mut self, array: Infallible) -> Bytes {
        match array {}
    }

    fn spill(&mut self, array: Infallible) -> Array {
        match array {}
    }
}

/// The containers open around an array a [`Sink`] is offered, outermost
/// first, as read so far.
#[derive(Clone, Copy)]
pub(crate) struct Path<'p>(&'p [Frame]);

/// One container of a [`Path`].
pub(crate) enum Container<'p> {
    /// An array.
    Array,
    /// An object: its members so far, and the name of the member being read.
    Object {
        members: &'p [(Vec<u8>, Value)],
        key: &'p [u8],
    },
}

impl<'p> Path<'p> {
    /// The containers, outermost first.
    pub(crate) fn containers(self) -> impl ExactSizeIterator<Item = Container<'p>> {
        self.0.iter().map(|frame| match frame {
            Frame::Array(_) => Container::Array,
            Frame::Object { members, key } => Container::Object { members, key },
        })
    }
}

/// An open container while parsing iteratively, owning the entries read so far (a
/// growing `Vec` per container, never copied once more at the end; number arrays
/// grow 8 bytes per element, see [`Array`]).
enum Frame {
    Array(Array),
    Object {
        members: Vec<(Vec<u8>, Value)>,
        key: Vec<u8>,
    },
}

struct Parser<'a, 's, S> {
    s: &'a [u8],
    /// Invariant: `pos <= s.len()`; it only advances past a byte that was peeked non-NUL.
    pos: usize,
    sink: &'s mut S,
}

#[inline]
fn syntax(message: &'static str, offset: usize) -> ParseError {
    ParseError::Syntax { message, offset }
}

impl<'a, 's, S: Sink> Parser<'a, 's, S> {
    fn new(input: &'a [u8], sink: &'s mut S) -> Self {
        let mut p = Parser {
            s: input,
            pos: 0,
            sink,
        };
        // EncodedInputStream<UTF8<>, MemoryStream>: each BOM byte skipped independently.
        for bom in [0xEF, 0xBB, 0xBF] {
            if p.peek() == bom {
                p.pos += 1;
            }
        }
        p
    }

    /// rapidjson `MemoryStream::Peek`: `'\0'` at the end.
    #[inline(always)]
    fn peek(&self) -> u8 {
        match self.s.get(self.pos) {
            Some(&b) => b,
            None => 0,
        }
    }

    #[inline(always)]
    fn consume(&mut self, c: u8) -> bool {
        if self.peek() == c {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    #[inline(always)]
    fn skip_ws(&mut self) {
        while let Some(&(b' ' | b'\n' | b'\r' | b'\t')) = self.s.get(self.pos) {
            self.pos += 1;
        }
    }

    fn err<T>(&self, message: &'static str) -> Result<T, ParseError> {
        Err(syntax(message, self.pos))
    }

    fn document(&mut self, max_depth: usize) -> Result<Value, ParseError> {
        self.skip_ws();
        if self.peek() == 0 {
            return self.err(DOCUMENT_EMPTY);
        }
        let mut frames: Vec<Frame> = Vec::new();
        'value: loop {
            // Parse one value at `pos` (whitespace already skipped), or open a container.
            let mut v = match self.peek() {
                b'[' => {
                    if self.open(frames.len(), max_depth, b']')? {
                        Value::Array(Array::default())
                    } else {
                        let Some(array) = self.sink.open(Path(&frames), &self.s[self.pos..]) else {
                            frames.push(Frame::Array(Array::default()));
                            continue 'value;
                        };
                        match self.sunk(array, &mut frames)? {
                            Some(closed) => closed,
                            None => continue 'value,
                        }
                    }
                }
                b'{' => {
                    if self.open(frames.len(), max_depth, b'}')? {
                        Value::Object(Vec::new())
                    } else {
                        let key = self.member_name()?;
                        frames.push(Frame::Object {
                            members: Vec::new(),
                            key,
                        });
                        continue 'value;
                    }
                }
                b'n' => self.literal(b"ull", Value::Null)?,
                b't' => self.literal(b"rue", Value::Bool(true))?,
                b'f' => self.literal(b"alse", Value::Bool(false))?,
                b'"' => Value::String(self.string()?),
                // `number` is inlined (as a call it measured 40 % slower on
                // number arrays): here and in `sunk` only.
                _ => match (self.number()?, frames.last_mut()) {
                    // The hot loop of number arrays: a number goes into its
                    // array as it is read, never as a `Value`.
                    (n, Some(Frame::Array(items))) => {
                        items.push_number(n);
                        match self.after_element(&mut frames)? {
                            Some(closed) => closed,
                            None => continue 'value,
                        }
                    }
                    (n, _) => n.into(),
                },
            };
            // A value is complete: hand it to the enclosing container, closing as many
            // containers as the input closes.
            loop {
                match frames.last_mut() {
                    None => {
                        self.skip_ws();
                        if self.peek() != 0 {
                            return self.err(ROOT_NOT_SINGULAR);
                        }
                        return Ok(v);
                    }
                    Some(Frame::Array(items)) => {
                        items.push(v);
                        match self.after_element(&mut frames)? {
                            Some(closed) => v = closed,
                            None => continue 'value,
                        }
                    }
                    Some(Frame::Object { members, key }) => {
                        members.push((std::mem::take(key), v));
                        if self.after_member(b'}', OBJECT_MISS_COMMA_OR_CURLY)? {
                            *key = self.member_name()?;
                            continue 'value;
                        }
                        let members = std::mem::take(members);
                        frames.pop();
                        v = Value::Object(members);
                    }
                }
            }
        }
    }

    /// After an element was added to the innermost array: past the
    /// separator, `None` while the array goes on; `Some(array)` once it is
    /// closed (and popped).
    #[inline(always)]
    fn after_element(&mut self, frames: &mut Vec<Frame>) -> Result<Option<Value>, ParseError> {
        let Some(Frame::Array(items)) = frames.last_mut() else {
            return Ok(None);
        };
        if self.next_element()? {
            return Ok(None);
        }
        let items = std::mem::take(items);
        frames.pop();
        Ok(Some(Value::Array(items)))
    }

    /// After an array's element: past the separator and at the next element
    /// (`true`), or past the `]` (`false`).
    #[inline(always)]
    fn next_element(&mut self) -> Result<bool, ParseError> {
        // Number arrays: a `,` and the next number's first byte straight
        // after the element, without `after_member`'s whitespace steps.
        if let Some(&[b',', next]) = self.s.get(self.pos..self.pos + 2) {
            if next.is_ascii_digit() || next == b'-' {
                self.pos += 1;
                return Ok(true);
            }
        }
        self.after_member(b']', ARRAY_MISS_COMMA_OR_SQUARE)
    }

    /// Reads the elements of an array the sink took into its `array` (`pos`
    /// is at the first element): the array once it closes (`Some`), as
    /// [`Parser::after_element`] gives it. At an element the sink refuses, or
    /// one that is not a number, the array goes on as plain values from the
    /// ones the sink gives back ([`Sink::spill`]): pushed on `frames`, with
    /// `pos` at that element, or past it when it was a number (`None`, unless
    /// that number was the last).
    fn sunk(
        &mut self,
        mut array: S::Array,
        frames: &mut Vec<Frame>,
    ) -> Result<Option<Value>, ParseError> {
        loop {
            let at_element = match self.sink.run(&mut array, self.s, self.pos) {
                Run::AfterElement(end) => {
                    self.pos = end;
                    false
                }
                Run::AtElement(end) => {
                    self.pos = end;
                    true
                }
            };
            if at_element {
                if let b'[' | b'{' | b'"' | b'n' | b't' | b'f' = self.peek() {
                    frames.push(Frame::Array(self.sink.spill(array)));
                    return Ok(None);
                }
                let n = self.number()?;
                if !self.sink.number(&mut array, n) {
                    let mut items = self.sink.spill(array);
                    items.push_number(n);
                    frames.push(Frame::Array(items));
                    return self.after_element(frames);
                }
            }
            if !self.next_element()? {
                let bytes = self.sink.close(array);
                return Ok(Some(Value::Array(Array::from_sink(bytes))));
            }
        }
    }

    /// Past the `[` or `{` at `pos`, `depth` containers deep: the depth
    /// limit, `ws`, then `true` if `close` follows at once (an empty
    /// container; ParseArray's / ParseObject's prologue).
    #[inline]
    fn open(&mut self, depth: usize, max_depth: usize, close: u8) -> Result<bool, ParseError> {
        self.pos += 1;
        if depth >= max_depth {
            return Err(ParseError::TooDeep { limit: max_depth });
        }
        self.skip_ws();
        Ok(self.consume(close))
    }

    /// `ws` then `,` `ws` (another member follows: `true`) or `close` (the
    /// container ends: `false`); anything else is the `missing` error
    /// (ParseArray's / ParseObject's per-member epilogue).
    #[inline]
    fn after_member(&mut self, close: u8, missing: &'static str) -> Result<bool, ParseError> {
        self.skip_ws();
        match self.peek() {
            b',' => {
                self.pos += 1;
                self.skip_ws();
                Ok(true)
            }
            c if c == close => {
                self.pos += 1;
                Ok(false)
            }
            _ => self.err(missing),
        }
    }

    /// `"name"` `ws` `:` `ws` (ParseObject's per-member prologue).
    fn member_name(&mut self) -> Result<Vec<u8>, ParseError> {
        if self.peek() != b'"' {
            return self.err(OBJECT_MISS_NAME);
        }
        let key = self.string()?;
        self.skip_ws();
        if !self.consume(b':') {
            return self.err(OBJECT_MISS_COLON);
        }
        self.skip_ws();
        Ok(key)
    }

    /// `null` / `true` / `false` after the first letter: the error is at the first
    /// mismatching byte.
    fn literal(&mut self, rest: &[u8], v: Value) -> Result<Value, ParseError> {
        self.pos += 1;
        for &c in rest {
            if !self.consume(c) {
                return self.err(VALUE_INVALID);
            }
        }
        Ok(v)
    }

    /// ParseStringToStream without encoding validation. `pos` is at the opening quote.
    fn string(&mut self) -> Result<Vec<u8>, ParseError> {
        self.pos += 1;
        let mut out = Vec::new();
        loop {
            let rest = self.s.get(self.pos..).unwrap_or_default();
            let n = rest
                .iter()
                .position(|&b| b == b'"' || b == b'\\' || b < 0x20)
                .unwrap_or(rest.len());
            out.extend_from_slice(&rest[..n]);
            self.pos += n;
            match self.peek() {
                b'"' => {
                    self.pos += 1;
                    return Ok(out);
                }
                b'\\' => self.escape(&mut out)?,
                0 => return self.err(STRING_MISS_QUOTATION_MARK),
                _ => return self.err(STRING_ESCAPE_INVALID),
            }
        }
    }

    /// One escape sequence; `pos` is at the backslash, which is where errors are reported.
    fn escape(&mut self, out: &mut Vec<u8>) -> Result<(), ParseError> {
        let escape_offset = self.pos;
        self.pos += 1;
        let unescaped = match self.peek() {
            b'"' => b'"',
            b'\\' => b'\\',
            b'/' => b'/',
            b'b' => 0x08,
            b'f' => 0x0C,
            b'n' => b'\n',
            b'r' => b'\r',
            b't' => b'\t',
            b'u' => {
                self.pos += 1;
                let mut cp = self.hex4(escape_offset)?;
                if (0xD800..=0xDBFF).contains(&cp) {
                    if !(self.consume(b'\\') && self.consume(b'u')) {
                        return Err(syntax(STRING_UNICODE_SURROGATE_INVALID, escape_offset));
                    }
                    let low = self.hex4(escape_offset)?;
                    if !(0xDC00..=0xDFFF).contains(&low) {
                        return Err(syntax(STRING_UNICODE_SURROGATE_INVALID, escape_offset));
                    }
                    cp = (((cp - 0xD800) << 10) | (low - 0xDC00)) + 0x10000;
                }
                encode_utf8(cp, out);
                return Ok(());
            }
            _ => return Err(syntax(STRING_ESCAPE_INVALID, escape_offset)),
        };
        self.pos += 1;
        out.push(unescaped);
        Ok(())
    }

    fn hex4(&mut self, escape_offset: usize) -> Result<u32, ParseError> {
        let mut cp = 0u32;
        for _ in 0..4 {
            let c = self.peek();
            let digit = match c {
                b'0'..=b'9' => c - b'0',
                b'A'..=b'F' => c - b'A' + 10,
                b'a'..=b'f' => c - b'a' + 10,
                _ => return Err(syntax(STRING_UNICODE_ESCAPE_INVALID_HEX, escape_offset)),
            };
            cp = (cp << 4) | u32::from(digit);
            self.pos += 1;
        }
        Ok(cp)
    }

    #[inline(always)]
    fn digit(&self) -> Option<u8> {
        let c = self.peek();
        c.is_ascii_digit().then(|| c - b'0')
    }

    /// rapidjson 1.1.0 `ParseNumber` (NaN/Inf enabled, normal precision, 64-bit).
    #[inline(always)]
    fn number(&mut self) -> Result<Number, ParseError> {
        let start = self.pos;
        let minus = self.consume(b'-');

        // Integer part: zero / digit1-9 *DIGIT, first in 32 bits, then in 64 bits.
        let mut i: u32 = 0;
        let mut u: u64 = 0;
        let mut use64 = false;
        let mut significand_digits: i32 = 0;
        let mut d: f64 = 0.0;
        let mut nan_or_inf = false;
        let c = self.peek();
        if c == b'0' {
            self.pos += 1;
        } else if c.is_ascii_digit() {
            // Up to 8 digits at once: their value is below 10^8, so none of
            // the limit checks below could have fired for them; the loop
            // reads on from there in the same state.
            let (run, n) = eight_digits(&self.s[self.pos..], 1).unwrap_or((u32::from(c - b'0'), 1));
            i = run;
            self.pos += n;
            significand_digits += n as i32 - 1;
            // Switch to 64 bits before the value would exceed 2^31 (negative) / 2^32 - 1.
            let (limit, last) = if minus {
                (214_748_364, 8)
            } else {
                (429_496_729, 5)
            };
            while let Some(dg) = self.digit() {
                if i >= limit && (i != limit || dg > last) {
                    u = u64::from(i);
                    use64 = true;
                    break;
                }
                i = i * 10 + u32::from(dg);
                self.pos += 1;
                significand_digits += 1;
            }
        } else if c == b'I' || c == b'N' {
            nan_or_inf = true;
            if self.consume(b'N') && self.consume(b'a') && self.consume(b'N') {
                d = f64::NAN;
            } else if self.consume(b'I') && self.consume(b'n') && self.consume(b'f') {
                d = if minus {
                    f64::NEG_INFINITY
                } else {
                    f64::INFINITY
                };
                if self.peek() == b'i'
                    && !(self.consume(b'i')
                        && self.consume(b'n')
                        && self.consume(b'i')
                        && self.consume(b't')
                        && self.consume(b'y'))
                {
                    return self.err(VALUE_INVALID);
                }
            } else {
                return self.err(VALUE_INVALID);
            }
        } else {
            return self.err(VALUE_INVALID);
        }

        // 64-bit integer part; past 2^63 (negative) / 2^64 - 1 it continues as a double.
        let mut use_double = false;
        if use64 {
            let (limit, last) = if minus {
                (0x0CCC_CCCC_CCCC_CCCC_u64, 8)
            } else {
                (0x1999_9999_9999_9999_u64, 5)
            };
            while let Some(dg) = self.digit() {
                if u >= limit && (u != limit || dg > last) {
                    d = u as f64;
                    use_double = true;
                    break;
                }
                u = u * 10 + u64::from(dg);
                self.pos += 1;
                significand_digits += 1;
            }
        }
        if use_double {
            while let Some(dg) = self.digit() {
                if d >= 1.797_693_134_862_315_7e307 {
                    return Err(syntax(NUMBER_TOO_BIG, start));
                }
                d = d * 10.0 + f64::from(dg);
                self.pos += 1;
            }
        }

        // Fraction.
        let mut exp_frac: i64 = 0;
        // `262143.0`: a fraction of zeros that fit the u64 significand. The
        // division below would give exactly the integer part (`u` = whole ×
        // 10^k < 2^53, so u, 10^k and the quotient are exact doubles); it is
        // skipped because `divsd` dominates parsing such arrays.
        let mut integral: Option<u64> = None;
        if self.consume(b'.') {
            if self.digit().is_none() {
                return self.err(NUMBER_MISS_FRACTION);
            }
            if !use_double {
                if !use64 {
                    u = u64::from(i);
                }
                let whole = u;
                let mut zeros_only = true;
                // Long runs of digits (4 to 8) at once, while the significand
                // stays within 2^53 - 1 through the whole run (the loop's
                // check before each digit would pass for every one of them);
                // shorter ones, like the `0` of `262143.0`, cost less below
                // (the second digit is looked at first: measured, a whole word
                // for every `.0` cost 10 % of an integral array's parsing).
                while self.s.get(self.pos + 1).is_some_and(u8::is_ascii_digit) {
                    let Some((run, n)) = eight_digits(&self.s[self.pos..], 4) else {
                        break;
                    };
                    let Some(next) = u
                        .checked_mul(TENS[n])
                        .and_then(|scaled| scaled.checked_add(u64::from(run)))
                        .filter(|&next| next <= 0x1F_FFFF_FFFF_FFFF)
                    else {
                        break;
                    };
                    // Digits count once the significand is non-zero.
                    significand_digits += if u == 0 {
                        let zeros = self.s[self.pos..self.pos + n]
                            .iter()
                            .take_while(|&&b| b == b'0')
                            .count();
                        (n - zeros) as i32
                    } else {
                        n as i32
                    };
                    u = next;
                    zeros_only &= run == 0;
                    self.pos += n;
                    exp_frac -= n as i64;
                    if n < 8 {
                        break;
                    }
                }
                while let Some(dg) = self.digit() {
                    if u > 0x1F_FFFF_FFFF_FFFF {
                        break;
                    }
                    u = u * 10 + u64::from(dg);
                    zeros_only &= dg == 0;
                    self.pos += 1;
                    exp_frac -= 1;
                    if u != 0 {
                        significand_digits += 1;
                    }
                }
                d = u as f64;
                use_double = true;
                if zeros_only && u <= 1 << 53 && self.digit().is_none() {
                    integral = Some(whole);
                }
            }
            while let Some(dg) = self.digit() {
                if significand_digits < 17 {
                    d = d * 10.0 + f64::from(dg);
                    exp_frac -= 1;
                    if d > 0.0 {
                        significand_digits += 1;
                    }
                }
                self.pos += 1;
            }
        }

        // Exponent.
        let mut exp: i64 = 0;
        if self.consume(b'e') || self.consume(b'E') {
            if !use_double {
                d = if use64 { u as f64 } else { f64::from(i) };
                use_double = true;
            }
            let exp_minus = if self.consume(b'+') {
                false
            } else {
                self.consume(b'-')
            };
            let Some(first) = self.digit() else {
                return self.err(NUMBER_MISS_EXPONENT);
            };
            exp = i64::from(first);
            self.pos += 1;
            if exp_minus {
                while let Some(dg) = self.digit() {
                    exp = exp * 10 + i64::from(dg);
                    self.pos += 1;
                    if exp >= 214_748_364 {
                        // rapidjson stops accumulating and skips the remaining digits.
                        while self.digit().is_some() {
                            self.pos += 1;
                        }
                    }
                }
                exp = -exp;
            } else {
                let max_exp = 308 - exp_frac;
                while let Some(dg) = self.digit() {
                    exp = exp * 10 + i64::from(dg);
                    self.pos += 1;
                    if exp > max_exp {
                        return Err(syntax(NUMBER_TOO_BIG, start));
                    }
                }
            }
        }

        Ok(if use_double {
            let d = match integral {
                Some(whole) if exp == 0 => whole as f64,
                _ => strtod_normal_precision(d, exp + exp_frac),
            };
            Number::Double(if minus { -d } else { d })
        } else if nan_or_inf {
            Number::Double(d)
        } else if use64 {
            if minus {
                Number::Int((u as i64).wrapping_neg())
            } else {
                Number::Uint(u)
            }
        } else if minus && i != 0 {
            Number::Int(-i64::from(i))
        } else {
            // "-0" is rapidjson Int(0), which is also a Uint.
            Number::Uint(u64::from(i))
        })
    }
}

/// The run of decimal digits (at most 8) at the start of `s`, and its
/// value, read as one 64-bit word (SWAR); `None` when fewer than 8 bytes
/// are left (the byte loop reads those) or the run is shorter than `least`
/// (its value is then not worked out). Hand-written because the digits of
/// tensor data are most of a big JSON request: one word instead of a loop
/// step per digit (measured with `cargo bench --bench json`).
#[inline(always)]
fn eight_digits(s: &[u8], least: usize) -> Option<(u32, usize)> {
    let word: [u8; 8] = s.get(..8)?.try_into().ok()?;
    let x = u64::from_le_bytes(word);
    // Per byte, below the first non-digit (no borrow or carry reaches it):
    // `b - '0'` has its top bit set for b < '0' or b ≥ 0xB0, `b + 0x46`
    // for '9' < b < 0xBA.
    let values = x.wrapping_sub(0x3030_3030_3030_3030);
    let non_digits = (values | x.wrapping_add(0x4646_4646_4646_4646)) & 0x8080_8080_8080_8080;
    let n = (non_digits.trailing_zeros() / 8) as usize;
    if n == 0 || n < least {
        return None;
    }
    Some((digit_run_value(values, n), n))
}

/// rapidjson `UTF8::Encode` (no validation: a lone low surrogate becomes 3 bytes).
fn encode_utf8(cp: u32, out: &mut Vec<u8>) {
    if cp <= 0x7F {
        out.push(cp as u8);
    } else if cp <= 0x7FF {
        out.extend_from_slice(&[0xC0 | (cp >> 6) as u8, 0x80 | (cp & 0x3F) as u8]);
    } else if cp <= 0xFFFF {
        out.extend_from_slice(&[
            0xE0 | (cp >> 12) as u8,
            0x80 | ((cp >> 6) & 0x3F) as u8,
            0x80 | (cp & 0x3F) as u8,
        ]);
    } else {
        out.extend_from_slice(&[
            0xF0 | (cp >> 18) as u8,
            0x80 | ((cp >> 12) & 0x3F) as u8,
            0x80 | ((cp >> 6) & 0x3F) as u8,
            0x80 | (cp & 0x3F) as u8,
        ]);
    }
}

/// rapidjson `internal::FastPath`.
fn fast_path(significand: f64, exp: i64) -> f64 {
    if exp < -308 {
        0.0
    } else if exp >= 0 {
        match POW10.get(exp as usize) {
            Some(p) => significand * p,
            None => significand * f64::INFINITY, // unreachable: callers keep exp <= 308
        }
    } else {
        match POW10.get(exp.unsigned_abs() as usize) {
            Some(p) => significand / p,
            None => 0.0,
        }
    }
}

/// rapidjson `internal::StrtodNormalPrecision`.
fn strtod_normal_precision(d: f64, p: i64) -> f64 {
    if p < -308 {
        fast_path(fast_path(d, -308), p + 308)
    } else {
        fast_path(d, p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::fixtures::{mutations, records, unescape, xorshift, Escapes, Split};

    /// Reads the expected-DOM notation of parse_ok.txt (see its header).
    struct Expect<'a> {
        s: &'a [u8],
        i: usize,
    }

    impl Expect<'_> {
        fn value(&mut self) -> Value {
            let c = self.s[self.i];
            match c {
                b'n' => self.word("null", Value::Null),
                b't' => self.word("true", Value::Bool(true)),
                b'f' => self.word("false", Value::Bool(false)),
                b'u' | b'i' | b'd' => {
                    self.i += 1;
                    let start = self.i;
                    while self.i < self.s.len() && !b",]}".contains(&self.s[self.i]) {
                        self.i += 1;
                    }
                    let t = std::str::from_utf8(&self.s[start..self.i]).unwrap();
                    match c {
                        b'u' => Value::Uint(t.parse().unwrap()),
                        b'i' => Value::Int(t.parse().unwrap()),
                        _ => Value::Double(t.parse().unwrap()),
                    }
                }
                b'"' => Value::String(self.string()),
                b'[' => {
                    self.i += 1;
                    let mut v = Vec::new();
                    while self.s[self.i] != b']' {
                        v.push(self.value());
                        if self.s[self.i] == b',' {
                            self.i += 1;
                        }
                    }
                    self.i += 1;
                    Value::Array(v.into())
                }
                b'{' => {
                    self.i += 1;
                    let mut m = Vec::new();
                    while self.s[self.i] != b'}' {
                        let k = self.string();
                        assert_eq!(self.s[self.i], b':');
                        self.i += 1;
                        m.push((k, self.value()));
                        if self.s[self.i] == b',' {
                            self.i += 1;
                        }
                    }
                    self.i += 1;
                    Value::Object(m)
                }
                _ => panic!("bad expectation at {}", self.i),
            }
        }

        fn word(&mut self, w: &str, v: Value) -> Value {
            assert!(self.s[self.i..].starts_with(w.as_bytes()));
            self.i += w.len();
            v
        }

        fn string(&mut self) -> Vec<u8> {
            assert_eq!(self.s[self.i], b'"');
            self.i += 1;
            let mut out = Vec::new();
            loop {
                match self.s[self.i] {
                    b'"' => {
                        self.i += 1;
                        return out;
                    }
                    b'\\' if self.s[self.i + 1] == b'x' => {
                        let h = std::str::from_utf8(&self.s[self.i + 2..self.i + 4]).unwrap();
                        out.push(u8::from_str_radix(h, 16).unwrap());
                        self.i += 4;
                    }
                    b'\\' => {
                        out.push(self.s[self.i + 1]);
                        self.i += 2;
                    }
                    c => {
                        out.push(c);
                        self.i += 1;
                    }
                }
            }
        }
    }

    /// Structural equality with doubles compared bit for bit (NaN == NaN, 0.0 != -0.0);
    /// an array of `a` that a sink took (the tests' [`TakeBytes`]) is the array
    /// of its bytes as numbers.
    fn same(a: &Value, b: &Value) -> bool {
        match (a, b) {
            (Value::Double(x), Value::Double(y)) => x.to_bits() == y.to_bits(),
            (Value::Array(x), Value::Array(y)) => match x.sink_bytes() {
                Some(bytes) => {
                    let numbers: Vec<Value> =
                        bytes.iter().map(|&b| Value::Uint(b.into())).collect();
                    *y == Array::from(numbers)
                }
                None => x.len() == y.len() && x.iter().zip(y.iter()).all(|(x, y)| same(&x, &y)),
            },
            (Value::Object(x), Value::Object(y)) => {
                x.len() == y.len()
                    && x.iter()
                        .zip(y)
                        .all(|((kx, vx), (ky, vy))| kx == ky && same(vx, vy))
            }
            _ => a == b,
        }
    }

    #[test]
    fn parse_ok_fixtures() {
        let recs = records("json/parse_ok.txt", Split::First);
        assert!(recs.len() > 50);
        for (line, input, expected) in recs {
            let mut e = Expect {
                s: expected.as_bytes(),
                i: 0,
            };
            let want = e.value();
            assert_eq!(e.i, expected.len(), "line {line}: trailing expectation");
            match parse(&unescape(&input, Escapes::Hex), MAX_DEPTH) {
                Ok(got) => assert!(same(&got, &want), "line {line}: got {got:?}, want {want:?}"),
                Err(err) => panic!("line {line}: unexpected error {err}"),
            }
        }
    }

    #[test]
    fn parse_err_fixtures() {
        let recs = records("json/parse_err.txt", Split::First);
        assert!(recs.len() > 50);
        for (line, input, expected) in recs {
            match parse(&unescape(&input, Escapes::Hex), MAX_DEPTH) {
                Ok(v) => panic!("line {line}: parsed as {v:?}, want {expected}"),
                Err(err) => assert_eq!(err.to_string(), expected, "line {line}"),
            }
        }
    }

    /// `W.000…` takes a shortcut when all its digits fit the u64 significand
    /// below 2^53; the result must be what the division gives.
    #[test]
    fn zero_fractions_are_the_division_result() {
        let mut st = 0x2545_F491_4F6C_DD1D_u64;
        let mut shortcuts = 0;
        for n in 0..40_000u32 {
            let r = xorshift(&mut st);
            let whole = r >> (11 + n % 53);
            let zeros = 1 + (r % 17) as u32;
            let Some(u) = 10u64.checked_pow(zeros).and_then(|p| p.checked_mul(whole)) else {
                continue;
            };
            if u > 1 << 53 {
                continue; // the general path
            }
            shortcuts += 1;
            let want = strtod_normal_precision(u as f64, -i64::from(zeros));
            for (sign, want) in [("", want), ("-", -want)] {
                let text = format!("{sign}{whole}.{}", "0".repeat(zeros as usize));
                let Ok(Value::Double(got)) = parse(text.as_bytes(), 1) else {
                    panic!("{text}");
                };
                assert_eq!(got.to_bits(), want.to_bits(), "{text}");
            }
        }
        assert!(shortcuts > 10_000, "{shortcuts}");
    }

    #[test]
    fn eight_digits_reads_the_leading_run() {
        for text in [
            &b"12345678"[..],
            b"123456789",
            b"1234567,",
            b"7.0,8.0,",
            b"99999999",
            b"10000000",
            b"1/234567",
            b"1:234567",
            b"0\xb0\xba12345",
            b"5\xff\x00\x00\x00\x00\x00\x00",
            b"x1234567",
        ] {
            let run = text[..8].iter().take_while(|b| b.is_ascii_digit()).count();
            let value = text[..run]
                .iter()
                .fold(0u32, |v, d| v * 10 + u32::from(d - b'0'));
            let want = (run > 0).then_some((value, run));
            assert_eq!(eight_digits(text, 1), want, "{text:?}");
            assert_eq!(eight_digits(text, 4), want.filter(|_| run >= 4), "{text:?}");
        }
        assert_eq!(eight_digits(b"1234567", 1), None);
        // Every run length and digit, against the plain reading.
        let mut seed = 0x1234_5678_9abc_def0u64;
        for _ in 0..100_000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let bytes = seed.to_le_bytes().map(|b| match b % 3 {
                0 => b,
                _ => b'0' + b % 10,
            });
            let run = bytes.iter().take_while(|b| b.is_ascii_digit()).count();
            let value = bytes[..run]
                .iter()
                .fold(0u32, |v, d| v * 10 + u32::from(d - b'0'));
            let want = (run > 0).then_some((value, run));
            assert_eq!(eight_digits(&bytes, 1), want, "{bytes:?}");
        }
    }

    #[test]
    fn depth_limit() {
        let nest = |n: usize| {
            let mut s = "[".repeat(n);
            s.push_str(&"]".repeat(n));
            s.into_bytes()
        };
        assert!(parse(&nest(100), MAX_DEPTH).is_ok());
        assert_eq!(
            parse(&nest(101), MAX_DEPTH),
            Err(ParseError::TooDeep { limit: 100 })
        );
        assert_eq!(
            parse(&nest(101), MAX_DEPTH).unwrap_err().to_string(),
            "JSON nesting depth exceeds maximum allowed limit (100)"
        );
        let obj = |n: usize| {
            let mut s = "{\"a\":".repeat(n - 1);
            s.push_str("{}");
            s.push_str(&"}".repeat(n - 1));
            s.into_bytes()
        };
        assert!(parse(&obj(100), MAX_DEPTH).is_ok());
        assert_eq!(
            parse(&obj(101), MAX_DEPTH),
            Err(ParseError::TooDeep { limit: 100 })
        );
        assert!(parse(b"1", 0).is_ok());
        assert_eq!(parse(b"[]", 0), Err(ParseError::TooDeep { limit: 0 }));
        // 1 MB of '[': rejected by the limit, and without a limit no stack overflow.
        let deep = vec![b'['; 1 << 20];
        assert_eq!(
            parse(&deep, MAX_DEPTH),
            Err(ParseError::TooDeep { limit: 100 })
        );
        assert_eq!(
            parse(&deep, usize::MAX),
            Err(ParseError::Syntax {
                message: VALUE_INVALID,
                offset: 1 << 20
            })
        );
        // A large limit works too (the parser is iterative); keep it moderate because
        // the derived Drop/Clone/PartialEq/Debug of `Value` recurse per nesting level.
        assert!(parse(&nest(2_000), 2_000).is_ok());
    }

    #[test]
    fn accessors() {
        let v = parse(
            br#"{"a":1,"a":2,"n":-3,"big":18446744073709551615,"d":8.0,"s":"x","b":true,"z":null,"l":[1]}"#,
            MAX_DEPTH,
        )
        .unwrap();
        assert_eq!(v.get("a"), Some(&Value::Uint(1)));
        assert_eq!(v.get("missing"), None);
        assert_eq!(v.get("n").and_then(Value::as_i64), Some(-3));
        assert_eq!(v.get("n").and_then(Value::as_u64), None);
        assert_eq!(v.get("n").and_then(Value::as_f64), Some(-3.0));
        assert_eq!(v.get("big").and_then(Value::as_u64), Some(u64::MAX));
        assert_eq!(v.get("big").and_then(Value::as_i64), None);
        assert_eq!(v.get("big").and_then(Value::as_f64), Some(u64::MAX as f64));
        assert_eq!(v.get("a").and_then(Value::as_i64), Some(1));
        assert_eq!(v.get("d").and_then(Value::as_u64), None);
        assert_eq!(v.get("d").and_then(Value::as_i64), None);
        assert_eq!(v.get("d").and_then(Value::as_f64), Some(8.0));
        assert_eq!(v.get("s").and_then(Value::as_bytes), Some(&b"x"[..]));
        assert_eq!(v.get("s").and_then(Value::as_f64), None);
        assert_eq!(v.get("b").and_then(Value::as_bool), Some(true));
        assert_eq!(v.get("z").map(Value::type_name), Some("null"));
        assert_eq!(
            v.get("l").and_then(Value::as_array).map(Array::len),
            Some(1)
        );
        assert_eq!(v.as_object().map(<[_]>::len), Some(9));
        assert_eq!(v.get("l").and_then(|l| l.get("a")), None);
        let i = parse(b"[9223372036854775807,9223372036854775808]", MAX_DEPTH).unwrap();
        let i: Vec<_> = i.as_array().unwrap().iter().collect();
        assert_eq!(i[0].as_i64(), Some(i64::MAX));
        assert_eq!(i[1].as_i64(), None);
        assert_eq!(i[1].as_u64(), Some(1 << 63));
    }

    #[test]
    fn error_display() {
        let e = parse(b"", MAX_DEPTH).unwrap_err();
        assert_eq!(
            e.to_string(),
            "failed to parse the request JSON buffer: The document is empty. at 0"
        );
    }

    #[test]
    fn no_panic_on_mutations() {
        let seeds: [&[u8]; 6] = [
            br#"{"id":"a\u00e9\ud83d\ude00","inputs":[{"name":"I","shape":[2],"data":[1.5e3,-2]}]}"#,
            b"[NaN,-Infinity,Inf,1e308,-0,0.000001,18446744073709551616]",
            br#"{"a":[true,false,null,"\n\\\/"],"b":{}}"#,
            b"\xEF\xBB\xBF[1]\x00x",
            b"-1234567890123456789012345678901234567890.5e-400",
            br#""\uD800\uDC00\uDBFF\uDFFF\u0000""#,
        ];
        mutations(&seeds, 20_000, |input| {
            let _ = parse(input, MAX_DEPTH);
            let _ = parse(input, 2);
        });
    }

    /// A sink for the tests: takes the arrays that are the value of a
    /// member named `take`, numbers 0 to 255 as one byte each (it refuses
    /// any other, and gives the bytes back as the numbers they were), and
    /// reads single-digit elements itself. Counts the arrays it gave back.
    #[derive(Default)]
    struct TakeBytes {
        spilled: usize,
    }

    impl Sink for TakeBytes {
        type Array = Vec<u8>;

        fn open(&mut self, path: Path<'_>, _: &[u8]) -> Option<Vec<u8>> {
            match path.containers().last()? {
                Container::Object { key: b"take", .. } => Some(Vec::new()),
                _ => None,
            }
        }

        fn number(&mut self, array: &mut Vec<u8>, n: Number) -> bool {
            match n {
                Number::Uint(u) => u8::try_from(u).map(|b| array.push(b)).is_ok(),
                _ => false,
            }
        }

        fn run(&mut self, array: &mut Vec<u8>, input: &[u8], mut pos: usize) -> Run {
            let single = |at: usize| match input.get(at..at + 2) {
                Some(&[d, next]) => {
                    d.is_ascii_digit() && !(next.is_ascii_digit() || b".eE".contains(&next))
                }
                _ => false,
            };
            while single(pos) {
                array.push(input[pos] - b'0');
                pos += 1;
                if input[pos] != b',' || !input.get(pos + 1).is_some_and(u8::is_ascii_digit) {
                    return Run::AfterElement(pos);
                }
                pos += 1;
            }
            Run::AtElement(pos)
        }

        fn close(&mut self, array: Vec<u8>) -> Bytes {
            Bytes::from(array)
        }

        fn spill(&mut self, array: Vec<u8>) -> Array {
            self.spilled += 1;
            let numbers: Vec<Value> = array.iter().map(|&b| Value::Uint(b.into())).collect();
            Array::from(numbers)
        }
    }

    #[test]
    fn a_sink_takes_the_arrays_it_chooses_while_they_are_plain_numbers() {
        let text = br#"{"take":[1,2,300],"b":{"take":[1,[2]]},"take":[5,6 ,17,8],"c":[{"take":[]}],"take":[1,"x"]}"#;
        let mut sink = TakeBytes::default();
        let sunk = parse_with(text, MAX_DEPTH, &mut sink).unwrap();
        let plain = parse(text, MAX_DEPTH).unwrap();
        // `[1,2,300]`, `[1,[2]]` and `[1,"x"]` went on from the bytes given back.
        assert_eq!(sink.spilled, 3);
        let taken: Vec<_> = sunk
            .as_object()
            .unwrap()
            .iter()
            .filter_map(|(_, v)| v.as_array()?.sink_bytes())
            .collect();
        assert_eq!(taken, [&Bytes::from_static(&[5, 6, 17, 8])]);
        assert!(same(&sunk, &plain));
        assert_ne!(sunk, plain);
    }

    /// Whatever the input, a sink changes nothing but the arrays it took:
    /// every error (text and offset) and every other value is [`parse`]'s.
    #[test]
    fn a_sink_changes_no_error_and_no_other_value() {
        let seeds: [&[u8]; 4] = [
            br#"{"take":[1,2,3,4,5,6,7,8,9],"x":[1,2]}"#,
            br#"[{"take":[255,0,17,1e2,-0]},{"take":[[1],2]}]"#,
            br#"{"take":[1, 2 ,3,"a",null],"take":[7,8,9,10,11]}"#,
            br#"{"a":{"take":[0,1]},"take":{"take":[9,NaN]}}"#,
        ];
        let (mut taken, mut sink) = (0, TakeBytes::default());
        mutations(&seeds, 20_000, |input| {
            for depth in [MAX_DEPTH, 2] {
                let plain = parse(input, depth);
                match (parse_with(input, depth, &mut sink), &plain) {
                    (Ok(sunk), Ok(plain)) => {
                        assert!(same(&sunk, plain), "{input:?}");
                        taken += usize::from(sunk != *plain);
                    }
                    (sunk, plain) => assert_eq!(sunk.as_ref().err(), plain.as_ref().err()),
                }
            }
        });
        assert!(taken > 1_000, "{taken}");
        assert!(sink.spilled > 1_000, "{}", sink.spilled);
    }
}
