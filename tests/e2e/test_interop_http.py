"""The HTTP front in front of MLServer and KServe (fixture `interop`): every
flow of FLOWS is sent byte for byte to Triton's own HTTP front (the same
models: tests/e2e/model_repository), to the gateway in front of the
server's gRPC port, and to the server's own HTTP front.

- Triton's answer is checked against docs/protocol-v2.md (as in
  test_differential.py), then the gateway's must equal it in status,
  headers and bytes (test_differential.compare), after the server's standing
  differences (`as_served_by`), unless the flow names a documented entry
  of docs/interop.md for that server (`Answer`).
- The server's own HTTP answer is checked too (`Own`): its status, and for a
  flow without an entry the same outputs as Triton's. Each difference is an
  entry of docs/interop.md ("better" or "shows through").
"""

import json
import os
import re
import struct
from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np
import pytest

import rawhttp
from diffcases import ABSENT, ERR, GET, INFER, JSON_500, Req, inp, js, outp, req_json
from test_differential import check_triton, compare

DOC = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "docs", "interop.md")
SERVER_NAMES = ("mlserver", "kserve")


@dataclass
class Answer:
    """The gateway's answer where it differs from Triton's: docs/interop.md
    entry `entry`. `error` is the exact error text, `error_has` words it
    must contain; `check(response, upstream)` checks the rest."""
    entry: str
    status: int
    error: Optional[str] = None
    error_has: tuple = ()
    check: Optional[Callable] = None


SAME = None  # the gateway answers as Triton (after the server's standing differences)


@dataclass
class Own:
    """The server's own HTTP answer: its status; `entry` names the
    docs/interop.md entry of its difference from Triton's answer (None: the
    same status and, for a 200, the same outputs)."""
    status: int
    entry: Optional[str] = None


@dataclass
class Flow:
    id: str
    req: Req    # the request, with Triton's recorded answer
    via: dict   # server name -> SAME or Answer
    own: dict   # server name -> Own


def both(value):
    return {name: value for name in SERVER_NAMES}


JSON = (("Content-Type", "application/json"),)
BINARY = (("Content-Type", "application/octet-stream"),)
A = np.array([1, 2], np.float32)
B = np.array([3, 4.5], np.float32)
ADD_SUB_JSON = [inp("INPUT0", "FP32", [2], [1, 2]), inp("INPUT1", "FP32", [2], [3, 4.5])]
ADD_SUB_BINARY = [inp("INPUT0", "FP32", [2], bsize=8), inp("INPUT1", "FP32", [2], bsize=8)]
ADD_SUB_ANSWER = (b'{"model_name":"add_sub","model_version":"1","outputs":['
                  b'{"name":"OUTPUT0","datatype":"FP32","shape":[2],"data":[4.0,6.5]},'
                  b'{"name":"OUTPUT1","datatype":"FP32","shape":[2],"data":[-2.0,-2.5]}]}')


def bytes_tensor(*items):
    return b"".join(struct.pack("<I", len(item)) + item for item in items)


def unknown_model(entry="I6"):
    return {"mlserver": Answer(entry, 404, "Model nope with version  not found"),
            "kserve": Answer(entry, 404, "Model with name nope does not exist.")}


def keeps_server_metadata(g, up):
    """The server's name, version and extensions, plus the ones the
    gateway serves itself."""
    own = json.loads(rawhttp.send(up.http, "GET", "/v2").body)
    got = json.loads(g.body)
    assert (got["name"], got["version"]) == (own["name"], own["version"])
    missing = set(own["extensions"]) - set(got["extensions"])
    assert not missing, "the server's extensions %s were dropped" % sorted(missing)
    assert "binary_tensor_data" in got["extensions"]


def metadata_as_grpc_carries(meta):
    """A model's metadata as gRPC can carry it: no null (KServe's
    `versions: null` is an empty list there) and no empty map (MLServer's
    `parameters: {}` is absent on the wire)."""
    meta = dict(meta)
    if meta.get("versions") is None:
        meta["versions"] = []
    if meta.get("parameters") == {}:
        del meta["parameters"]
    return meta


def servers_model_metadata(g, up):
    """The server's own metadata of add_sub (its unversioned path: KServe's
    versioned one answers 501)."""
    own = json.loads(rawhttp.send(up.http, "GET", "/v2/models/add_sub").body)
    assert metadata_as_grpc_carries(json.loads(g.body)) == metadata_as_grpc_carries(own)


