//! Protocol-neutral inference data: datatypes, shapes, tensors, requests and
//! responses. Imports nothing of ours; `wire` decodes into these types and
//! `translate` turns them into gRPC messages and back.

use bytes::Bytes;

/// A tensor element type, named as in the v2 protocol (`"FP32"`, `"BYTES"`, ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DataType {
    Bool,
    Uint8,
    Uint16,
    Uint32,
    Uint64,
    Int8,
    Int16,
    Int32,
    Int64,
    Fp16,
    Fp32,
    Fp64,
    Bytes,
    Bf16,
}

/// Every datatype, in the order Triton lists them.
pub const ALL_DATATYPES: [DataType; 14] = [
    DataType::Bool,
    DataType::Uint8,
    DataType::Uint16,
    DataType::Uint32,
    DataType::Uint64,
    DataType::Int8,
    DataType::Int16,
    DataType::Int32,
    DataType::Int64,
    DataType::Fp16,
    DataType::Fp32,
    DataType::Fp64,
    DataType::Bytes,
    DataType::Bf16,
];

impl DataType {
    /// Exact, case-sensitive mapping of the protocol name (v2 §2.3 item 3).
    pub fn parse(name: &[u8]) -> Option<DataType> {
        Some(match name {
            b"BOOL" => DataType::Bool,
            b"UINT8" => DataType::Uint8,
            b"UINT16" => DataType::Uint16,
            b"UINT32" => DataType::Uint32,
            b"UINT64" => DataType::Uint64,
            b"INT8" => DataType::Int8,
            b"INT16" => DataType::Int16,
            b"INT32" => DataType::Int32,
            b"INT64" => DataType::Int64,
            b"FP16" => DataType::Fp16,
            b"FP32" => DataType::Fp32,
            b"FP64" => DataType::Fp64,
            b"BYTES" => DataType::Bytes,
            b"BF16" => DataType::Bf16,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            DataType::Bool => "BOOL",
            DataType::Uint8 => "UINT8",
            DataType::Uint16 => "UINT16",
            DataType::Uint32 => "UINT32",
            DataType::Uint64 => "UINT64",
            DataType::Int8 => "INT8",
            DataType::Int16 => "INT16",
            DataType::Int32 => "INT32",
            DataType::Int64 => "INT64",
            DataType::Fp16 => "FP16",
            DataType::Fp32 => "FP32",
            DataType::Fp64 => "FP64",
            DataType::Bytes => "BYTES",
            DataType::Bf16 => "BF16",
        }
    }

    /// Bytes per element; `None` for BYTES (variable, length-prefixed).
    pub fn element_size(self) -> Option<usize> {
        Some(match self {
            DataType::Bool | DataType::Uint8 | DataType::Int8 => 1,
            DataType::Uint16 | DataType::Int16 | DataType::Fp16 | DataType::Bf16 => 2,
            DataType::Uint32 | DataType::Int32 | DataType::Fp32 => 4,
            DataType::Uint64 | DataType::Int64 | DataType::Fp64 => 8,
            DataType::Bytes => return None,
        })
    }

    /// The ModelConfig enum name (`TYPE_FP32`, `TYPE_STRING` for BYTES).
    pub fn config_name(self) -> &'static str {
        match self {
            DataType::Bytes => "TYPE_STRING",
            other => CONFIG_NAMES[other as usize],
        }
    }

    /// Maps a ModelConfig enum name back (`TYPE_STRING` is BYTES).
    pub fn from_config_name(name: &str) -> Option<DataType> {
        if name == "TYPE_STRING" {
            return Some(DataType::Bytes);
        }
        ALL_DATATYPES
            .into_iter()
            .find(|d| *d != DataType::Bytes && d.config_name() == name)
    }
}

/// A tensor's datatype as a request or an answer names it, read once:
/// one we know, or a name we do not, kept as written so the upstream
/// refuses it in its own words (an input) or the client sees it (an
/// output).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum DeclaredType {
    Known(DataType),
    Unknown(Box<str>),
}

