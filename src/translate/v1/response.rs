//! A v2 inference answer to the v1 `InferResponseHeader` and raw output
//! chunks (v1 §3): outputs in request order, `raw.dims`
//! without the batch dimension, `batch_byte_size` for the whole batch,
//! `batch_size` always set (a missing one kills the v1 client), and one
//! `batch_classes` per batch entry — parsed from the upstream's
//! classification strings (`<value>:<index>[:<label>]`, v2 §3.5), or
//! computed here when the upstream ignored the request (no labels then).

use bytes::Bytes;

use super::request::{Wanted, WantedOutput};
use crate::error::{Error, Result};
use crate::model::{DataType, InferResponse, OutputTensor};
use crate::proto::v1::infer_response_header::{output, Output};
use crate::proto::v1::InferResponseHeader;
use crate::wire::tensor::bytes_elements;

/// The header (classes included) and one entry per requested output, in
/// order: its bytes, or empty when it is not raw (classes, shared memory),
/// as TRTIS's gRPC `raw_output` (the 1.11 client indexes it by position).
pub(crate) fn infer_response(
    response: &InferResponse,
    wanted: &Wanted,
    requested_version: &str,
) -> Result<(InferResponseHeader, Vec<Bytes>)> {
    let mut raw = Vec::new();
    let mut outputs = Vec::with_capacity(wanted.outputs.len());
    for asked in &wanted.outputs {
        let tensor = response
            .outputs
            .iter()
            .find(|o| o.name == asked.name)
            .ok_or_else(|| {
                Error::internal(format!("the upstream returned no output '{}'", asked.name))
            })?;
        let mut output = Output {
            name: asked.name.clone(),
            ..Default::default()
        };
        if asked.classes == 0 {
            output.raw = Some(raw_info(tensor, asked, wanted.batching));
            raw.push(if asked.shared_memory {
                Bytes::new()
            } else {
                tensor.data.clone()
            });
        } else {
            output.batch_classes = classes(tensor, asked.classes, wanted)?;
            raw.push(Bytes::new());
        }
        outputs.push(output);
    }
    let version = response
        .model_version
        .parse()
        .or_else(|_| requested_version.parse())
        .unwrap_or(0);
    let header = InferResponseHeader {
        id: wanted.id,
        model_name: response.model_name.clone(),
        model_version: version,
        batch_size: wanted.batch_size,
        output: outputs,
    };
    Ok((header, raw))
}

fn raw_info(tensor: &OutputTensor, asked: &WantedOutput, batching: bool) -> output::Raw {
    let dims = match tensor.shape.split_first() {
        Some((_, rest)) if batching => rest.to_vec(),
        _ => tensor.shape.clone(),
    };
    let batch_byte_size = if asked.shared_memory {
        tensor
            .datatype
            .known()
            .and_then(DataType::element_size)
            .and_then(|size| {
                tensor
                    .shape
                    .iter()
                    .try_fold(size as u64, |n, d| n.checked_mul(u64::try_from(*d).ok()?))
            })
            .unwrap_or(0)
    } else {
        tensor.data.len() as u64
    };
    output::Raw {
        dims,
        batch_byte_size,
    }
}

/// One `Classes` per batch entry.
fn classes(tensor: &OutputTensor, k: u32, wanted: &Wanted) -> Result<Vec<output::Classes>> {
    let entries = if wanted.batching {
        wanted.batch_size as usize
    } else {
        1
    };
    if tensor.datatype == DataType::Bytes {
        return upstream_classes(tensor, entries);
    }
    let dtype = tensor
        .datatype
        .known()
        .filter(|d| d.element_size().is_some())
        .ok_or_else(|| {
            Error::invalid(format!(
                "class result not available for output '{}' of type '{}'",
                tensor.name, tensor.datatype
            ))
        })?;
    let values = values(&tensor.data, dtype);
    let per_entry = values.len() / entries;
    Ok((0..entries)
        .map(|e| top_k(&values[e * per_entry..(e + 1) * per_entry], k))
        .collect())
}

/// Splits the upstream's classification strings into batch entries.
fn upstream_classes(tensor: &OutputTensor, entries: usize) -> Result<Vec<output::Classes>> {
    let bad = |what: &str| {
        Error::internal(format!(
            "the upstream's classification of output '{}' is malformed: {what}",
            tensor.name
        ))
    };
    let mut all = Vec::new();
    for element in bytes_elements(&tensor.data) {
        let element = element.map_err(|_| bad("broken string framing"))?;
        all.push(class(element).ok_or_else(|| bad(&String::from_utf8_lossy(element)))?);
    }
    if all.len() % entries != 0 {
        return Err(bad("not one result list per batch entry"));
    }
    let per_entry = all.len() / entries;
    if per_entry == 0 {
        return Ok(vec![output::Classes::default(); entries]);
    }
    Ok(all
        .chunks(per_entry)
        .map(|cls| output::Classes { cls: cls.to_vec() })
        .collect())
}

/// `<value>:<index>[:<label>]`.
fn class(element: &[u8]) -> Option<output::Class> {
    let text = std::str::from_utf8(element).ok()?;
    let mut parts = text.splitn(3, ':');
    let value = parts.next()?;
    let value = match value {
        "nan" | "-nan" => f32::NAN,
        v => v.parse().ok()?,
    };
    let idx = parts.next()?.parse().ok()?;
    let label = parts.next().unwrap_or("").to_string();
    Some(output::Class { idx, value, label })
}

