"""The differential case table: one entry per HTTP request (or short sequence of
requests) that is sent byte-for-byte identically to Triton's own HTTP endpoint
and to the gateway (see test_differential.py).

Each request step carries what Triton 2.51 was observed to answer (status,
Content-Type, IHCL, error text or exact body), taken from
docs/protocol-v2.md; the probe ids of that sheet (J01, B11,
...) are given in ``facts``.  The gateway must answer byte-identically unless the
step has an ``expect_diff``: a dict of what the gateway answers instead (e.g.
``{"status": 400}``: Triton says 500, the gateway says 400 with the same body).
Each such difference must be listed in docs/compatibility.md.

Never put the two inputs that crash Triton 2.51 in this table: a JSON shape
dimension >= 2**63, or ``classification`` on a BYTES output.
"""

import base64
import gzip
import json
import os
import time
import re
import struct
import zlib
from dataclasses import dataclass, field
from typing import Callable, Optional

import numpy as np

from rawhttp import send

# --------------------------------------------------------------------------
# Case model


ABSENT = "<absent>"  # expected header value meaning "header must not be sent"


@dataclass
class Req:
    method: str
    path: str
    body: bytes = b""
    headers: tuple = ()
    content_length: Optional[bool] = None
    chunks: Optional[list] = None
    # Triton's observed answer (asserted on Triton's response):
    status: int = 200
    ct: Optional[str] = None           # Content-Type; ABSENT; None = not checked
    ihcl: object = None                # int, ABSENT, or None = not checked
    encoding: object = None            # Content-Encoding value, ABSENT, or None
    error: Optional[str] = None        # exact {"error": ...} text
    body_exact: Optional[bytes] = None  # exact (decoded) body, or JSON header if IHCL
    tail: Optional[bytes] = None       # exact binary tail (after IHCL bytes)
    check: Optional[Callable] = None   # extra assertion on Triton's Response
    # How to compare Triton's and the gateway's answers:
    compare: str = "exact"             # exact | numbers
    expect_diff: Optional[dict] = None  # documented deliberate gateway differences


@dataclass
class Case:
    id: str
    steps: list
    facts: str = ""
    setup: Optional[Callable] = None     # setup(triton_url) before each target's run
    teardown: Optional[Callable] = None  # teardown(triton_url) after each target's run


CASES = []


def case(id, *steps, facts="", setup=None, teardown=None):
    assert id not in {c.id for c in CASES}, "duplicate case id " + id
    CASES.append(Case(id, list(steps), facts, setup, teardown))


def js(obj):
    """Compact JSON bytes (NaN/Infinity as bare tokens, like rapidjson accepts)."""
    return json.dumps(obj, separators=(",", ":")).encode()


def rj_escape(text):
    """rapidjson's string escaping (v2 §3.4) of a str or bytes value."""
    raw = text.encode("utf-8") if isinstance(text, str) else text
    out = bytearray()
    names = {0x22: b'\\"', 0x5C: b"\\\\", 0x08: b"\\b", 0x09: b"\\t", 0x0A: b"\\n",
             0x0C: b"\\f", 0x0D: b"\\r"}
    for b in raw:
        if b in names:
            out += names[b]
        elif b < 0x20:
            out += b"\\u%04X" % b
        else:
            out.append(b)
    return bytes(out)


def err_body(text):
    return b'{"error":"' + rj_escape(text) + b'"}'


# --------------------------------------------------------------------------
# Request builders


def GET(path, **kw):
    return Req("GET", path, **kw)


def POST(path, body=b"", **kw):
    if isinstance(body, (dict, list)):
        body = js(body)
    return Req("POST", path, body=body, **kw)


JSON_500 = {"status": 400}  # Triton: 500 for JSON type/parse errors; gateway: 400


def half_json_answer(model, dtype):
    """docs/compatibility.md #5/#6: the gateway accepts and renders FP16/BF16
    as JSON numbers where Triton refuses; the values here are 1.0 and 2.0."""
    body = ('{"model_name":"%s","model_version":"1","outputs":[{"name":"OUTPUT0","datatype":"%s",'
            '"shape":[1,2],"data":[1.0,2.0]}]}' % (model, dtype)).encode()
    return {"status": 200, "ct": "application/json", "body": body, "why": "compatibility #5/#6"}


def ERR(method, path, status, text, ct="application/json", body=b"", headers=(),
        gateway_status=None, expect_diff=None, **kw):
    """A request whose expected answer is {"error": text}."""
    if isinstance(body, (dict, list)):
        body = js(body)
    diff = {"status": gateway_status} if gateway_status else expect_diff
    return Req(method, path, body=body, headers=headers, status=status, ct=ct, error=text,
               ihcl=ABSENT, expect_diff=diff, **kw)


def inp(name, datatype, shape, data=None, bsize=None, **params):
    d = {"name": name, "datatype": datatype, "shape": shape}
    if bsize is not None:
        params["binary_data_size"] = bsize
    if params:
        d["parameters"] = params
    if data is not None:
        d["data"] = data
    return d


def outp(name, binary=None, classification=None, **params):
    d = {"name": name}
    if binary is not None:
        params["binary_data"] = binary
    if classification is not None:
        params["classification"] = classification
    if params:
        d["parameters"] = params
    return d


def req_json(inputs, outputs=None, id=None, parameters=None):
    d = {}
    if id is not None:
        d["id"] = id
    if parameters is not None:
        d["parameters"] = parameters
    d["inputs"] = inputs
    if outputs is not None:
        d["outputs"] = outputs
    return d


def infer_path(model, version=None):
    if version is None:
        return "/v2/models/%s/infer" % model
    return "/v2/models/%s/versions/%s/infer" % (model, version)


def INFER(model, body, tail=b"", ihcl="auto", headers=(), version=None, **kw):
    """POST .../infer with a JSON header (dict or bytes) and optional binary tail.
    ihcl: "auto" = send IHCL iff there is a tail; None = never; str/int = verbatim."""
    header = js(body) if isinstance(body, (dict, list)) else body
    hdrs = list(headers)
    if ihcl == "auto":
        if tail:
            hdrs.append(("Inference-Header-Content-Length", str(len(header))))
    elif ihcl is not None:
        hdrs.append(("Inference-Header-Content-Length", str(ihcl)))
    return Req("POST", infer_path(model, version), body=header + tail, headers=tuple(hdrs), **kw)


# --------------------------------------------------------------------------
# Expected response builders


def o_json(name, datatype, shape, data_literal):
    """An output object with JSON data; data_literal is the exact text inside []."""
    if isinstance(data_literal, str):
        data_literal = data_literal.encode()
    return (b'{"name":"%s","datatype":"%s","shape":%s,"data":[' % (
        name.encode(), datatype.encode(), js(shape)) + data_literal + b"]}")


def o_bin(name, datatype, shape, size):
    return b'{"name":"%s","datatype":"%s","shape":%s,"parameters":{"binary_data_size":%d}}' % (
        name.encode(), datatype.encode(), js(shape), size)


def o_shm(name, datatype, shape):
    return b'{"name":"%s","datatype":"%s","shape":%s}' % (name.encode(), datatype.encode(), js(shape))


def resp(model, *outputs, id=None, version="1"):
    head = b"{"
    if id is not None:
        head += b'"id":"' + rj_escape(id) + b'",'
    return head + b'"model_name":"%s","model_version":"%s","outputs":[' % (
        model.encode(), version.encode()) + b",".join(outputs) + b"]}"


def OK_JSON(req, body):
    """Triton answers 200 application/json with exactly body, no IHCL."""
    req.status, req.ct, req.ihcl, req.body_exact = 200, "application/json", ABSENT, body
    return req


def OK_BIN(req, header, tail, encoding=None):
    """Triton answers 200 octet-stream: JSON header (IHCL) + binary tail."""
    req.status, req.ct, req.ihcl = 200, "application/octet-stream", len(header)
    req.body_exact, req.tail = header, tail
    if encoding is not None:
        req.encoding = encoding
    return req


def gz(data):
    return gzip.compress(data)


def zl(data):
    return zlib.compress(data)


def strings(*items):
    """BYTES binary layout: 4-byte LE length + bytes per element."""
    out = b""
    for s in items:
        s = s.encode() if isinstance(s, str) else s
        out += struct.pack("<I", len(s)) + s
    return out


# --------------------------------------------------------------------------
# State helpers for setup/teardown (always talk to Triton directly)

SHM_NAME = "tg_e2e_%d" % os.getpid()
SHM_KEY = "/" + SHM_NAME
SHM_SIZE = 64
SHM_REGION = "tg_region"


def shm_create():
    fd = os.open("/dev/shm/" + SHM_NAME, os.O_CREAT | os.O_RDWR, 0o600)
    try:
        os.ftruncate(fd, SHM_SIZE)
        os.pwrite(fd, b"\0" * SHM_SIZE, 0)
    finally:
        os.close(fd)


def shm_write(offset, data):
    fd = os.open("/dev/shm/" + SHM_NAME, os.O_RDWR)
    try:
        os.pwrite(fd, data, offset)
    finally:
        os.close(fd)


def shm_remove():
    try:
        os.unlink("/dev/shm/" + SHM_NAME)
    except FileNotFoundError:
        pass


def _ok(url, method, path, body=b""):
    r = send(url, method, path, body)
    assert r.status == 200, "%s %s -> %s %r" % (method, path, r.status, r.body)
    return r


def shm_register(url, region=SHM_REGION, data=None):
    if data is not None:
        shm_write(0, data)
    _ok(url, "POST", "/v2/systemsharedmemory/region/%s/register" % region,
        js({"key": SHM_KEY, "offset": 0, "byte_size": SHM_SIZE}))


def shm_unregister(url, region=SHM_REGION):
    """Triton holds a region until the request that read it is released, a
    moment after that request's answer: a teardown waits for it (10 s at
    most) so the next case can register the region again."""
    path = "/v2/systemsharedmemory/region/%s/unregister" % region
    deadline = time.monotonic() + 10
    while True:
        r = send(url, "POST", path)
        busy = r.status == 500 and b"currently in use" in r.body
        if not busy or time.monotonic() > deadline:
            assert r.status == 200, "POST %s -> %s %r" % (path, r.status, r.body)
            return r
        time.sleep(0.01)


def wait_model_state(url, model, state, deadline_s=30.0):
    """Poll the repository index until model reaches state (unload is asynchronous:
    the index shows UNLOADING for a while, X18)."""
    import time
    deadline = time.monotonic() + deadline_s
    while True:
        index = json.loads(_ok(url, "POST", "/v2/repository/index").body)
        states = [m.get("state") for m in index if m["name"] == model]
        if states and all(s == state for s in states):
            return
        assert time.monotonic() < deadline, "%s did not reach %s: %r" % (model, state, states)
        time.sleep(0.05)  # polling interval


def unload(model):
    def run(url):
        _ok(url, "POST", "/v2/repository/models/%s/unload" % model)
        wait_model_state(url, model, "UNAVAILABLE")
    return run


def load(model):
    return lambda url: _ok(url, "POST", "/v2/repository/models/%s/load" % model)


def both(*fns):
    def run(url):
        for fn in fns:
            fn(url)
    return run


# --------------------------------------------------------------------------
# v2 §1 endpoints, v2 §0.3 routing

case("health-live", Req("GET", "/v2/health/live", status=200, ct="text/plain", body_exact=b""),
     facts="v2 §1 row 1")
case("health-ready", Req("GET", "/v2/health/ready", status=200, ct="text/plain", body_exact=b""),
     facts="v2 §1 row 2")
case("health-live-query", Req("GET", "/v2/health/live?verbose=1", status=200, ct="text/plain",
                              body_exact=b""), facts="v2 §0.3 query string ignored")


def _server_metadata(r):
    doc = json.loads(r.body)
    assert doc["name"] == "triton" and doc["version"] == "2.51.0", doc
    assert "binary_tensor_data" in doc["extensions"] and "classification" in doc["extensions"]


# Transparent (issue 13 #1): the gateway answers Triton's name, version and
# extensions byte for byte (NVIDIA's examples check name == "triton").
case("server-metadata", Req("GET", "/v2", status=200, ct="application/json", check=_server_metadata),
     facts="v2 §1 row 3")
case("server-metadata-405", ERR("DELETE", "/v2", 405, "Method Not Allowed"), facts="v2 §0.3")

ADD_SUB_META = (b'{"name":"add_sub","versions":["1"],"platform":"python","inputs":['
                b'{"name":"INPUT0","datatype":"FP32","shape":[-1]},{"name":"INPUT1","datatype":"FP32","shape":[-1]}],'
                b'"outputs":[{"name":"OUTPUT0","datatype":"FP32","shape":[-1]},{"name":"OUTPUT1","datatype":"FP32","shape":[-1]}]}')
case("model-metadata", Req("GET", "/v2/models/add_sub", status=200, ct="application/json",
                           body_exact=ADD_SUB_META), facts="v2 §1 row 4")
case("model-metadata-version", Req("GET", "/v2/models/add_sub/versions/1", status=200,
                                   ct="application/json", body_exact=ADD_SUB_META), facts="v2 §1 row 4")
case("model-metadata-version-01", Req("GET", "/v2/models/add_sub/versions/01", status=200,
                                      ct="application/json", body_exact=ADD_SUB_META), facts="Q05")
case("model-metadata-batching", Req(
    "GET", "/v2/models/identity_fp32", status=200, ct="application/json",
    body_exact=b'{"name":"identity_fp32","versions":["1"],"platform":"python","inputs":[{"name":"INPUT0",'
               b'"datatype":"FP32","shape":[-1,-1]}],"outputs":[{"name":"OUTPUT0","datatype":"FP32","shape":[-1,-1]}]}'),
    facts="v2 §1 row 4 (batch dim included)")
case("model-metadata-bytes", Req(
    "GET", "/v2/models/string_single", status=200, ct="application/json",
    body_exact=b'{"name":"string_single","versions":["1"],"platform":"python","inputs":[{"name":"INPUT0",'
               b'"datatype":"BYTES","shape":[1]}],"outputs":[{"name":"OUTPUT0","datatype":"BYTES","shape":[1]}]}'),
    facts="v2 §1 row 4")
