//! Fuzz target: walking the start of a gRPC `ModelInfer` body must never
//! panic, and a head it finds must lie within the bytes it was given.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tensorgate::wire::grpc_head::{head, prefix, Head};

fuzz_target!(|data: &[u8]| {
    let _ = prefix(data);
    if let Head::Ends { len } = head(data) {
        assert!(len < data.len());
    }
});
