//! The one answer checked before the load: status 200 and, for a built-in
//! workload, `OUTPUT0 = INPUT0 + INPUT1` and `OUTPUT1 = INPUT0 - INPUT1`
//! element by element, read from JSON `data`, binary tensor data or the
//! gRPC answer's `raw_output_contents`.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::grpc;
use crate::http::ERROR_BODY_SAMPLE;
use crate::response::Response;
use crate::shm::Regions;
use crate::workload::{f32s, Expected};

/// `Ok` when the answer is what `expected` says (any 200 without it).
pub(crate) fn validate(
    resp: &Response,
    expected: Option<&Expected>,
    grpc: bool,
) -> Result<(), String> {
    ok_status(resp)?;
    let Some(expected) = expected else {
        return Ok(());
    };
    if grpc {
        return check_outputs(&grpc::outputs(&resp.body)?, expected);
    }
    check_outputs(&http_outputs(resp, expected.binary)?, expected)
}

/// A shared-memory answer (workload w6): both outputs listed without data
/// or a binary part, as Triton answers them, and the output windows
/// holding the sum and the difference.
pub(crate) fn validate_shm(
    resp: &Response,
    expected: &Expected,
    regions: &Regions,
) -> Result<(), String> {
    ok_status(resp)?;
    if resp.inference_header_len.is_some() {
        return Err("outputs in shared memory but got a binary answer".into());
    }
    let header: Value =
        serde_json::from_slice(&resp.body).map_err(|e| format!("response JSON: {e}"))?;
    let outputs = header["outputs"]
        .as_array()
        .ok_or("response has no \"outputs\" array")?;
    if outputs.len() != 2 || outputs.iter().any(|o| o.get("data").is_some()) {
        return Err(format!("outputs in shared memory, answered {header}"));
    }
    let [sum, diff] = regions.outputs()?;
    let seen = BTreeMap::from([("OUTPUT0".to_string(), sum), ("OUTPUT1".to_string(), diff)]);
    check_outputs(&seen, expected)
}

/// Status 200, or the error with a sample of the body.
fn ok_status(resp: &Response) -> Result<(), String> {
    if resp.status == 200 {
        return Ok(());
    }
    Err(format!(
        "status {}: {}",
        resp.status,
        String::from_utf8_lossy(&resp.body[..resp.body.len().min(ERROR_BODY_SAMPLE)])
    ))
}

/// The FP32 outputs of an HTTP answer, by name: binary after the JSON
/// header (`binary`), or the header's `data` arrays.
fn http_outputs(resp: &Response, binary: bool) -> Result<BTreeMap<String, Vec<f32>>, String> {
    let header_len = if binary {
        resp.inference_header_len
            .ok_or("binary outputs requested but no Inference-Header-Content-Length")?
    } else {
        if resp.inference_header_len.is_some() {
            return Err("JSON outputs requested but got Inference-Header-Content-Length".into());
        }
        resp.body.len()
    };
    if header_len > resp.body.len() {
        return Err(format!(
            "Inference-Header-Content-Length {header_len} > body {}",
            resp.body.len()
        ));
    }
    let header: Value = serde_json::from_slice(&resp.body[..header_len])
        .map_err(|e| format!("response JSON: {e}"))?;
    let outputs = header["outputs"]
        .as_array()
        .ok_or("response has no \"outputs\" array")?;
    let mut offset = header_len;
    let mut seen = BTreeMap::new();
    for out in outputs {
        let name = out["name"].as_str().unwrap_or("?").to_string();
        if out["datatype"] != "FP32" {
            return Err(format!("{name}: datatype {}", out["datatype"]));
        }
        let data = if binary {
            let size = out["parameters"]["binary_data_size"]
                .as_u64()
                .ok_or_else(|| format!("{name}: no binary_data_size"))?
                as usize;
            let end = offset + size;
            let raw = resp
                .body
                .get(offset..end)
                .ok_or_else(|| format!("{name}: binary data past the end of the body"))?;
            offset = end;
            f32s(raw)
        } else {
            json_f32s(&out["data"]).ok_or_else(|| format!("{name}: no numeric \"data\""))?
        };
        seen.insert(name, data);
    }
    if offset != resp.body.len() {
        return Err(format!(
            "{} trailing bytes after the outputs",
            resp.body.len() - offset
        ));
    }
    Ok(seen)
}

