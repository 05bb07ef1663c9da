//! The `/infer` request's tensor sink (module `json`, "Sinks"): the `data`
//! array of each `inputs` entry whose numeric `datatype` member comes
//! before it is written straight into little-endian tensor bytes while the
//! parser reads it (module `narrow`'s rules: 4 bytes per FP32 element, no
//! DOM of numbers and no second pass), room reserved for what its `shape`
//! declares but never more than the rest of the input can hold. At an
//! element the datatype refuses (or a nested array, a string...) the sink
//! gives back the elements it wrote, [`narrow::widen`]ed to the numbers
//! that narrow to the same bytes, and the parser goes on with plain values,
//! which module `tensor` then converts: the same tensor bytes and the same
//! error texts as the plain path's (`tests::the_sink_decodes_as_plain_values_do`).
//! The datatype is the first `datatype` member, as the decoder's is, so
//! [`encode_data`] can take the bytes as they are.
//!
//! FP32 arrays of short decimals (`262143.0`, module `json_decimal`) are
//! read in one straight loop ([`fp32_run`]) while that pays.

use bytes::Bytes;

use crate::error::{Error, Result};
use crate::model::DataType;
use crate::wire::json::{self, Container, Number, Path, Run, Sink, Value};
use crate::wire::json_access;
use crate::wire::json_decimal::short_decimal;
use crate::wire::narrow::{self, PutNumber};
use crate::wire::tensor::{self, SHAPE_MISMATCH};

/// Parses a v2 request's JSON header, its tensor `data` arrays written into
/// tensor bytes (module doc); errors mapped as `json_access::parse` maps them.
pub(crate) fn parse(header: &[u8], max_depth: usize) -> Result<Value> {
    json_access::parse_with(header, max_depth, &mut TensorSink)
}

/// An input's `data` (of `count` elements of `dtype`) as tensor bytes: the
/// bytes the sink wrote while parsing, when it took the array (only the
/// count is left to check), else `tensor::encode_json_data`'s.
pub(crate) fn encode_data(dtype: DataType, data: &Value, count: usize) -> Result<Bytes> {
    let written = data.as_array().and_then(json::Array::sink_bytes);
    match (written, dtype.element_size()) {
        (Some(bytes), Some(size)) if bytes.len() == count.saturating_mul(size) => Ok(bytes.clone()),
        (Some(_), _) => Err(Error::json(SHAPE_MISMATCH)),
        (None, _) => tensor::encode_json_data(dtype, data, count),
    }
}

/// The sink (it keeps nothing between arrays).
struct TensorSink;

/// One `data` array being written.
struct Tensor {
    dtype: DataType,
    put: PutNumber,
    bytes: Vec<u8>,
    /// Elements [`fp32_run`] took, and those it left to the parser.
    short: (u32, u32),
}

impl Sink for TensorSink {
    type Array = Tensor;

    /// Takes `inputs[i].data` when a numeric `datatype` came before it.
    fn open(&mut self, path: Path<'_>, rest: &[u8]) -> Option<Tensor> {
        let mut open = path.containers();
        if open.len() != 3 {
            return None;
        }
        let (
            Some(Container::Object { key: b"inputs", .. }),
            Some(Container::Array),
            Some(Container::Object {
                members,
                key: b"data",
            }),
        ) = (open.next(), open.next(), open.next())
        else {
            return None;
        };
        let first = |name: &[u8]| members.iter().find(|(k, _)| k == name).map(|(_, v)| v);
        let dtype = DataType::parse(first(b"datatype")?.as_bytes()?)?;
        let put = narrow::putter(dtype)?;
        let declared = first(b"shape")
            .and_then(Value::as_array)
            .and_then(|dims| {
                dims.iter().try_fold(1usize, |n, d| {
                    n.checked_mul(usize::try_from(d.as_u64()?).ok()?)
                })
            })
            .unwrap_or(0);
        // Each element takes at least two bytes of input (a digit and a separator).
        let room = rest.len() / 2 + 1;
        let capacity = declared.min(room).saturating_mul(dtype.element_size()?);
        Some(Tensor {
            dtype,
            put,
            bytes: Vec::with_capacity(capacity),
            short: (0, 0),
        })
    }

    /// FP32 from a literal with a fraction, the common case, inline
    /// (module `narrow`'s rule: rounded to nearest); the rest through `put`.
    #[inline(always)]
    fn number(&mut self, tensor: &mut Tensor, n: Number) -> bool {
        if let (DataType::Fp32, Number::Double(d)) = (tensor.dtype, n) {
            tensor.bytes.extend_from_slice(&(d as f32).to_le_bytes());
            return true;
        }
        (tensor.put)(n, &mut tensor.bytes)
    }

