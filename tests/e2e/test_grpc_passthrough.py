"""Stories with the real tritonclient gRPC clients (sync, streaming and
asyncio), run against Triton's own gRPC port and against the gateway's gRPC
passthrough (--grpc-listen): the answers, numpy results and errors must be
the same."""

import asyncio
import queue

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.grpc.aio as aioclient
from tritonclient.utils import InferenceServerException


@pytest.fixture(scope="module")
def clients(triton_grpc, gateway_grpc):
    t = grpcclient.InferenceServerClient(triton_grpc)
    g = grpcclient.InferenceServerClient(gateway_grpc)
    yield t, g
    t.close()
    g.close()


def both(clients, story):
    """Run story(client) on Triton and on the gateway; return both results."""
    t, g = clients
    return story(t), story(g)


def outcome(call):
    """("ok", value) or ("error", status, message) of call()."""
    try:
        return ("ok", call())
    except InferenceServerException as err:
        return ("error", err.status(), err.message())


def make_input(name, array, datatype):
    tensor = grpcclient.InferInput(name, list(array.shape), datatype)
    tensor.set_data_from_numpy(array)
    return tensor


def add_sub(client):
    a = np.array([1.5, 2.0, -3.25], dtype=np.float32)
    b = np.array([0.5, 4.0, 1.0], dtype=np.float32)
    result = client.infer(
        "add_sub",
        [make_input("INPUT0", a, "FP32"), make_input("INPUT1", b, "FP32")],
        outputs=[grpcclient.InferRequestedOutput("OUTPUT0"),
                 grpcclient.InferRequestedOutput("OUTPUT1")],
        request_id="r1")
    return result


def test_health(clients):
    for client in clients:
        assert client.is_server_live()
        assert client.is_server_ready()
        assert client.is_model_ready("add_sub")
        assert client.is_model_ready("add_sub", "1")
    t, g = both(clients, lambda c: outcome(lambda: c.is_model_ready("nope")))
    assert t == g


def test_server_metadata_is_the_servers(clients):
    t, g = both(clients, lambda c: c.get_server_metadata(as_json=True))
    assert t == g
    assert t["name"] == "triton"


def test_model_metadata_and_config(clients):
    for model in ("add_sub", "identity_fp32", "sequence_accumulate", "repeat_decoupled"):
        t, g = both(clients, lambda c: c.get_model_metadata(model, as_json=True))
        assert t == g, model
        t, g = both(clients, lambda c: c.get_model_config(model, as_json=True))
        assert t == g, model
    t, g = both(clients, lambda c: c.get_model_repository_index(as_json=True))
    assert t == g


def test_infer_add_sub(clients):
    t, g = both(clients, add_sub)
    assert g.get_response(as_json=True) == t.get_response(as_json=True)
    np.testing.assert_array_equal(g.as_numpy("OUTPUT0"), [2.0, 6.0, -2.25])
    np.testing.assert_array_equal(g.as_numpy("OUTPUT1"), [1.0, -2.0, -4.25])
    assert g.get_response().id == "r1"


@pytest.mark.parametrize("model,array,datatype", [
    ("identity_fp32", np.array([[1.0, -2.5, 3.25]], dtype=np.float32), "FP32"),
    ("identity_int64", np.array([[1, -2, 2**40]], dtype=np.int64), "INT64"),
    ("identity_bytes", np.array([[b"one", b"", b"\x00\xff"]], dtype=np.object_), "BYTES"),
])
def test_infer_identity(clients, model, array, datatype):
    def story(client):
        return client.infer(model, [make_input("INPUT0", array, datatype)]).as_numpy("OUTPUT0")
    t, g = both(clients, story)
    np.testing.assert_array_equal(g, t)
    np.testing.assert_array_equal(g, array)


def test_sequence(clients):
    """A running sum kept by Triton's sequence batcher: every request of the
    sequence must reach the same backend (here the only one)."""
    def story(client, sequence_id):
        sums = []
        values = [3, 4, -2, 10]
        for i, value in enumerate(values):
            result = client.infer(
                "sequence_accumulate",
                [make_input("INPUT0", np.array([[value]], dtype=np.int32), "INT32")],
                sequence_id=sequence_id,
                sequence_start=(i == 0),
                sequence_end=(i == len(values) - 1))
            sums.append(int(result.as_numpy("OUTPUT0")[0][0]))
        return sums
    t_client, g_client = clients
    t = story(t_client, 7001)
    g = story(g_client, 7002)
    assert t == g == [3, 7, 5, 15]
    # A string sequence id too.
    assert story(g_client, "seq-grpc") == [3, 7, 5, 15]


