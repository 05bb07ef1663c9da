//! v1 test support: the capture fixtures (tests/fixtures/v1/captures.txt),
//! and the checks of v1 §3 — what the real v1 client needs
//! of an answer — applied to a neutral response.
#![allow(dead_code)]

use std::collections::HashMap;

use prost::Message;
use prost_reflect::{DescriptorPool, DynamicMessage};
use tensorgate::front::http::HttpResponse;
use tensorgate::proto::v1 as pb;
use tensorgate::proto::FILE_DESCRIPTOR_SET;

/// One captured request.
pub(crate) struct Capture {
    pub name: String,
    pub method: String,
    pub target: String,
    /// In wire order, names and values as the client wrote them.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Capture {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The request bytes exactly as the client sends them.
    pub(crate) fn wire(&self) -> Vec<u8> {
        let mut out = format!("{} {} HTTP/1.1\r\n", self.method, self.target).into_bytes();
        for (name, value) in &self.headers {
            // The client writes `NV-InferRequest:` without a space.
            let sep = if name == "NV-InferRequest" { ":" } else { ": " };
            out.extend_from_slice(format!("{name}{sep}{value}\r\n").as_bytes());
        }
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(&self.body);
        out
    }

    /// The parsed `NV-InferRequest`, for infer captures.
    pub(crate) fn infer_header(&self) -> Option<pb::InferRequestHeader> {
        let value = self.header("NV-InferRequest")?;
        let message = DynamicMessage::parse_text_format(descriptor("InferRequestHeader"), value)
            .expect("capture header parses");
        Some(message.transcode_to().expect("transcodes"))
    }
}

pub(crate) fn captures() -> Vec<Capture> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/v1/captures.txt"
    );
    let text = std::fs::read_to_string(path).expect("captures fixture");
    let mut out = Vec::new();
    for block in text.split("\n=== ").skip(1) {
        let mut lines = block.lines();
        let name = lines.next().expect("name").trim().to_string();
        let (request_line, mut headers, mut body) =
            (lines.next().expect("request line"), Vec::new(), Vec::new());
        let mut parts = request_line.split(' ');
        let method = parts.next().expect("method").to_string();
        let target = parts.next().expect("target").to_string();
        for line in lines {
            if let Some(spec) = line.strip_prefix("--- body ") {
                body = body_bytes(spec);
            } else if let Some((n, v)) = line.split_once(':') {
                let v = v.strip_prefix(' ').unwrap_or(v);
                headers.push((n.to_string(), v.to_string()));
            }
        }
        if let Some((_, len)) = headers.iter().find(|(n, _)| n == "Content-Length") {
            assert_eq!(
                len.parse::<usize>().unwrap(),
                body.len(),
                "{name}: Content-Length"
            );
        }
        out.push(Capture {
            name,
            method,
            target,
            headers,
            body,
        });
    }
    out
}

fn body_bytes(spec: &str) -> Vec<u8> {
    let mut out = Vec::new();
    for token in spec.split(" | ") {
        let values = token.strip_prefix("i32 ").expect("i32 token");
        let ints: Vec<i32> = if let Some((a, b)) = values.split_once("..") {
            (a.parse().unwrap()..b.parse().unwrap()).collect()
        } else {
            let (v, n) = values.split_once('x').expect("VxN");
            vec![v.parse().unwrap(); n.parse().unwrap()]
        };
        out.extend(ints.iter().flat_map(|i| i.to_le_bytes()));
    }
    out
}

pub(crate) fn descriptor(name: &str) -> prost_reflect::MessageDescriptor {
    DescriptorPool::decode(FILE_DESCRIPTOR_SET)
        .expect("pool")
        .get_message_by_name(&format!("nvidia.inferenceserver.{name}"))
        .expect("v1 message")
}

/// A response as the client sees it: header names case-insensitive.
pub(crate) struct Seen {
    pub status: u16,
    pub headers: HashMap<String, String>,
    pub body: Vec<u8>,
}

impl From<HttpResponse> for Seen {
    fn from(r: HttpResponse) -> Seen {
        Seen {
            status: r.status,
            headers: r
                .headers
                .iter()
                .map(|(n, v)| (n.to_ascii_lowercase(), v.clone()))
                .collect(),
            body: r.body_bytes(),
        }
    }
}

