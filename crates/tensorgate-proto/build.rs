//! Build script: compiles the protobuf definitions in the repository's
//! top-level `proto/` (`../../proto` from this crate) into Rust code.
//!
//! Everything is pure Rust: `protox` parses the `.proto` files into a
//! `FileDescriptorSet` (no `protoc` is needed), which is
//!
//! * written to `$OUT_DIR/tensorgate_descriptor.bin`, so the gateway can use it
//!   at run time with `prost-reflect` (e.g. to render `ModelConfig` as JSON in
//!   declaration order, like Triton), and
//! * handed to `tonic-prost-build`, which generates the message types plus the
//!   gRPC clients and servers.

use std::path::PathBuf;

/// The `.proto` files live at the top of the repository (the layout the
/// product was specified with: `Cargo.toml, src, proto, config, ...`), not in
/// this crate: they are the protocol's definition, which this crate only
/// compiles. (The crate is not published, so reaching outside it is fine.)
const PROTO_DIR: &str = "../../proto";
const PROTO_FILES: [&str; 4] = [
    "grpc_service.proto",
    "model_config.proto",
    "health.proto",
    "v1/grpc_service.proto",
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed={PROTO_DIR}");
    for file in PROTO_FILES {
        println!("cargo:rerun-if-changed={PROTO_DIR}/{file}");
    }

    let mut compiler = protox::Compiler::new([PROTO_DIR])?;
    // Keep comments (they become doc comments on the generated types) and
    // make the set self-contained.
    compiler.include_source_info(true).include_imports(true);
    compiler.open_files(PROTO_FILES)?;

    let out_dir = PathBuf::from(std::env::var("OUT_DIR")?);
    std::fs::write(
        out_dir.join("tensorgate_descriptor.bin"),
        compiler.encode_file_descriptor_set(),
    )?;

    tonic_prost_build::configure()
        // Every `bytes` field (raw_input_contents, raw_output_contents, ...)
        // becomes `bytes::Bytes`, so tensor data can be shared without copies.
        .bytes(".")
        .build_server(true)
        .build_client(true)
        .compile_fds(compiler.file_descriptor_set())?;

    Ok(())
}
