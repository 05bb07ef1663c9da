//! The v1 messages the text codec (`wire::v1::text`) renders and parses,
//! each with its descriptor from the compiled-in descriptor set. Here
//! rather than in the codec: only the translation sees generated types.

use std::sync::OnceLock;

use prost_reflect::{DescriptorPool, MessageDescriptor};

use crate::proto::v1 as pb;
use crate::wire::v1::text::V1Message;

/// The compiled-in descriptors (decoded once; `None` would mean a broken
/// build, and the codec then renders nothing rather than panicking).
fn pool() -> Option<&'static DescriptorPool> {
    static POOL: OnceLock<Option<DescriptorPool>> = OnceLock::new();
    POOL.get_or_init(|| DescriptorPool::decode(crate::proto::FILE_DESCRIPTOR_SET).ok())
        .as_ref()
}

macro_rules! v1_messages {
    ($($t:ident),* $(,)?) => {$(
        impl V1Message for pb::$t {
            fn descriptor() -> Option<MessageDescriptor> {
                pool()?.get_message_by_name(concat!("nvidia.inferenceserver.", stringify!($t)))
            }
        }
    )*};
}
v1_messages!(
    RequestStatus,
    InferRequestHeader,
    InferResponseHeader,
    ServerStatus,
    ModelRepositoryIndex,
);
