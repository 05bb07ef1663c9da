"""Triton's restricted APIs: a Triton started with
``--http-restricted-api=model-repository,logging:admin-key=secret`` and a
tensorgate given the same flag in front of it must answer every request
alike -- 403 ``text/plain`` ``{"error":"This API is restricted, expecting
header 'admin-key'"}`` without the header or with another value (before the
method check), the ordinary answer with it, other groups untouched."""

import json

import pytest

import conftest as c
from rawhttp import send

RESTRICTED = "model-repository,logging:admin-key=secret"
ADD_SUB = json.dumps({"inputs": [
    {"name": "INPUT0", "datatype": "FP32", "shape": [2], "data": [1, 2]},
    {"name": "INPUT1", "datatype": "FP32", "shape": [2], "data": [3, 4]}]}).encode()
REFUSED = b'{"error":"This API is restricted, expecting header \'admin-key\'"}'

# (method, path, headers, body)
REQUESTS = [
    ("POST", "/v2/repository/index", (), b""),
    ("POST", "/v2/repository/index", (("admin-key", "wrong"),), b""),
    ("POST", "/v2/repository/index", (("admin-key", "secret"),), b""),
    ("POST", "/v2/repository/index", (("Admin-Key", "secret"),), b""),
    ("POST", "/v2/repository/index", (("admin-key", "Secret"),), b""),
    ("GET", "/v2/repository/index", (), b""),
    ("GET", "/v2/repository/index", (("admin-key", "secret"),), b""),
    ("POST", "/v2/repository/models/add_sub/load", (), b""),
    ("GET", "/v2/logging", (), b""),
    ("POST", "/v2/logging", (("admin-key", "secret"),), b"{}"),
    ("POST", "/v2/models/add_sub/infer", (), ADD_SUB),
    ("GET", "/v2/models/add_sub/config", (), b""),
]


@pytest.fixture(scope="module")
def pair(e2e_tmpdir):
    if c.selftest_mode():
        pytest.skip("the restricted-API story needs the gateway")
    triton = c.launch_triton(e2e_tmpdir, "triton-restricted", ["add_sub"],
                             ["--http-restricted-api=" + RESTRICTED])
    procs = []
    try:
        c.wait_triton_ready(triton)
        gw = c.launch_gateway(e2e_tmpdir, "tensorgate-restricted",
                              ["--upstream", triton["grpc"], "--http-restricted-api", RESTRICTED])
        procs.append(gw["proc"])
        base = gw["http"]
        c.wait_until(lambda: c.http_status(base + "/v2/health/ready") == 200,
                     c.GATEWAY_START_TIMEOUT_S, gw["proc"], "tensorgate", gw["log"])
        yield triton["http"], base
    finally:
        for p in procs + [triton["proc"]]:
            c.stop(p)


@pytest.mark.parametrize("method,path,headers,body", REQUESTS,
                         ids=["%s %s %s" % (m, p, h) for m, p, h, _ in REQUESTS])
def test_answers_like_triton(pair, method, path, headers, body):
    triton, gateway = pair
    t = send(triton, method, path, body=body, headers=headers)
    g = send(gateway, method, path, body=body, headers=headers)
    if not headers and path.startswith(("/v2/repository", "/v2/logging")):
        assert (t.status, t.content_type, t.body) == (403, "text/plain", REFUSED)
    # docs/compatibility.md #9c: a JSON error body is always application/json.
    t_ct = "application/json" if t.body.startswith(b'{"error":') else t.content_type
    assert (g.status, g.content_type) == (t.status, t_ct), (t, g)
    if t.status == 200 and path == "/v2/repository/index":
        # The index lists the models; the gateway's answer is the same server's.
        assert json.loads(g.body) == json.loads(t.body)
    else:
        assert g.body == t.body, (t, g)