fn values(data: &[u8], dtype: DataType) -> Vec<f64> {
    let size = dtype.element_size().unwrap_or(1);
    data.chunks_exact(size)
        .map(|c| {
            let mut b = [0u8; 8];
            b[..size].copy_from_slice(c);
            match dtype {
                DataType::Int8 => f64::from(c[0] as i8),
                DataType::Int16 => f64::from(i16::from_le_bytes([b[0], b[1]])),
                DataType::Int32 => f64::from(i32::from_le_bytes([b[0], b[1], b[2], b[3]])),
                DataType::Int64 => i64::from_le_bytes(b) as f64,
                DataType::Uint8 | DataType::Bool => f64::from(c[0]),
                DataType::Uint16 => f64::from(u16::from_le_bytes([b[0], b[1]])),
                DataType::Uint32 => f64::from(u32::from_le_bytes([b[0], b[1], b[2], b[3]])),
                DataType::Uint64 => u64::from_le_bytes(b) as f64,
                DataType::Fp16 => half::f16::from_le_bytes([b[0], b[1]]).to_f64(),
                DataType::Bf16 => half::bf16::from_le_bytes([b[0], b[1]]).to_f64(),
                DataType::Fp32 => f64::from(f32::from_le_bytes([b[0], b[1], b[2], b[3]])),
                DataType::Fp64 => f64::from_le_bytes(b),
                DataType::Bytes => 0.0,
            }
        })
        .collect()
}

/// The `k` largest values, largest first (ties in index order).
fn top_k(values: &[f64], k: u32) -> output::Classes {
    let mut order: Vec<usize> = (0..values.len()).collect();
    order.sort_by(|&a, &b| values[b].total_cmp(&values[a]));
    output::Classes {
        cls: order
            .into_iter()
            .take(k as usize)
            .map(|i| output::Class {
                idx: i32::try_from(i).unwrap_or(i32::MAX),
                value: values[i] as f32,
                label: String::new(),
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::DeclaredType;

    fn wanted(batch_size: u32, outputs: &[(&str, u32)]) -> Wanted {
        Wanted {
            id: 0,
            batch_size,
            batching: true,
            outputs: outputs
                .iter()
                .map(|(name, classes)| WantedOutput {
                    name: name.to_string(),
                    classes: *classes,
                    shared_memory: false,
                })
                .collect(),
        }
    }

    fn tensor(name: &str, datatype: &str, shape: &[i64], data: Vec<u8>) -> OutputTensor {
        OutputTensor {
            name: name.into(),
            datatype: DeclaredType::read(datatype),
            shape: shape.to_vec(),
            data: Bytes::from(data),
        }
    }

    fn framed(strings: &[&str]) -> Vec<u8> {
        let mut out = Vec::new();
        for s in strings {
            out.extend_from_slice(&(s.len() as u32).to_le_bytes());
            out.extend_from_slice(s.as_bytes());
        }
        out
    }

    fn class(idx: i32, value: f32, label: &str) -> output::Class {
        output::Class {
            idx,
            value,
            label: label.into(),
        }
    }

    #[test]
    fn raw_and_classes_in_request_order() {
        let ints: Vec<u8> = (0..4i32).flat_map(i32::to_le_bytes).collect();
        let response = InferResponse {
            model_name: "m".into(),
            model_version: "1".into(),
            outputs: vec![
                tensor(
                    "C",
                    "BYTES",
                    &[2, 1],
                    framed(&["3.000000:1:b", "7.500000:0"]),
                ),
                tensor("R", "INT32", &[2, 2], ints.clone()),
            ],
            ..Default::default()
        };
        let (header, raw) =
            infer_response(&response, &wanted(2, &[("R", 0), ("C", 1)]), "").expect("ok");
        assert_eq!((header.batch_size, header.model_version), (2, 1));
        assert_eq!(header.output[0].name, "R");
        assert_eq!(
            header.output[0].raw,
            Some(output::Raw {
                dims: vec![2],
                batch_byte_size: 16
            })
        );
        assert_eq!(raw, [Bytes::from(ints), Bytes::new()]);
        assert_eq!(
            header.output[1].batch_classes,
            [
                output::Classes {
                    cls: vec![class(1, 3.0, "b")]
                },
                output::Classes {
                    cls: vec![class(0, 7.5, "")]
                },
            ]
        );
    }

    #[test]
    fn classes_computed_locally_when_the_upstream_sent_the_tensor() {
        let data: Vec<u8> = [1.0f32, 9.0, 5.0, 2.0, 0.5, 3.0]
            .iter()
            .flat_map(|f| f.to_le_bytes())
            .collect();
        let response = InferResponse {
            outputs: vec![tensor("C", "FP32", &[2, 3], data)],
            ..Default::default()
        };
        let (header, raw) = infer_response(&response, &wanted(2, &[("C", 2)]), "4").expect("ok");
        assert_eq!(raw, [Bytes::new()]);
        assert_eq!(header.model_version, 4);
        assert_eq!(
            header.output[0].batch_classes,
            [
                output::Classes {
                    cls: vec![class(1, 9.0, ""), class(2, 5.0, "")]
                },
                output::Classes {
                    cls: vec![class(2, 3.0, ""), class(0, 2.0, "")]
                },
            ]
        );
    }

    #[test]
    fn missing_or_malformed_outputs_are_errors() {
        let response = InferResponse {
            outputs: vec![tensor("C", "BYTES", &[1], framed(&["x:y"]))],
            ..Default::default()
        };
        let e = infer_response(&response, &wanted(1, &[("R", 0)]), "").expect_err("missing");
        assert_eq!(e.message, "the upstream returned no output 'R'");
        let e = infer_response(&response, &wanted(1, &[("C", 1)]), "").expect_err("malformed");
        assert_eq!(
            e.message,
            "the upstream's classification of output 'C' is malformed: x:y"
        );
    }
}