case("model-metadata-bf16", Req(
    "GET", "/v2/models/identity_bf16", status=200, ct="application/json",
    body_exact=b'{"name":"identity_bf16","versions":["1"],"platform":"python","inputs":[{"name":"INPUT0",'
               b'"datatype":"BF16","shape":[-1,-1]}],"outputs":[{"name":"OUTPUT0","datatype":"BF16","shape":[-1,-1]}]}'),
    facts="v2 §1 row 4")
case("model-metadata-sequence", Req(
    "GET", "/v2/models/sequence_accumulate", status=200, ct="application/json",
    body_exact=b'{"name":"sequence_accumulate","versions":["1"],"platform":"python","inputs":[{"name":"INPUT0",'
               b'"datatype":"INT32","shape":[-1,1]}],"outputs":[{"name":"OUTPUT0","datatype":"INT32","shape":[-1,1]}]}'),
    facts="v2 §1 row 4 (control inputs not listed)")
case("model-metadata-decoupled", Req("GET", "/v2/models/repeat_decoupled", status=200,
                                     ct="application/json"), facts="v2 §1 row 4")
case("model-metadata-unknown", ERR("GET", "/v2/models/nope", 404,
                                   "Request for unknown model: 'nope' is not found"), facts="E06")
case("model-metadata-unknown-version", ERR(
    "GET", "/v2/models/add_sub/versions/7", 404,
    "Request for unknown model: 'add_sub' version 7 is not found"), facts="E07")
case("model-metadata-version-0", ERR(
    "GET", "/v2/models/add_sub/versions/0", 404,
    "Request for unknown model: 'add_sub' version 0 is not found"), facts="E44")
case("model-metadata-percent-encoded", ERR(
    "GET", "/v2/models/add%5Fsub", 404, "Request for unknown model: 'add%5Fsub' is not found"),
    facts="Q01")
case("model-metadata-405", ERR("POST", "/v2/models/add_sub", 405, "Method Not Allowed"),
     facts="v2 §0.3")
case("model-metadata-unloaded", ERR(
    "GET", "/v2/models/identity_fp64", 404,
    "Request for unknown model: 'identity_fp64' has no available versions"),
    facts="X08", setup=unload("identity_fp64"), teardown=load("identity_fp64"))

case("model-ready", Req("GET", "/v2/models/add_sub/ready", status=200, ct="text/plain",
                        body_exact=b""), facts="v2 §1 row 5")
case("model-ready-version", Req("GET", "/v2/models/add_sub/versions/1/ready", status=200,
                                ct="text/plain", body_exact=b""), facts="v2 §1 row 5")
case("model-ready-unknown", ERR("GET", "/v2/models/nope/ready", 400, "Model version not ready",
                                ct="text/plain"), facts="v2 §1 row 5")
case("model-ready-unknown-version", ERR("GET", "/v2/models/add_sub/versions/9/ready", 400,
                                        "Model version not ready", ct="text/plain"), facts="v2 §1 row 5")
case("model-ready-version-0", ERR("GET", "/v2/models/add_sub/versions/0/ready", 400,
                                  "Model version not ready", ct="text/plain"), facts="E44")
case("model-ready-unloaded", ERR("GET", "/v2/models/identity_fp64/ready", 400,
                                 "Model version not ready", ct="text/plain"),
     facts="v2 §1 row 5", setup=unload("identity_fp64"), teardown=load("identity_fp64"))
case("model-ready-405", ERR("POST", "/v2/models/add_sub/ready", 405, "Method Not Allowed",
                            ct="text/plain"), facts="v2 §0.2")


def _config_add_sub(r):
    assert r.body.startswith(b'{"name":"add_sub","platform":"","backend":"python","runtime":"",'
                             b'"version_policy":{"latest":{"num_versions":1}},"max_batch_size":0,'
                             b'"input":[{"name":"INPUT0","data_type":"TYPE_FP32","format":"FORMAT_NONE",'
                             b'"dims":[-1],"is_shape_tensor":false,"allow_ragged_batch":false,'
                             b'"optional":false,"is_non_linear_format_io":false},'), r.body
    assert b'"label_filename":""' in r.body and b'"default_model_filename":"model.py"' in r.body
    assert b'"cc_model_filenames":{},"metric_tags":{}' in r.body and b'"model_warmup":[]' in r.body


case("model-config", Req("GET", "/v2/models/add_sub/config", status=200, ct="application/json",
                         check=_config_add_sub), facts="E11")
case("model-config-version", Req("GET", "/v2/models/add_sub/versions/1/config", status=200,
                                 ct="application/json", check=_config_add_sub), facts="E11")
for _m in ("add_sub_label", "identity_bytes", "identity_bf16", "sequence_accumulate",
           "repeat_decoupled", "string_single"):
    case("model-config-" + _m, Req("GET", "/v2/models/%s/config" % _m, status=200,
                                   ct="application/json"), facts="v2 §1.2")
case("model-config-unknown", ERR("GET", "/v2/models/nope/config", 404,
                                 "Request for unknown model: 'nope' is not found"), facts="v2 §1.1")
case("model-config-405", ERR("POST", "/v2/models/add_sub/config", 405, "Method Not Allowed"),
     facts="v2 §0.2")


def _stats_shape(r):
    doc = json.loads(r.body)
    s = doc["model_stats"][0]
    assert list(s)[:5] == ["name", "version", "last_inference", "inference_count", "execution_count"]
    assert list(s["inference_stats"]) == ["success", "fail", "queue", "compute_input", "compute_infer",
                                          "compute_output", "cache_hit", "cache_miss"]


case("stats-all", Req("GET", "/v2/models/stats", status=200, ct="application/json",
                      check=_stats_shape, compare="numbers"), facts="E13")
case("stats-model", Req("GET", "/v2/models/add_sub/stats", status=200, ct="application/json",
                        check=_stats_shape, compare="numbers"), facts="E14")
case("stats-model-version", Req("GET", "/v2/models/add_sub/versions/1/stats", status=200,
                                ct="application/json", check=_stats_shape, compare="numbers"),
     facts="E14")
case("stats-unknown", ERR("GET", "/v2/models/nope/stats", 400,
                          "requested model 'nope' is not available"), facts="E15")
case("stats-405", ERR("POST", "/v2/models/stats", 405, "Method Not Allowed"), facts="v2 §0.2")


def _index(r):
    doc = json.loads(r.body)
    assert {"name": "add_sub", "version": "1", "state": "READY"} in doc, doc


def _index_unloaded(r):
    doc = json.loads(r.body)
    assert {"name": "identity_fp64", "version": "1", "state": "UNAVAILABLE",
            "reason": "unloaded"} in doc, doc


case("repository-index", POST("/v2/repository/index", status=200, ct="application/json",
                              check=_index), facts="v2 §1.4")
case("repository-index-ready", POST("/v2/repository/index", {"ready": True}, status=200,
                                    ct="application/json", check=_index), facts="X19")
case("repository-index-not-ready", POST("/v2/repository/index", {"ready": False}, status=200,
                                        ct="application/json", check=_index), facts="v2 §1.4")
case("repository-index-named-repo", POST("/v2/repository/somerepo/index", status=200,
                                         ct="application/json", check=_index), facts="v2 §0.3 rule 8")
case("repository-index-with-unloaded", POST("/v2/repository/index", status=200,
                                            ct="application/json", check=_index_unloaded),
     facts="v2 §1.4", setup=unload("identity_fp64"), teardown=load("identity_fp64"))
case("repository-index-ready-unloaded-filtered", POST(
    "/v2/repository/index", {"ready": True}, status=200, ct="application/json",
    check=lambda r: b'"identity_fp64"' not in r.body), facts="X19",
    setup=unload("identity_fp64"), teardown=load("identity_fp64"))
case("repository-index-ready-nonbool", ERR("POST", "/v2/repository/index", 500,
                                           "attempt to access JSON non-boolean as boolean",
                                           body={"ready": 1}, gateway_status=400), facts="K45")
case("repository-index-405", ERR("GET", "/v2/repository/index", 405, "Method Not Allowed"),
     facts="v2 §0.2")
case("repository-unload", POST("/v2/repository/models/identity_fp64/unload", status=200,
                               ct="application/json", body_exact=b""),
     facts="v2 §1 row 10", teardown=load("identity_fp64"))
case("repository-load-loaded", POST("/v2/repository/models/identity_fp64/load", status=200,
                                    ct="application/json", body_exact=b""), facts="v2 §1 row 9")
case("repository-load-unloaded", POST("/v2/repository/models/identity_fp64/load", status=200,
                                      ct="application/json", body_exact=b""),
     facts="v2 §1 row 9", setup=unload("identity_fp64"))
case("repository-load-unknown", ERR("POST", "/v2/repository/models/nope/load", 500,
                                    "failed to load 'nope', failed to poll from model repository"),
     facts="X12")
case("repository-unload-unknown", POST("/v2/repository/models/nope/unload", status=200,
                                       ct="application/json", body_exact=b""), facts="X13")
case("repository-load-named-repo", ERR("POST", "/v2/repository/somerepo/models/add_sub/load", 501,
                                       "'repository_name' specification is not supported"),
     facts="E21")
case("repository-unload-named-repo", ERR("POST", "/v2/repository/somerepo/models/add_sub/unload",
                                         501, "'repository_name' specification is not supported"),
     facts="E21")
case("repository-load-405", ERR("GET", "/v2/repository/models/add_sub/load", 405,
                                "Method Not Allowed"), facts="v2 §0.2")
case("repository-load-other-keys-ignored", POST("/v2/repository/models/identity_fp64/load", {"other": 1},
                                                 status=200, ct="application/json", body_exact=b""),
     facts="v2 §1.4")
case("repository-load-config-non-string", ERR("POST", "/v2/repository/models/identity_fp64/load", 500,
                                              "attempt to access JSON non-string as string",
                                              body={"parameters": {"config": 5}}, gateway_status=400),
     facts="v2 §1.4")
case("repository-load-parameters-non-object", ERR("POST", "/v2/repository/models/identity_fp64/load", 500,
                                                  "attempt to get members for non-object",
                                                  body={"parameters": []}, gateway_status=400), facts="v2 §1.4")
case("repository-load-malformed-json", ERR("POST", "/v2/repository/models/identity_fp64/load", 500,
                                           "failed to parse the request JSON buffer: Missing a name for object member. at 1",
                                           body=b"{", gateway_status=400), facts="v2 §1.4")
case("repository-load-bad-config", ERR("POST", "/v2/repository/models/identity_fp64/load", 500,
                                       "failed to load 'identity_fp64', failed to poll from model repository",
                                       body={"parameters": {"config": "{bad"}}),
     facts="v2 §1.4", teardown=load("identity_fp64"))
case("repository-unload-dependents", POST("/v2/repository/models/identity_fp64/unload",
                                          {"parameters": {"unload_dependents": True}}, status=200,
                                          ct="application/json", body_exact=b""),
     facts="v2 §1.4", teardown=load("identity_fp64"))
case("repository-unload-dependents-nonbool", POST("/v2/repository/models/identity_fp64/unload",
                                                  {"parameters": {"unload_dependents": "x"}}, status=200,
                                                  ct="application/json", body_exact=b""),
     facts="X15", teardown=load("identity_fp64"))
case("repository-index-malformed-json", ERR("POST", "/v2/repository/index", 500,
                                            "failed to parse the request JSON buffer: Missing a name for object member. at 1",
                                            body=b"{", gateway_status=400), facts="v2 §1.4")
case("repository-index-array-body", POST("/v2/repository/index", b"[]", status=200, ct="application/json",
                                         check=_index), facts="v2 §1.4 (observed)")
case("repository-unload-then-infer", ERR(
    "POST", "/v2/models/identity_fp64/infer", 404,
    "Request for unknown model: 'identity_fp64' has no available versions", ct="text/plain",
    body={"inputs": [inp("INPUT0", "FP64", [1, 1], [1.0])]}),
    facts="X09", setup=unload("identity_fp64"), teardown=load("identity_fp64"))

# System shared memory (v2 §1 rows 11-13, v2 §1.1)
SHM_STATUS_ONE = js([{"name": SHM_REGION, "key": SHM_KEY, "offset": 0, "byte_size": SHM_SIZE}])
case("shm-status", GET("/v2/systemsharedmemory/status", status=200, ct="application/json",
                       body_exact=b"[]"), facts="v2 §1 row 11")
case("shm-status-registered", GET("/v2/systemsharedmemory/status", status=200,
                                  ct="application/json", body_exact=SHM_STATUS_ONE),
     facts="v2 §1 row 11", setup=shm_register, teardown=shm_unregister)
case("shm-status-region", GET("/v2/systemsharedmemory/region/%s/status" % SHM_REGION, status=200,
                              ct="application/json", body_exact=SHM_STATUS_ONE),
     facts="v2 §1 row 11", setup=shm_register, teardown=shm_unregister)
case("shm-status-unknown", ERR("GET", "/v2/systemsharedmemory/region/nope/status", 404,
                               "Unable to find system shared memory region: 'nope'"), facts="v2 §1.1")
case("shm-register", POST("/v2/systemsharedmemory/region/%s/register" % SHM_REGION,
                          {"key": SHM_KEY, "offset": 0, "byte_size": SHM_SIZE}, status=200,
                          ct="application/json", body_exact=b""),
     facts="v2 §1 row 12", teardown=shm_unregister)
case("shm-register-twice", ERR("POST", "/v2/systemsharedmemory/region/%s/register" % SHM_REGION,
                               400, "shared memory region '%s' already in manager" % SHM_REGION,
                               body={"key": SHM_KEY, "offset": 0, "byte_size": SHM_SIZE}),
     facts="v2 §1.1", setup=shm_register, teardown=shm_unregister)
case("shm-register-bad-key", ERR("POST", "/v2/systemsharedmemory/region/r1/register", 500,
                                 "Unable to open shared memory region: '/tg_e2e_missing'",
                                 body={"key": "/tg_e2e_missing", "offset": 0, "byte_size": 8}),
     facts="v2 §1.1")
case("shm-register-no-region", ERR("POST", "/v2/systemsharedmemory/register", 400,
                                   "'region name' is necessary to register system shared memory region",
                                   body={"key": SHM_KEY, "offset": 0, "byte_size": 8}), facts="v2 §1.1")
