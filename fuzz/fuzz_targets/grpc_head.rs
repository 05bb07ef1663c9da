//! Fuzz target: walking the start of a gRPC `ModelInfer` body must never
//! panic, a head it finds must lie within the bytes it was given, and a
//! walk resumed where a shorter walk stopped must find the same.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tensorgate::wire::grpc_head::{head, prefix, Head};

fuzz_target!(|data: &[u8]| {
    let _ = prefix(data);
    let whole = head(data, 0);
    if let Head::Ends { len } = whole {
        assert!(len < data.len());
    }
    if let Head::Incomplete { walked } = head(&data[..data.len() / 2], 0) {
        assert_eq!(head(data, walked), whole);
    }
});
