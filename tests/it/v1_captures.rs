//! The v1 client's exact requests (tests/fixtures/v1/captures.txt, from
//! v1 §2) against the gateway and the embedded demo
//! upstream — in-process, and byte for byte over one keep-alive connection
//! to the real binary — and every requirement of v1 §3 checked on
//! the answers.

use std::collections::HashMap;
use std::io::Write;
use std::net::TcpStream;
use std::time::Duration;

use crate::support::{GatewayProcess, Harness};
use crate::v1::{client_reads_infer, ints, Capture, Seen};
use http::Method;
use prost::Message;
use tensorgate::proto::v1 as pb;

async fn in_process(h: &Harness, c: &Capture) -> Seen {
    let headers: Vec<(&str, &str)> = c
        .headers
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_str()))
        .collect();
    let method = Method::from_bytes(c.method.as_bytes()).expect("method");
    Seen::from(h.send(method, &c.target, &headers, c.body.clone()).await)
}

/// Checks one capture's answer; `upstream_saw` is the demo's last request
/// when the gateway runs in-process.
fn check(c: &Capture, seen: &Seen) {
    match c.name.as_str() {
        "health_live" | "health_ready" => assert_eq!(seen.status, 200, "{}", c.name),
        "status_all" | "status_simple" => check_status(c, seen),
        "status_unknown_model" => {
            let msg = seen.assert_failure(pb::RequestStatusCode::NotFound);
            assert_eq!(msg, "no status available for unknown model 'nosuch'");
        }
        "wrong_dims" => {
            let msg = seen.assert_failure(pb::RequestStatusCode::InvalidArg);
            assert_eq!(
                msg,
                "unexpected shape for input 'INPUT0' for model 'simple'. Expected [16], got [15]"
            );
        }
        _ => check_simple_infer(c, seen),
    }
}

fn check_status(c: &Capture, seen: &Seen) {
    seen.assert_success();
    let status = pb::ServerStatus::decode(&seen.body[..]).expect("binary ServerStatus");
    assert_eq!(status.ready_state, pb::ServerReadyState::ServerReady as i32);
    let simple = status.model_status.get("simple").expect("exact model name");
    let config = simple.config.as_ref().expect("config");
    assert_eq!(config.max_batch_size, 8);
    let tensors = |t: Vec<(&str, i32, &[i64])>| -> Vec<(String, i32, Vec<i64>)> {
        t.into_iter()
            .map(|(n, d, dims)| (n.to_string(), d, dims.to_vec()))
            .collect()
    };
    let int32 = pb::DataType::TypeInt32 as i32;
    assert_eq!(
        config
            .input
            .iter()
            .map(|i| (i.name.clone(), i.data_type, i.dims.clone()))
            .collect::<Vec<_>>(),
        tensors(vec![("INPUT0", int32, &[16]), ("INPUT1", int32, &[16])])
    );
    assert_eq!(
        config
            .output
            .iter()
            .map(|o| (o.name.clone(), o.data_type, o.dims.clone()))
            .collect::<Vec<_>>(),
        tensors(vec![("OUTPUT0", int32, &[16]), ("OUTPUT1", int32, &[16])])
    );
    assert_eq!(
        simple.version_status[&1].ready_state,
        pb::ModelReadyState::ModelReady as i32
    );
    if c.name == "status_all" {
        assert!(status.model_status.contains_key("add_sub"));
    } else {
        assert_eq!(status.model_status.len(), 1);
    }
}

/// `simple`: OUTPUT0 = INPUT0 + INPUT1, OUTPUT1 = INPUT0 - INPUT1, checked
/// value by value, raw or as top-K classes per batch entry.
fn check_simple_infer(c: &Capture, seen: &Seen) {
    let request = c.infer_header().expect("infer capture");
    let got = client_reads_infer(seen, &request, "simple");
    let batch = request.batch_size as usize;
    let values = ints(&c.body);
    let (a, b) = values.split_at(values.len() / 2);
    let expected: HashMap<&str, Vec<i32>> = HashMap::from([
        ("OUTPUT0", a.iter().zip(b).map(|(x, y)| x + y).collect()),
        ("OUTPUT1", a.iter().zip(b).map(|(x, y)| x - y).collect()),
    ]);
    for output in &request.output {
        let want = &expected[output.name.as_str()];
        match &output.cls {
            None => {
                let raw = &got.raw[&output.name];
                assert_eq!(ints(raw), *want, "{} raw", output.name);
                let info = got.header.output.iter().find(|o| o.name == output.name);
                let info = info.and_then(|o| o.raw.as_ref()).expect("raw");
                assert_eq!(info.dims, [16], "dims exclude the batch dimension");
                assert_eq!(info.batch_byte_size, 64 * batch as u64, "whole batch");
            }
            Some(cls) => {
                let lists = &got.classes[&output.name];
                for (entry, list) in lists.iter().enumerate() {
                    let values = &want[entry * 16..(entry + 1) * 16];
                    let mut order: Vec<usize> = (0..16).collect();
                    order.sort_by(|x, y| values[*y].cmp(&values[*x]));
                    let top: Vec<(i32, f32, String)> = order
                        .iter()
                        .take(cls.count as usize)
                        .map(|i| (*i as i32, values[*i] as f32, String::new()))
                        .collect();
                    assert_eq!(*list, top, "{} entry {entry}", output.name);
                }
            }
        }
    }
}

#[tokio::test]
async fn every_capture_in_process() {
    let h = Harness::start().await;
    let captures = crate::v1::captures();
    assert_eq!(captures.len(), 13);
    for c in &captures {
        let seen = in_process(&h, c).await;
        check(c, &seen);
        if c.name == "sequence" {
            let sent = h.demo.last_request().expect("upstream saw it");
            let param = |k: &str| sent.parameters[k].parameter_choice.clone();
            use tensorgate::proto::inference::infer_parameter::ParameterChoice as P;
            assert_eq!(param("sequence_id"), Some(P::Int64Param(42)));
            assert_eq!(param("sequence_start"), Some(P::BoolParam(true)));
            assert!(!sent.parameters.contains_key("sequence_end"));
        }
    }
}

#[tokio::test]
async fn the_captures_match_the_facts_text() {
    // A capture's header and Content-Length exactly as in docs/protocol-v1.md.
    let captures = crate::v1::captures();
    let raw = captures.iter().find(|c| c.name == "raw_batch1").unwrap();
    let wire = String::from_utf8_lossy(&raw.wire()).into_owned();
    assert!(wire.contains("\r\nNV-InferRequest:batch_size: 1 input { name: \"INPUT0\" dims: 16 } input { name: \"INPUT1\" dims: 16 } output { name: \"OUTPUT0\" } output { name: \"OUTPUT1\" }\r\nContent-Length: 128\r\n\r\n"));
}

/// Reads one HTTP/1.1 answer with a Content-Length body.
fn read_seen(stream: &mut TcpStream) -> Seen {
    let (head, body) = crate::support::raw::read_answer(stream);
    let mut lines = head.split("\r\n");
    let status = lines.next().unwrap()[9..12].parse().unwrap();
    let headers: HashMap<String, String> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    Seen {
        status,
        headers,
        body,
    }
}

#[test]
fn every_capture_byte_for_byte_over_one_connection() {
    let gw = GatewayProcess::demo(&[]);
    let mut stream = TcpStream::connect(gw.addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    for c in crate::v1::captures() {
        stream.write_all(&c.wire()).expect("send");
        let seen = read_seen(&mut stream);
        check(&c, &seen);
    }
}