SIGNATURE_NOT_CHECKED = {"kserve": Answer("I14", 500, "Internal server error")}

FLOWS = [
    # Health, metadata, config
    Flow("live", GET("/v2/health/live", ct="text/plain"), both(SAME),
         {"mlserver": Own(200), "kserve": Own(200, "I5")}),
    Flow("ready", GET("/v2/health/ready", ct="text/plain"), both(SAME),
         {"mlserver": Own(200), "kserve": Own(200, "I5")}),
    Flow("model_ready", GET("/v2/models/add_sub/ready", ct="text/plain"), both(SAME),
         {"mlserver": Own(200), "kserve": Own(200, "I5")}),
    Flow("model_ready_unknown_model",
         ERR("GET", "/v2/models/nope/ready", 400, "Model version not ready", ct="text/plain"),
         {"mlserver": Answer("I7", 400, "Unexpected <class 'mlserver.errors.ModelNotFound'>: "
                                         "Model nope with version  not found"),
          "kserve": Answer("I7", 404, "Model with name nope does not exist.")},
         both(Own(404, "I7"))),
    Flow("server_metadata", GET("/v2", ct="application/json"),
         both(Answer("I3", 200, check=keeps_server_metadata)), both(Own(200, "I3"))),
    Flow("model_metadata", GET("/v2/models/add_sub", ct="application/json"),
         both(Answer("I2", 200, check=servers_model_metadata)), both(Own(200, "I2"))),
    Flow("model_metadata_of_a_version", GET("/v2/models/add_sub/versions/1", ct="application/json"),
         both(Answer("I2", 200, check=servers_model_metadata)),
         {"mlserver": Own(200, "I2"), "kserve": Own(501, "I2")}),
    Flow("model_metadata_unknown_model",
         ERR("GET", "/v2/models/nope", 404, "Request for unknown model: 'nope' is not found"),
         unknown_model(), both(Own(404, "I6"))),
    Flow("model_config", GET("/v2/models/add_sub/config", ct="application/json"),
         both(Answer("I4", 404, error_has=("ModelConfig",))), both(Own(404, "I4"))),
    Flow("model_config_unknown_model",
         ERR("GET", "/v2/models/nope/config", 404, "Request for unknown model: 'nope' is not found"),
         both(Answer("I4", 404)), both(Own(404, "I4"))),

    # Inference: JSON, binary, mixed, raw
    Flow("json_without_content_type",
         INFER("add_sub", req_json(ADD_SUB_JSON), body_exact=ADD_SUB_ANSWER), both(SAME),
         {"mlserver": Own(200), "kserve": Own(400, "I8")}),
    Flow("json", INFER("add_sub", req_json(ADD_SUB_JSON), headers=JSON, body_exact=ADD_SUB_ANSWER),
         both(SAME), both(Own(200))),
    Flow("json_with_id", INFER("add_sub", req_json(ADD_SUB_JSON, id="r1"), headers=JSON),
         both(SAME), both(Own(200))),
    Flow("json_int32", INFER("identity_int32", req_json([inp("INPUT0", "INT32", [1, 3], [1, -2, 3])]),
                             headers=JSON), both(SAME), both(Own(200))),
    Flow("json_bytes", INFER("identity_bytes", req_json([inp("INPUT0", "BYTES", [1, 2], ["ab", "c"])]),
                             headers=JSON), both(SAME), both(Own(200))),
    Flow("binary_inputs", INFER("add_sub", req_json(ADD_SUB_BINARY), A.tobytes() + B.tobytes(),
                                headers=BINARY, body_exact=ADD_SUB_ANSWER),
         both(SAME), {"mlserver": Own(500, "I9"), "kserve": Own(200)}),
    Flow("binary_outputs", INFER("add_sub", req_json(ADD_SUB_JSON, parameters={"binary_data_output": True}),
                                 headers=JSON),
         both(SAME), {"mlserver": Own(200, "I9"), "kserve": Own(200)}),
    Flow("binary_inputs_and_one_binary_output",
         INFER("add_sub", req_json(ADD_SUB_BINARY, [outp("OUTPUT0", binary=True), outp("OUTPUT1")]),
               A.tobytes() + B.tobytes(), headers=BINARY),
         both(SAME), {"mlserver": Own(500, "I9"), "kserve": Own(200)}),
    Flow("mixed_json_and_binary_inputs",
         INFER("add_sub", req_json([inp("INPUT0", "FP32", [2], bsize=8),
                                    inp("INPUT1", "FP32", [2], [3, 4.5])]),
               A.tobytes(), headers=BINARY, body_exact=ADD_SUB_ANSWER),
         both(SAME), {"mlserver": Own(500, "I9"), "kserve": Own(200)}),
    Flow("binary_int32",
         INFER("identity_int32", req_json([inp("INPUT0", "INT32", [1, 3], bsize=12)],
                                          [outp("OUTPUT0", binary=True)]),
               np.array([1, -2, 3], np.int32).tobytes(), headers=BINARY),
         both(SAME), {"mlserver": Own(500, "I9"), "kserve": Own(200)}),
    Flow("binary_bytes_not_utf8",
         INFER("identity_bytes", req_json([inp("INPUT0", "BYTES", [1, 2], bsize=11)],
                                          [outp("OUTPUT0", binary=True)]),
               bytes_tensor(b"\xff\x00", b"c"), headers=BINARY),
         both(SAME), {"mlserver": Own(500, "I9"), "kserve": Own(500, "I9")}),
    Flow("raw_binary_request",
         INFER("string_single", b"", bytes_tensor(b"hello"), ihcl=0, headers=BINARY),
         both(SAME), {"mlserver": Own(422, "I10"), "kserve": Own(400, "I10")}),

    # Outputs requested by name
    Flow("one_output_requested",
         INFER("add_sub", req_json(ADD_SUB_JSON, [outp("OUTPUT1")]), headers=JSON),
         both(SAME), {"mlserver": Own(200, "I12"), "kserve": Own(200)}),
    Flow("one_binary_output_requested",
         INFER("add_sub", req_json(ADD_SUB_JSON, [outp("OUTPUT0", binary=True)]), headers=JSON),
         both(SAME), {"mlserver": Own(200, "I12"), "kserve": Own(200)}),
    Flow("unknown_output_requested",
         ERR("POST", "/v2/models/add_sub/infer", 400,
             "unexpected inference output 'OUTPUT9' for model 'add_sub'",
             body=req_json(ADD_SUB_JSON, [outp("OUTPUT0"), outp("OUTPUT9")]), headers=JSON),
         both(SAME), {"mlserver": Own(200, "I12"), "kserve": Own(400)}),

    # Refusals the gateway makes itself
    Flow("json_data_count_not_the_shape",
         ERR("POST", "/v2/models/add_sub/infer", 500,
             "Unable to parse 'data': Shape does not match true shape of 'data' field",
             body=req_json([inp("INPUT0", "FP32", [3], [1, 2]), ADD_SUB_JSON[1]]), headers=JSON,
             gateway_status=400),
         both(SAME), both(Own(500, "I13"))),
    Flow("json_data_of_the_wrong_type",
         ERR("POST", "/v2/models/identity_int32/infer", 500,
             "Unable to parse 'data': attempt to access JSON non-signed-integer as signed-integer",
             body=req_json([inp("INPUT0", "INT32", [1, 2], [1, "x"])]), headers=JSON,
             gateway_status=400),
         both(SAME), {"mlserver": Own(200, "I13"), "kserve": Own(500, "I13")}),
    Flow("malformed_json",
         ERR("POST", "/v2/models/add_sub/infer", 500,
             "failed to parse the request JSON buffer: Invalid value. at 11",
             body=b'{"inputs":[', headers=JSON, gateway_status=400),
         both(SAME), both(Own(422, "I13"))),
    Flow("unknown_datatype",
         ERR("POST", "/v2/models/identity_int32/infer", 400, "invalid datatype for input INPUT0",
             body=req_json([inp("INPUT0", "INT33", [1, 2], [1, 2])]), headers=JSON),
         both(SAME), {"mlserver": Own(422, "I13"), "kserve": Own(400)}),
    Flow("binary_input_one_byte_short",
         ERR("POST", "/v2/models/add_sub/infer", 400,
             "unexpected size for input 'INPUT1', expecting 1 additional bytes for model 'add_sub'",
             body=js(req_json(ADD_SUB_BINARY)) + A.tobytes() + B.tobytes()[:-1],
             headers=BINARY + (("Inference-Header-Content-Length", str(len(js(req_json(ADD_SUB_BINARY))))),)),
         both(SAME), both(Own(500, "I13"))),
    Flow("bytes_element_count_not_the_shape",
         ERR("POST", "/v2/models/identity_bytes/infer", 400,
             "[request id: <id_unknown>] expected 3 string elements for inference input 'INPUT0' "
             "for model 'identity_bytes', got 2",
             body=js(req_json([inp("INPUT0", "BYTES", [1, 3], bsize=11)])) + bytes_tensor(b"ab", b"c"),
             headers=BINARY + (("Inference-Header-Content-Length",
                                str(len(js(req_json([inp("INPUT0", "BYTES", [1, 3], bsize=11)]))))),)),
         both(SAME), {"mlserver": Own(422, "I13"), "kserve": Own(500, "I13")}),
    Flow("raw_request_to_a_model_of_two_inputs",
         ERR("POST", "/v2/models/add_sub/infer", 400,
             "[request id: <id_unknown>] Raw request must only have 1 input (found 1) to be deduced "
             "but got 2 inputs in 'add_sub' model configuration",
             body=A.tobytes(), headers=(("Inference-Header-Content-Length", "0"),)),
         both(SAME), {"mlserver": Own(422, "I10"), "kserve": Own(400, "I10")}),
    Flow("raw_request_to_a_batching_model",
         INFER("identity_int32", b"", np.array([1, 2], np.int32).tobytes(), ihcl=0,
               status=200, ct="application/octet-stream"),
         both(Answer("I11", 400, "[request id: <id_unknown>] The shape of the raw input 'INPUT0' can "
                                 "not be deduced because there are more than one variable-sized "
                                 "dimension")),
         {"mlserver": Own(422, "I10"), "kserve": Own(400, "I10")}),
    Flow("unknown_model", ERR("POST", "/v2/models/nope/infer", 404,
                              "Request for unknown model: 'nope' is not found", ct="text/plain",
                              body=req_json(ADD_SUB_JSON), headers=JSON),
         unknown_model(), both(Own(404, "I6"))),

    # The version asked is the version served (docs/interop.md I23).
    Flow("infer_of_an_unknown_version",
         ERR("POST", "/v2/models/add_sub/versions/9/infer", 404,
             "Request for unknown model: 'add_sub' version 9 is not found", ct="text/plain",
             body=req_json(ADD_SUB_JSON), headers=JSON),
         {"mlserver": Answer("I23", 404, "Model add_sub with version 9 not found"),
          "kserve": Answer("I23", 404, "Request for unknown model: 'add_sub' version 9 is not found")},
         {"mlserver": Own(404, "I23"), "kserve": Own(501, "I23")}),

    # Refusals left to the server: its models see what Triton's core checks
    Flow("unknown_input",
         ERR("POST", "/v2/models/add_sub/infer", 400,
             "unexpected inference input 'INPUT7' for model 'add_sub'",
             body=req_json([ADD_SUB_JSON[0], inp("INPUT7", "FP32", [2], [3, 4.5])]), headers=JSON),
         {"mlserver": Answer("I14", 500, "missing input 'INPUT1'"), **SIGNATURE_NOT_CHECKED},
         both(Own(500, "I14"))),
    Flow("missing_input",
         ERR("POST", "/v2/models/add_sub/infer", 400,
             "[request id: <id_unknown>] expected 2 inputs but got 1 inputs for model 'add_sub'. "
             "Got input(s) ['INPUT0'], but missing required input(s) ['INPUT1']. "
             "Please provide all required input(s).",
             body=req_json(ADD_SUB_JSON[:1]), headers=JSON),
         {"mlserver": Answer("I14", 500, "missing input 'INPUT1'"), **SIGNATURE_NOT_CHECKED},
         both(Own(500, "I14"))),
    Flow("input_of_another_datatype",
         ERR("POST", "/v2/models/add_sub/infer", 400,
             "[request id: <id_unknown>] inference input 'INPUT1' data-type is 'INT32', but model "
             "'add_sub' expects 'FP32'",
             body=req_json([ADD_SUB_JSON[0], inp("INPUT1", "INT32", [2], [3, 4])]), headers=JSON),
         {"mlserver": Answer("I14", 200, check=lambda g, up: json.loads(g.body)["outputs"][0]
                             ["datatype"] == "FP64"),
          "kserve": Answer("I14", 400, "got unexpected datatype FP64 from numpy array, expected FP32")},
         {"mlserver": Own(200, "I14"), "kserve": Own(500, "I14")}),
    Flow("input_of_another_rank",
         ERR("POST", "/v2/models/add_sub/infer", 400,
             "[request id: <id_unknown>] unexpected shape for input 'INPUT1' for model 'add_sub'. "
             "Expected [-1], got [1,2]. ",
             body=req_json([inp("INPUT0", "FP32", [1, 2], [1, 2]), inp("INPUT1", "FP32", [1, 2], [3, 4.5])]),
             headers=JSON),
         both(Answer("I14", 200, check=lambda g, up: json.loads(g.body)["outputs"][0]["shape"] == [1, 2])),
         both(Own(200, "I14"))),
]