case("shm-register-no-key", ERR("POST", "/v2/systemsharedmemory/region/r1/register", 400,
                                "Shared memory register request has no 'key' field",
                                body={"offset": 0, "byte_size": 8}), facts="v2 §1.1")
case("shm-register-no-byte-size", ERR("POST", "/v2/systemsharedmemory/region/r1/register", 400,
                                      "Shared memory register request has no 'byte_size' field",
                                      body={"key": SHM_KEY, "offset": 0}), facts="v2 §1.1")
# Observed on 2.51 (this machine): a region outside the object is a 400 "invalid args"
# (docs/protocol-v2.md recorded 500 "Invalid shared memory region: '<key>'").
case("shm-register-offset-beyond", ERR("POST", "/v2/systemsharedmemory/region/r1/register", 400,
                                       "failed to register shared memory region 'r1': invalid args",
                                       body={"key": SHM_KEY, "offset": 4096, "byte_size": 8}),
     facts="v2 §1.1 (observed 400, not 500)")
case("shm-register-size-beyond", ERR("POST", "/v2/systemsharedmemory/region/r1/register", 400,
                                     "failed to register shared memory region 'r1': invalid args",
                                     body={"key": SHM_KEY, "offset": 0, "byte_size": SHM_SIZE + 1}),
     facts="v2 §1.1 (observed)")
case("shm-register-unaligned-offset", ERR(
    "POST", "/v2/systemsharedmemory/region/r1/register", 400,
    "failed to register shared memory region 'r1': unable to process address spaceInvalid argument",
    body={"key": SHM_KEY, "offset": 8, "byte_size": 8}), facts="v2 §1.1 (observed)")
case("shm-register-zero-size", ERR(
    "POST", "/v2/systemsharedmemory/region/r1/register", 400,
    "failed to register shared memory region 'r1': unable to process address spaceInvalid argument",
    body={"key": SHM_KEY, "offset": 0, "byte_size": 0}), facts="v2 §1.1 (observed)")
case("shm-register-no-offset", POST("/v2/systemsharedmemory/region/%s/register" % SHM_REGION,
                                    {"key": SHM_KEY, "byte_size": SHM_SIZE}, status=200,
                                    ct="application/json", body_exact=b""),
     facts="v2 §1 row 12 (offset optional)", teardown=shm_unregister)
case("shm-register-offset-negative", ERR("POST", "/v2/systemsharedmemory/region/r1/register", 500,
                                         "attempt to access JSON non-unsigned-integer as unsigned-integer",
                                         body={"key": SHM_KEY, "offset": -1, "byte_size": 8},
                                         gateway_status=400), facts="v2 §1.1")
case("shm-register-empty-body", ERR("POST", "/v2/systemsharedmemory/region/r1/register", 500,
                                    "failed to parse the request JSON buffer: The document is empty. at 0",
                                    gateway_status=400), facts="v2 §1.1")
case("shm-unregister", POST("/v2/systemsharedmemory/region/%s/unregister" % SHM_REGION,
                            status=200, ct="application/json", body_exact=b""),
     facts="v2 §1 row 13", setup=shm_register)
case("shm-unregister-unknown", POST("/v2/systemsharedmemory/region/nope/unregister", status=200,
                                    ct="application/json", body_exact=b""), facts="E28")
case("shm-unregister-all", POST("/v2/systemsharedmemory/unregister", status=200,
                                ct="application/json", body_exact=b""),
     facts="v2 §1 row 13", setup=shm_register)
case("shm-status-405", ERR("POST", "/v2/systemsharedmemory/status", 405, "Method Not Allowed"),
     facts="v2 §0.2")
case("shm-register-405", ERR("GET", "/v2/systemsharedmemory/region/r1/register", 405,
                             "Method Not Allowed"), facts="v2 §0.2")

# CUDA shared memory (v2 §1 rows 14-16)
case("cudashm-status", GET("/v2/cudasharedmemory/status", status=200, ct="application/json",
                           body_exact=b"[]"), facts="v2 §1 row 14")
case("cudashm-status-unknown", ERR("GET", "/v2/cudasharedmemory/region/nope/status", 404,
                                   "Unable to find cuda shared memory region: 'nope'"), facts="v2 §1.1")
case("cudashm-register-bad-handle", ERR(
    "POST", "/v2/cudasharedmemory/region/r1/register", 400,
    "'raw_handle' must be a valid base64 encoded cudaIpcMemHandle_t",
    body={"raw_handle": {"b64": "AAAA"}, "device_id": 0, "byte_size": 8}), facts="E41")
case("cudashm-register-no-gpu", ERR(
    "POST", "/v2/cudasharedmemory/region/r1/register", 400,
    "failed to register shared memory region: invalid args",
    body={"raw_handle": {"b64": base64.b64encode(b"\0" * 64).decode()}, "device_id": 0,
          "byte_size": 8}), facts="v2 §1.1 (GPU build, no GPU)")
case("cudashm-unregister", POST("/v2/cudasharedmemory/region/nope/unregister", status=200,
                                ct="application/json", body_exact=b""), facts="v2 §1 row 16")
case("cudashm-unregister-all", POST("/v2/cudasharedmemory/unregister", status=200,
                                    ct="application/json", body_exact=b""), facts="v2 §1 row 16")

# Trace (v2 §1 row 17, v2 §1.5)
TRACE_DEFAULT = (b'{"trace_level":["OFF"],"trace_rate":"1000","trace_count":"-1","log_frequency":"0",'
                 b'"trace_file":"","trace_mode":"triton"}')
case("trace-get", GET("/v2/trace/setting", status=200, ct="application/json",
                      body_exact=TRACE_DEFAULT), facts="v2 §1.5")
case("trace-get-model", GET("/v2/models/add_sub/trace/setting", status=200, ct="application/json",
                            body_exact=TRACE_DEFAULT), facts="v2 §1.5")
case("trace-get-model-unknown", ERR("GET", "/v2/models/nope/trace/setting", 400,
                                    "Request for unknown model : nope"), facts="E45")
case("trace-get-model-version", ERR("GET", "/v2/models/add_sub/versions/1/trace/setting", 404,
                                    "Not Found", ct="text/plain"), facts="E32")
case("trace-post-same", POST("/v2/trace/setting", {"trace_rate": "1000"}, status=200,
                             ct="application/json", body_exact=TRACE_DEFAULT), facts="v2 §1.5")
case("trace-post-bad-rate", ERR("POST", "/v2/trace/setting", 400,
                                "Unable to parse 'trace_rate', got: abc",
                                body={"trace_rate": "abc"}), facts="K50")
case("trace-post-number", ERR("POST", "/v2/trace/setting", 500,
                              "attempt to access JSON non-string as string",
                              body={"trace_rate": 5}, gateway_status=400), facts="K51")
case("trace-post-file", ERR("POST", "/v2/trace/setting", 501,
                            "trace file location can not be updated through network protocol",
                            body={"trace_file": "x"}), facts="v2 §1.5")
case("trace-405", ERR("DELETE", "/v2/trace/setting", 405, "Method Not Allowed"), facts="v2 §0.2")

# Logging (v2 §1 row 18)
LOG_DEFAULT = (b'{"log_file":"","log_info":true,"log_warning":true,"log_error":true,'
               b'"log_verbose_level":0,"log_format":"default"}')
case("logging-get", GET("/v2/logging", status=200, ct="application/json", body_exact=LOG_DEFAULT),
     facts="v2 §1 row 18")
case("logging-post-empty-object", POST("/v2/logging", {}, status=200, ct="application/json",
                                       body_exact=LOG_DEFAULT), facts="v2 §1 row 18")
case("logging-post-same", POST("/v2/logging", {"log_verbose_level": 0}, status=200,
                               ct="application/json", body_exact=LOG_DEFAULT), facts="v2 §1 row 18")
case("logging-post-empty-body", ERR("POST", "/v2/logging", 500,
                                    "failed to parse the request JSON buffer: The document is empty. at 0",
                                    gateway_status=400), facts="v2 §1 row 18")
case("logging-post-bad-type", ERR("POST", "/v2/logging", 500,
                                  "attempt to access JSON non-unsigned-integer as unsigned-integer",
                                  body={"log_verbose_level": "x"}, gateway_status=400),
     facts="v2 §1 row 18")
case("logging-405", ERR("PUT", "/v2/logging", 405, "Method Not Allowed"), facts="v2 §0.2")

# Routing (v2 §0.3)
case("route-unknown", ERR("GET", "/v2/nope", 404, "Not Found", ct="text/plain"), facts="E35")
case("route-root", ERR("GET", "/", 404, "Not Found", ct="text/plain"), facts="E35")
case("route-trailing-slash", ERR("GET", "/v2/health/live/", 404, "Not Found", ct="text/plain"),
     facts="E39")
case("route-double-slash", ERR("GET", "/v2//models/add_sub", 404, "Not Found", ct="text/plain"),
     facts="Q04")
case("route-version-non-numeric", ERR("GET", "/v2/models/add_sub/versions/x", 404, "Not Found",
                                      ct="text/plain"), facts="E38")
case("route-health-405-post", ERR("POST", "/v2/health/live", 405, "Method Not Allowed",
                                  ct="text/plain"), facts="v2 §0.2")
case("route-health-405-head", Req("HEAD", "/v2/health/ready", status=405, ct="text/plain"),
     facts="K06")
case("route-options-405", ERR("OPTIONS", "/v2", 405, "Method Not Allowed"), facts="K07")
case("route-infer-405", ERR("GET", "/v2/models/add_sub/infer", 405, "Method Not Allowed",
                            ct="text/plain"), facts="v2 §0.2")


# --------------------------------------------------------------------------
# Infer, JSON data (v2 §2.2-§2.3, v2 §3.1, v2 §3.3)

A = inp("INPUT0", "FP32", [2], [1, 2])
B = inp("INPUT1", "FP32", [2], [3, 4])
ADD_SUB_OUT = (o_json("OUTPUT0", "FP32", [2], "4.0,6.0"), o_json("OUTPUT1", "FP32", [2], "-2.0,-2.0"))

case("infer-add-sub", OK_JSON(INFER("add_sub", req_json([A, B], id="abc")),
                              resp("add_sub", *ADD_SUB_OUT, id="abc")), facts="J01")
case("infer-add-sub-no-id", OK_JSON(INFER("add_sub", req_json([A, B])), resp("add_sub", *ADD_SUB_OUT)),
     facts="J01")
case("infer-add-sub-version", OK_JSON(INFER("add_sub", req_json([A, B]), version="1"),
                                      resp("add_sub", *ADD_SUB_OUT)), facts="v2 §1 row 19")
case("infer-empty-id", OK_JSON(INFER("add_sub", req_json([A, B], id="")),
                               resp("add_sub", *ADD_SUB_OUT)), facts="J55")
case("infer-id-escaping", OK_JSON(INFER("add_sub", req_json([A, B], id="é\n\"x")),
                                  resp("add_sub", *ADD_SUB_OUT, id="é\n\"x")), facts="K40")
case("infer-id-control-chars", OK_JSON(INFER("add_sub", req_json([A, B], id="a\x01\x1f\x7f/\\b\t\r\f\b")),
                                       resp("add_sub", *ADD_SUB_OUT, id="a\x01\x1f\x7f/\\b\t\r\f\b")),
     facts="v2 §3.4")
case("infer-id-invalid-utf8", OK_JSON(
    INFER("add_sub", b'{"id":"\xff\xfe","inputs":' + js([A, B]) + b"}"),
    resp("add_sub", *ADD_SUB_OUT, id=b"\xff\xfe")), facts="K05, Q11")
case("infer-id-non-string", ERR("POST", infer_path("add_sub"), 500,
                                "Unable to parse 'id': attempt to access JSON non-string as string",
                                body={"id": 5, "inputs": [A, B]}, gateway_status=400), facts="J23")
case("infer-ignored-top-level-keys", OK_JSON(
    INFER("add_sub", {"model_name": "x", "model_version": "9", "inputs": [A, B], "extra": [1]}),
    resp("add_sub", *ADD_SUB_OUT)), facts="K34, K35")
case("infer-content-type-ignored", OK_JSON(
    INFER("add_sub", req_json([A, B]), headers=(("Content-Type", "text/plain"),)),
    resp("add_sub", *ADD_SUB_OUT)), facts="J57")
case("infer-nested-data", OK_JSON(
    INFER("add_sub", req_json([inp("INPUT0", "FP32", [4], [[1, [2]], [[3], 4]]),
                               inp("INPUT1", "FP32", [4], [1, 1, 1, 1])])),
    resp("add_sub", o_json("OUTPUT0", "FP32", [4], "2.0,3.0,4.0,5.0"),
         o_json("OUTPUT1", "FP32", [4], "0.0,1.0,2.0,3.0"))), facts="J02, J59")
case("infer-shape-2d-flat-output", OK_JSON(
    INFER("identity_int32", req_json([inp("INPUT0", "INT32", [2, 3], [[1, 2, 3], [4, 5, 6]])])),
    resp("identity_int32", o_json("OUTPUT0", "INT32", [2, 3], "1,2,3,4,5,6"))), facts="v2 §3.3")
case("infer-trailing-whitespace", OK_JSON(INFER("add_sub", js(req_json([A, B])) + b" \n\t "),
                                          resp("add_sub", *ADD_SUB_OUT)), facts="Q13")
case("infer-trailing-nul", OK_JSON(INFER("add_sub", js(req_json([A, B])) + b"\0garbage"),
                                   resp("add_sub", *ADD_SUB_OUT)), facts="Q12")
case("infer-chunked-upload", OK_JSON(
    Req("POST", infer_path("add_sub"), headers=(("Transfer-Encoding", "chunked"),),
        chunks=[js(req_json([A, B]))[:20], js(req_json([A, B]))[20:]]),
    resp("add_sub", *ADD_SUB_OUT)), facts="K62")
case("infer-outputs-empty-list", OK_JSON(INFER("add_sub", req_json([A, B], outputs=[])),
                                         resp("add_sub", *ADD_SUB_OUT)), facts="K12")
