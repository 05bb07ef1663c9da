//! Classification outputs: an output requested with `classification` = K is
//! replaced by its top-K entries as BYTES strings `<value>:<index>[:<label>]`
//! (server `src/classification.cc` and `InferResponseCompleteCommon`).
//!
//! Values are formatted like C++ `std::to_string` (`6.000000` for floats);
//! for batching models every batch entry is classified on its own and the
//! shape is `[batch, min(K, n)]`, else `[min(K, n)]`. BOOL, FP16, BF16 and
//! BYTES outputs are refused (Triton 2.51 crashes on BYTES; the demo answers
//! with the error later releases give).

use std::cmp::Ordering;

use bytes::Bytes;
use tonic::Status;

use super::models::{element_size, protocol_name, Tensor, TensorSpec};
use tensorgate_proto::inference::DataType;

/// An element type Triton can classify.
trait Class: Copy {
    const SIZE: usize;
    fn read(bytes: &[u8]) -> Self;
    /// Descending order (largest first).
    fn descending(a: &Self, b: &Self) -> Ordering;
    /// `std::to_string`.
    fn cpp_string(self) -> String;
}

macro_rules! integer_class {
    ($($t:ty),*) => {$(
        impl Class for $t {
            const SIZE: usize = std::mem::size_of::<$t>();
            fn read(bytes: &[u8]) -> Self {
                <$t>::from_le_bytes(bytes.try_into().expect("chunk of the element size"))
            }
            fn descending(a: &Self, b: &Self) -> Ordering {
                b.cmp(a)
            }
            fn cpp_string(self) -> String {
                self.to_string()
            }
        }
    )*};
}
integer_class!(u8, u16, u32, u64, i8, i16, i32, i64);

/// `std::to_string(double)`, i.e. `printf("%f")`.
fn cpp_fixed(value: f64) -> String {
    match value {
        v if v.is_nan() && v.is_sign_negative() => "-nan".to_owned(),
        v if v.is_nan() => "nan".to_owned(),
        v if v.is_infinite() && v > 0.0 => "inf".to_owned(),
        v if v.is_infinite() => "-inf".to_owned(),
        v => format!("{v:.6}"),
    }
}

impl Class for f32 {
    const SIZE: usize = 4;
    fn read(bytes: &[u8]) -> Self {
        f32::from_le_bytes(bytes.try_into().expect("chunk of the element size"))
    }
    fn descending(a: &Self, b: &Self) -> Ordering {
        b.total_cmp(a)
    }
    fn cpp_string(self) -> String {
        cpp_fixed(f64::from(self))
    }
}

impl Class for f64 {
    const SIZE: usize = 8;
    fn read(bytes: &[u8]) -> Self {
        f64::from_le_bytes(bytes.try_into().expect("chunk of the element size"))
    }
    fn descending(a: &Self, b: &Self) -> Ordering {
        b.total_cmp(a)
    }
    fn cpp_string(self) -> String {
        cpp_fixed(self)
    }
}

/// The top `k` entries of one batch entry (`AddClassResults`); ties keep
/// index order.
fn top_k<T: Class>(data: &[u8], k: u32, spec: &TensorSpec) -> Vec<String> {
    let values: Vec<T> = data.chunks_exact(T::SIZE).map(T::read).collect();
    let mut order: Vec<usize> = (0..values.len()).collect();
    order.sort_by(|&i, &j| T::descending(&values[i], &values[j]));
    order
        .into_iter()
        .take(k as usize)
        .map(|i| {
            let mut class = format!("{}:{i}", values[i].cpp_string());
            if let Some(label) = spec.label(i) {
                class.push(':');
                class.push_str(label);
            }
            class
        })
        .collect()
}

/// Replaces `output` by its classification (`k` > 0).
pub(crate) fn classify(
    output: &Tensor,
    spec: &TensorSpec,
    k: u32,
    batching: bool,
) -> Result<Tensor, Status> {
    let entry: fn(&[u8], u32, &TensorSpec) -> Vec<String> = match output.dtype {
        DataType::TypeUint8 => top_k::<u8>,
        DataType::TypeUint16 => top_k::<u16>,
        DataType::TypeUint32 => top_k::<u32>,
        DataType::TypeUint64 => top_k::<u64>,
        DataType::TypeInt8 => top_k::<i8>,
        DataType::TypeInt16 => top_k::<i16>,
        DataType::TypeInt32 => top_k::<i32>,
        DataType::TypeInt64 => top_k::<i64>,
        DataType::TypeFp32 => top_k::<f32>,
        DataType::TypeFp64 => top_k::<f64>,
        other => {
            return Err(Status::invalid_argument(format!(
                "class result not available for output due to unsupported type '{}'",
                protocol_name(other)
            )))
        }
    };
    let shape = &output.shape;
    // A uint32 in Triton.
    let batch = match shape.first() {
        Some(&first) if batching => u64::from(first as u32),
        _ => 0,
    };
    let entry_dims = if batch == 0 { &shape[..] } else { &shape[1..] };
    let entry_count = entry_dims
        .iter()
        .fold(1u64, |n, d| n.wrapping_mul(*d as u64));
    let entry_size = entry_count.wrapping_mul(element_size(output.dtype) as u64) as usize;

    let mut framed = Vec::new();
    for b in 0..batch.max(1) as usize {
        let start = b.saturating_mul(entry_size);
        // Triton classifies an entry that does not fit in the data as
        // empty, and so are all after it: stop at the first one.
        let data = match output.data.get(start..start.saturating_add(entry_size)) {
            Some(data) if !data.is_empty() => data,
            _ => break,
        };
        for class in entry(data, k, spec) {
            framed.extend_from_slice(&(class.len() as u32).to_le_bytes());
            framed.extend_from_slice(class.as_bytes());
        }
    }
    let mut new_shape: Vec<i64> = (batch > 0).then_some(batch as i64).into_iter().collect();
    new_shape.push(i64::from(k.min(entry_count as u32)));
    Ok(Tensor {
        name: output.name.clone(),
        dtype: DataType::TypeString,
        shape: new_shape,
        data: Bytes::from(framed),
    })
}
