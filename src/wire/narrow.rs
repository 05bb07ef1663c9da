//! A JSON number narrowed into a tensor element, as Triton narrows it
//! (v2 §2.3): unsigned types take only non-negative integer literals,
//! signed types only integer literals that fit an `i64`, each truncated to
//! the element's width (`300` as UINT8 is `44`); float types take any
//! number, rounded to nearest. The one place these rules live: the tensor
//! encoder (module `tensor`) uses them leaf by leaf, and the request's
//! tensor sink (module `v2_request::tensor_sink`) uses them to write
//! `data` arrays straight into little-endian tensor bytes while the parser
//! reads them, and [`widen`]s them back to numbers when it gives an array
//! back to the parser.

use half::{bf16, f16};

use crate::model::DataType;
use crate::wire::json_value::Number;

/// Appends a number to tensor bytes as one datatype takes it, or returns
/// `false` (nothing written) when that datatype refuses it.
pub(crate) type PutNumber = fn(Number, &mut Vec<u8>) -> bool;

/// rapidjson `IsUint64` + `GetUint64`.
#[inline(always)]
fn unsigned(n: Number) -> Option<u64> {
    match n {
        Number::Uint(u) => Some(u),
        _ => None,
    }
}

/// rapidjson `IsInt64` + `GetInt64`.
#[inline(always)]
fn signed(n: Number) -> Option<i64> {
    match n {
        Number::Uint(u) => i64::try_from(u).ok(),
        Number::Int(i) => Some(i),
        Number::Double(_) => None,
    }
}

/// rapidjson `GetDouble`: integers rounded to nearest, as the C++ casts do.
#[inline(always)]
fn number(n: Number) -> Option<f64> {
    Some(match n {
        Number::Uint(u) => u as f64,
        Number::Int(i) => i as f64,
        Number::Double(d) => d,
    })
}

/// One function per element type: appends `n` narrowed by `$le` (to
/// little-endian bytes), or returns `false` (nothing written) when Triton's
/// accessor `$take` would refuse it.
macro_rules! put {
    ($name:ident, $take:ident, $le:expr) => {
        fn $name(n: Number, out: &mut Vec<u8>) -> bool {
            match $take(n) {
                Some(v) => {
                    out.extend_from_slice(&$le(v));
                    true
                }
                None => false,
            }
        }
    };
}

put!(put_u8, unsigned, |v: u64| (v as u8).to_le_bytes());
put!(put_u16, unsigned, |v: u64| (v as u16).to_le_bytes());
put!(put_u32, unsigned, |v: u64| (v as u32).to_le_bytes());
put!(put_u64, unsigned, u64::to_le_bytes);
put!(put_i8, signed, |v: i64| (v as i8).to_le_bytes());
put!(put_i16, signed, |v: i64| (v as i16).to_le_bytes());
put!(put_i32, signed, |v: i64| (v as i32).to_le_bytes());
put!(put_i64, signed, i64::to_le_bytes);
put!(put_f16, number, fp16_le);
put!(put_bf16, number, bf16_le);
put!(put_f32, number, fp32_le);
put!(put_f64, number, f64::to_le_bytes);

/// The writer for `dtype`'s elements; `None` for BOOL and BYTES, whose
/// elements are not numbers.
pub(crate) fn putter(dtype: DataType) -> Option<PutNumber> {
    Some(match dtype {
        DataType::Uint8 => put_u8,
        DataType::Uint16 => put_u16,
        DataType::Uint32 => put_u32,
        DataType::Uint64 => put_u64,
        DataType::Int8 => put_i8,
        DataType::Int16 => put_i16,
        DataType::Int32 => put_i32,
        DataType::Int64 => put_i64,
        DataType::Fp16 => put_f16,
        DataType::Bf16 => put_bf16,
        DataType::Fp32 => put_f32,
        DataType::Fp64 => put_f64,
        DataType::Bool | DataType::Bytes => return None,
    })
}

/// A double narrowed into each float type (the slice loops of module `tensor`).
pub(crate) fn fp16_le(d: f64) -> [u8; 2] {
    f16::from_f64(d).to_le_bytes()
}

pub(crate) fn bf16_le(d: f64) -> [u8; 2] {
    bf16::from_f64(d).to_le_bytes()
}

pub(crate) fn fp32_le(d: f64) -> [u8; 4] {
    (d as f32).to_le_bytes()
}

