"""Stories with the real tritonclient HTTP clients (sync and asyncio), run
against the gateway and against Triton directly: the gateway must give the
same answers, the same numpy results, and the same errors."""

import asyncio

import ml_dtypes
import numpy as np
import pytest
import tritonclient.http as httpclient
import tritonclient.http.aio as aioclient
from tritonclient.utils import InferenceServerException


def hostport(url):
    return url.split("://", 1)[1]


@pytest.fixture(scope="module")
def clients(triton_http, gateway):
    t = httpclient.InferenceServerClient(hostport(triton_http), network_timeout=60.0)
    g = httpclient.InferenceServerClient(hostport(gateway), network_timeout=60.0)
    yield t, g
    t.close()
    g.close()


def both(clients, story):
    """Run story(client) on Triton and on the gateway; return both results."""
    t, g = clients
    return story(t), story(g)


def make_input(name, array, datatype, binary=True):
    tensor = httpclient.InferInput(name, list(array.shape), datatype)
    tensor.set_data_from_numpy(array, binary_data=binary)
    return tensor


def add_sub(client, binary_in, binary_out, **kwargs):
    a = np.array([1.5, 2.0, -3.25], dtype=np.float32)
    b = np.array([0.5, 4.0, 1.0], dtype=np.float32)
    result = client.infer(
        "add_sub",
        [make_input("INPUT0", a, "FP32", binary_in), make_input("INPUT1", b, "FP32", binary_in)],
        outputs=[httpclient.InferRequestedOutput("OUTPUT0", binary_data=binary_out),
                 httpclient.InferRequestedOutput("OUTPUT1", binary_data=binary_out)],
        **kwargs)
    return result


def test_health(clients):
    for client in clients:
        assert client.is_server_live()
        assert client.is_server_ready()
        assert client.is_model_ready("add_sub")
        assert client.is_model_ready("add_sub", "1")
        assert not client.is_model_ready("nope")


def test_server_metadata(clients):
    # NVIDIA's simple_http_health_metadata.py checks name == "triton".
    t, g = both(clients, lambda c: c.get_server_metadata())
    assert t["name"] == "triton" and t["version"] == "2.51.0"
    assert g == t


@pytest.mark.parametrize("model", ["add_sub", "identity_fp16", "identity_bytes", "sequence_accumulate"])
def test_model_metadata_and_config(clients, model):
    t, g = both(clients, lambda c: c.get_model_metadata(model))
    assert t == g
    t, g = both(clients, lambda c: c.get_model_config(model))
    assert t == g
    assert t["name"] == model


@pytest.mark.parametrize("binary_in,binary_out", [(True, True), (False, False), (True, False), (False, True)])
def test_infer_add_sub(clients, binary_in, binary_out):
    t, g = both(clients, lambda c: add_sub(c, binary_in, binary_out, request_id="story-1"))
    for name in ("OUTPUT0", "OUTPUT1"):
        np.testing.assert_array_equal(t.as_numpy(name), g.as_numpy(name))
    np.testing.assert_array_equal(g.as_numpy("OUTPUT0"), np.array([2.0, 6.0, -2.25], dtype=np.float32))
    np.testing.assert_array_equal(g.as_numpy("OUTPUT1"), np.array([1.0, -2.0, -4.25], dtype=np.float32))
    assert t.get_response() == g.get_response()
    assert g.get_response()["id"] == "story-1"


@pytest.mark.parametrize("compression", ["gzip", "deflate"])
def test_infer_compressed(clients, compression):
    t, g = both(clients, lambda c: add_sub(c, True, True, request_compression_algorithm=compression,
                                           response_compression_algorithm=compression))
    np.testing.assert_array_equal(t.as_numpy("OUTPUT0"), g.as_numpy("OUTPUT0"))
    np.testing.assert_array_equal(g.as_numpy("OUTPUT1"), np.array([1.0, -2.0, -4.25], dtype=np.float32))


IDENTITY_ARRAYS = [
    ("BOOL", np.array([[True, False, True]])),
    ("INT8", np.array([[-128, 0, 127]], dtype=np.int8)),
    ("INT16", np.array([[-32768, 7, 32767]], dtype=np.int16)),
    ("INT32", np.array([[-2147483648, 7, 2147483647]], dtype=np.int32)),
    ("INT64", np.array([[-9223372036854775808, 7, 9223372036854775807]], dtype=np.int64)),
    ("UINT8", np.array([[0, 7, 255]], dtype=np.uint8)),
    ("UINT16", np.array([[0, 7, 65535]], dtype=np.uint16)),
    ("UINT32", np.array([[0, 7, 4294967295]], dtype=np.uint32)),
    ("UINT64", np.array([[0, 7, 18446744073709551615]], dtype=np.uint64)),
    ("FP16", np.array([[1.0, -2.5, 65504.0]], dtype=np.float16)),
    ("FP32", np.array([[0.1, -0.0, np.inf]], dtype=np.float32)),
    ("FP64", np.array([[0.1, 5e-324, -np.inf]], dtype=np.float64)),
    ("BF16", np.array([[1.0, -2.5, 0.15625]], dtype=ml_dtypes.bfloat16)),
    ("BYTES", np.array([[b"hello", b"", b"\x00\xff"]], dtype=np.object_)),
]