impl DeclaredType {
    /// Reads a protocol name (exact, case-sensitive: `DataType::parse`).
    pub fn read(name: &str) -> DeclaredType {
        match DataType::parse(name.as_bytes()) {
            Some(known) => DeclaredType::Known(known),
            None => DeclaredType::Unknown(name.into()),
        }
    }

    /// The datatype, when it is one we know.
    pub fn known(&self) -> Option<DataType> {
        match self {
            DeclaredType::Known(known) => Some(*known),
            DeclaredType::Unknown(_) => None,
        }
    }

    /// The name as the protocol writes it (an unknown one as it came).
    pub fn as_str(&self) -> &str {
        match self {
            DeclaredType::Known(known) => known.as_str(),
            DeclaredType::Unknown(name) => name,
        }
    }
}

impl From<DataType> for DeclaredType {
    fn from(known: DataType) -> DeclaredType {
        DeclaredType::Known(known)
    }
}

impl From<String> for DeclaredType {
    /// [`DeclaredType::read`], keeping an unknown name's own buffer.
    fn from(name: String) -> DeclaredType {
        match DataType::parse(name.as_bytes()) {
            Some(known) => DeclaredType::Known(known),
            None => DeclaredType::Unknown(name.into_boxed_str()),
        }
    }
}

impl From<&str> for DeclaredType {
    fn from(name: &str) -> DeclaredType {
        DeclaredType::read(name)
    }
}

impl PartialEq<DataType> for DeclaredType {
    fn eq(&self, other: &DataType) -> bool {
        self.known() == Some(*other)
    }
}

impl std::fmt::Display for DeclaredType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

const CONFIG_NAMES: [&str; 14] = [
    "TYPE_BOOL",
    "TYPE_UINT8",
    "TYPE_UINT16",
    "TYPE_UINT32",
    "TYPE_UINT64",
    "TYPE_INT8",
    "TYPE_INT16",
    "TYPE_INT32",
    "TYPE_INT64",
    "TYPE_FP16",
    "TYPE_FP32",
    "TYPE_FP64",
    "TYPE_STRING",
    "TYPE_BF16",
];

/// Number of elements of `shape`, or `None` when a dim is negative or the
/// product overflows. Like Triton, an empty shape has zero elements for JSON
/// data (v2 §2.3, `J16`); callers that need scalar semantics say so.
pub fn element_count(shape: &[i64]) -> Option<u64> {
    if shape.is_empty() {
        return Some(0);
    }
    shape.iter().try_fold(1u64, |acc, &d| {
        let d = u64::try_from(d).ok()?;
        acc.checked_mul(d)
    })
}

/// A typed parameter value, as `InferParameter` carries it.
#[derive(Debug, Clone, PartialEq)]
pub enum Param {
    Bool(bool),
    Int64(i64),
    Uint64(u64),
    Double(f64),
    String(String),
}

/// Where an input's (or output's) data lives when it is in shared memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SharedMemory {
    pub region: String,
    pub offset: u64,
    pub byte_size: u64,
}

/// The data source of one input.
#[derive(Debug, Clone, PartialEq)]
pub enum InputData {
    /// Serialized tensor bytes (little-endian, BYTES length-prefixed).
    Raw(Bytes),
    SharedMemory(SharedMemory),
    /// This many bytes that follow in the rest of a streamed request body
    /// (`body::BodyRest`), in input order; never BYTES.
    Streamed(u64),
}

#[derive(Debug, Clone, PartialEq)]
pub struct InputTensor {
    pub name: String,
    /// The datatype, read once (an unknown name is forwarded as written,
    /// so the upstream reports its own mismatch error).
    pub datatype: DeclaredType,
    pub shape: Vec<i64>,
    pub data: InputData,
}

/// How an output should be rendered in the HTTP answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputKind {
    Json,
    Binary,
    SharedMemory,
}

#[derive(Debug, Clone, PartialEq)]
pub struct RequestedOutput {
    pub name: String,
    /// Top-K classification; 0 = off (never forwarded upstream).
    pub classification: u32,
    pub kind: OutputKind,
    pub shared_memory: Option<SharedMemory>,
}

