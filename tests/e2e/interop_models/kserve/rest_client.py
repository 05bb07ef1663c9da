"""KServe's own Python client (kserve.InferenceRESTClient, protocol v2), run
with the KServe venv's python by tests/e2e/test_interop_clients.py:

    rest_client.py BASE_URL

infers add_sub, then asks for a model that does not exist; prints one JSON
line per call: {"model", "outputs"} or {"model", "error"} (the text the
client shows its user)."""

import asyncio
import json
import sys

import numpy as np
from kserve import InferenceRESTClient, InferInput, InferRequest, RESTConfig


def tensor(name, values):
    t = InferInput(name, [len(values)], "FP32")
    t.set_data_from_numpy(np.array(values, np.float32), binary_data=False)
    return t


async def main(base_url):
    client = InferenceRESTClient(RESTConfig(protocol="v2", retries=0, timeout=60))
    inputs = [tensor("INPUT0", [1, 2]), tensor("INPUT1", [3, 4.5])]
    for model in ("add_sub", "nope"):
        request = InferRequest(model_name=model, infer_inputs=inputs, request_id="k1")
        try:
            answer = await client.infer(base_url, request, model_name=model)
            line = {"model": model,
                    "outputs": {o.name: o.as_numpy().tolist() for o in answer.outputs}}
        except Exception as err:  # what a user of the client sees
            line = {"model": model, "error": str(err)}
        print(json.dumps(line), flush=True)
    await client.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