fn json_f32s(value: &Value) -> Option<Vec<f32>> {
    value
        .as_array()?
        .iter()
        .map(|v| v.as_f64().map(|f| f as f32))
        .collect()
}

fn compare(name: &str, got: &[f32], want: &[f32]) -> Result<(), String> {
    if got.len() != want.len() {
        return Err(format!(
            "{name}: {} elements, expected {}",
            got.len(),
            want.len()
        ));
    }
    match got.iter().zip(want).position(|(g, w)| g != w) {
        None => Ok(()),
        Some(i) => Err(format!(
            "{name}[{i}] = {:?}, expected {:?}",
            got[i], want[i]
        )),
    }
}

/// `OUTPUT0` and `OUTPUT1` against the sum and the difference of the inputs.
fn check_outputs(seen: &BTreeMap<String, Vec<f32>>, expected: &Expected) -> Result<(), String> {
    for (name, want) in [("OUTPUT0", &expected.sum), ("OUTPUT1", &expected.diff)] {
        let got = seen
            .get(name)
            .ok_or_else(|| format!("{name} missing from the response"))?;
        compare(name, got, want)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::{inputs, le_bytes, Workload};

    fn response(body: Vec<u8>, inference_header_len: Option<usize>) -> Response {
        Response {
            status: 200,
            close: false,
            inference_header_len,
            retry_after: false,
            body_len: body.len() as u64,
            body,
        }
    }

    fn binary_answer(sum: &[f32], diff: &[f32]) -> Response {
        let size = sum.len() * 4;
        let header = format!(
            r#"{{"outputs":[{{"name":"OUTPUT0","datatype":"FP32","parameters":{{"binary_data_size":{size}}}}},{{"name":"OUTPUT1","datatype":"FP32","parameters":{{"binary_data_size":{size}}}}}]}}"#
        );
        let mut body = header.clone().into_bytes();
        body.extend(le_bytes(sum));
        body.extend(le_bytes(diff));
        response(body, Some(header.len()))
    }

    #[test]
    fn binary_outputs_are_checked_element_by_element() {
        let (_, _, expected) = inputs(Workload::SmallBinary, 4);
        let right = binary_answer(&expected.sum, &expected.diff);
        assert_eq!(validate(&right, Some(&expected), false), Ok(()));
        let mut diff = expected.diff.clone();
        diff[2] += 1.0;
        let wrong = binary_answer(&expected.sum, &diff);
        let error = validate(&wrong, Some(&expected), false).unwrap_err();
        assert!(error.starts_with("OUTPUT1[2] = "), "{error}");
        let mut short = binary_answer(&expected.sum, &expected.diff);
        short.body.pop();
        assert!(validate(&short, Some(&expected), false).is_err());
    }

    #[test]
    fn json_outputs_are_read_from_data() {
        let (_, _, expected) = inputs(Workload::LargeJsonIntegral, 2);
        let body = br#"{"outputs":[{"name":"OUTPUT0","datatype":"FP32","data":[1.0,2.0]},{"name":"OUTPUT1","datatype":"FP32","data":[-1,0]}]}"#;
        assert_eq!(
            validate(&response(body.to_vec(), None), Some(&expected), false),
            Ok(())
        );
        let error = validate(&response(body.to_vec(), Some(3)), Some(&expected), false);
        assert!(error
            .unwrap_err()
            .contains("Inference-Header-Content-Length"));
    }

    #[test]
    fn a_failed_status_is_reported_with_its_body() {
        let mut r = response(br#"{"error":"no"}"#.to_vec(), None);
        r.status = 400;
        assert_eq!(
            validate(&r, None, false),
            Err(r#"status 400: {"error":"no"}"#.into())
        );
        r.status = 200;
        assert_eq!(validate(&r, None, false), Ok(()));
    }
}
