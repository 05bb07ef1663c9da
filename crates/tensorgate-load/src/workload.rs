//! The built-in workloads: the two FP32 inputs of Triton's `add_sub` model,
//! the HTTP body (binary tensor extension or JSON) that carries them, and
//! the outputs to expect back. The values are deterministic, so every
//! target gets the same bytes.

use std::fmt::Write as _;

use clap::ValueEnum;
use serde_json::json;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum Workload {
    /// add_sub, 2 x 16 FP32, binary tensor extension in and out.
    #[value(name = "w1", alias = "small-binary")]
    SmallBinary,
    /// add_sub, 2 x 16 FP32, JSON in and out.
    #[value(name = "w2", alias = "small-json")]
    SmallJson,
    /// add_sub, 2 x 262144 FP32 (2 x 1 MiB), binary in and out.
    #[value(name = "w3", alias = "large-binary")]
    LargeBinary,
    /// add_sub, 2 x 262144 FP32 as JSON in and out (about 5 MB).
    #[value(name = "w4", alias = "large-json")]
    LargeJson,
    /// add_sub, 2 x 262144 integral FP32 as JSON (`262143.0`), JSON out.
    #[value(name = "w5", alias = "large-json-integral")]
    LargeJsonIntegral,
    /// add_sub, 2 x 16777216 FP32 (2 x 64 MiB) in and out through system
    /// shared memory (a gateway in bridge mode on this host; module `shm`).
    #[value(name = "w6", alias = "shared-memory")]
    SharedMemory,
}

impl Workload {
    pub(crate) fn default_elements(self) -> usize {
        match self {
            Workload::SmallBinary | Workload::SmallJson => 16,
            Workload::LargeBinary | Workload::LargeJson | Workload::LargeJsonIntegral => 262_144,
            Workload::SharedMemory => 16_777_216,
        }
    }

    pub(crate) fn binary(self) -> bool {
        matches!(self, Workload::SmallBinary | Workload::LargeBinary)
    }

    /// The short name (`w1`…), as the report gives it.
    pub(crate) fn name(self) -> Option<String> {
        self.to_possible_value().map(|v| v.get_name().to_string())
    }
}

/// What a built-in workload sent, to check the answer against.
pub(crate) struct Expected {
    pub(crate) binary: bool,
    pub(crate) sum: Vec<f32>,
    pub(crate) diff: Vec<f32>,
}

/// Deterministic pseudo-random FP32 values in [0, 1) with about 8
/// significant digits (so JSON numbers are ~10 bytes, as real data would be).
fn values(n: usize, seed: u64) -> Vec<f32> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 40) as f32 / (1u64 << 24) as f32
        })
        .collect()
}