case("infer-output-subset", OK_JSON(INFER("add_sub", req_json([A, B], outputs=[outp("OUTPUT1")])),
                                    resp("add_sub", ADD_SUB_OUT[1])), facts="v2 §2.4")
case("infer-output-order", OK_JSON(
    INFER("add_sub", req_json([A, B], outputs=[outp("OUTPUT1"), outp("OUTPUT0")])),
    resp("add_sub", *ADD_SUB_OUT)), facts="J25")
case("infer-output-duplicates", OK_JSON(
    INFER("add_sub", req_json([A, B], outputs=[outp("OUTPUT0"), outp("OUTPUT0")]),
          expect_diff={"status": 400, "error": "[request id: <id_unknown>] output 'OUTPUT0' already exists in request",
                       "why": "compatibility #8: newer Triton refuses a repeated output"}),
    resp("add_sub", ADD_SUB_OUT[0])), facts="K11")
case("infer-output-extra-keys", OK_JSON(
    INFER("add_sub", req_json([A, B], outputs=[{"name": "OUTPUT0", "foo": 1, "parameters": {"bar": 2}}])),
    resp("add_sub", ADD_SUB_OUT[0])), facts="v2 §2.4")
case("infer-input-extra-keys", OK_JSON(
    INFER("add_sub", req_json([dict(A, foo=[1], parameters={"x": 1}), B])),
    resp("add_sub", *ADD_SUB_OUT)), facts="K30")
case("infer-count-zero", OK_JSON(
    INFER("add_sub", req_json([inp("INPUT0", "FP32", [0], "ignored"), inp("INPUT1", "FP32", [0], [])])),
    resp("add_sub", o_json("OUTPUT0", "FP32", [0], ""), o_json("OUTPUT1", "FP32", [0], ""))),
    facts="J17")

# Every datatype through JSON, including boundary values and truncation (T01, T02).
JSON_DTYPE_CASES = [
    ("bool", "BOOL", [True, False, True], "true,false,true"),
    ("int8", "INT8", [-128, 127, 300, -129, 0], "-128,127,44,127,0"),
    ("int16", "INT16", [-32768, 32767, 70000], "-32768,32767,4464"),
    ("int32", "INT32", [-2147483648, 2147483647, 4294967301], "-2147483648,2147483647,5"),
    ("int64", "INT64", [-9223372036854775808, 9223372036854775807, 0],
     "-9223372036854775808,9223372036854775807,0"),
    ("uint8", "UINT8", [0, 255, 256, 257], "0,255,0,1"),
    ("uint16", "UINT16", [0, 65535, 65536], "0,65535,0"),
    ("uint32", "UINT32", [4294967295, 4294967296], "4294967295,0"),
    ("uint64", "UINT64", [0, 18446744073709551615], "0,18446744073709551615"),
    ("fp32", "FP32", [0.1, 1e-7, 3.14159, 123456789, 1e20, 100.5, 0, -0.0, 12345.678, 1.5e-6, 1e21, 1e-6, 4],
     "0.10000000149011612,1.0000000116860974e-7,3.141590118408203,123456792.0,"
     "100000002004087730000.0,100.5,0.0,-0.0,12345.677734375,0.000001500000053056283,"
     "1.0000000200408774e21,9.999999974752428e-7,4.0"),
    ("fp32-nonfinite", "FP32", [float("nan"), float("inf"), float("-inf"), 1e39, -1e39],
     "NaN,Infinity,-Infinity,Infinity,-Infinity"),
    ("fp64", "FP64", [0.1, 5e-324, 1.7976931348623157e308, 1e300, 1e21, 1e-7, 1e20, -2.5, 0.0, -0.0],
     "0.1,5e-324,1.7976931348623157e308,1e300,1e21,1e-7,100000000000000000000.0,-2.5,0.0,-0.0"),
    ("fp64-nonfinite", "FP64", [float("nan"), float("inf"), float("-inf")], "NaN,Infinity,-Infinity"),
]
for _id, _dt, _data, _lit in JSON_DTYPE_CASES:
    _model = "identity_" + _dt.lower()
    case("infer-json-" + _id, OK_JSON(
        INFER(_model, req_json([inp("INPUT0", _dt, [1, len(_data)], _data)])),
        resp(_model, o_json("OUTPUT0", _dt, [1, len(_data)], _lit))), facts="T01, T02, J58, K01-K03, J46, T07")

case("infer-json-fp32-int-literals", OK_JSON(
    INFER("identity_fp32", b'{"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[1,3],'
                           b'"data":[1,-7,18446744073709551615]}]}'),
    resp("identity_fp32", o_json("OUTPUT0", "FP32", [1, 3], "1.0,-7.0,18446744073709553000.0"))),
    facts="v2 §2.3 (any number); v2 §3.3 Grisu2 is not shortest here: 2^64 -> ...553000.0, Ryu gives ...552000.0")
case("infer-json-bytes", OK_JSON(
    INFER("identity_bytes", req_json([inp("INPUT0", "BYTES", [1, 5], ["hello", "", "a\x00b", "é\n\"x/", "\x01\x1f"])])),
    resp("identity_bytes", o_json("OUTPUT0", "BYTES", [1, 5],
                                  b'"hello","","a\\u0000b","\xc3\xa9\\n\\"x/","\\u0001\\u001F"'))),
    facts="J07, v2 §3.4")
case("infer-json-bytes-raw-invalid-utf8", OK_JSON(
    INFER("identity_bytes", b'{"inputs":[{"name":"INPUT0","datatype":"BYTES","shape":[1,1],"data":["\xff\xfe"]}]}'),
    resp("identity_bytes", o_json("OUTPUT0", "BYTES", [1, 1], b'"\xff\xfe"'))), facts="K04, Q11")
case("infer-json-bytes-no-base64", OK_JSON(
    INFER("identity_bytes", req_json([inp("INPUT0", "BYTES", [1, 1], ["aGVsbG8="])])),
    resp("identity_bytes", o_json("OUTPUT0", "BYTES", [1, 1], b'"aGVsbG8="'))), facts="v2 §2.3")
case("infer-json-string-single", OK_JSON(
    INFER("string_single", req_json([inp("INPUT0", "BYTES", [1], ["hi"])])),
    resp("string_single", o_json("OUTPUT0", "BYTES", [1], b'"hi"'))), facts="v2 §2.3")

# JSON data errors (v2 §2.3 leaf table): Triton 500, gateway 400
for _id, _dt, _data, _msg, _facts in [
    ("bool-int", "BOOL", [0, 1], "Unable to parse 'data': attempt to access JSON non-boolean as boolean", "P02"),
    ("uint-negative", "UINT8", [-1], "Unable to parse 'data': attempt to access JSON non-unsigned-integer as unsigned-integer", "T03"),
    ("uint-float", "UINT32", [1.5], "Unable to parse 'data': attempt to access JSON non-unsigned-integer as unsigned-integer", "T03"),
    ("int-float", "INT32", [1.0], "Unable to parse 'data': attempt to access JSON non-signed-integer as signed-integer", "T04"),
    ("int-bool", "INT8", [True], "Unable to parse 'data': attempt to access JSON non-signed-integer as signed-integer", "T05"),
    ("int64-too-big", "INT64", [9223372036854775808], "Unable to parse 'data': attempt to access JSON non-signed-integer as signed-integer", "T06"),
    ("fp32-string", "FP32", ["1.0"], "Unable to parse 'data': attempt to access JSON non-number as double", "J05"),
    ("fp32-null", "FP32", [None], "Unable to parse 'data': attempt to access JSON non-number as double", "J47"),
    ("fp64-bool", "FP64", [True], "Unable to parse 'data': attempt to access JSON non-number as double", "J05"),
    ("bytes-number", "BYTES", [1], "Unable to parse JSON bytes array: attempt to access JSON non-string as string", "J08"),
]:
    _model = "identity_" + _dt.lower()
    case("infer-json-error-" + _id, ERR("POST", infer_path(_model), 500, _msg,
                                        body=req_json([inp("INPUT0", _dt, [1, len(_data)], _data)]),
                                        gateway_status=400), facts=_facts)

case("infer-json-fp16", ERR("POST", infer_path("identity_fp16"), 400,
                            "receiving FP16 data via JSON is not supported. Please use the binary data format for input INPUT0",
                            body=req_json([inp("INPUT0", "FP16", [1, 2], [1.0, 2.0])]),
                            expect_diff=half_json_answer("identity_fp16", "FP16")), facts="J06")
case("infer-json-bf16", ERR("POST", infer_path("identity_bf16"), 400,
                            "receiving BF16 data via JSON is not supported. Please use the binary data format for input INPUT0",
                            body=req_json([inp("INPUT0", "BF16", [1, 2], [1.0, 2.0])]),
                            expect_diff=half_json_answer("identity_bf16", "BF16")), facts="v2 §2.3")
case("infer-json-too-many-leaves", ERR("POST", infer_path("add_sub"), 500,
                                       "Unable to parse 'data': Shape does not match true shape of 'data' field",
                                       body=req_json([inp("INPUT0", "FP32", [2], [1, 2, 3]), B]),
                                       gateway_status=400), facts="J03")
case("infer-json-too-few-leaves", ERR("POST", infer_path("add_sub"), 500,
                                      "Unable to parse 'data': Shape does not match true shape of 'data' field",
                                      body=req_json([inp("INPUT0", "FP32", [3], [1, 2]), B]),
                                      gateway_status=400), facts="J04")
case("infer-json-type-error-before-count", ERR("POST", infer_path("add_sub"), 500,
                                               "Unable to parse 'data': attempt to access JSON non-number as double",
                                               body=req_json([inp("INPUT0", "FP32", [1], ["x", 2, 3]), B]),
                                               gateway_status=400), facts="v2 §2.3")
case("infer-json-data-not-array", ERR("POST", infer_path("add_sub"), 500,
                                      "Unable to parse 'data': attempt to access JSON non-array as array",
                                      body=req_json([inp("INPUT0", "FP32", [1], 5), B]),
                                      gateway_status=400), facts="v2 §2.3")
case("infer-json-bytes-count-mismatch-more", ERR(
    "POST", infer_path("identity_bytes"), 400,
    "[request id: <id_unknown>] unexpected number of string elements 3 for inference input 'INPUT0' for model 'identity_bytes', expecting 2",
    body=req_json([inp("INPUT0", "BYTES", [1, 2], ["a", "b", "c"])])), facts="K22")
case("infer-json-bytes-count-mismatch-fewer", ERR(
    "POST", infer_path("identity_bytes"), 400,
    "[request id: <id_unknown>] expected 2 string elements for inference input 'INPUT0' for model 'identity_bytes', got 1",
    body=req_json([inp("INPUT0", "BYTES", [1, 2], ["a"])])), facts="K23")


# --------------------------------------------------------------------------
# Infer request structure errors (v2 §2.1-§2.4, v2 §2.8)

P = infer_path("add_sub")
UNK = "[request id: <id_unknown>] "
case("infer-unknown-model", ERR("POST", infer_path("nope"), 404,
                                "Request for unknown model: 'nope' is not found", ct="text/plain",
                                body=req_json([A, B])), facts="J12")
case("infer-unknown-version", ERR("POST", infer_path("add_sub", 3), 404,
                                  "Request for unknown model: 'add_sub' version 3 is not found",
                                  ct="text/plain", body=req_json([A, B])), facts="J13")
case("infer-version-0", ERR("POST", infer_path("add_sub", 0), 404,
                            "Request for unknown model: 'add_sub' version 0 is not found",
                            ct="text/plain", body=req_json([A, B])), facts="K39")
case("infer-decoupled", ERR("POST", infer_path("repeat_decoupled"), 501,
                            "HTTP end point doesn't support models with decoupled transaction policy",
                            ct="text/plain", body=req_json([inp("INPUT0", "INT32", [1], [2])])),
     facts="D01")
case("infer-malformed-json", ERR("POST", P, 500,
                                 "failed to parse the request JSON buffer: Invalid value. at 1",
                                 body=b"not json", gateway_status=400), facts="J20")
case("infer-malformed-json-missing-comma", ERR(
    "POST", P, 500, "failed to parse the request JSON buffer: Missing a comma or '}' after an object member. at 13",
    body=b'{"inputs":[] "x":1}', gateway_status=400), facts="J20")
case("infer-malformed-json-missing-name", ERR(
    "POST", P, 500, "failed to parse the request JSON buffer: Missing a name for object member. at 1",
    body=b"{,}", gateway_status=400), facts="J20")
case("infer-trailing-garbage", ERR(
    "POST", P, 500,
    "failed to parse the request JSON buffer: The document root must not be followed by other values. at %d"
    % (len(js(req_json([A, B]))) + 1),
    body=js(req_json([A, B])) + b" x", gateway_status=400), facts="J56")
case("infer-root-array", ERR("POST", P, 500,
                             "Unable to parse 'inputs': attempt to access non-existing object member 'inputs'",
                             body=b"[1,2]", gateway_status=400), facts="K10")
case("infer-no-inputs", ERR("POST", P, 500,
                            "Unable to parse 'inputs': attempt to access non-existing object member 'inputs'",
                            body={"id": "x"}, gateway_status=400), facts="J22")
case("infer-inputs-not-array", ERR("POST", P, 500,
                                   "Unable to parse 'inputs': attempt to access JSON non-array as array",
                                   body={"inputs": {}}, gateway_status=400), facts="v2 §2.3")
case("infer-inputs-empty", ERR(
    "POST", P, 400,
    UNK + "expected 2 inputs but got 0 inputs for model 'add_sub'. Got input(s) [], but missing required "
    "input(s) ['INPUT0','INPUT1']. Please provide all required input(s).",
    body={"inputs": []}), facts="K18")
case("infer-missing-input", ERR(
    "POST", P, 400,
    UNK + "expected 2 inputs but got 1 inputs for model 'add_sub'. Got input(s) ['INPUT0'], but missing "
    "required input(s) ['INPUT1']. Please provide all required input(s).",
    body=req_json([A])), facts="J11")
case("infer-missing-input-with-id", ERR(
    "POST", P, 400,
    "[request id: r1] expected 2 inputs but got 1 inputs for model 'add_sub'. Got input(s) ['INPUT0'], but "
    "missing required input(s) ['INPUT1']. Please provide all required input(s).",
    body=req_json([A], id="r1")), facts="J11, v2 §0.1")
