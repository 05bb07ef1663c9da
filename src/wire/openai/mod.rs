//! The OpenAI API's bodies, pure: a completions or chat request decoded
//! into a [`Generation`] (`request`), and the answers written back
//! (`answer`): whole, as server-sent events chunk by chunk, the models
//! listing. Unknown request fields are accepted and ignored; the fields
//! that change what a model would do and that tensorgate cannot do (`n`
//! above 1, logprobs, tools, ...) are refused, never dropped
//! (docs/compatibility.md, "OpenAI").

pub mod answer;
pub mod request;

pub use answer::{Answering, Usage, DONE};
pub use request::{decode, Endpoint, Generation, Prompt};