impl Seen {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .get(&name.to_ascii_lowercase())
            .map(String::as_str)
    }

    /// `NV-Status`, parsed with the 2020 schema (unknown fields fail).
    pub(crate) fn nv_status(&self) -> pb::RequestStatus {
        let value = self.header("NV-Status").expect("NV-Status header");
        DynamicMessage::parse_text_format(descriptor("RequestStatus"), value)
            .unwrap_or_else(|e| panic!("NV-Status {value:?} does not parse: {e}"))
            .transcode_to()
            .expect("transcodes")
    }

    /// Success as the client needs it: 200 and NV-Status SUCCESS.
    #[track_caller]
    pub(crate) fn assert_success(&self) {
        let status = self.nv_status();
        assert_eq!(
            (self.status, status.code),
            (200, pb::RequestStatusCode::Success as i32),
            "{status:?}"
        );
        assert!(status.request_id > 0);
        assert_eq!(status.server_id, "inference:0");
    }

    /// A failure: never 200, never SUCCESS; returns the message.
    #[track_caller]
    pub(crate) fn assert_failure(&self, code: pb::RequestStatusCode) -> String {
        let status = self.nv_status();
        assert_eq!((self.status, status.code), (400, code as i32), "{status:?}");
        assert!(self.body.is_empty());
        status.msg
    }
}

/// The classes of one output in one batch entry.
pub(crate) type Classes = Vec<(i32, f32, String)>;

/// What the client reads from a successful infer answer (v1 §3 "Infer"), each
/// requirement asserted: header text with the 2020 schema, `model_name`,
/// `batch_size`, outputs in request order, raw dims and whole-batch sizes,
/// body = raw outputs in header order + a binary trailer, classes from the
/// trailer only.
pub(crate) struct InferSeen {
    pub header: pb::InferResponseHeader,
    pub trailer: pb::InferResponseHeader,
    /// Raw outputs by name.
    pub raw: HashMap<String, Vec<u8>>,
    /// Classes by output name, one list per batch entry.
    pub classes: HashMap<String, Vec<Classes>>,
}

#[track_caller]
pub(crate) fn client_reads_infer(
    seen: &Seen,
    request: &pb::InferRequestHeader,
    model: &str,
) -> InferSeen {
    seen.assert_success();
    let value = seen
        .header("NV-InferResponse")
        .expect("NV-InferResponse header");
    assert!(
        !value.contains("data_type"),
        "field unknown to the 1.11 client: {value}"
    );
    let header: pb::InferResponseHeader =
        DynamicMessage::parse_text_format(descriptor("InferResponseHeader"), value)
            .unwrap_or_else(|e| panic!("NV-InferResponse {value:?} does not parse: {e}"))
            .transcode_to()
            .expect("transcodes");
    assert_eq!(header.model_name, model, "model_name");
    assert_eq!(
        header.batch_size, request.batch_size,
        "batch_size (0 kills the client)"
    );
    let names: Vec<&str> = header.output.iter().map(|o| o.name.as_str()).collect();
    let wanted: Vec<&str> = request.output.iter().map(|o| o.name.as_str()).collect();
    assert_eq!(names, wanted, "one output per requested output, in order");
    let mut offset = 0usize;
    let mut raw = HashMap::new();
    for (output, asked) in header.output.iter().zip(&request.output) {
        if asked.cls.is_some() {
            assert!(output.raw.is_none(), "class output {} has raw", output.name);
            continue;
        }
        let info = output.raw.as_ref().expect("raw output has raw { }");
        assert!(!info.dims.is_empty(), "raw.dims");
        let len = info.batch_byte_size as usize;
        let data = seen
            .body
            .get(offset..offset + len)
            .expect("body holds the raw output");
        raw.insert(output.name.clone(), data.to_vec());
        offset += len;
    }
    let trailer_bytes = &seen.body[offset..];
    assert!(!trailer_bytes.is_empty(), "trailer");
    let trailer = pb::InferResponseHeader::decode(trailer_bytes).expect("binary trailer");
    assert_eq!(trailer.model_name, model);
    assert!(trailer.model_version > 0);
    assert_eq!(trailer.batch_size, request.batch_size);
    let mut classes = HashMap::new();
    for (output, asked) in trailer.output.iter().zip(&request.output) {
        let Some(cls) = &asked.cls else { continue };
        assert_eq!(
            output.batch_classes.len(),
            request.batch_size as usize,
            "one per batch entry"
        );
        let lists: Vec<Classes> = output
            .batch_classes
            .iter()
            .map(|b| {
                assert!(!b.cls.is_empty() && b.cls.len() <= cls.count as usize);
                b.cls
                    .iter()
                    .map(|c| (c.idx, c.value, c.label.clone()))
                    .collect()
            })
            .collect();
        classes.insert(output.name.clone(), lists);
    }
    InferSeen {
        header,
        trailer,
        raw,
        classes,
    }
}

/// Little-endian int32 values.
pub(crate) fn ints(data: &[u8]) -> Vec<i32> {
    data.chunks_exact(4)
        .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}