def as_served_by(server, triton):
    """Triton's answer as the server's models would give it: KServe's have no
    version, so `model_version` is "" (docs/interop.md I1)."""
    if server != "kserve":
        return triton
    head, tail = triton.split()
    head = head.replace(b'"model_version":"1"', b'"model_version":""')
    headers = [(k, str(len(head)) if k.lower() == "inference-header-content-length" else v)
               for k, v in triton.headers]
    return rawhttp.Response(triton.status, headers, head + tail)


def outputs(response):
    """{name: (datatype, shape, values)} of a 200 answer, JSON or binary."""
    head, tail = response.split()
    result, offset = {}, 0
    for out in json.loads(head)["outputs"]:
        size = (out.get("parameters") or {}).get("binary_data_size")
        if size is None:
            values = out["data"]
        else:
            raw, offset = tail[offset:offset + size], offset + size
            values = (list(split_bytes(raw)) if out["datatype"] == "BYTES"
                      else np.frombuffer(raw, out["datatype"].lower().replace("fp", "float")).tolist())
        if out["datatype"] == "BYTES":
            values = [v.encode() if isinstance(v, str) else v for v in values]
        result[out["name"]] = (out["datatype"], out["shape"], values)
    return result


def split_bytes(raw):
    while raw:
        (n,) = struct.unpack_from("<I", raw)
        yield raw[4:4 + n]
        raw = raw[4 + n:]