/// A little-endian element of `dtype` (its [`DataType::element_size`]
/// bytes) as the number it holds: exact, so narrowed again it is the same
/// bytes. BOOL and BYTES, which are never narrowed, come back as `Uint`.
pub(crate) fn widen(dtype: DataType, le: &[u8]) -> Number {
    let mut wide = [0u8; 8];
    let width = le.len().min(8);
    wide[..width].copy_from_slice(&le[..width]);
    let bits = u64::from_le_bytes(wide);
    let integer = |i: i64| match u64::try_from(i) {
        Ok(u) => Number::Uint(u),
        Err(_) => Number::Int(i),
    };
    match dtype {
        DataType::Int8 => integer(i64::from(bits as u8 as i8)),
        DataType::Int16 => integer(i64::from(bits as u16 as i16)),
        DataType::Int32 => integer(i64::from(bits as u32 as i32)),
        DataType::Int64 => integer(bits as i64),
        DataType::Fp16 => Number::Double(f16::from_bits(bits as u16).to_f64()),
        DataType::Bf16 => Number::Double(bf16::from_bits(bits as u16).to_f64()),
        DataType::Fp32 => Number::Double(f64::from(f32::from_bits(bits as u32))),
        DataType::Fp64 => Number::Double(f64::from_bits(bits)),
        DataType::Uint8
        | DataType::Uint16
        | DataType::Uint32
        | DataType::Uint64
        | DataType::Bool
        | DataType::Bytes => Number::Uint(bits),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ALL_DATATYPES;

    fn put(dtype: DataType, n: Number) -> Option<Vec<u8>> {
        let mut out = Vec::new();
        putter(dtype).unwrap()(n, &mut out).then_some(out)
    }

    #[test]
    fn integers_truncate_and_refuse_the_wrong_kind() {
        assert_eq!(put(DataType::Uint8, Number::Uint(300)), Some(vec![44]));
        assert_eq!(put(DataType::Uint8, Number::Int(-1)), None);
        assert_eq!(put(DataType::Uint8, Number::Double(1.0)), None);
        assert_eq!(put(DataType::Int8, Number::Int(-1)), Some(vec![0xFF]));
        assert_eq!(put(DataType::Int16, Number::Uint(u64::MAX)), None);
        assert_eq!(put(DataType::Int64, Number::Double(2.0)), None);
        assert_eq!(
            put(DataType::Uint32, Number::Uint(7)),
            Some(7u32.to_le_bytes().to_vec())
        );
    }

    #[test]
    fn floats_take_every_number_rounded() {
        assert_eq!(
            put(DataType::Fp32, Number::Double(0.1)),
            Some(0.1f32.to_le_bytes().to_vec())
        );
        assert_eq!(
            put(DataType::Fp32, Number::Uint(16_777_217)),
            Some(16_777_216f32.to_le_bytes().to_vec())
        );
        assert_eq!(
            put(DataType::Fp64, Number::Int(-3)),
            Some((-3f64).to_le_bytes().to_vec())
        );
        assert_eq!(
            put(DataType::Fp16, Number::Double(1.5)),
            Some(f16::from_f64(1.5).to_le_bytes().to_vec())
        );
        assert_eq!(
            put(DataType::Bf16, Number::Double(1.5)),
            Some(bf16::from_f64(1.5).to_le_bytes().to_vec())
        );
        assert!(putter(DataType::Bool).is_none());
        assert!(putter(DataType::Bytes).is_none());
    }

    #[test]
    fn widened_elements_narrow_to_the_same_bytes() {
        let numbers = [
            Number::Uint(0),
            Number::Uint(300),
            Number::Uint(u64::MAX),
            Number::Int(-1),
            Number::Int(i64::MIN),
            Number::Double(0.1),
            Number::Double(-0.0),
            Number::Double(1e300),
            Number::Double(f64::NAN),
            Number::Double(f64::NEG_INFINITY),
        ];
        for dtype in ALL_DATATYPES {
            let Some(put) = putter(dtype) else { continue };
            for n in numbers {
                let mut first = Vec::new();
                if !put(n, &mut first) {
                    continue;
                }
                let mut again = Vec::new();
                assert!(put(widen(dtype, &first), &mut again), "{dtype:?} {n:?}");
                assert_eq!(first, again, "{dtype:?} {n:?}");
            }
        }
    }
}
