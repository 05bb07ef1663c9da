//! Fuzz target: request-body inflation (with a 1 MiB output limit) and
//! Accept-Encoding negotiation must never panic, whatever the input.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = tensorgate::wire::compress::inflate(data, 1 << 20);
    let _ = tensorgate::wire::compress::negotiate(Some(data));
});
