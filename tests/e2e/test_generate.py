"""/generate and /generate_stream: Triton's own HTTP answers against the
gateway's, which reaches the same Triton over gRPC ModelStreamInfer
(v2 §1.6, v2 §6.4).  The differential table below is run with the machinery
of test_differential.py (same checks of Triton's answer, same comparison,
byte for byte, chunked bodies compared decoded).  Then stories with real
SSE clients: the first event arrives while the model is still generating,
and a client that disconnects cancels the generation upstream (the e2e
model notices the cancellation and writes a marker file).
"""

import json
import os
import socket
import tempfile
import time

import pytest
import requests

from conftest import selftest_mode
from diffcases import ABSENT, Case, ERR, POST, js
from test_differential import check_triton, compare, run_case

SSE = "text/event-stream; charset=utf-8"
NOT_ONE = ("generate expects model to produce exactly 1 response, use generate stream for "
           "model that generates various number of responses")


def G(model, stream=False):
    return "/v2/models/%s/%s" % (model, "generate_stream" if stream else "generate")


def events(*objects):
    return b"".join(b"data: " + o + b"\n\n" for o in objects)


def token(model, text, id=None):
    head = b'{"id":"%s",' % id.encode() if id else b"{"
    return head + b'"model_name":"%s","model_version":"1","text_output":"%s"}' % (
        model.encode(), text.encode())


CASES = []


def case(id, *steps, facts=""):
    CASES.append(Case(id, list(steps), facts))


def OK(path, body, expected, ct="application/json", **kw):
    return POST(path, body, status=200, ct=ct, ihcl=ABSENT, body_exact=expected, **kw)


# -- answers -----------------------------------------------------------------
case("g-add-sub", OK(G("add_sub"), {"id": "g1", "INPUT0": [1, 2], "INPUT1": [3, 4]},
                     b'{"OUTPUT0":[4.0,6.0],"OUTPUT1":[-2.0,-2.0],"id":"g1",'
                     b'"model_name":"add_sub","model_version":"1"}'), facts="G01")
case("g-bytes-scalar", OK(G("identity_bytes"), {"INPUT0": "hello"},
                          b'{"OUTPUT0":"hello","model_name":"identity_bytes","model_version":"1"}'),
     facts="G03")
case("g-batch-dims", OK(G("identity_int32"), {"INPUT0": [1, 2, 3]},
                        b'{"OUTPUT0":[1,2,3],"model_name":"identity_int32","model_version":"1"}'))
case("g-empty-array", OK(G("identity_int32"), {"INPUT0": []},
                         b'{"OUTPUT0":[],"model_name":"identity_int32","model_version":"1"}'))
case("g-text", OK(G("text_generate"), {"text_input": "hello big world", "max_tokens": 4},
                  token("text_generate", "hello big world hello")))
case("g-nested-parameters", OK(G("text_generate"),
                               {"text_input": "a", "parameters": {"max_tokens": 2, "t": 0.5}},
                               token("text_generate", "a a")))
case("g-id-is-also-a-parameter", OK(G("text_generate"), {"id": "x", "text_input": "b"},
                                    token("text_generate", "b", id="x")))
case("g-decoupled-one", OK(G("text_stream"), {"text_input": "a", "max_tokens": 1},
                           token("text_stream", "a")))
case("g-decoupled-three", POST(G("text_stream"), {"text_input": "a", "max_tokens": 3},
                               status=200, ct="application/json", error=NOT_ONE), facts="D02")
case("g-decoupled-none", POST(G("text_stream"), {"text_input": "a", "max_tokens": 0},
                              status=200, ct="application/json", error=NOT_ONE), facts="D02")
case("gs-tokens", OK(G("text_stream", True), {"id": "s", "text_input": "a b", "max_tokens": 3},
                     events(token("text_stream", "a", "s"), token("text_stream", "b", "s"),
                            token("text_stream", "a", "s")), ct=SSE))
case("gs-none", OK(G("text_stream", True), {"text_input": "a", "max_tokens": 0}, b"", ct=SSE),
     facts="D03")
case("gs-one-of-non-decoupled", OK(G("text_generate", True), {"text_input": "a b"},
                                   events(token("text_generate", "a b")), ct=SSE))
case("gs-repeat", OK(G("repeat_decoupled", True), {"INPUT0": 2},
                     events(b'{"OUTPUT0":0,"model_name":"repeat_decoupled","model_version":"1"}',
                            b'{"OUTPUT0":1,"model_name":"repeat_decoupled","model_version":"1"}'),
                     ct=SSE))
case("gs-triton-keys", OK(G("text_stream", True),
                          {"text_input": "a", "triton_enable_empty_final_response": True},
                          events(token("text_stream", "a")), ct=SSE))

# -- failures ----------------------------------------------------------------
BACKEND = "INPUT0 and INPUT1 must have the same shape, got [2] and [1]"
case("g-backend-error", POST(G("add_sub"), {"INPUT0": [1, 2], "INPUT1": [3]}, status=400,
                             ct="application/json", error=BACKEND))