case("infer-unexpected-input", ERR("POST", P, 400, "unexpected inference input 'INPUT9' for model 'add_sub'",
                                   body=req_json([A, inp("INPUT9", "FP32", [2], [1, 2])])), facts="J10")
# With one input too many, the core's count check comes first, with a garbled list ("input(s) ]").
case("infer-extra-input", ERR(
    "POST", P, 400,
    UNK + "expected 2 inputs but got 3 inputs for model 'add_sub'. Got input(s) ['INPUT9','INPUT1','INPUT0'], "
    "but missing required input(s) ]. Please provide all required input(s).",
    body=req_json([A, B, inp("INPUT9", "FP32", [2], [1, 2])])), facts="v2 §2.8 (observed)")
case("infer-datatype-mismatch", ERR(
    "POST", P, 400,
    UNK + "inference input 'INPUT0' data-type is 'BOOL', but model 'add_sub' expects 'FP32'",
    body=req_json([inp("INPUT0", "BOOL", [2], [True, False]), B])), facts="J09")
case("infer-invalid-datatype-lowercase", ERR("POST", P, 400, "invalid datatype for input INPUT0",
                                             body=req_json([inp("INPUT0", "fp32", [2], [1, 2]), B])),
     facts="J14")
case("infer-invalid-datatype-string", ERR("POST", infer_path("identity_bytes"), 400,
                                          "invalid datatype for input INPUT0",
                                          body=req_json([inp("INPUT0", "STRING", [1, 1], ["a"])])),
     facts="K20")
case("infer-name-missing", ERR("POST", P, 500,
                               "Unable to parse 'name': attempt to access non-existing object member 'name'",
                               body={"inputs": [{"datatype": "FP32", "shape": [2], "data": [1, 2]}]},
                               gateway_status=400), facts="v2 §2.3")
case("infer-name-not-string", ERR("POST", P, 500,
                                  "Unable to parse 'name': attempt to access JSON non-string as string",
                                  body={"inputs": [{"name": 0, "datatype": "FP32", "shape": [2], "data": [1, 2]}]},
                                  gateway_status=400), facts="v2 §2.3")
case("infer-datatype-missing", ERR("POST", P, 500,
                                   "Unable to parse 'datatype': attempt to access non-existing object member 'datatype'",
                                   body={"inputs": [{"name": "INPUT0", "shape": [2], "data": [1, 2]}]},
                                   gateway_status=400), facts="v2 §2.3")
case("infer-shape-negative", ERR("POST", P, 500,
                                 "Unable to parse 'shape': attempt to access JSON non-unsigned-integer as unsigned-integer",
                                 body=req_json([inp("INPUT0", "FP32", [-1], [1, 2]), B]),
                                 gateway_status=400), facts="J15")
case("infer-shape-float", ERR("POST", P, 500,
                              "Unable to parse 'shape': attempt to access JSON non-unsigned-integer as unsigned-integer",
                              body=req_json([inp("INPUT0", "FP32", [2.0], [1, 2]), B]),
                              gateway_status=400), facts="K19")
case("infer-shape-not-array", ERR("POST", P, 500,
                                  "Unable to parse 'shape': attempt to access JSON non-array as array",
                                  body=req_json([inp("INPUT0", "FP32", 2, [1, 2]), B]),
                                  gateway_status=400), facts="J48")
case("infer-shape-empty", ERR(
    "POST", P, 400,
    UNK + "unexpected shape for input 'INPUT1' for model 'add_sub'. Expected [-1], got []. ",
    body=req_json([A, inp("INPUT1", "FP32", [], [1])])), facts="J16")
case("infer-batch-too-large", ERR(
    "POST", infer_path("identity_bytes"), 400,
    UNK + "inference request batch-size must be <= 8 for 'identity_bytes'",
    body=req_json([inp("INPUT0", "BYTES", [9, 1], ["a"] * 9)])), facts="J44")
case("infer-batching-shape-mismatch", Req(
    "POST", infer_path("identity_fp32"), js(req_json([inp("INPUT0", "FP32", [2], [1, 2])])),
    status=400, ct="application/json", ihcl=ABSENT,
    check=lambda r: json.loads(r.body)["error"].startswith(
        UNK + "unexpected shape for input 'INPUT0' for model 'identity_fp32'. Expected [-1,-1], got [2]. NOTE:")),
    facts="J45")
case("infer-duplicate-input", ERR("POST", P, 400, UNK + "input 'INPUT0' already exists in request",
                                  body=req_json([A, A, B])), facts="J49")
case("infer-no-data-source", ERR(
    "POST", P, 400,
    "Input must set only one of the following fields: 'data', 'binary_data_size' in 'parameters', "
    "'shared_memory_region' in 'parameters'. But no field is set",
    body=req_json([inp("INPUT0", "FP32", [2]), B])), facts="J19")
case("infer-two-data-sources", ERR(
    "POST", P, 400,
    "Input must set only one of the following fields: 'data', 'binary_data_size' in 'parameters', "
    "'shared_memory_region' in 'parameters'. But set 'data' 'binary_data_size'",
    body=req_json([inp("INPUT0", "FP32", [2], [1, 2], bsize=8), B])), facts="J18")
case("infer-three-data-sources", ERR(
    "POST", P, 400,
    "Input must set only one of the following fields: 'data', 'binary_data_size' in 'parameters', "
    "'shared_memory_region' in 'parameters'. But set 'data' 'binary_data_size' 'shared_memory_region'",
    body=req_json([inp("INPUT0", "FP32", [2], [1, 2], bsize="x", shared_memory_region=None), B])),
    facts="J18 (presence by key)")
case("infer-unknown-output", ERR("POST", P, 400, "unexpected inference output 'OUTPUT9' for model 'add_sub'",
                                 body=req_json([A, B], outputs=[outp("OUTPUT9")])), facts="J26")
case("infer-outputs-not-array", ERR("POST", P, 500,
                                    "Unable to parse 'outputs': attempt to access JSON non-array as array",
                                    body=req_json([A, B], outputs={}), gateway_status=400), facts="K13")
case("infer-output-no-name", ERR("POST", P, 500,
                                 "Unable to parse 'name': attempt to access non-existing object member 'name'",
                                 body=req_json([A, B], outputs=[{"parameters": {"binary_data": True}}]),
                                 gateway_status=400), facts="K14")
case("infer-output-binary-data-nonbool", ERR(
    "POST", P, 500, "Unable to parse 'binary_data': attempt to access JSON non-boolean as boolean",
    body=req_json([A, B], outputs=[outp("OUTPUT0", binary=1)]), gateway_status=400), facts="J53")
case("infer-output-classification-string", ERR(
    "POST", P, 500, "Unable to set 'classification': attempt to access JSON non-unsigned-integer as unsigned-integer",
    body=req_json([A, B], outputs=[outp("OUTPUT0", classification="2")]), gateway_status=400), facts="J54")
case("infer-output-shm-and-classification", ERR(
    "POST", P, 400, "Output can't set both 'shared_memory_region' and 'classification'",
    body=req_json([A, B], outputs=[outp("OUTPUT0", classification=1, shared_memory_region="r")])),
    facts="J41")
case("infer-output-shm-and-binary", ERR(
    "POST", P, 400, "Output can't set both 'shared_memory_region' and 'binary_data'",
    body=req_json([A, B], outputs=[outp("OUTPUT0", binary=True, shared_memory_region="r")])), facts="K32")
case("infer-json-fp16-output", ERR(
    "POST", infer_path("identity_fp16"), 400,
    "sending FP16 data via JSON is not supported. Please use the binary data format for output",
    ct="text/plain", body=js(req_json([inp("INPUT0", "FP16", [1, 2], bsize=4)])) + b"\x00\x3c\x00\x40",
    headers=(("Inference-Header-Content-Length", str(len(js(req_json([inp("INPUT0", "FP16", [1, 2], bsize=4)]))))),),
    expect_diff=half_json_answer("identity_fp16", "FP16")),
    facts="J43")
case("infer-json-bf16-output", ERR(
    "POST", infer_path("identity_bf16"), 400,
    "sending BF16 data via JSON is not supported. Please use the binary data format for output",
    ct="text/plain", body=js(req_json([inp("INPUT0", "BF16", [1, 2], bsize=4)])) + b"\x80\x3f\x00\x40",
    headers=(("Inference-Header-Content-Length", str(len(js(req_json([inp("INPUT0", "BF16", [1, 2], bsize=4)]))))),),
    expect_diff=half_json_answer("identity_bf16", "BF16")),
    facts="J43")

# Request parameters (v2 §5.1)
case("infer-custom-parameters", OK_JSON(
    INFER("add_sub", req_json([A, B], parameters={"a": 1, "b": "x", "c": True, "d": 1.5,
                                                  "e": 18446744073709551615, "headers": "h"})),
    resp("add_sub", *ADD_SUB_OUT)), facts="v2 §5.1, P01")
case("infer-parameters-priority-timeout", OK_JSON(
    INFER("add_sub", req_json([A, B], parameters={"priority": 0, "timeout": 100000000})),
    resp("add_sub", *ADD_SUB_OUT)), facts="v2 §5.1")
# `timeout` is Triton's queueing timeout (µs), not a deadline of the whole
# call: 1 ms to a model that takes 50 ms succeeds (issue 13 #8).
case("infer-parameter-timeout-shorter-than-model", OK_JSON(
    INFER("slow_identity", req_json([inp("INPUT0", "FP32", [1, 1], [1])],
                                    parameters={"timeout": 1000, "delay_ms": 50})),
    resp("slow_identity", o_json("OUTPUT0", "FP32", [1, 1], "1.0"))), facts="v2 §5.1")
case("infer-parameters-not-object", ERR("POST", P, 500,
                                        "failed to get request params.: attempt to get members for non-object",
                                        body=req_json([A, B], parameters=[1]), gateway_status=400),
     facts="J50")
for _id, _val in (("object", {"x": 1}), ("array", [1]), ("null", None)):
    case("infer-parameter-invalid-type-" + _id, ERR(
        "POST", P, 400, "parameter 'p' has invalid type. It should be either 'int', 'bool', or 'string'.",
        body=req_json([A, B], parameters={"p": _val})), facts="J28, J30, K28")
case("infer-parameter-triton-reserved", ERR(
    "POST", P, 400,
    "parameter keys starting with 'triton_' are reserved for Triton usage and should not be specified.",
    body=req_json([A, B], parameters={"triton_x": 1})), facts="J29")
case("infer-parameter-priority-string", ERR(
    "POST", P, 500, "Unable to parse 'priority': attempt to access JSON non-unsigned-integer as unsigned-integer",
    body=req_json([A, B], parameters={"priority": "1"}), gateway_status=400), facts="J33")
case("infer-parameter-timeout-negative", ERR(
    "POST", P, 500, "Unable to parse 'timeout': attempt to access JSON non-unsigned-integer as unsigned-integer",
    body=req_json([A, B], parameters={"timeout": -1}), gateway_status=400), facts="K25")
case("infer-parameter-binary-data-output-nonbool", ERR(
    "POST", P, 500, "Unable to parse 'binary_data_output': attempt to access JSON non-boolean as boolean",
    body=req_json([A, B], parameters={"binary_data_output": 1}), gateway_status=400), facts="J52")
case("infer-parameter-sequence-start-nonbool", ERR(
    "POST", P, 500, "Unable to parse 'sequence_start': attempt to access JSON non-boolean as boolean",
    body=req_json([A, B], parameters={"sequence_start": 1}), gateway_status=400), facts="J34")
case("infer-parameter-sequence-end-nonbool", ERR(
    "POST", P, 500, "Unable to parse 'sequence_end': attempt to access JSON non-boolean as boolean",
    body=req_json([A, B], parameters={"sequence_end": "true"}), gateway_status=400), facts="J34")
case("infer-parameter-sequence-id-negative", ERR(
    "POST", P, 500, "Unable to parse 'sequence_id': attempt to access JSON non-string as string",
    body=req_json([A, B], parameters={"sequence_id": -1}), gateway_status=400), facts="K26")
case("infer-parameter-sequence-id-float", ERR(
    "POST", P, 500, "Unable to parse 'sequence_id': attempt to access JSON non-string as string",
    body=req_json([A, B], parameters={"sequence_id": 1.5}), gateway_status=400), facts="K27")
case("infer-sequence-id-on-plain-model", OK_JSON(
    INFER("add_sub", req_json([A, B], parameters={"sequence_id": 5, "sequence_start": True})),
    resp("add_sub", *ADD_SUB_OUT)), facts="J31")
case("infer-sequence-flags-without-id", OK_JSON(
    INFER("add_sub", req_json([A, B], parameters={"sequence_start": True, "sequence_end": True})),
    resp("add_sub", *ADD_SUB_OUT)), facts="K24")

# Sequences (v2 §5.1) on sequence_accumulate: each target runs its own full sequence
SEQ = "sequence_accumulate"


def seq_step(value, total, **params):
    return OK_JSON(INFER(SEQ, req_json([inp("INPUT0", "INT32", [1, 1], [value])], parameters=params)),
                   resp(SEQ, o_json("OUTPUT0", "INT32", [1, 1], str(total))))


case("sequence-numeric-id",
     seq_step(5, 5, sequence_id=4242, sequence_start=True),
     seq_step(7, 12, sequence_id=4242),
     seq_step(1, 13, sequence_id=4242, sequence_end=True),
     facts="v2 §5.1")
case("sequence-start-end-one-request", seq_step(9, 9, sequence_id=4243, sequence_start=True,
                                                sequence_end=True), facts="v2 §5.1")
case("sequence-two-interleaved",
     seq_step(1, 1, sequence_id=4244, sequence_start=True),
     seq_step(10, 10, sequence_id=4245, sequence_start=True),
     seq_step(2, 3, sequence_id=4244, sequence_end=True),
     seq_step(20, 30, sequence_id=4245, sequence_end=True),
     facts="v2 §5.1")
