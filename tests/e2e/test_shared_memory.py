"""System shared memory bridged to a remote upstream: NVIDIA's own flows
(`simple_http_shm_client.py` and `simple_grpc_shm_client.py`:
`tritonclient.utils.shared_memory` with `tritonclient.http` or
`tritonclient.grpc`, inputs and outputs in shared memory) against a
tensorgate in bridge mode (`[shared_memory] mode = "bridge"`) whose upstream
is the embedded demo, which cannot see this host's /dev/shm (it refuses every
registration): the gateway reads the inputs from the client's regions, sends
the bytes upstream, and writes the outputs into the client's regions, for
HTTP and gRPC clients alike, from one region table.
"""

import os

import numpy as np
import pytest

import conftest as c

tritonclient_http = pytest.importorskip("tritonclient.http")
tritonclient_grpc = pytest.importorskip("tritonclient.grpc")
shm = pytest.importorskip("tritonclient.utils.shared_memory")
from tritonclient.utils import InferenceServerException  # noqa: E402

BRIDGE_CONFIG = """
[shared_memory]
mode = "bridge"
max_regions = 8
max_total_bytes = 1048576
"""

# The demo's `simple`: INPUT0, INPUT1 INT32 [1, 16] -> OUTPUT0 = sum, OUTPUT1 = difference.
BYTES = 16 * 4


@pytest.fixture(scope="module")
def bridge(e2e_tmpdir):
    if c.selftest_mode():
        pytest.skip("bridge mode is the gateway's own; nothing to compare with Triton")
    config = os.path.join(e2e_tmpdir, "shm-bridge.toml")
    with open(config, "w") as f:
        f.write(BRIDGE_CONFIG)
    gateway = c.launch_gateway(e2e_tmpdir, "shm-bridge", ["demo", "--config", config], grpc=True)
    yield gateway
    c.stop(gateway["proc"])


@pytest.fixture
def client(bridge):
    client = tritonclient_http.InferenceServerClient(bridge["http"][len("http://"):])
    client.unregister_system_shared_memory()
    yield client
    client.unregister_system_shared_memory()
    client.close()


@pytest.fixture
def grpc_client(bridge):
    client = tritonclient_grpc.InferenceServerClient(bridge["grpc"])
    client.unregister_system_shared_memory()
    yield client
    client.unregister_system_shared_memory()
    client.close()


@pytest.fixture
def regions():
    """This test's shared-memory objects, removed at the end (the key is
    per process, so parallel runs do not meet)."""
    made = []

    def create(name, size):
        key = "/tensorgate-e2e-%d-%s" % (os.getpid(), name)
        made.append(shm.create_shared_memory_region(name, key, size))
        return key, made[-1]

    yield create
    for handle in made:
        shm.destroy_shared_memory_region(handle)


def test_registration_is_answered_by_the_gateway(client, regions):
    in_key, _ = regions("input_data", BYTES * 2)
    out_key, _ = regions("output_data", BYTES * 2)
    client.register_system_shared_memory("input_data", in_key, BYTES * 2)
    client.register_system_shared_memory("output_data", out_key, BYTES * 2)
    status = client.get_system_shared_memory_status()
    assert status == [
        {"name": "input_data", "key": in_key, "offset": 0, "byte_size": BYTES * 2},
        {"name": "output_data", "key": out_key, "offset": 0, "byte_size": BYTES * 2},
    ]
    assert client.get_system_shared_memory_status("output_data") == [status[1]]
    client.unregister_system_shared_memory("output_data")
    assert client.get_system_shared_memory_status() == [status[0]]


def test_refusals_reach_the_stock_client_with_tritons_texts(client, regions):
    key, _ = regions("r", BYTES)
    client.register_system_shared_memory("r", key, BYTES)
    cases = [
        (lambda: client.register_system_shared_memory("r", key, BYTES),
         "shared memory region 'r' already in manager"),
        (lambda: client.register_system_shared_memory("s", key, BYTES + 1),
         "failed to register shared memory region 's': invalid args"),
        (lambda: client.register_system_shared_memory("t", "/tensorgate-e2e-missing", 8),
         "Unable to open shared memory region: '/tensorgate-e2e-missing'"),
        (lambda: client.get_system_shared_memory_status("nope"),
         "Unable to find system shared memory region: 'nope'"),
    ]
    for call, text in cases:
        with pytest.raises(InferenceServerException) as refused:
            call()
        assert refused.value.message() == text
    with pytest.raises(InferenceServerException) as refused:
        client.get_cuda_shared_memory_status()
    assert "CUDA shared memory is not available through this gateway" in refused.value.message()