case("gs-backend-error", POST(G("add_sub", True), {"INPUT0": [1, 2], "INPUT1": [3]}, status=400,
                              ct=SSE, ihcl=ABSENT,
                              body_exact=events(b'{"error":"%s"}' % BACKEND.encode())))
for stream in (False, True):
    s = "s" if stream else ""
    case("g%s-unknown-model" % s,
         ERR("POST", G("nope", stream), 404, "Request for unknown model: 'nope' is not found",
             body={}), facts="G04")
    case("g%s-empty-body" % s,
         ERR("POST", G("add_sub", stream), 500,
             "failed to parse the request JSON buffer: The document is empty. at 0",
             gateway_status=400), facts="K59")
    case("g%s-param-type" % s,
         ERR("POST", G("text_generate", stream), 400,
             "parameter 'x' has invalid type. It should be either 'int', 'bool', or 'string'.",
             body={"text_input": "a", "x": [1]}))
    case("g%s-shape" % s,
         ERR("POST", G("text_generate", stream), 400,
             "The schema can not convert input 'text_input' to tensor with proper shape",
             body={"text_input": ["a", "b"]}))
    case("g%s-missing-input" % s,
         ERR("POST", G("add_sub", stream), 400,
             "[request id: <id_unknown>] expected 2 inputs but got 1 inputs for model 'add_sub'. "
             "Got input(s) ['INPUT0'], but missing required input(s) ['INPUT1']. Please provide "
             "all required input(s).", body={"INPUT0": [1]}))
    case("g%s-encoding" % s,
         ERR("POST", G("add_sub", stream), 400,
             "Unsupported content-encoding, only 'identity' is supported.", body=b"{}",
             headers=(("Content-Encoding", "gzip"),)), facts="G06")
    case("g%s-method" % s, ERR("GET", G("add_sub", stream), 405, "Method Not Allowed"))
case("g-fp16-json", ERR(
    "POST", G("identity_fp16"), 400,
    "receiving FP16 data via JSON is not supported. Please use the binary data format for "
    "input INPUT0", body={"INPUT0": [1.5]},
    expect_diff={"status": 200, "ct": "application/json", "why": "compatibility #5",
                 "body": b'{"OUTPUT0":1.5,"model_name":"identity_fp16","model_version":"1"}'}),
    facts="G07")


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_generate_differential(case, triton_http, gateway):
    t_resps = run_case(triton_http, case, triton_http)
    for step, r in zip(case.steps, t_resps):
        check_triton(step, r)
    g_resps = run_case(gateway, case, triton_http)
    for step, t, g in zip(case.steps, t_resps, g_resps):
        if selftest_mode() and step.expect_diff:
            check_triton(step, g)
            continue
        compare(step, t, g)


# -- real SSE clients ----------------------------------------------------------


def test_requests_stream_true_reads_the_same_events(triton_http, gateway):
    """Python `requests` with stream=True, as LLM clients use it."""
    body = {"text_input": "one two three", "delay_ms": 50}

    def read(base):
        with requests.post(base + G("text_stream", True), json=body, stream=True,
                           timeout=60) as r:
            assert r.status_code == 200
            assert r.headers["Content-Type"] == SSE
            lines = [line for line in r.iter_lines() if line]
        return [json.loads(line[len(b"data: "):]) for line in lines]

    expected = [{"model_name": "text_stream", "model_version": "1", "text_output": w}
                for w in ("one", "two", "three")]
    assert read(triton_http) == expected
    assert read(gateway) == expected


def read_first_event(sock, deadline_s):
    sock.settimeout(deadline_s)
    data = b""
    while b"\n\n" not in data:
        chunk = sock.recv(4096)
        assert chunk, "connection closed: %r" % data
        data += chunk
    return data


def test_first_event_streams_and_disconnect_cancels_the_model(gateway):
    """Three tokens a minute apart: the first must reach the client at once;
    closing the connection then cancels the request, which the model sees
    (as with Triton's own HTTP front, which the self-test checks)."""
    marker = os.path.join(tempfile.mkdtemp(prefix="tensorgate-cancel-"), "cancelled")
    body = js({"text_input": "a b c", "delay_ms": 60000, "cancel_marker": marker})
    host, port = gateway.split("//")[1].split(":")
    sock = socket.create_connection((host, int(port)))
    try:
        sock.sendall(b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s"
                     % (G("text_stream", True).encode(), len(body), body))
        started = time.monotonic()
        head = read_first_event(sock, 30.0)
        assert time.monotonic() - started < 30.0
        assert b" 200 " in head.split(b"\r\n", 1)[0], head
        assert b'data: {"model_name":"text_stream","model_version":"1","text_output":"a"}\n\n' \
            in head, head
    finally:
        sock.close()
    deadline = time.monotonic() + 30.0
    while not os.path.exists(marker) and time.monotonic() < deadline:
        time.sleep(0.05)  # polling for the model's marker file, not a synchronisation
    assert os.path.exists(marker), "the model did not see the cancellation"
    with open(marker) as f:
        assert f.read() == "1", "one token was sent before the cancellation"
