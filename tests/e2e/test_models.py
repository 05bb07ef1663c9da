"""Sanity checks of the models kept for later work (streaming, timeouts), run
against Triton's gRPC endpoint directly."""

import queue
import time

import numpy as np
import tritonclient.grpc as grpcclient


def test_repeat_decoupled_streams_n_responses(triton_grpc):
    results = queue.Queue()
    client = grpcclient.InferenceServerClient(triton_grpc)
    try:
        client.start_stream(callback=lambda result, error: results.put((result, error)))
        tensor = grpcclient.InferInput("INPUT0", [1], "INT32")
        tensor.set_data_from_numpy(np.array([3], dtype=np.int32))
        client.async_stream_infer("repeat_decoupled", [tensor], request_id="r1",
                                  enable_empty_final_response=True)
        values = []
        while True:
            result, error = results.get(timeout=30)
            assert error is None, error
            response = result.get_response()
            if response.outputs:
                values.append(int(result.as_numpy("OUTPUT0")[0]))
            if response.parameters["triton_final_response"].bool_param:
                break
        assert values == [0, 1, 2]
    finally:
        client.stop_stream()
        client.close()


def test_slow_identity_sleeps(triton_grpc):
    client = grpcclient.InferenceServerClient(triton_grpc)
    try:
        tensor = grpcclient.InferInput("INPUT0", [1, 2], "FP32")
        tensor.set_data_from_numpy(np.array([[1.5, 2.5]], dtype=np.float32))
        started = time.monotonic()
        result = client.infer("slow_identity", [tensor], parameters={"delay_ms": 300})
        assert time.monotonic() - started >= 0.3
        np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), [[1.5, 2.5]])
    finally:
        client.close()