    /// [`fp32_run`] for an FP32 array, unless it has left more than one
    /// element in eight to the parser (after a few). An array of long
    /// literals (`0.3748765289783478`, what clients print for random FP32
    /// values) would otherwise pay for a call and a look at each element
    /// that give nothing: the w4 request parsed in 21.0 ms instead of 16.0
    /// (`cargo bench --bench json`).
    #[inline(always)]
    fn run(&mut self, tensor: &mut Tensor, input: &[u8], pos: usize) -> Run {
        let (taken, left) = tensor.short;
        if tensor.dtype != DataType::Fp32 || left > taken / 8 + 8 {
            return Run::AtElement(pos);
        }
        fp32_run(tensor, input, pos)
    }

    fn close(&mut self, tensor: Tensor) -> Bytes {
        Bytes::from(tensor.bytes)
    }

    fn spill(&mut self, tensor: Tensor) -> json::Array {
        let mut items = json::Array::default();
        let size = tensor.dtype.element_size().unwrap_or(1);
        for element in tensor.bytes.chunks_exact(size) {
            items.push_number(narrow::widen(tensor.dtype, element));
        }
        items
    }
}

/// Reads the short decimals (module `json_decimal`) at `input[pos..]` into
/// an FP32 tensor, each with the `,` after it while another number follows.
///
/// Not inlined: it is called once per run of elements, and inlined into
/// the parser's loop it slowed the general reader by 20 %.
#[inline(never)]
fn fp32_run(tensor: &mut Tensor, input: &[u8], pos: usize) -> Run {
    let (taken, left) = tensor.short;
    // Locals, so that the loop keeps them in registers.
    let (mut pos, mut out) = (pos, std::mem::take(&mut tensor.bytes));
    let mut after_element = false;
    let mut run = 0;
    while let Some((value, len)) = short_decimal(&input[pos..]) {
        out.extend_from_slice(&(value as f32).to_le_bytes());
        pos += len;
        run += 1;
        match input.get(pos..pos + 2) {
            Some(&[b',', next]) if next.is_ascii_digit() || next == b'-' => pos += 1,
            _ => {
                after_element = true;
                break;
            }
        }
    }
    tensor.bytes = out;
    tensor.short = (taken.saturating_add(run), left + u32::from(!after_element));
    match after_element {
        true => Run::AfterElement(pos),
        false => Run::AtElement(pos),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{InferRequest, InputData, ALL_DATATYPES};
    use crate::wire::fixtures::{mutations, xorshift};
    use crate::wire::json::MAX_DEPTH;
    use crate::wire::tensor::encode_json_data;
    use crate::wire::v2_request::{decode_header, DecodeLimits, Decoder, Readers, Tail};

    const LIMITS: DecodeLimits = DecodeLimits {
        max_input_size: 1 << 20,
        max_json_depth: MAX_DEPTH,
    };

    /// A request header decoded through the sink (`sunk`), or through the
    /// plain document of `json_access::parse` and module `tensor`.
    fn decoded(header: &[u8], sunk: bool) -> Result<InferRequest> {
        let tail = Tail::Whole(Bytes::new());
        match sunk {
            true => decode_header(Readers::General, "m", "1", header, tail, LIMITS),
            false => json_access::parse(header, MAX_DEPTH).and_then(|root| {
                let mut decoder = Decoder::new("m", "1", tail, LIMITS);
                decoder.decode_root(&root)?;
                Ok(decoder.request)
            }),
        }
    }

    /// `{"inputs":[...]}` with one input of each `(datatype, shape, data)`,
    /// named `I0`, `I1`...
    fn request(inputs: &[(&str, &str, &str)]) -> String {
        let inputs: Vec<String> = inputs
            .iter()
            .enumerate()
            .map(|(i, (dtype, shape, data))| {
                format!(r#"{{"name":"I{i}","datatype":"{dtype}","shape":{shape},"data":{data}}}"#)
            })
            .collect();
        format!(r#"{{"id":"x","inputs":[{}]}}"#, inputs.join(","))
    }

    /// The sink's contract end to end: a request decodes through the sink
    /// (tensor bytes written while parsing, given back as values at a
    /// refusal) exactly as through plain values: the same tensors, or the
    /// same error. Over every datatype, `data` arrays the sink takes whole,
    /// gives back early or late (after its straight FP32 loop too) or never
    /// takes, and byte mutations of such requests.
    #[test]
    fn the_sink_decodes_as_plain_values_do() {
        let mut st = 0x5DEE_CE66_D1CE_4E5D_u64;
        let long: Vec<String> = (0..300)
            .map(|_| format!("{}.{}", xorshift(&mut st) % 300_000, xorshift(&mut st) % 10))
            .collect();
        let long = long.join(",");
        let datas = [
            "[1.5,-0.0,1e300,3.0]".to_string(),
            "[1,-2,9223372036854775807,0]".into(),
            "[1,2,3,18446744073709551615]".into(),
            "[1,2.5,-3,4]".into(),
            "[0,1,2,3,4]".into(),
            "[0,1,2]".into(),
            "[[1,2],[3,4]]".into(),
            "[1,2,[3,4]]".into(),
            "[1,[2,[3]],4]".into(),
            "[1,2,\"3\",4]".into(),
            "[1,true,3,4]".into(),
            "[true,false,true,true]".into(),
            "[\"a\",\"b\",\"c\",\"d\"]".into(),
            "[1,NaN,-Infinity,4]".into(),
            "[300,-129,65536,7]".into(),
            "[255,256,-1,1]".into(),
            "[ 1 , 2 ,3,\n4 ]".into(),
            "[1,2,3,4,null]".into(),
            "7".into(),
            format!("[{long}]"),
            format!("[{long},\"x\"]"),
            format!("[{long},-1]"),
            format!("[{long},[1]]"),
        ];
        let shapes = ["[4]", "[2,2]", "[3]", "[5]", "[0]", "[1]", "[300]", "[301]"];
        let mut decoded_tensors = 0;
        for dtype in ALL_DATATYPES {
            for data in &datas {
                for shape in shapes {
                    let text =
                        request(&[(dtype.as_str(), shape, data), ("FP32", "[2]", "[1.5,2]")]);
                    let sunk = decoded(text.as_bytes(), true);
                    assert_eq!(sunk, decoded(text.as_bytes(), false), "{text}");
                    decoded_tensors += usize::from(sunk.is_ok());
                }
            }
        }
        assert!(decoded_tensors > 300, "{decoded_tensors}");
        let seeds = [
            request(&[
                ("FP32", "[2,2]", "[1.5,2.25,-3.0,4e1]"),
                ("INT8", "[3]", "[1,-2,300]"),
            ]),
            request(&[
                ("UINT16", "[2]", "[[7],[65535]]"),
                ("FP16", "[3]", "[0.1,2,-0.0]"),
            ]),
            request(&[
                ("INT64", "[4]", "[9223372036854775807,-1,0,5]"),
                ("BF16", "[1]", "[NaN]"),
            ]),
            request(&[
                ("FP64", "[5]", "[1.0,2.0,3.0,4.0,5.0]"),
                ("UINT8", "[2]", "[1,2]"),
            ]),
        ];
        let seeds: Vec<&[u8]> = seeds.iter().map(|s| s.as_bytes()).collect();
        let mut filled = 0;
        mutations(&seeds, 20_000, |header| {
            let sunk = decoded(header, true);
            assert_eq!(
                sunk,
                decoded(header, false),
                "{:?}",
                String::from_utf8_lossy(header)
            );
            if let Ok(request) = sunk {
                filled += request
                    .inputs
                    .iter()
                    .filter(|i| matches!(&i.data, InputData::Raw(b) if !b.is_empty()))
                    .count();
            }
        });
        assert!(filled > 500, "{filled}");
    }

    /// The `data` member of a request's first input.
    fn first_data(request: &Value) -> &Value {
        let Some(Value::Array(inputs)) = request.get("inputs") else {
            panic!()
        };
        let Some(std::borrow::Cow::Borrowed(input)) = inputs.iter().next() else {
            panic!()
        };
        input.get("data").unwrap()
    }

    #[test]
    fn arrays_filled_while_parsing_encode_as_values_do() {
        let datas = [
            "[1.5,-0.0,1e300,3.0]",
            "[1,-2,9223372036854775807,0]",
            "[1,2,3,18446744073709551615]",
            "[1,2.5,-3,4]",
            "[0,1,2,3,4]",
            "[[1,2],[3,4]]",
            "[1,2,\"3\",4]",
            "[1,true,3,4]",
            "[1,NaN,-Infinity,4]",
            "[300,-129,65536,7]",
        ];
        for data in datas {
            for dtype in ALL_DATATYPES {
                let text = format!(
                    r#"{{"inputs":[{{"name":"I","datatype":"{}","shape":[4],"data":{data}}}]}}"#,
                    dtype.as_str()
                );
                let plain = json::parse(text.as_bytes(), MAX_DEPTH).unwrap();
                let filled = parse(text.as_bytes(), MAX_DEPTH).unwrap();
                for count in [3, 4, 5] {
                    let want = encode_json_data(dtype, first_data(&plain), count);
                    let got = encode_data(dtype, first_data(&filled), count);
                    assert_eq!(
                        got.map_err(|e| e.to_string()),
                        want.map_err(|e| e.to_string()),
                        "{text} {count}"
                    );
                }
            }
        }
        // The plain floats of a float tensor were written while parsing.
        let text = br#"{"inputs":[{"datatype":"FP32","shape":[2],"data":[1.5,2]}]}"#;
        let filled = parse(text, MAX_DEPTH).unwrap();
        let Value::Array(items) = first_data(&filled) else {
            panic!()
        };
        let bytes = items.sink_bytes().expect("filled while parsing");
        assert_eq!(
            &bytes[..],
            [1.5f32.to_le_bytes(), 2f32.to_le_bytes()].concat()
        );
        // A datatype after the data, or none, or one that is not a string
        // first, leaves the array as values; so does any other place.
        for text in [
            &br#"{"inputs":[{"shape":[2],"data":[1.5,2],"datatype":"FP32"}]}"#[..],
            br#"{"inputs":[{"shape":[2],"data":[1.5,2]}]}"#,
            br#"{"inputs":[{"datatype":1,"datatype":"FP32","data":[1.5,2]}]}"#,
            br#"{"outputs":[{"datatype":"FP32","data":[1.5,2]}]}"#,
            br#"{"x":{"inputs":[{"datatype":"FP32","data":[1.5,2]}]}}"#,
            br#"[{"inputs":[{"datatype":"FP32","data":[1.5,2]}]}]"#,
            br#"{"inputs":[{"datatype":"FP32","data":[[1.5,2]]}]}"#,
        ] {
            let doc = parse(text, MAX_DEPTH).unwrap();
            assert_eq!(doc, json::parse(text, MAX_DEPTH).unwrap());
        }
        // The first datatype is the one the bytes are written as, as it
        // is the one the decoder reads.
        let text = br#"{"inputs":[{"datatype":"INT8","datatype":"FP32","data":[1,2]}]}"#;
        let filled = parse(text, MAX_DEPTH).unwrap();
        let got = encode_data(DataType::Int8, first_data(&filled), 2).unwrap();
        assert_eq!(&got[..], [1, 2]);
    }

    /// Long FP32 arrays (where the sink reads short decimals in its
    /// straight loop, `fp32_run`) mixed with every other form of
    /// number and separator: the bytes written while parsing are the ones
    /// the plain values convert to.
    #[test]
    fn long_fp32_arrays_fill_as_their_values_convert() {
        use crate::wire::fixtures::xorshift;
        let forms = [
            "262143.0",
            "-1.0",
            "0.0",
            "-0.0",
            "-0",
            "0",
            "7",
            "-42",
            "1234567",
            "12345678",
            "0.25",
            "-3.1415927",
            "0.1234567",
            "0.12345678",
            "1e3",
            "-2.5E-2",
            "1.0e0",
            "9999999.9999999",
            "16777217",
            "0.30000000000000004",
            "NaN",
            "-Infinity",
        ];
        let separators = [",", ",", ",", ", ", " ,", ",\n"];
        let mut st = 0x2545_F491_4F6C_DD1D_u64;
        for _ in 0..20 {
            let mut elements = Vec::new();
            for _ in 0..2_000 {
                let r = xorshift(&mut st);
                let form = forms[(r % forms.len() as u64) as usize];
                let separator = separators[((r >> 32) % separators.len() as u64) as usize];
                elements.push((form, separator));
            }
            let mut data = String::from("[");
            for (i, (form, separator)) in elements.iter().enumerate() {
                if i > 0 {
                    data.push_str(separator);
                }
                data.push_str(form);
            }
            data.push(']');
            let count = elements.len();
            let text = format!(
                r#"{{"inputs":[{{"name":"I","datatype":"FP32","shape":[{count}],"data":{data}}}]}}"#
            );
            let plain = json::parse(text.as_bytes(), MAX_DEPTH).unwrap();
            let filled = parse(text.as_bytes(), MAX_DEPTH).unwrap();
            let want = encode_json_data(DataType::Fp32, first_data(&plain), count).unwrap();
            let Value::Array(items) = first_data(&filled) else {
                panic!()
            };
            let got = items.sink_bytes().expect("filled while parsing");
            assert_eq!(got, &want);
        }
    }
}
