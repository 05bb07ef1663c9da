"""Stock clients and large tensors against the gateway in front of MLServer
and KServe (fixture `interop`), compared with Triton's own HTTP front and
with the server's own:

- tritonclient.http, binary and JSON: through the gateway it gets Triton's
  answers; against the servers' own fronts one of the two fails
  (docs/interop.md I8, I9).
- KServe's own InferenceRESTClient (run in the KServe venv): it reads an
  error's text only from an `application/json` body (I16).
- Large tensors: below the server's gRPC message limit the answer is
  Triton's byte for byte; above it, a clear refusal (I15).
"""

import http.client
import json
import os
import re
import subprocess
from urllib.parse import urlsplit

import numpy as np
import pytest
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

import interop as servers
import rawhttp
from test_interop_http import as_served_by

# The server's gRPC limit on a received message: grpc's default (MLServer
# sets none) and KServe's --grpc_max_receive_message_length default.
GRPC_LIMIT = {"mlserver": 4 * 1024 * 1024, "kserve": 8 * 1024 * 1024}
# Two FP32 inputs of this many MiB each make a message below the limit, and
# above it.
BELOW_MIB = {"mlserver": 1.5, "kserve": 3.5}
ABOVE_MIB = {"mlserver": 2.5, "kserve": 4.5}


def url_host(base_url):
    return urlsplit(base_url).netloc


def tensor(name, array, binary):
    t = httpclient.InferInput(name, list(array.shape), "FP32")
    t.set_data_from_numpy(array, binary_data=binary)
    return t


def add_sub(base_url, binary):
    """tritonclient.http's add_sub asking for OUTPUT0 only; (response, OUTPUT0)."""
    client = httpclient.InferenceServerClient(url_host(base_url))
    try:
        a, b = np.array([1, 2], np.float32), np.array([3, 4.5], np.float32)
        result = client.infer("add_sub", [tensor("INPUT0", a, binary), tensor("INPUT1", b, False)],
                              outputs=[httpclient.InferRequestedOutput("OUTPUT0", binary_data=binary)])
        return result.get_response(), result.as_numpy("OUTPUT0").tolist()
    finally:
        client.close()


def triton_response_as_served_by(server, response):
    if server == "kserve":
        response = dict(response, model_version="")
    return response


@pytest.mark.parametrize("binary", [True, False], ids=["binary", "json"])
def test_tritonclient_http_gets_tritons_answers_through_the_gateway(interop, triton_http, binary):
    t_response, t_values = add_sub(triton_http, binary)
    g_response, g_values = add_sub(interop.gateway, binary)
    assert g_values == t_values == [4.0, 6.5]
    assert g_response == triton_response_as_served_by(interop.name, t_response)


def test_tritonclient_http_against_the_servers_own_front(interop):
    """docs/interop.md I8 and I9: one of the two forms fails against each
    server's own front (MLServer has no binary tensors; KServe wants a
    Content-Type that tritonclient does not send for JSON)."""
    fails = "binary" if interop.name == "mlserver" else "json"
    works = "json" if fails == "binary" else "binary"
    _, values = add_sub(interop.http, works == "binary")
    assert values == [4.0, 6.5]
    with pytest.raises(InferenceServerException):
        add_sub(interop.http, fails == "binary")


def test_tritonclient_http_reads_the_servers_error_through_the_gateway(interop):
    client = httpclient.InferenceServerClient(url_host(interop.gateway))
    try:
        with pytest.raises(InferenceServerException) as err:
            client.get_model_metadata("nope")
    finally:
        client.close()
    assert err.value.status() == "404"
    assert "nope" in err.value.message()


def test_kserves_rest_client_through_the_gateway(interop):
    """KServe's InferenceRESTClient shows an error's text only when the body
    is `application/json` (docs/interop.md I16)."""
    script = os.path.join(servers.MODELS_DIR, "kserve", "rest_client.py")
    python = os.path.join(servers.venv("kserve"), "bin", "python")
    done = subprocess.run([python, script, interop.gateway], capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
    lines = [json.loads(line) for line in done.stdout.decode().splitlines()]
    assert lines[0] == {"model": "add_sub", "outputs": {"OUTPUT0": [4.0, 6.5],
                                                        "OUTPUT1": [-2.0, -2.5]}}
    expected = {"mlserver": "Model nope with version  not found",
                "kserve": "Model with name nope does not exist."}[interop.name]
    assert lines[1]["model"] == "nope"
    assert lines[1]["error"].startswith(expected), lines[1]


def large_request(mib):
    """add_sub with two binary FP32 inputs of `mib` MiB each, binary outputs."""
    n = int(mib * 1024 * 1024) // 4
    header = json.dumps({
        "inputs": [{"name": name, "datatype": "FP32", "shape": [n],
                    "parameters": {"binary_data_size": 4 * n}} for name in ("INPUT0", "INPUT1")],
        "outputs": [{"name": name, "parameters": {"binary_data": True}}
                    for name in ("OUTPUT0", "OUTPUT1")],
    }, separators=(",", ":")).encode()
    a = np.arange(n, dtype=np.float32)
    return header + a.tobytes() + (a * 2).tobytes(), [
        ("Inference-Header-Content-Length", str(len(header))),
        ("Content-Type", "application/octet-stream")]


def post_refusable(base_url, path, body, headers):
    """POSTs body and reads the answer. The gateway streams a large body and
    may answer a refusal (and close) before it has all arrived, so the rest
    of the write can fail: that is not the outcome under test, the answer
    is."""
    url = urlsplit(base_url)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=120)
    try:
        conn.putrequest("POST", path, skip_accept_encoding=True)
        for name, value in headers + [("Content-Length", str(len(body)))]:
            conn.putheader(name, value)
        try:
            conn.endheaders(body)
        except (BrokenPipeError, ConnectionResetError):
            pass
        resp = conn.getresponse()
        return rawhttp.Response(resp.status, list(resp.getheaders()), resp.read())
    finally:
        conn.close()


def test_large_tensors_below_the_servers_grpc_limit_answer_as_triton(interop, triton_http):
    body, headers = large_request(BELOW_MIB[interop.name])
    path = "/v2/models/add_sub/infer"
    t = rawhttp.send(triton_http, "POST", path, body, headers, timeout=120)
    g = rawhttp.send(interop.gateway, "POST", path, body, headers, timeout=120)
    assert t.status == 200, t.body[:300]
    expected = as_served_by(interop.name, t)
    assert (g.status, g.content_type, g.ihcl) == (200, expected.content_type, expected.ihcl)
    assert g.body == expected.body


def test_a_message_above_the_servers_grpc_limit_is_refused_clearly(interop, triton_http):
    """docs/interop.md I15: Triton's HTTP front takes the request; the
    server's gRPC port refuses the message, and the gateway says which size
    went, which limit refused it and what to raise."""
    body, headers = large_request(ABOVE_MIB[interop.name])
    path = "/v2/models/add_sub/infer"
    assert rawhttp.send(triton_http, "POST", path, body, headers, timeout=120).status == 200
    g = post_refusable(interop.gateway, path, body, headers)
    assert (g.status, g.content_type) == (400, "application/json"), g.body[:500]
    error = json.loads(g.body)["error"]
    assert str(GRPC_LIMIT[interop.name]) in error, error
    sizes = [int(n) for n in re.findall(r"\b\d{7,}\b", error)]
    assert any(n > GRPC_LIMIT[interop.name] for n in sizes), "the size sent: " + error
    assert "upstream.max_message_bytes" in error, error