@pytest.mark.parametrize("datatype,array", IDENTITY_ARRAYS, ids=[d for d, _ in IDENTITY_ARRAYS])
@pytest.mark.parametrize("binary", [True, False], ids=["binary", "json"])
def test_identity(clients, datatype, array, binary):
    if not binary and datatype in ("FP16", "BF16"):
        pytest.skip("FP16/BF16 cannot travel as JSON")
    model = "identity_" + datatype.lower()
    if not binary and datatype == "BYTES":
        array = np.array([[b"hello", b"", "caf\u00e9 \"q\"\n".encode()]], dtype=np.object_)

    def story(client):
        return client.infer(model, [make_input("INPUT0", array, datatype, binary)],
                            outputs=[httpclient.InferRequestedOutput("OUTPUT0", binary_data=binary)])

    t, g = both(clients, story)
    out_t, out_g = t.as_numpy("OUTPUT0"), g.as_numpy("OUTPUT0")
    assert out_g.dtype == out_t.dtype and out_g.shape == out_t.shape == array.shape
    np.testing.assert_array_equal(out_g, out_t)
    if datatype == "BYTES" and not binary:  # JSON BYTES come back as str
        out_g = np.vectorize(lambda v: v.encode("utf-8"), otypes=[np.object_])(out_g)
    np.testing.assert_array_equal(out_g, array)


def test_classification(clients):
    def story(client):
        a = np.array([1, 2, 3], dtype=np.float32)
        b = np.array([1, 4, 1], dtype=np.float32)
        return client.infer(
            "add_sub_label",
            [make_input("INPUT0", a, "FP32"), make_input("INPUT1", b, "FP32")],
            outputs=[httpclient.InferRequestedOutput("OUTPUT0", binary_data=False, class_count=2),
                     httpclient.InferRequestedOutput("OUTPUT1", binary_data=True, class_count=1)])

    t, g = both(clients, story)
    # JSON BYTES come back as str, binary BYTES as bytes
    assert list(g.as_numpy("OUTPUT0")) == ["6.000000:1:label_one", "4.000000:2:label_two"]
    assert list(g.as_numpy("OUTPUT1")) == [b"2.000000:2"]
    np.testing.assert_array_equal(t.as_numpy("OUTPUT0"), g.as_numpy("OUTPUT0"))
    np.testing.assert_array_equal(t.as_numpy("OUTPUT1"), g.as_numpy("OUTPUT1"))


def test_sequence(clients):
    def story(client, seq_id):
        totals = []
        for i, value in enumerate([3, 4, 5]):
            result = client.infer(
                "sequence_accumulate",
                [make_input("INPUT0", np.array([[value]], dtype=np.int32), "INT32")],
                sequence_id=seq_id, sequence_start=(i == 0), sequence_end=(i == 2))
            totals.append(int(result.as_numpy("OUTPUT0")[0][0]))
        return totals

    t, g = clients
    assert story(t, 9001) == story(g, 9002) == [3, 7, 12]


def test_errors_match(clients):
    def story(client):
        with pytest.raises(InferenceServerException) as info:
            client.infer("nope", [make_input("INPUT0", np.zeros(2, np.float32), "FP32")])
        with pytest.raises(InferenceServerException) as info2:
            client.infer("add_sub", [make_input("INPUT0", np.zeros(2, np.float32), "FP32")])
        with pytest.raises(InferenceServerException) as info3:
            client.get_model_metadata("nope")
        return [(str(e.value.status()), e.value.message()) for e in (info, info2, info3)]

    t, g = both(clients, story)
    assert t == g
    assert t[0][1] == "Request for unknown model: 'nope' is not found"


def test_statistics_and_index(clients):
    t, g = both(clients, lambda c: c.get_inference_statistics("add_sub"))
    assert [s["name"] for s in t["model_stats"]] == [s["name"] for s in g["model_stats"]] == ["add_sub"]
    t, g = both(clients, lambda c: c.get_model_repository_index())
    assert t == g


def test_aio_client(triton_http, gateway):
    async def story(url):
        client = aioclient.InferenceServerClient(hostport(url))
        try:
            assert await client.is_server_live()
            assert await client.is_model_ready("add_sub")
            meta = await client.get_model_metadata("add_sub")
            a = np.array([1, 2], dtype=np.float32)
            b = np.array([3, 4], dtype=np.float32)
            inputs = []
            for name, arr, binary in (("INPUT0", a, True), ("INPUT1", b, False)):
                tensor = aioclient.InferInput(name, [2], "FP32")
                tensor.set_data_from_numpy(arr, binary_data=binary)
                inputs.append(tensor)
            outputs = [aioclient.InferRequestedOutput("OUTPUT0", binary_data=True),
                       aioclient.InferRequestedOutput("OUTPUT1", binary_data=False)]
            result = await client.infer("add_sub", inputs, outputs=outputs, request_id="aio")
            return meta, result.as_numpy("OUTPUT0"), result.as_numpy("OUTPUT1"), result.get_response()
        finally:
            await client.close()

    t = asyncio.run(story(triton_http))
    g = asyncio.run(story(gateway))
    assert t[0] == g[0]
    np.testing.assert_array_equal(g[1], np.array([4, 6], dtype=np.float32))
    np.testing.assert_array_equal(g[2], np.array([-2, -2], dtype=np.float32))
    np.testing.assert_array_equal(t[1], g[1])
    assert t[3] == g[3]