def registered(client, regions, second):
    """The examples' regions: `input_data` holding INPUT0 = 0..16 and
    INPUT1 = `second` everywhere, `output_data` for both outputs, registered
    with `client`. Returns the inputs and the outputs' region."""
    in_key, in_handle = regions("input_data", BYTES * 2)
    out_key, out_handle = regions("output_data", BYTES * 2)
    input0 = np.arange(16, dtype=np.int32).reshape(1, 16)
    input1 = np.full((1, 16), second, dtype=np.int32)
    shm.set_shared_memory_region(in_handle, [input0, input1])
    client.register_system_shared_memory("input_data", in_key, BYTES * 2)
    client.register_system_shared_memory("output_data", out_key, BYTES * 2)
    return input0, input1, out_handle


def test_nvidia_simple_http_shm_flow(client, regions):
    # The example's flow: inputs in one region, outputs in another.
    input0, input1, out_handle = registered(client, regions, 1)

    inputs = [tritonclient_http.InferInput("INPUT0", [1, 16], "INT32"),
              tritonclient_http.InferInput("INPUT1", [1, 16], "INT32")]
    inputs[0].set_shared_memory("input_data", BYTES)
    inputs[1].set_shared_memory("input_data", BYTES, offset=BYTES)
    outputs = [tritonclient_http.InferRequestedOutput("OUTPUT0", binary_data=True),
               tritonclient_http.InferRequestedOutput("OUTPUT1", binary_data=True)]
    outputs[0].set_shared_memory("output_data", BYTES)
    outputs[1].set_shared_memory("output_data", BYTES, offset=BYTES)

    result = client.infer("simple", inputs, outputs=outputs)
    # As Triton answers a shared-memory output: metadata only, no data.
    out0 = result.get_output("OUTPUT0")
    assert out0 == {"name": "OUTPUT0", "datatype": "INT32", "shape": [1, 16]}
    sums = shm.get_contents_as_numpy(out_handle, np.int32, [1, 16])
    diffs = shm.get_contents_as_numpy(out_handle, np.int32, [1, 16], offset=BYTES)
    np.testing.assert_array_equal(sums, input0 + input1)
    np.testing.assert_array_equal(diffs, input0 - input1)


def test_nvidia_simple_grpc_shm_flow(grpc_client, regions):
    # The gRPC example's flow: the same regions, registered, used and
    # released over gRPC; the gateway answers the shared-memory RPCs itself.
    client = grpc_client
    input0, input1, out_handle = registered(client, regions, 1)
    status = client.get_system_shared_memory_status()
    assert sorted(status.regions) == ["input_data", "output_data"]

    inputs = [tritonclient_grpc.InferInput("INPUT0", [1, 16], "INT32"),
              tritonclient_grpc.InferInput("INPUT1", [1, 16], "INT32")]
    inputs[0].set_shared_memory("input_data", BYTES)
    inputs[1].set_shared_memory("input_data", BYTES, offset=BYTES)
    outputs = [tritonclient_grpc.InferRequestedOutput("OUTPUT0"),
               tritonclient_grpc.InferRequestedOutput("OUTPUT1")]
    outputs[0].set_shared_memory("output_data", BYTES)
    outputs[1].set_shared_memory("output_data", BYTES, offset=BYTES)

    result = client.infer("simple", inputs, outputs=outputs)
    out0 = result.get_output("OUTPUT0")
    assert (out0.name, out0.datatype, list(out0.shape)) == ("OUTPUT0", "INT32", [1, 16])
    sums = shm.get_contents_as_numpy(out_handle, np.int32, [1, 16])
    diffs = shm.get_contents_as_numpy(out_handle, np.int32, [1, 16], offset=BYTES)
    np.testing.assert_array_equal(sums, input0 + input1)
    np.testing.assert_array_equal(diffs, input0 - input1)

    client.unregister_system_shared_memory("output_data")
    assert sorted(client.get_system_shared_memory_status().regions) == ["input_data"]
    with pytest.raises(InferenceServerException) as refused:
        client.get_system_shared_memory_status("output_data")
    assert refused.value.message() == "Unable to find system shared memory region: 'output_data'"


def test_regions_registered_over_http_serve_a_grpc_client(client, grpc_client, regions):
    input0, input1, out_handle = registered(client, regions, 3)
    inputs = [tritonclient_grpc.InferInput("INPUT0", [1, 16], "INT32"),
              tritonclient_grpc.InferInput("INPUT1", [1, 16], "INT32")]
    inputs[0].set_shared_memory("input_data", BYTES)
    inputs[1].set_shared_memory("input_data", BYTES, offset=BYTES)
    outputs = [tritonclient_grpc.InferRequestedOutput("OUTPUT0")]
    outputs[0].set_shared_memory("output_data", BYTES)
    grpc_client.infer("simple", inputs, outputs=outputs)
    sums = shm.get_contents_as_numpy(out_handle, np.int32, [1, 16])
    np.testing.assert_array_equal(sums, input0 + input1)
