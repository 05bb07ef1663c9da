"""fixed_capacity: OUTPUT0 = INPUT0 + INPUT1, OUTPUT1 = INPUT0 - INPUT1
(FP32), each request held for the config parameter ``delay_ms``
milliseconds. Each of the config's 4 instances is a process of its own
that runs one request at a time, so at most 4 run at once; the others wait
in Triton's scheduler queue. The overload benchmark's Triton row
(scripts/bench-overload, docs/performance.md "Overload").
"""

import json
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        self.delay_s = float(config["parameters"]["delay_ms"]["string_value"]) / 1000.0

    def execute(self, requests):
        responses = []
        for request in requests:
            a = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            b = pb_utils.get_input_tensor_by_name(request, "INPUT1").as_numpy()
            time.sleep(self.delay_s)
            outputs = [
                pb_utils.Tensor("OUTPUT0", (a + b).astype(np.float32)),
                pb_utils.Tensor("OUTPUT1", (a - b).astype(np.float32)),
            ]
            responses.append(pb_utils.InferenceResponse(output_tensors=outputs))
        return responses