/// A decoded inference request, independent of HTTP or gRPC.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct InferRequest {
    pub model_name: String,
    pub model_version: String,
    /// Request id as the client sent it (raw bytes, echoed verbatim).
    pub id: Vec<u8>,
    /// Parameters in document order (reserved ones already typed, v2 §5.1).
    pub parameters: Vec<(String, Param)>,
    pub inputs: Vec<InputTensor>,
    /// Outputs listed by the client (duplicates collapsed).
    pub outputs: Vec<RequestedOutput>,
    /// Kind of outputs *not* listed in `outputs` (`binary_data_output`).
    pub unlisted_kind: Option<OutputKind>,
}

impl InferRequest {
    /// The render kind of an output the upstream produced (v2 §2.4).
    pub fn output_kind(&self, name: &str) -> OutputKind {
        match self.outputs.iter().find(|o| o.name == name) {
            Some(o) => o.kind,
            None => self.unlisted_kind.unwrap_or(OutputKind::Json),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct OutputTensor {
    pub name: String,
    /// As the upstream named it, read once.
    pub datatype: DeclaredType,
    pub shape: Vec<i64>,
    /// Raw bytes as the upstream sent them (empty for shm outputs).
    pub data: Bytes,
}

/// A decoded inference response.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct InferResponse {
    pub id: Vec<u8>,
    pub model_name: String,
    pub model_version: String,
    pub parameters: Vec<(String, Param)>,
    pub outputs: Vec<OutputTensor>,
}

/// What the gateway knows of a model's signature (from the upstream's
/// ModelConfig, or its ModelMetadata when the server has no ModelConfig).
#[derive(Debug, Clone, PartialEq)]
pub struct TensorInfo {
    pub name: String,
    /// `None` when the upstream named a type we do not know.
    pub datatype: Option<DataType>,
    /// Dims without the batch dimension (`-1` = variable).
    pub dims: Vec<i64>,
    pub optional: bool,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct ModelInfo {
    pub max_batch_size: i64,
    pub decoupled: bool,
    pub inputs: Vec<TensorInfo>,
    pub outputs: Vec<TensorInfo>,
}

impl ModelInfo {
    pub fn input(&self, name: &str) -> Option<&TensorInfo> {
        self.inputs.iter().find(|t| t.name == name)
    }

    pub fn output(&self, name: &str) -> Option<&TensorInfo> {
        self.outputs.iter().find(|t| t.name == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn datatype_names_round_trip() {
        for d in ALL_DATATYPES {
            assert_eq!(DataType::parse(d.as_str().as_bytes()), Some(d));
            assert_eq!(DataType::from_config_name(d.config_name()), Some(d));
        }
        assert_eq!(DataType::parse(b"fp32"), None);
        assert_eq!(DataType::parse(b"STRING"), None);
        assert_eq!(DataType::Bytes.config_name(), "TYPE_STRING");
    }

    #[test]
    fn a_declared_type_keeps_an_unknown_name_as_written() {
        for d in ALL_DATATYPES {
            assert_eq!(DeclaredType::read(d.as_str()), DeclaredType::Known(d));
            assert_eq!(DeclaredType::from(d.as_str().to_string()).known(), Some(d));
        }
        for name in ["fp32", "FP8", "", "TYPE_FP32"] {
            let read = DeclaredType::read(name);
            assert_eq!(read, DeclaredType::Unknown(name.into()));
            assert_eq!(read.known(), None);
            assert_eq!(read.as_str(), name);
            assert_eq!(DeclaredType::from(name.to_string()), read);
        }
        assert_eq!(DeclaredType::read("BYTES"), DataType::Bytes);
        assert_ne!(DeclaredType::read("BYTE"), DataType::Bytes);
    }

    #[test]
    fn element_count_checks_overflow_and_sign() {
        assert_eq!(element_count(&[]), Some(0));
        assert_eq!(element_count(&[2, 3]), Some(6));
        assert_eq!(element_count(&[-1]), None);
        assert_eq!(element_count(&[i64::MAX, 3]), None);
    }
}

/// A model reference taken from the path: name used verbatim, version as
/// written (digits only; empty = the server's version policy).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelRef {
    pub name: String,
    pub version: String,
}