case("sequence-missing-id", ERR(
    "POST", infer_path(SEQ), 400,
    "inference request to model 'sequence_accumulate' must specify a non-zero or non-empty correlation ID",
    body=req_json([inp("INPUT0", "INT32", [1, 1], [1])])), facts="v2 §5.1")
case("sequence-id-zero", ERR(
    "POST", infer_path(SEQ), 400,
    "inference request to model 'sequence_accumulate' must specify a non-zero or non-empty correlation ID",
    body=req_json([inp("INPUT0", "INT32", [1, 1], [1])], parameters={"sequence_id": 0})), facts="v2 §5.1")
case("sequence-string-id-start-end", seq_step(3, 3, sequence_id="seq-a", sequence_start=True,
                                              sequence_end=True), facts="v2 §5.1 (string id)")


# --------------------------------------------------------------------------
# Binary tensor data extension (v2 §2.3 binary_data_size, v2 §2.7 raw, v2 §3.2)

F32 = lambda *v: struct.pack("<%df" % len(v), *v)  # noqa: E731
A_BIN = F32(1, 2)
B_BIN = F32(3, 4)
OUT0_BIN, OUT1_BIN = F32(4, 6), F32(-2, -2)
HA = inp("INPUT0", "FP32", [2], bsize=8)
HB = inp("INPUT1", "FP32", [2], bsize=8)


def bin_resp_add_sub(outputs_binary=(True, True), id=None):
    outs, tail = [], b""
    for name, data, lit, binary in (("OUTPUT0", OUT0_BIN, "4.0,6.0", outputs_binary[0]),
                                    ("OUTPUT1", OUT1_BIN, "-2.0,-2.0", outputs_binary[1])):
        if binary:
            outs.append(o_bin(name, "FP32", [2], 8))
            tail += data
        else:
            outs.append(o_json(name, "FP32", [2], lit))
    return resp("add_sub", *outs, id=id), tail


case("binary-add-sub", OK_BIN(INFER("add_sub", req_json([HA, HB], outputs=[outp("OUTPUT0", True), outp("OUTPUT1", True)]),
                                    A_BIN + B_BIN), *bin_resp_add_sub()), facts="B02, J35")
case("binary-in-json-out", OK_JSON(INFER("add_sub", req_json([HA, HB]), A_BIN + B_BIN),
                                   resp("add_sub", *ADD_SUB_OUT)), facts="v2 §2.3")
case("binary-output-all-via-binary-data-output", OK_BIN(
    INFER("add_sub", req_json([A, B], parameters={"binary_data_output": True})), *bin_resp_add_sub()),
    facts="J35")
case("binary-output-binary-data-output-false", OK_JSON(
    INFER("add_sub", req_json([A, B], parameters={"binary_data_output": False})),
    resp("add_sub", *ADD_SUB_OUT)), facts="v2 §2.4")
case("binary-output-mixed", OK_BIN(
    INFER("add_sub", req_json([A, B], outputs=[outp("OUTPUT0", True), outp("OUTPUT1", False)])),
    *bin_resp_add_sub((True, False))), facts="J36")
case("binary-output-mixed-json-first", OK_BIN(
    INFER("add_sub", req_json([A, B], outputs=[outp("OUTPUT0", False), outp("OUTPUT1", True)])),
    *bin_resp_add_sub((False, True))), facts="J36")
case("binary-output-listed-does-not-inherit", OK_JSON(
    INFER("add_sub", req_json([A, B], parameters={"binary_data_output": True},
                              outputs=[outp("OUTPUT0"), outp("OUTPUT1")])),
    resp("add_sub", *ADD_SUB_OUT)), facts="Q03, P06, J37")
case("binary-output-listed-only", OK_JSON(
    INFER("add_sub", req_json([A, B], parameters={"binary_data_output": True}, outputs=[outp("OUTPUT0")])),
    resp("add_sub", ADD_SUB_OUT[0])), facts="Q03 (unlisted outputs are not returned)")
case("binary-output-listed-false-overrides", OK_JSON(
    INFER("add_sub", req_json([A, B], parameters={"binary_data_output": True},
                              outputs=[outp("OUTPUT0", False)])),
    resp("add_sub", ADD_SUB_OUT[0])), facts="Q03")
case("binary-output-with-id", OK_BIN(
    INFER("add_sub", req_json([A, B], id="bin-1", parameters={"binary_data_output": True})),
    *bin_resp_add_sub(id="bin-1")), facts="v2 §3.1")
case("binary-output-empty", OK_JSON(
    INFER("add_sub", req_json([inp("INPUT0", "FP32", [0], []), inp("INPUT1", "FP32", [0], [])],
                              parameters={"binary_data_output": True})),
    resp("add_sub", o_bin("OUTPUT0", "FP32", [0], 0), o_bin("OUTPUT1", "FP32", [0], 0))), facts="B37")
case("binary-mixed-inputs", OK_JSON(INFER("add_sub", req_json([A, HB]), B_BIN),
                                    resp("add_sub", *ADD_SUB_OUT)), facts="B17")
case("binary-mixed-inputs-binary-first", OK_JSON(INFER("add_sub", req_json([HA, B]), A_BIN),
                                                 resp("add_sub", *ADD_SUB_OUT)), facts="B17")
case("binary-data-size-zero", OK_JSON(
    INFER("add_sub", req_json([inp("INPUT0", "FP32", [0], bsize=0), inp("INPUT1", "FP32", [0], bsize=0)]),
          ihcl=len(js(req_json([inp("INPUT0", "FP32", [0], bsize=0), inp("INPUT1", "FP32", [0], bsize=0)])))),
    resp("add_sub", o_json("OUTPUT0", "FP32", [0], ""), o_json("OUTPUT1", "FP32", [0], ""))), facts="v2 §2.3")
case("binary-ihcl-lowercase-header", OK_JSON(
    INFER("add_sub", req_json([HA, HB]), A_BIN + B_BIN, ihcl=None,
          headers=(("inference-header-content-length", str(len(js(req_json([HA, HB]))))),)),
    resp("add_sub", *ADD_SUB_OUT)), facts="K09")
case("binary-ihcl-equals-content-length", OK_JSON(
    INFER("add_sub", req_json([A, B]), ihcl=len(js(req_json([A, B])))), resp("add_sub", *ADD_SUB_OUT)),
    facts="B34")

# Every datatype as binary input and binary output (and back as JSON where allowed)
BIN_DTYPES = [
    ("bool", "BOOL", np.array([True, False, True], dtype=np.bool_)),
    ("int8", "INT8", np.array([-128, 0, 127], dtype=np.int8)),
    ("int16", "INT16", np.array([-32768, 1, 32767], dtype=np.int16)),
    ("int32", "INT32", np.array([-2147483648, 1, 2147483647], dtype=np.int32)),
    ("int64", "INT64", np.array([-9223372036854775808, 1, 9223372036854775807], dtype=np.int64)),
    ("uint8", "UINT8", np.array([0, 1, 255], dtype=np.uint8)),
    ("uint16", "UINT16", np.array([0, 1, 65535], dtype=np.uint16)),
    ("uint32", "UINT32", np.array([0, 1, 4294967295], dtype=np.uint32)),
    ("uint64", "UINT64", np.array([0, 1, 18446744073709551615], dtype=np.uint64)),
    ("fp16", "FP16", np.array([1.0, -2.5, np.inf], dtype=np.float16)),
    ("fp32", "FP32", np.array([0.1, -0.0, np.nan], dtype=np.float32)),
    ("fp64", "FP64", np.array([0.1, 5e-324, -np.inf], dtype=np.float64)),
]
for _id, _dt, _arr in BIN_DTYPES:
    _model, _raw = "identity_" + _dt.lower(), _arr.astype(_arr.dtype.newbyteorder("<")).tobytes()
    _shape = [1, len(_arr)]
    case("binary-dtype-" + _id, OK_BIN(
        INFER(_model, req_json([inp("INPUT0", _dt, _shape, bsize=len(_raw))],
                               outputs=[outp("OUTPUT0", True)]), _raw),
        resp(_model, o_bin("OUTPUT0", _dt, _shape, len(_raw))), _raw), facts="B02, B30")
_bf16 = struct.pack("<4H", 0x3F80, 0xC020, 0x7F80, 0x0000)  # 1.0, -2.5, inf, 0.0
case("binary-dtype-bf16", OK_BIN(
    INFER("identity_bf16", req_json([inp("INPUT0", "BF16", [1, 4], bsize=8)], outputs=[outp("OUTPUT0", True)]), _bf16),
    resp("identity_bf16", o_bin("OUTPUT0", "BF16", [1, 4], 8)), _bf16), facts="B30")
_strs = strings("ab", "cde")
case("binary-dtype-bytes", OK_BIN(
    INFER("identity_bytes", req_json([inp("INPUT0", "BYTES", [1, 2], bsize=len(_strs))],
                                     outputs=[outp("OUTPUT0", True)]), _strs),
    resp("identity_bytes", o_bin("OUTPUT0", "BYTES", [1, 2], 13)), b"\x02\x00\x00\x00ab\x03\x00\x00\x00cde"),
    facts="B24")
_strs2 = strings("", b"\x00\xff", "é")
case("binary-bytes-to-json", OK_JSON(
    INFER("identity_bytes", req_json([inp("INPUT0", "BYTES", [1, 3], bsize=len(_strs2))]), _strs2),
    resp("identity_bytes", o_json("OUTPUT0", "BYTES", [1, 3], b'"","\\u0000\xff","\xc3\xa9"'))), facts="v2 §3.4")
case("binary-bool-nonzero-byte", OK_JSON(
    INFER("identity_bool", req_json([inp("INPUT0", "BOOL", [1, 3], bsize=3)]), b"\x02\x00\x01"),
    resp("identity_bool", o_json("OUTPUT0", "BOOL", [1, 3], "true,false,true"))), facts="P03")
case("binary-int32-to-json", OK_JSON(
    INFER("identity_int32", req_json([inp("INPUT0", "INT32", [2, 2], bsize=16)]),
          struct.pack("<4i", -1, 0, 7, 2147483647)),
    resp("identity_int32", o_json("OUTPUT0", "INT32", [2, 2], "-1,0,7,2147483647"))), facts="v2 §3.3")
case("binary-fp64-to-json", OK_JSON(
    INFER("identity_fp64", req_json([inp("INPUT0", "FP64", [1, 3], bsize=24)]),
          struct.pack("<3d", 1e21, 1e-7, float("nan"))),
    resp("identity_fp64", o_json("OUTPUT0", "FP64", [1, 3], "1e21,1e-7,NaN"))), facts="v2 §3.3")
case("binary-fp32-output-json-formatting", OK_JSON(
    INFER("identity_fp32", req_json([inp("INPUT0", "FP32", [1, 4], bsize=16)]),
          F32(1e-7, 123456789, float("-inf"), 0.5)),
    resp("identity_fp32", o_json("OUTPUT0", "FP32", [1, 4], "1.0000000116860974e-7,123456792.0,-Infinity,0.5"))),
    facts="J58")

# Binary framing errors
_H2 = js(req_json([HA, HB]))
case("binary-ihcl-too-large", ERR(
    "POST", P, 400, "inference header size should be in range (0, %d), got: %d" % (len(_H2) + 16, len(_H2) + 17),
    ct="text/plain", body=_H2 + A_BIN + B_BIN,
    headers=(("Inference-Header-Content-Length", str(len(_H2) + 17)),)), facts="B05")
case("binary-ihcl-negative", ERR(
    "POST", P, 400, "inference header size should be in range (0, %d), got: -5" % (len(_H2) + 16),
    ct="text/plain", body=_H2 + A_BIN + B_BIN, headers=(("Inference-Header-Content-Length", "-5"),)),
    facts="B06")
case("binary-ihcl-too-small", ERR(
    "POST", P, 500, "failed to parse the request JSON buffer: Missing a comma or '}' after an object member. at %d"
    % (len(_H2) - 1), body=_H2 + A_BIN + B_BIN,
    headers=(("Inference-Header-Content-Length", str(len(_H2) - 1)),), gateway_status=400), facts="B08")
case("binary-ihcl-trailing-junk-atoi", ERR(
    "POST", P, 500, "failed to parse the request JSON buffer: Missing a name for object member. at 12",
    body=_H2 + A_BIN + B_BIN, headers=(("Inference-Header-Content-Length", "12abc"),),
    gateway_status=400), facts="B35")
case("binary-ihcl-too-large-nul-data", ERR(
    "POST", infer_path("identity_int32"), 400,
    "unexpected size for input 'INPUT0', expecting 1 additional bytes for model 'identity_int32'",
    body=js(req_json([inp("INPUT0", "INT32", [1, 1], bsize=4)])) + b"\x00\x00\x00\x00",
    headers=(("Inference-Header-Content-Length", str(len(js(req_json([inp("INPUT0", "INT32", [1, 1], bsize=4)]))) + 1)),)),
    facts="B09")
case("binary-no-ihcl-nul-first", ERR(
    "POST", infer_path("identity_int32"), 400,
    "unexpected size for input 'INPUT0', expecting 4 additional bytes for model 'identity_int32'",
    body=js(req_json([inp("INPUT0", "INT32", [1, 1], bsize=4)])) + b"\x00\x00\x00\x00"), facts="B03")
case("binary-extra-data", ERR("POST", P, 400, "unexpected additional input data for model 'add_sub'",
                              body=_H2 + A_BIN + B_BIN + b"\x01",
                              headers=(("Inference-Header-Content-Length", str(len(_H2))),)), facts="B10")
case("binary-short-data", ERR(
    "POST", P, 400, "unexpected size for input 'INPUT1', expecting 4 additional bytes for model 'add_sub'",
    body=_H2 + A_BIN + B_BIN[:4], headers=(("Inference-Header-Content-Length", str(len(_H2))),)), facts="B11")
_HUGE = js(req_json([inp("INPUT0", "FP32", [2], bsize=1000000000000000), HB]))
case("binary-huge-size", ERR(
    "POST", P, 400,
    "unexpected size for input 'INPUT0', expecting 999999999999992 additional bytes for model 'add_sub'",
    body=_HUGE + A_BIN, headers=(("Inference-Header-Content-Length", str(len(_HUGE))),)), facts="K41")