def stream_story(client, counts):
    """Streams one repeat_decoupled request per count; returns the sorted
    (request id, values) of every response."""
    responses = queue.Queue()
    client.start_stream(callback=lambda result, error: responses.put((result, error)))
    try:
        for n in counts:
            client.async_stream_infer(
                "repeat_decoupled",
                [make_input("INPUT0", np.array([n], dtype=np.int32), "INT32")],
                request_id="rep%d" % n)
        received = []
        for _ in range(sum(counts)):
            result, error = responses.get(timeout=60)
            assert error is None, error
            received.append((result.get_response().id, result.as_numpy("OUTPUT0").tolist()))
    finally:
        client.stop_stream()
    return sorted(received)


def test_streaming_decoupled(clients):
    t, g = both(clients, lambda c: stream_story(c, [3, 2]))
    assert t == g
    assert [r for r in g if r[0] == "rep3"] == [("rep3", [0]), ("rep3", [1]), ("rep3", [2])]


def test_stream_error_is_the_servers(clients):
    def story(client):
        responses = queue.Queue()
        client.start_stream(callback=lambda result, error: responses.put((result, error)))
        try:
            client.async_stream_infer(
                "nope", [make_input("INPUT0", np.array([1], dtype=np.int32), "INT32")])
            result, error = responses.get(timeout=60)
        finally:
            client.stop_stream()
        assert result is None
        return str(error)
    t, g = both(clients, story)
    assert t == g
    assert "Request for unknown model: 'nope' is not found" in g


def test_errors_are_the_servers(clients):
    def unknown_model(client):
        return outcome(lambda: client.infer(
            "nope", [make_input("INPUT0", np.array([1.0], dtype=np.float32), "FP32")]))

    def bad_shape(client):
        a = np.array([1.0, 2.0], dtype=np.float32)
        b = np.array([1.0], dtype=np.float32)
        tensor = make_input("INPUT1", b, "FP32")
        tensor.set_shape([2])
        return outcome(lambda: client.infer("add_sub", [make_input("INPUT0", a, "FP32"), tensor]))

    def unknown_metadata(client):
        return outcome(lambda: client.get_model_metadata("nope"))

    for story in (unknown_model, bad_shape, unknown_metadata):
        t, g = both(clients, story)
        assert t[0] == "error", story.__name__
        assert g == t, story.__name__
    t, _ = both(clients, unknown_model)
    assert t == ("error", "StatusCode.NOT_FOUND",
                 "Request for unknown model: 'nope' is not found")


def test_client_timeout(clients):
    def story(client):
        return outcome(lambda: client.infer(
            "slow_identity",
            [make_input("INPUT0", np.array([[1.0]], dtype=np.float32), "FP32")],
            parameters={"delay_ms": 1500},
            client_timeout=0.3))
    t, g = both(clients, story)
    # The client's own timer gives Triton's case its text; the gateway
    # answers a little before the deadline with its own (compatibility.md).
    assert t == ("error", "StatusCode.DEADLINE_EXCEEDED", "Deadline Exceeded")
    assert g[:2] == t[:2], g
    assert "deadline" in g[2].lower() or "did not answer within" in g[2], g


def test_aio_client(triton_grpc, gateway_grpc):
    async def story(url):
        async with aioclient.InferenceServerClient(url) as client:
            assert await client.is_server_ready()
            a = np.array([1.0, 2.0], dtype=np.float32)
            result = await client.infer(
                "add_sub", [make_input("INPUT0", a, "FP32"), make_input("INPUT1", a, "FP32")])
            return result.as_numpy("OUTPUT0").tolist(), result.as_numpy("OUTPUT1").tolist()

    async def run():
        return await asyncio.gather(story(triton_grpc), story(gateway_grpc))

    t, g = asyncio.run(run())
    assert t == g == ([2.0, 4.0], [0.0, 0.0])
