//! Generated protobuf wire types and gRPC stubs (built by `build.rs` from
//! the repository's top-level `proto/*.proto`), shared by the gateway (as
//! `tensorgate::proto`) and the demo upstream (`tensorgate-demo`).
//!
//! These types describe Triton's gRPC protocol byte for byte; they belong at
//! the edges of the gateway (the gRPC client and the translation layer) and
//! should not leak into protocol-neutral code.
//!
//! * [`inference`]: package `inference` — `GRPCInferenceService` (client in
//!   `inference::grpc_inference_service_client`, server in
//!   `inference::grpc_inference_service_server`) and Triton's `ModelConfig`.
//! * [`health`]: package `grpc.health.v1` — the standard health service.
//! * [`v1`]: package `nvidia.inferenceserver` — the legacy v1 API.
//! * [`FILE_DESCRIPTOR_SET`]: the encoded descriptors of all three files, for
//!   run-time reflection with `prost-reflect` (e.g. rendering `ModelConfig` as
//!   JSON in declaration order, as Triton does).

// No lint allowances are needed on the generated modules: with the current
// toolchain they build clippy-clean.

/// Package `inference`: Triton's inference service and model configuration.
pub mod inference {
    tonic::include_proto!("inference");
}

/// Package `grpc.health.v1`: the standard gRPC health-checking service.
pub mod health {
    tonic::include_proto!("grpc.health.v1");
}

/// Package `nvidia.inferenceserver`: the legacy TensorRT Inference Server v1
/// messages (the top-level `proto/v1/`), spoken by the gateway's `/api/...` front and its
/// v1 gRPC service.
pub mod v1 {
    tonic::include_proto!("nvidia.inferenceserver");
}

/// Encoded `google.protobuf.FileDescriptorSet` of `model_config.proto`,
/// `grpc_service.proto`, `health.proto` and the v1 files (with source info).
pub const FILE_DESCRIPTOR_SET: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/tensorgate_descriptor.bin"));

#[cfg(test)]
mod tests {
    use super::FILE_DESCRIPTOR_SET;
    use prost_reflect::DescriptorPool;

    fn pool() -> DescriptorPool {
        DescriptorPool::decode(FILE_DESCRIPTOR_SET).expect("descriptor set decodes")
    }

    #[test]
    fn model_config_fields_in_triton_declaration_order() {
        let config = pool()
            .get_message_by_name("inference.ModelConfig")
            .expect("inference.ModelConfig exists");
        // Declaration order lives in `DescriptorProto.field`. Beware:
        // `MessageDescriptor::fields()` iterates in field-number order
        // (prost-reflect keeps a BTreeMap), which differs for ModelConfig.
        let declared = &config.descriptor_proto().field;
        let names: Vec<&str> = declared.iter().map(|f| f.name()).collect();
        assert_eq!(
            names,
            [
                "name",
                "platform",
                "backend",
                "runtime",
                "version_policy",
                "max_batch_size",
                "input",
                "output",
                "batch_input",
                "batch_output",
                "optimization",
                "dynamic_batching",
                "sequence_batching",
                "ensemble_scheduling",
                "instance_group",
                "default_model_filename",
                "cc_model_filenames",
                "metric_tags",
                "parameters",
                "model_warmup",
                "model_operations",
                "model_transaction_policy",
                "model_repository_agents",
                "response_cache",
            ]
        );
        let numbers: Vec<i32> = declared.iter().map(|f| f.number()).collect();
        assert_eq!(
            numbers,
            [
                1, 2, 17, 25, 3, 4, 5, 6, 20, 21, 12, 11, 13, 15, 7, 8, 9, 10, 14, 16, 18, 19, 23,
                24
            ]
        );
        let by_number: Vec<u32> = config.fields().map(|f| f.number()).collect();
        assert_eq!(by_number, (1..=25).filter(|n| *n != 22).collect::<Vec<_>>());
    }

    #[test]
    fn inference_service_has_triton_rpcs() {
        let pool = pool();
        let service = pool
            .get_service_by_name("inference.GRPCInferenceService")
            .expect("inference.GRPCInferenceService exists");
        let methods: Vec<String> = service.methods().map(|m| m.name().to_owned()).collect();
        assert_eq!(
            methods,
            [
                "ServerLive",
                "ServerReady",
                "ModelReady",
                "ServerMetadata",
                "ModelMetadata",
                "ModelInfer",
                "ModelStreamInfer",
                "ModelConfig",
                "ModelStatistics",
                "RepositoryIndex",
                "RepositoryModelLoad",
                "RepositoryModelUnload",
                "SystemSharedMemoryStatus",
                "SystemSharedMemoryRegister",
                "SystemSharedMemoryUnregister",
                "CudaSharedMemoryStatus",
                "CudaSharedMemoryRegister",
                "CudaSharedMemoryUnregister",
                "TraceSetting",
                "LogSettings",
            ]
        );
        for method in service.methods() {
            let streaming = method.name() == "ModelStreamInfer";
            assert_eq!(method.is_client_streaming(), streaming, "{}", method.name());
            assert_eq!(method.is_server_streaming(), streaming, "{}", method.name());
        }
        assert!(pool.get_service_by_name("grpc.health.v1.Health").is_some());
    }

    #[test]
    fn raw_contents_are_bytes() {
        // `.bytes(".")` in build.rs: raw tensor data is shared, not copied.
        let request = super::inference::ModelInferRequest::default();
        let _: &Vec<bytes::Bytes> = &request.raw_input_contents;
        let response = super::inference::ModelInferResponse::default();
        let _: &Vec<bytes::Bytes> = &response.raw_output_contents;
    }
}
