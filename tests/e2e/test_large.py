"""Large binary tensors against real Triton: the gateway streams such bodies
upstream and their answers back (ARCHITECTURE.md, "Life of a large request"),
and must answer exactly as Triton's own HTTP front does; the gRPC
passthrough relays such messages as they arrive ("Life of a gRPC call") and
must answer as Triton's gRPC front does. The size is the largest the
gateway's default body limit (256 MiB) takes: 2 x 100 MB FP32, with
2 x 100 MB back."""

import json

import numpy as np
import tritonclient.grpc as grpcclient

import rawhttp

# Elements per input: 100 MB of FP32 each.
N = 25_000_000
PATH = "/v2/models/add_sub/infer"


def request(n):
    header = json.dumps({
        "inputs": [
            {"name": name, "datatype": "FP32", "shape": [n],
             "parameters": {"binary_data_size": 4 * n}}
            for name in ("INPUT0", "INPUT1")
        ],
        "outputs": [{"name": name, "parameters": {"binary_data": True}}
                    for name in ("OUTPUT0", "OUTPUT1")],
    }, separators=(",", ":")).encode()
    a = np.arange(n, dtype=np.float32)
    tail = a.tobytes() + (a * 2).tobytes()
    headers = [("Inference-Header-Content-Length", str(len(header)))]
    return header, tail, headers


def chunks(body, size=1 << 20):
    return [body[i:i + size] for i in range(0, len(body), size)]


def same_answer(triton, gateway):
    assert gateway.status == triton.status
    assert gateway.content_type == triton.content_type
    assert gateway.ihcl == triton.ihcl
    t_json, t_tail = triton.split()
    g_json, g_tail = gateway.split()
    assert json.loads(g_json) == json.loads(t_json)
    assert g_tail == t_tail


def test_large_binary_tensors_answer_as_triton(triton_http, gateway):
    header, tail, headers = request(N)
    body = header + tail
    triton = rawhttp.send(triton_http, "POST", PATH, body, headers, timeout=300)
    assert triton.status == 200, triton.body[:200]
    _, out = triton.split()
    a = np.arange(N, dtype=np.float32)
    assert out == (a * 3).tobytes() + (a - a * 2).tobytes()
    declared = rawhttp.send(gateway, "POST", PATH, body, headers, timeout=300)
    same_answer(triton, declared)
    chunked = rawhttp.send(gateway, "POST", PATH, headers=headers + [("Transfer-Encoding", "chunked")],
                           chunks=chunks(body), timeout=300)
    same_answer(triton, chunked)


def test_a_large_chunked_body_cut_short_is_refused_as_triton_refuses_it(triton_http, gateway):
    header, tail, headers = request(N)
    body = header + tail[:-1000]
    headers = headers + [("Transfer-Encoding", "chunked")]
    triton = rawhttp.send(triton_http, "POST", PATH, headers=headers, chunks=chunks(body),
                          timeout=300)
    assert triton.status == 400
    g = rawhttp.send(gateway, "POST", PATH, headers=headers, chunks=chunks(body), timeout=300)
    assert (g.status, g.body) == (triton.status, triton.body)


def test_large_grpc_tensors_through_the_passthrough_answer_as_triton(triton_grpc, gateway_grpc):
    a = np.arange(N, dtype=np.float32)
    answers = []
    for url in (triton_grpc, gateway_grpc):
        client = grpcclient.InferenceServerClient(url)
        inputs = [grpcclient.InferInput(name, [N], "FP32") for name in ("INPUT0", "INPUT1")]
        inputs[0].set_data_from_numpy(a)
        inputs[1].set_data_from_numpy(a * 2)
        answers.append(client.infer("add_sub", inputs, request_id="big", client_timeout=300))
        client.close()
    triton, gateway = answers
    for name in ("OUTPUT0", "OUTPUT1"):
        assert gateway.as_numpy(name).tobytes() == triton.as_numpy(name).tobytes()
    np.testing.assert_array_equal(gateway.as_numpy("OUTPUT0"), a * 3)
    # The rest of the message (model, id, output descriptions), without the
    # 200 MB of tensors already compared.
    t, g = triton.get_response(), gateway.get_response()
    t.ClearField("raw_output_contents")
    g.ClearField("raw_output_contents")
    assert g == t