def send(url, step):
    return rawhttp.send(url, step.method, step.path, step.body, step.headers, step.content_length)


def check_answer(answer, g, up):
    where = "gateway (docs/interop.md %s): status=%s body=%r" % (answer.entry, g.status, g.body[:600])
    assert g.status == answer.status, where
    if g.status != 200:
        assert g.content_type == "application/json", "error bodies are JSON; " + where
        error = json.loads(g.body)["error"]
        if answer.error is not None:
            assert error == answer.error, where
        for word in answer.error_has:
            assert word in error, where
    if answer.check is not None:
        assert answer.check(g, up) is not False, where


@pytest.mark.parametrize("flow", FLOWS, ids=[f.id for f in FLOWS])
def test_through_the_gateway_as_through_triton(flow, interop, triton_http):
    step = flow.req
    t = send(triton_http, step)
    check_triton(step, t)
    g = send(interop.gateway, step)
    via = flow.via[interop.name]
    if via is SAME:
        compare(step, as_served_by(interop.name, t), g)
    else:
        check_answer(via, g, interop)


@pytest.mark.parametrize("flow", FLOWS, ids=[f.id for f in FLOWS])
def test_the_servers_own_http_front(flow, interop, triton_http):
    step = flow.req
    own = flow.own[interop.name]
    o = send(interop.http, step)
    assert o.status == own.status, "%s's own answer: %s %r" % (interop.name, o.status, o.body[:600])
    if own.entry is None and o.status == 200 and step.path.endswith("/infer"):
        t = send(triton_http, step)
        assert outputs(o) == outputs(t)


def test_every_entry_is_documented():
    with open(DOC, encoding="utf-8") as f:
        rows = set(re.findall(r"^\| (I\d+) \|", f.read(), re.M))
    named = {"I1"}
    for flow in FLOWS:
        for value in list(flow.via.values()) + list(flow.own.values()):
            if value is not None and value.entry:
                named.add(value.entry)
    assert not named - rows, "entries missing in docs/interop.md: %s" % sorted(named - rows)
