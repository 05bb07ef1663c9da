//! Wire codecs, pure and synchronous (no I/O): bytes in, model types out,
//! and back. `json`/`json_write` reproduce rapidjson's behaviour (`json` is
//! schema-free; `json_value` is its DOM, with compact number arrays;
//! `json_decimal` reads short decimals in one step),
//! `json_access` Triton's accessors over it with their texts, `tensor`
//! and `narrow` the element layouts and Triton's narrowing rules,
//! `v2_request`/`v2_response` the v2 HTTP infer body (`v2_request`'s
//! `tensor_sink` writes JSON `data` into tensor bytes while it is parsed),
//! `generate` the `/generate*` bodies, `compress` the HTTP content codings,
//! `v1` the legacy v1 API, `openai` the OpenAI API's bodies and
//! events, `grpc_head` the leading fields of a gRPC
//! `ModelInfer` body still arriving.

pub mod compress;
#[cfg(test)]
pub(crate) mod fixtures;
// pub: the fuzz target fuzz/fuzz_targets/generate.rs drives its decoder.
pub mod generate;
pub mod grpc_head;
pub mod json;
pub(crate) mod json_access;
pub(crate) mod json_decimal;
pub mod json_value;
pub mod json_write;
pub(crate) mod narrow;
// pub: the fuzz target fuzz/fuzz_targets/openai.rs drives its codecs.
pub mod openai;
pub(crate) mod tensor;
pub mod v1;
pub mod v2_request;
pub mod v2_response;