_H12 = js(req_json([HA, inp("INPUT1", "FP32", [2], bsize=12)]))
case("binary-byte-size-mismatch", ERR(
    "POST", P, 400, UNK + "input byte size mismatch for input 'INPUT1' for model 'add_sub'. Expected 8, got 12",
    body=_H12 + A_BIN + B_BIN + b"\0\0\0\0", headers=(("Inference-Header-Content-Length", str(len(_H12))),)),
    facts="B12")
# Several wrong inputs: Triton's core names the last wrong one in request
# order, whatever the check (issue 13 #2).
_H412 = js(req_json([inp("INPUT0", "FP32", [2], bsize=4), inp("INPUT1", "FP32", [2], bsize=12)]))
case("binary-byte-size-mismatch-both", ERR(
    "POST", P, 400, UNK + "input byte size mismatch for input 'INPUT1' for model 'add_sub'. Expected 8, got 12",
    body=_H412 + A_BIN[:4] + B_BIN + b"\0\0\0\0",
    headers=(("Inference-Header-Content-Length", str(len(_H412))),)), facts="B12")
_TEXT2 = inp("text_input", "BYTES", [1], ["a", "b"])
_TOKENS8 = inp("max_tokens", "INT32", [1], bsize=8)
for _id, _inputs, _text in (
        ("bytes-then-size", [_TEXT2, _TOKENS8],
         "input byte size mismatch for input 'max_tokens' for model 'text_generate'. Expected 4, got 8"),
        ("size-then-bytes", [_TOKENS8, _TEXT2],
         "unexpected number of string elements 2 for inference input 'text_input' for model 'text_generate', expecting 1")):
    _h = js(req_json(_inputs))
    case("binary-last-wrong-input-named-" + _id, ERR(
        "POST", infer_path("text_generate"), 400, UNK + _text, body=_h + b"\1\0\0\0\2\0\0\0",
        headers=(("Inference-Header-Content-Length", str(len(_h))),)), facts="B12, B26")
_H4 = js(req_json([HA, inp("INPUT1", "FP32", [2], bsize=4)]))
case("binary-byte-size-mismatch-short", ERR(
    "POST", P, 400, UNK + "input byte size mismatch for input 'INPUT1' for model 'add_sub'. Expected 8, got 4",
    body=_H4 + A_BIN + B_BIN[:4], headers=(("Inference-Header-Content-Length", str(len(_H4))),)), facts="B13")
for _id, _val, _facts in (("negative", -8, "B14"), ("string", "8", "B15"), ("float", 8.0, "B16")):
    _h = js(req_json([inp("INPUT0", "FP32", [2], bsize=_val), HB]))
    case("binary-data-size-" + _id, ERR(
        "POST", P, 500, "Unable to parse 'binary_data_size': attempt to access JSON non-unsigned-integer as unsigned-integer",
        body=_h + A_BIN + B_BIN, headers=(("Inference-Header-Content-Length", str(len(_h))),),
        gateway_status=400), facts=_facts)

# BYTES framing checked by the core (v2 §2.8)
def _bytes_err(id, data, elements, text, facts, status=400, ct="application/json", expect_diff=None):
    h = js(req_json([inp("INPUT0", "BYTES", [1, elements], bsize=len(data))]))
    case(id, ERR("POST", infer_path("identity_bytes"), status, text, ct=ct, body=h + data,
                 headers=(("Inference-Header-Content-Length", str(len(h))),), expect_diff=expect_diff),
         facts=facts)


_bytes_err("binary-bytes-too-few", strings("ab"), 2,
           UNK + "expected 2 string elements for inference input 'INPUT0' for model 'identity_bytes', got 1",
           "B25")
_bytes_err("binary-bytes-too-many", strings("a", "b", "c"), 2,
           UNK + "unexpected number of string elements 3 for inference input 'INPUT0' for model 'identity_bytes', expecting 2",
           "B26")
case("binary-bytes-no-data", ERR(
    "POST", infer_path("identity_bytes"), 400,
    UNK + "expected 2 string elements for inference input 'INPUT0' for model 'identity_bytes', got 0",
    body=req_json([inp("INPUT0", "BYTES", [1, 2], bsize=0)]),
    headers=(("Inference-Header-Content-Length", str(len(js(req_json([inp("INPUT0", "BYTES", [1, 2], bsize=0)]))))),)),
    facts="B29")
# The last element runs past the data, the count being right: the core lets it
# through and the Python backend refuses it after execution (text/plain); the
# gateway refuses it before the call, as JSON (compatibility #7).
_bytes_err("binary-bytes-length-overrun", strings("ab") + b"\x0a\x00\x00\x00abc", 2,
           "incomplete string data for inference input 'INPUT0', expecting string of length 10 but only 3 bytes available",
           "B27", ct="text/plain", expect_diff={"ct": "application/json", "why": "compatibility #7"})
# The first of two elements runs past the data: the core counts one element.
_bytes_err("binary-bytes-first-overrun", b"\x64\x00\x00\x00abcdefg", 2,
           UNK + "expected 2 string elements for inference input 'INPUT0' for model 'identity_bytes', got 1",
           "B27")
_bytes_err("binary-bytes-incomplete-indicator", strings("ab") + b"\x01\x00", 2,
           UNK + "incomplete string length indicator for inference input 'INPUT0' for model 'identity_bytes', "
           "expecting 4 bytes but only 2 bytes available. Please make sure the string length indicator is in one buffer.",
           "B28")

# Raw binary requests (v2 §2.7): IHCL 0 / absent with empty body / non-numeric
RAW_FP16 = struct.pack("<4e", 1.0, 2.0, -3.5, 0.25)
RAW_FP16_RESP = resp("identity_fp16", o_bin("OUTPUT0", "FP16", [1, 4], 8))
case("raw-fp16", OK_BIN(INFER("identity_fp16", b"", RAW_FP16, ihcl=0), RAW_FP16_RESP, RAW_FP16),
     facts="B19")
case("raw-ihcl-non-numeric", OK_BIN(INFER("identity_fp16", b"", RAW_FP16, ihcl="abc"), RAW_FP16_RESP, RAW_FP16),
     facts="B07")
case("raw-ihcl-space-zero", OK_BIN(INFER("identity_fp16", b"", RAW_FP16, ihcl=" 0"), RAW_FP16_RESP, RAW_FP16),
     facts="K43")
case("raw-fp32", OK_BIN(INFER("identity_fp32", b"", F32(1.5, 2.5), ihcl=0),
                        resp("identity_fp32", o_bin("OUTPUT0", "FP32", [1, 2], 8)), F32(1.5, 2.5)), facts="v2 §2.7")
case("raw-fp16-odd-length", ERR(
    "POST", infer_path("identity_fp16"), 400,
    UNK + "input byte size mismatch for input 'raw_input' for model 'identity_fp16'. Expected 6, got 7",
    body=RAW_FP16[:7], headers=(("Inference-Header-Content-Length", "0"),)), facts="B20, K36")
case("raw-bytes-variable-dims", ERR(
    "POST", infer_path("identity_bytes"), 400,
    UNK + "For BYTE datatype raw input 'INPUT0', the model must have input shape [1]",
    body=b"hello", headers=(("Inference-Header-Content-Length", "0"),)), facts="B21, K61")
case("raw-empty-body", OK_JSON(INFER("identity_fp16", b"", b"", ihcl=0),
                               resp("identity_fp16", o_bin("OUTPUT0", "FP16", [1, 0], 0))), facts="B22")
case("raw-empty-body-no-ihcl", OK_JSON(INFER("identity_fp16", b"", b"", ihcl=None),
                                       resp("identity_fp16", o_bin("OUTPUT0", "FP16", [1, 0], 0))), facts="J21")
case("raw-two-inputs", ERR(
    "POST", P, 400,
    UNK + "Raw request must only have 1 input (found 1) to be deduced but got 2 inputs in 'add_sub' model configuration",
    body=F32(1, 2), headers=(("Inference-Header-Content-Length", "0"),)), facts="B18")
case("raw-empty-body-two-inputs", ERR(
    "POST", P, 400,
    UNK + "Raw request must only have 1 input (found 1) to be deduced but got 2 inputs in 'add_sub' model configuration"),
    facts="J21")
case("raw-string-single", OK_BIN(INFER("string_single", b"", b"hello world", ihcl=0),
                                 resp("string_single", o_bin("OUTPUT0", "BYTES", [1], 15)), strings("hello world")),
     facts="v2 §2.7 (BYTES dims [1])")
case("raw-string-single-empty", OK_BIN(INFER("string_single", b"", b"", ihcl=0),
                                       resp("string_single", o_bin("OUTPUT0", "BYTES", [1], 4)), strings("")),
     facts="v2 §2.7")
case("raw-decoupled", ERR("POST", infer_path("repeat_decoupled"), 501,
                          "HTTP end point doesn't support models with decoupled transaction policy",
                          ct="text/plain", body=b"\x01\x00\x00\x00",
                          headers=(("Inference-Header-Content-Length", "0"),)), facts="D01")


# --------------------------------------------------------------------------
# Compression (v2 §4.1, v2 §3.7)

_J = js(req_json([A, B]))
_JB = js(req_json([A, B], parameters={"binary_data_output": True}))
_ADD_SUB_JSON = resp("add_sub", *ADD_SUB_OUT)


def OK_ENC(req, body, encoding):
    """200 application/json, compressed with `encoding` (checked after decoding)."""
    req.status, req.ct, req.ihcl, req.encoding, req.body_exact = 200, "application/json", ABSENT, encoding, body
    return req


case("compress-request-gzip", OK_JSON(INFER("add_sub", gz(_J), headers=(("Content-Encoding", "gzip"),)),
                                      _ADD_SUB_JSON), facts="v2 §4.1")
case("compress-request-deflate-zlib", OK_JSON(INFER("add_sub", zl(_J), headers=(("Content-Encoding", "deflate"),)),
                                              _ADD_SUB_JSON), facts="v2 §4.1")
case("compress-request-gzip-label-zlib-data", OK_JSON(
    INFER("add_sub", zl(_J), headers=(("Content-Encoding", "gzip"),)), _ADD_SUB_JSON), facts="v2 §4.1 auto-detect")
case("compress-request-deflate-label-gzip-data", OK_JSON(
    INFER("add_sub", gz(_J), headers=(("Content-Encoding", "deflate"),)), _ADD_SUB_JSON), facts="v2 §4.1 auto-detect")
case("compress-request-identity", OK_JSON(INFER("add_sub", _J, headers=(("Content-Encoding", "identity"),)),
                                          _ADD_SUB_JSON), facts="v2 §4.1")
# Observed: an empty Content-Encoding value is NOT treated like an absent header
# (docs/protocol-v2.md says "absent/empty -> as is").
case("compress-request-empty-encoding", ERR("POST", P, 501, "Unsupported compression type", ct="text/plain",
                                            body=_J, headers=(("Content-Encoding", ""),),
                                            check=lambda r: r.header("Accept-Encoding") == "gzip, deflate"),
     facts="v2 §4.1 (observed 501)")
case("compress-request-identity-capitalised", ERR("POST", P, 501, "Unsupported compression type",
                                                  ct="text/plain", body=_J,
                                                  headers=(("Content-Encoding", "Identity"),)), facts="v2 §4.1")
case("compress-request-leading-space", ERR(
    "POST", P, 400,
    UNK + "Raw request must only have 1 input (found 1) to be deduced but got 2 inputs in 'add_sub' model configuration",
    body=_J, headers=(("Content-Encoding", " gzip"),)), facts="v2 §4.1, C06 (header value is trimmed)")
for _id, _enc in (("br", "br"), ("uppercase", "GZIP"), ("list", "gzip, deflate")):
    case("compress-request-unsupported-" + _id, ERR(
        "POST", P, 501, "Unsupported compression type", ct="text/plain", body=gz(_J),
        headers=(("Content-Encoding", _enc),),
        check=lambda r: r.header("Accept-Encoding") == "gzip, deflate"), facts="C05, C09")
case("compress-request-empty-body", ERR("POST", P, 400, "nothing to be decompressed", ct="text/plain",
                                        body=b"", headers=(("Content-Encoding", "gzip"),)), facts="C14")
case("compress-request-corrupt", ERR(
    "POST", P, 400,
    UNK + "Raw request must only have 1 input (found 1) to be deduced but got 2 inputs in 'add_sub' model configuration",
    body=_J, headers=(("Content-Encoding", "gzip"),)), facts="C06")
_HB_BODY = _H2 + A_BIN + B_BIN
case("compress-request-binary-ihcl-decompressed", OK_JSON(
    INFER("add_sub", gz(_HB_BODY), ihcl=len(_H2), headers=(("Content-Encoding", "gzip"),)), _ADD_SUB_JSON),
    facts="B31, B32")
case("compress-request-raw", OK_BIN(
    INFER("identity_fp16", zl(RAW_FP16), ihcl=0, headers=(("Content-Encoding", "deflate"),)),
    RAW_FP16_RESP, RAW_FP16), facts="B38")

case("compress-response-gzip", OK_ENC(INFER("add_sub", _J, headers=(("Accept-Encoding", "gzip"),)),
                                      _ADD_SUB_JSON, "gzip"), facts="C01")
case("compress-response-deflate", OK_ENC(INFER("add_sub", _J, headers=(("Accept-Encoding", "deflate"),)),
                                         _ADD_SUB_JSON, "deflate"),
     facts="C02")
case("compress-response-deflate-zlib-wrapper", Req(
    "POST", P, _J, headers=(("Accept-Encoding", "deflate"),), status=200, encoding="deflate",
    check=lambda r: r.body[:2] == b"x\x9c"), facts="C02")
case("compress-response-gzip-magic", Req(
    "POST", P, _J, headers=(("Accept-Encoding", "gzip"),), status=200, encoding="gzip",
    check=lambda r: r.body[:2] == b"\x1f\x8b"), facts="C01")
case("compress-response-tie-first-wins", OK_ENC(
    INFER("add_sub", _J, headers=(("Accept-Encoding", "deflate, gzip"),)), _ADD_SUB_JSON, "deflate"), facts="Q08")
case("compress-response-tie-first-wins-gzip", OK_ENC(
    INFER("add_sub", _J, headers=(("Accept-Encoding", "gzip,deflate"),)), _ADD_SUB_JSON, "gzip"), facts="Q08")
