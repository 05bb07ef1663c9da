//! Splits a v1 infer body into one slice per input (v1 §7.3): the inputs'
//! data back to back in `NV-InferRequest` order, each its whole batch, no
//! framing or padding; inputs in shared memory take no bytes. Every size is
//! checked before slicing; the slices share the body's buffer.

use bytes::Bytes;

use crate::error::{Error, Result};
use crate::wire::tensor::bytes_elements;

/// How many body bytes an input takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Extent {
    /// Exactly this many bytes (fixed-size datatypes, or a declared
    /// `batch_byte_size`).
    Bytes(u64),
    /// This many length-prefixed strings (STRING without `batch_byte_size`).
    Strings(u64),
    /// None: the data is in shared memory.
    SharedMemory,
}

/// One slice per input (`None` for shared memory), or TRTIS's size errors.
pub fn split(body: &Bytes, model: &str, inputs: &[(&str, Extent)]) -> Result<Vec<Option<Bytes>>> {
    let mut offset = 0usize;
    let mut slices = Vec::with_capacity(inputs.len());
    for (name, extent) in inputs {
        let rest = &body[offset..];
        let len = match *extent {
            Extent::SharedMemory => {
                slices.push(None);
                continue;
            }
            Extent::Bytes(n) => match usize::try_from(n) {
                Ok(n) if n <= rest.len() => n,
                _ => {
                    return Err(Error::invalid(format!(
                        "unexpected size for input '{name}', expecting {n} bytes for model '{model}'"
                    )))
                }
            },
            Extent::Strings(count) => strings_len(rest, count).ok_or_else(|| {
                Error::invalid(format!(
                    "unexpected size for input '{name}', expecting {count} strings for model '{model}'"
                ))
            })?,
        };
        slices.push(Some(body.slice(offset..offset + len)));
        offset += len;
    }
    if offset != body.len() {
        return Err(Error::invalid(format!(
            "unexpected additional input data for model '{model}'"
        )));
    }
    Ok(slices)
}

/// Bytes taken by the first `count` length-prefixed strings of `data`.
fn strings_len(data: &[u8], count: u64) -> Option<usize> {
    let mut len = 0usize;
    let mut elements = bytes_elements(data);
    for _ in 0..count {
        len += 4 + elements.next()?.ok()?.len();
    }
    Some(len)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(body: &[u8], inputs: &[(&str, Extent)]) -> Vec<Option<Vec<u8>>> {
        split(&Bytes::copy_from_slice(body), "m", inputs)
            .expect("splits")
            .into_iter()
            .map(|s| s.map(|b| b.to_vec()))
            .collect()
    }

    fn err(body: &[u8], inputs: &[(&str, Extent)]) -> String {
        split(&Bytes::copy_from_slice(body), "m", inputs)
            .expect_err("refused")
            .message
    }

    #[test]
    fn slices_inputs_in_order() {
        let got = ok(
            b"aabbb\x01\x00\x00\x00z",
            &[
                ("A", Extent::Bytes(2)),
                ("S", Extent::SharedMemory),
                ("B", Extent::Bytes(3)),
                ("C", Extent::Strings(1)),
            ],
        );
        assert_eq!(
            got,
            [
                Some(b"aa".to_vec()),
                None,
                Some(b"bbb".to_vec()),
                Some(b"\x01\x00\x00\x00z".to_vec())
            ]
        );
    }

    #[test]
    fn short_and_long_bodies_get_trtis_texts() {
        assert_eq!(
            err(b"abc", &[("A", Extent::Bytes(4))]),
            "unexpected size for input 'A', expecting 4 bytes for model 'm'"
        );
        assert_eq!(
            err(b"abcde", &[("A", Extent::Bytes(4))]),
            "unexpected additional input data for model 'm'"
        );
        assert_eq!(
            err(b"\x05\x00\x00\x00ab", &[("S", Extent::Strings(1))]),
            "unexpected size for input 'S', expecting 1 strings for model 'm'"
        );
        assert_eq!(
            err(b"", &[("A", Extent::Bytes(u64::MAX))]),
            "unexpected size for input 'A', expecting 18446744073709551615 bytes for model 'm'"
        );
    }
}
