//! Whether a mirror's answer agrees with the primary's (a route's
//! `mirror`, `app::door::mirror`): the same outputs by name, each of the
//! same datatype and shape, with the same data — byte for byte, or, for
//! the floating-point types, element by element within a tolerance. The
//! answers' model names, versions, ids and parameters are not compared:
//! a shadow model may well be named and versioned otherwise.
//!
//! Compared on the answers as the client would get them
//! (`from_grpc::model_infer`: typed `contents` already in the raw
//! layout), so an upstream that answers typed and one that answers raw
//! agree when their values do.

use half::{bf16, f16};

use crate::model::{DataType, InferResponse, OutputTensor};

/// `mirror` agrees with `primary`: every output of each is in the other,
/// alike (see the module documentation). `tolerance` 0: byte for byte.
pub(crate) fn agree(primary: &InferResponse, mirror: &InferResponse, tolerance: f64) -> bool {
    primary.outputs.len() == mirror.outputs.len()
        && primary.outputs.iter().all(|p| {
            mirror
                .outputs
                .iter()
                .find(|m| m.name == p.name)
                .is_some_and(|m| alike(p, m, tolerance))
        })
}

/// Two outputs of one name agree.
fn alike(p: &OutputTensor, m: &OutputTensor, tolerance: f64) -> bool {
    if p.datatype != m.datatype || p.shape != m.shape || p.data.len() != m.data.len() {
        return false;
    }
    if p.data == m.data {
        return true;
    }
    if tolerance == 0.0 {
        return false;
    }
    let close = |a: f64, b: f64| {
        (a.is_nan() && b.is_nan()) || (a - b).abs() <= tolerance * a.abs().max(1.0)
    };
    let (a, b) = (&p.data[..], &m.data[..]);
    match p.datatype.known() {
        Some(DataType::Fp16) => elements(a, b, |x: [u8; 2], y| {
            close(
                f16::from_le_bytes(x).to_f64(),
                f16::from_le_bytes(y).to_f64(),
            )
        }),
        Some(DataType::Bf16) => elements(a, b, |x: [u8; 2], y| {
            close(
                bf16::from_le_bytes(x).to_f64(),
                bf16::from_le_bytes(y).to_f64(),
            )
        }),
        Some(DataType::Fp32) => elements(a, b, |x: [u8; 4], y| {
            close(
                f64::from(f32::from_le_bytes(x)),
                f64::from(f32::from_le_bytes(y)),
            )
        }),
        Some(DataType::Fp64) => elements(a, b, |x: [u8; 8], y| {
            close(f64::from_le_bytes(x), f64::from_le_bytes(y))
        }),
        _ => false,
    }
}

/// Every element of `a` is `close` to its place in `b` (of one length);
/// a length that is not a whole number of elements never agrees.
fn elements<const N: usize>(a: &[u8], b: &[u8], close: impl Fn([u8; N], [u8; N]) -> bool) -> bool {
    let element = |chunk: &[u8]| <[u8; N]>::try_from(chunk).unwrap_or([0; N]);
    a.len().is_multiple_of(N)
        && a.chunks_exact(N)
            .zip(b.chunks_exact(N))
            .all(|(x, y)| close(element(x), element(y)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    use crate::model::DeclaredType;

    fn answer(datatype: DataType, data: Vec<u8>) -> InferResponse {
        InferResponse {
            id: Vec::new(),
            model_name: "m".into(),
            model_version: "1".into(),
            parameters: Vec::new(),
            outputs: vec![OutputTensor {
                name: "OUT".into(),
                datatype: DeclaredType::Known(datatype),
                shape: vec![2],
                data: Bytes::from(data),
            }],
        }
    }

    fn fp32(values: [f32; 2]) -> Vec<u8> {
        values.iter().flat_map(|v| v.to_le_bytes()).collect()
    }

    #[test]
    fn equal_bytes_agree_and_other_bytes_do_not() {
        let a = answer(DataType::Int32, vec![1, 0, 0, 0, 2, 0, 0, 0]);
        let mut b = answer(DataType::Int32, vec![1, 0, 0, 0, 2, 0, 0, 0]);
        b.model_name = "shadow".into();
        b.model_version = "7".into();
        assert!(agree(&a, &b, 0.0));
        let c = answer(DataType::Int32, vec![1, 0, 0, 0, 3, 0, 0, 0]);
        assert!(!agree(&a, &c, 0.0));
        // A tolerance is for floating point only.
        assert!(!agree(&a, &c, 10.0));
    }

    #[test]
    fn floats_agree_within_the_tolerance() {
        let a = answer(DataType::Fp32, fp32([1.0, 1000.0]));
        let near = answer(DataType::Fp32, fp32([1.0005, 1000.4]));
        assert!(!agree(&a, &near, 0.0));
        // 1e-3 absolute at 1.0, relative (1.0) at 1000.
        assert!(agree(&a, &near, 1e-3));
        let far = answer(DataType::Fp32, fp32([1.01, 1000.0]));
        assert!(!agree(&a, &far, 1e-3));
        let half_a = answer(
            DataType::Fp16,
            [f16::from_f32(0.5), f16::from_f32(2.0)]
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect(),
        );
        let half_b = answer(
            DataType::Fp16,
            [f16::from_f32(0.5), f16::from_f32(2.001)]
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect(),
        );
        assert!(agree(&half_a, &half_b, 1e-2));
    }

    #[test]
    fn a_missing_renamed_or_reshaped_output_disagrees() {
        let a = answer(DataType::Fp32, fp32([1.0, 2.0]));
        let mut renamed = a.clone();
        renamed.outputs[0].name = "OTHER".into();
        assert!(!agree(&a, &renamed, 0.5));
        let mut reshaped = a.clone();
        reshaped.outputs[0].shape = vec![1, 2];
        assert!(!agree(&a, &reshaped, 0.5));
        let mut more = a.clone();
        more.outputs.push(a.outputs[0].clone());
        more.outputs[1].name = "EXTRA".into();
        assert!(!agree(&a, &more, 0.5));
        let ragged = answer(DataType::Fp32, vec![0; 6]);
        let other = answer(DataType::Fp32, vec![0, 0, 0, 0, 0, 1]);
        assert!(!agree(&ragged, &other, 0.5));
    }
}