case("compress-response-weights", OK_ENC(
    INFER("add_sub", _J, headers=(("Accept-Encoding", "gzip;q=0.5, deflate;q=0.8"),)), _ADD_SUB_JSON, "deflate"),
    facts="v2 §4.1")
case("compress-response-identity-weight", OK_JSON(
    INFER("add_sub", _J, headers=(("Accept-Encoding", "gzip;q=0.5, identity"),)), _ADD_SUB_JSON), facts="v2 §4.1")
case("compress-response-space-before-q", OK_JSON(
    INFER("add_sub", _J, headers=(("Accept-Encoding", "gzip; q=0.5"),)), _ADD_SUB_JSON), facts="Q07")
case("compress-response-weight-zero", OK_JSON(
    INFER("add_sub", _J, headers=(("Accept-Encoding", "gzip;q=0"),)), _ADD_SUB_JSON), facts="C11")
case("compress-response-uppercase", OK_JSON(
    INFER("add_sub", _J, headers=(("Accept-Encoding", "GZIP"),)), _ADD_SUB_JSON), facts="C12, Q09")
case("compress-response-star", OK_JSON(
    INFER("add_sub", _J, headers=(("Accept-Encoding", "*"),)), _ADD_SUB_JSON), facts="Q09")
case("compress-response-br", OK_JSON(
    INFER("add_sub", _J, headers=(("Accept-Encoding", "br"),)), _ADD_SUB_JSON), facts="C03")
case("compress-response-bad-weight", OK_ENC(
    INFER("add_sub", _J, headers=(("Accept-Encoding", "gzip;q=abc, deflate"),)), _ADD_SUB_JSON, "deflate"),
    facts="v2 §4.1 (unparsable weight skipped)")
case("compress-response-leading-spaces", OK_ENC(
    INFER("add_sub", _J, headers=(("Accept-Encoding", "br,   gzip"),)), _ADD_SUB_JSON, "gzip"), facts="v2 §4.1")
_BIN_HDR, _BIN_TAIL = bin_resp_add_sub()
case("compress-response-binary-ihcl", OK_BIN(
    INFER("add_sub", _JB, headers=(("Accept-Encoding", "gzip"),)), _BIN_HDR, _BIN_TAIL, encoding="gzip"),
    facts="B33")
case("compress-response-binary-deflate", OK_BIN(
    INFER("add_sub", _JB, headers=(("Accept-Encoding", "deflate"),)), _BIN_HDR, _BIN_TAIL, encoding="deflate"),
    facts="B33")
case("compress-response-error-not-compressed", ERR(
    "POST", P, 400, "unexpected inference input 'INPUT9' for model 'add_sub'",
    body=req_json([A, inp("INPUT9", "FP32", [2], [1, 2])]), headers=(("Accept-Encoding", "gzip"),),
    encoding=ABSENT), facts="C13")
case("compress-response-error-404-not-compressed", ERR(
    "POST", infer_path("nope"), 404, "Request for unknown model: 'nope' is not found", ct="text/plain",
    body=_J, headers=(("Accept-Encoding", "gzip"),), encoding=ABSENT), facts="C13")
case("compress-other-endpoint-ignored", Req("GET", "/v2/models/add_sub", headers=(("Accept-Encoding", "gzip"),),
                                            status=200, ct="application/json", encoding=ABSENT,
                                            body_exact=ADD_SUB_META), facts="C08")
case("compress-other-endpoint-request-ignored", Req(
    "POST", "/v2/repository/index", b"", headers=(("Content-Encoding", "br"),), status=200,
    ct="application/json", encoding=ABSENT, check=_index), facts="C08")
case("compress-both-directions", OK_ENC(
    INFER("add_sub", gz(_J), headers=(("Content-Encoding", "gzip"), ("Accept-Encoding", "deflate"))),
    _ADD_SUB_JSON, "deflate"), facts="v2 §4.1")

# --------------------------------------------------------------------------
# Classification (v2 §3.5)

CA = inp("INPUT0", "FP32", [3], [1, 2, 3])
CB = inp("INPUT1", "FP32", [3], [1, 4, 1])  # OUTPUT0 = [2, 6, 4]
case("classification-top2", OK_JSON(
    INFER("add_sub", req_json([CA, CB], outputs=[outp("OUTPUT0", classification=2)])),
    resp("add_sub", o_json("OUTPUT0", "BYTES", [2], b'"6.000000:1","4.000000:2"'))), facts="J38")
case("classification-binary", OK_BIN(
    INFER("add_sub", req_json([CA, CB], outputs=[outp("OUTPUT0", binary=True, classification=2)])),
    resp("add_sub", o_bin("OUTPUT0", "BYTES", [2], 28)), strings("6.000000:1", "4.000000:2")), facts="J39")
case("classification-k-larger-than-n", OK_JSON(
    INFER("add_sub", req_json([inp("INPUT0", "FP32", [2], [1, 2]), inp("INPUT1", "FP32", [2], [5, 1])],
                              outputs=[outp("OUTPUT0", classification=9)])),
    resp("add_sub", o_json("OUTPUT0", "BYTES", [2], b'"6.000000:0","3.000000:1"'))), facts="J40")
case("classification-zero-is-off", OK_JSON(
    INFER("add_sub", req_json([CA, CB], outputs=[outp("OUTPUT0", classification=0)])),
    resp("add_sub", o_json("OUTPUT0", "FP32", [3], "2.0,6.0,4.0"))), facts="v2 §2.4")
case("classification-with-other-output", OK_JSON(
    INFER("add_sub", req_json([CA, CB], outputs=[outp("OUTPUT0", classification=1), outp("OUTPUT1")])),
    resp("add_sub", o_json("OUTPUT0", "BYTES", [1], b'"6.000000:1"'),
         o_json("OUTPUT1", "FP32", [3], "0.0,-2.0,2.0"))), facts="v2 §3.5")
case("classification-labels", OK_JSON(
    INFER("add_sub_label", req_json([CA, CB], outputs=[outp("OUTPUT0", classification=2)])),
    resp("add_sub_label", o_json("OUTPUT0", "BYTES", [2], b'"6.000000:1:label_one","4.000000:2:label_two"'))),
    facts="v2 §3.5 label_filename")
case("classification-labels-binary", OK_BIN(
    INFER("add_sub_label", req_json([CA, CB], outputs=[outp("OUTPUT0", True, classification=1)])),
    resp("add_sub_label", o_bin("OUTPUT0", "BYTES", [1], 24)), strings("6.000000:1:label_one")),
    facts="v2 §3.5")
case("classification-int32-batched", OK_JSON(
    INFER("identity_int32", req_json([inp("INPUT0", "INT32", [2, 3], [5, 9, 1, -4, -2, -8])],
                                     outputs=[outp("OUTPUT0", classification=2)])),
    resp("identity_int32", o_json("OUTPUT0", "BYTES", [2, 2], b'"9:1","5:0","-2:1","-4:0"'))), facts="v2 §3.5")
case("classification-uint8", OK_JSON(
    INFER("identity_uint8", req_json([inp("INPUT0", "UINT8", [1, 3], [7, 200, 3])],
                                     outputs=[outp("OUTPUT0", classification=1)])),
    resp("identity_uint8", o_json("OUTPUT0", "BYTES", [1, 1], b'"200:1"'))), facts="v2 §3.5")
case("classification-fp64", OK_JSON(
    INFER("identity_fp64", req_json([inp("INPUT0", "FP64", [1, 2], [0.25, -1.5])],
                                    outputs=[outp("OUTPUT0", classification=2)])),
    resp("identity_fp64", o_json("OUTPUT0", "BYTES", [1, 2], b'"0.250000:0","-1.500000:1"'))), facts="v2 §3.5")
_fp16_h = js(req_json([inp("INPUT0", "FP16", [1, 2], bsize=4)], outputs=[outp("OUTPUT0", classification=1)]))
case("classification-fp16-unsupported", ERR(
    "POST", infer_path("identity_fp16"), 400, "class result not available for output due to unsupported type 'FP16'",
    ct="text/plain", body=_fp16_h + b"\x00\x3c\x00\x40",
    headers=(("Inference-Header-Content-Length", str(len(_fp16_h))),)), facts="K38")
case("classification-bool-unsupported", ERR(
    "POST", infer_path("identity_bool"), 400, "class result not available for output due to unsupported type 'BOOL'",
    ct="text/plain", body=req_json([inp("INPUT0", "BOOL", [1, 2], [True, False])],
                                   outputs=[outp("OUTPUT0", classification=1)])), facts="K38")
# NOT here on purpose: classification on a BYTES output (crashes Triton 2.51, K37).

# --------------------------------------------------------------------------
# Shared-memory inputs and outputs (v2 §2.6)

_SHM_F32 = F32(1, 2, 3, 4)
_shm_setup = lambda url: shm_register(url, data=_SHM_F32 + b"\0" * (SHM_SIZE - 16))  # noqa: E731
case("shm-infer-input", OK_JSON(
    INFER("identity_fp32", req_json([inp("INPUT0", "FP32", [1, 4], shared_memory_region=SHM_REGION,
                                         shared_memory_byte_size=16)])),
    resp("identity_fp32", o_json("OUTPUT0", "FP32", [1, 4], "1.0,2.0,3.0,4.0"))),
    facts="v2 §2.6", setup=_shm_setup, teardown=shm_unregister)
case("shm-infer-input-offset", OK_JSON(
    INFER("identity_fp32", req_json([inp("INPUT0", "FP32", [1, 2], shared_memory_region=SHM_REGION,
                                         shared_memory_offset=8, shared_memory_byte_size=8)])),
    resp("identity_fp32", o_json("OUTPUT0", "FP32", [1, 2], "3.0,4.0"))),
    facts="v2 §2.6", setup=_shm_setup, teardown=shm_unregister)
case("shm-infer-input-mixed-with-binary", OK_JSON(
    INFER("add_sub", req_json([inp("INPUT0", "FP32", [2], shared_memory_region=SHM_REGION,
                                   shared_memory_byte_size=8), HB]), B_BIN),
    resp("add_sub", *ADD_SUB_OUT)), facts="v2 §2.6, B17", setup=_shm_setup, teardown=shm_unregister)
case("shm-infer-input-no-byte-size", Req(
    "POST", infer_path("identity_fp32"),
    js(req_json([inp("INPUT0", "FP32", [1, 4], shared_memory_region=SHM_REGION)])), status=400,
    ct="application/json", ihcl=ABSENT), facts="v2 §2.6 (byte_size defaults to 0 on HTTP)",
    setup=_shm_setup, teardown=shm_unregister)
case("shm-infer-output", OK_JSON(
    INFER("identity_fp32", req_json([inp("INPUT0", "FP32", [1, 2], [5, 6])],
                                    outputs=[outp("OUTPUT0", shared_memory_region=SHM_REGION,
                                                  shared_memory_byte_size=16)])),
    resp("identity_fp32", o_shm("OUTPUT0", "FP32", [1, 2]))), facts="S05, S09",
    setup=_shm_setup, teardown=shm_unregister)
case("shm-infer-output-too-small", ERR(
    "POST", infer_path("identity_fp32"), 500,
    "shared memory size specified with the request for output 'OUTPUT0' (4 bytes) should be at least 8 bytes to hold the results",
    ct="text/plain", body=req_json([inp("INPUT0", "FP32", [1, 2], [5, 6])],
                                   outputs=[outp("OUTPUT0", shared_memory_region=SHM_REGION,
                                                 shared_memory_byte_size=4)]),
    # docs/compatibility.md #11: a post-execution upstream error; over gRPC it
    # cannot be told from a submission-time one, so the gateway says JSON.
    expect_diff={"ct": "application/json", "why": "compatibility #11"}),
    facts="S06", setup=_shm_setup, teardown=shm_unregister)
case("shm-infer-out-of-bounds", ERR(
    "POST", infer_path("identity_fp32"), 400, "Invalid offset + byte size for shared memory region: '%s'" % SHM_REGION,
    body=req_json([inp("INPUT0", "FP32", [1, 4], shared_memory_region=SHM_REGION, shared_memory_offset=60,
                       shared_memory_byte_size=16)])), facts="S07", setup=_shm_setup, teardown=shm_unregister)
case("shm-infer-size-mismatch", ERR(
    "POST", infer_path("identity_fp32"), 400,
    UNK + "input byte size mismatch for input 'INPUT0' for model 'identity_fp32'. Expected 16, got 12",
    body=req_json([inp("INPUT0", "FP32", [1, 4], shared_memory_region=SHM_REGION, shared_memory_byte_size=12)])),
    facts="S08", setup=_shm_setup, teardown=shm_unregister)
case("shm-infer-unknown-region", ERR(
    "POST", infer_path("identity_fp32"), 404, "Unable to find shared memory region: 'nope'",
    body=req_json([inp("INPUT0", "FP32", [1, 4], shared_memory_region="nope", shared_memory_byte_size=16)])),
    facts="J42, K31")
case("shm-infer-unknown-output-region", ERR(
    "POST", infer_path("identity_fp32"), 404, "Unable to find shared memory region: 'nope'",
    body=req_json([inp("INPUT0", "FP32", [1, 2], [5, 6])],
                  outputs=[outp("OUTPUT0", shared_memory_region="nope", shared_memory_byte_size=8)])),
    facts="K33")
case("shm-infer-region-not-string", ERR(
    "POST", infer_path("identity_fp32"), 500,
    "Unable to parse 'shared_memory_region': attempt to access JSON non-string as string",
    body=req_json([inp("INPUT0", "FP32", [1, 4], shared_memory_region=5, shared_memory_byte_size=16)]),
    gateway_status=400), facts="v2 §2.6")
case("shm-infer-offset-negative", ERR(
    "POST", infer_path("identity_fp32"), 500,
    "Unable to parse 'shared_memory_offset': attempt to access JSON non-unsigned-integer as unsigned-integer",
    body=req_json([inp("INPUT0", "FP32", [1, 4], shared_memory_region=SHM_REGION, shared_memory_offset=-1,
                       shared_memory_byte_size=16)]), gateway_status=400), facts="v2 §2.6")