/// FP32 values as little-endian bytes, as tensors travel.
pub(crate) fn le_bytes(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// Little-endian FP32 bytes as values (a trailing partial element ignored).
pub(crate) fn f32s(raw: &[u8]) -> Vec<f32> {
    raw.chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// The two input tensors of `n` elements each, and what to expect back.
pub(crate) fn inputs(workload: Workload, n: usize) -> (Vec<f32>, Vec<f32>, Expected) {
    let (a, b): (Vec<f32>, Vec<f32>) = if workload == Workload::LargeJsonIntegral {
        ((0..n).map(|i| i as f32).collect(), vec![1.0; n])
    } else {
        (values(n, 1), values(n, 2))
    };
    let expected = Expected {
        binary: workload.binary(),
        sum: a.iter().zip(&b).map(|(x, y)| x + y).collect(),
        diff: a.iter().zip(&b).map(|(x, y)| x - y).collect(),
    };
    (a, b, expected)
}

/// HTTP body and extra headers of a built-in workload.
pub(crate) fn body(workload: Workload, a: &[f32], b: &[f32]) -> (Vec<u8>, Vec<String>) {
    if workload.binary() {
        binary_body(a, b)
    } else {
        json_body(a, b, workload == Workload::LargeJsonIntegral)
    }
}

/// The JSON header, then both tensors' bytes; binary outputs asked for.
fn binary_body(a: &[f32], b: &[f32]) -> (Vec<u8>, Vec<String>) {
    let n = a.len();
    let size = n * 4;
    let header = json!({
        "inputs": [
            {"name": "INPUT0", "shape": [n], "datatype": "FP32",
             "parameters": {"binary_data_size": size}},
            {"name": "INPUT1", "shape": [n], "datatype": "FP32",
             "parameters": {"binary_data_size": size}},
        ],
        "outputs": [
            {"name": "OUTPUT0", "parameters": {"binary_data": true}},
            {"name": "OUTPUT1", "parameters": {"binary_data": true}},
        ],
    })
    .to_string();
    let mut body = Vec::with_capacity(header.len() + 2 * size);
    body.extend_from_slice(header.as_bytes());
    body.extend(le_bytes(a));
    body.extend(le_bytes(b));
    let headers = vec![
        "Content-Type: application/octet-stream".to_string(),
        format!("Inference-Header-Content-Length: {}", header.len()),
    ];
    (body, headers)
}

/// Both tensors as JSON `data` arrays; JSON outputs asked for. With
/// `integral`, whole values keep their `.0`, as Python's json writes them.
fn json_body(a: &[f32], b: &[f32], integral: bool) -> (Vec<u8>, Vec<String>) {
    let n = a.len();
    let mut body = String::with_capacity(n * 24 + 256);
    body.push_str("{\"inputs\":[");
    for (i, data) in [a, b].iter().enumerate() {
        if i > 0 {
            body.push(',');
        }
        let _ = write!(
            body,
            "{{\"name\":\"INPUT{i}\",\"shape\":[{n}],\"datatype\":\"FP32\",\"data\":["
        );
        for (j, v) in data.iter().enumerate() {
            if j > 0 {
                body.push(',');
            }
            // `{v:?}` keeps the `.0` of an integral float, as Python's json does.
            let _ = if integral {
                write!(body, "{v:?}")
            } else {
                write!(body, "{v}")
            };
        }
        body.push_str("]}");
    }
    body.push_str(
        "],\"outputs\":[{\"name\":\"OUTPUT0\",\"parameters\":{\"binary_data\":false}},\
         {\"name\":\"OUTPUT1\",\"parameters\":{\"binary_data\":false}}]}",
    );
    let headers = vec!["Content-Type: application/json".to_string()];
    (body.into_bytes(), headers)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_binary_body_is_its_header_then_both_tensors() {
        let (a, b, expected) = inputs(Workload::SmallBinary, 16);
        let (body, headers) = body(Workload::SmallBinary, &a, &b);
        let header_len: usize = headers[1]
            .strip_prefix("Inference-Header-Content-Length: ")
            .unwrap()
            .parse()
            .unwrap();
        let header: serde_json::Value = serde_json::from_slice(&body[..header_len]).unwrap();
        assert_eq!(header["inputs"][1]["parameters"]["binary_data_size"], 64);
        assert_eq!(f32s(&body[header_len..header_len + 64]), a);
        assert_eq!(f32s(&body[header_len + 64..]), b);
        assert!(expected.binary);
        assert_eq!(expected.sum[3], a[3] + b[3]);
    }

    #[test]
    fn the_integral_json_body_is_written_as_python_writes_it() {
        let (a, b, expected) = inputs(Workload::LargeJsonIntegral, 3);
        let (body, _) = body(Workload::LargeJsonIntegral, &a, &b);
        let text = String::from_utf8(body).unwrap();
        assert!(text.contains(r#""data":[0.0,1.0,2.0]"#), "{text}");
        assert!(text.contains(r#""data":[1.0,1.0,1.0]"#), "{text}");
        assert_eq!(expected.diff, [-1.0, 0.0, 1.0]);
        let parsed: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(parsed["outputs"][1]["parameters"]["binary_data"], false);
    }

    #[test]
    fn random_values_are_the_same_every_run_and_below_one() {
        let v = values(1000, 1);
        assert_eq!(v, values(1000, 1));
        assert_ne!(v, values(1000, 2));
        assert!(v.iter().all(|x| (0.0..1.0).contains(x)));
    }
}
