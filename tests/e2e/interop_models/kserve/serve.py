"""KServe ModelServer with the custom models of the interop suite
(tests/e2e/test_interop_*.py): the same signatures and results as the Triton
models of the same names in tests/e2e/model_repository, written as a new
KServe user writes them: kserve.Model subclasses that declare their inputs
and outputs (KServe's model metadata) and answer as KServe's own model
servers do (kserve.utils.utils.get_predict_response: the request's id or a
new one, its requested outputs and binary choice handed to the response).
Run with the KServe venv's python:

    serve.py --http_port N --grpc_port M

One change to a stock start: KServe binds 0.0.0.0 (HTTP) and [::] (gRPC)
with no option to choose; the test suite listens on loopback only, so both
binds are moved to 127.0.0.1 below.
"""

import kserve
from kserve import InferOutput, InferRequest, InferResponse
from kserve.protocol.grpc import server as grpc_server
from kserve.protocol.rest import server as rest_server
from kserve.utils.utils import generate_uuid

LOOPBACK = "127.0.0.1"


def tensor(name, datatype, shape):
    return {"name": name, "datatype": datatype, "shape": shape}


class Signed(kserve.Model):
    """A model that declares its inputs and outputs."""

    def __init__(self, name, inputs, outputs):
        super().__init__(name)
        self.inputs, self.outputs = inputs, outputs
        self.ready = True

    def get_input_types(self):
        return self.inputs

    def get_output_types(self):
        return self.outputs

    def answer(self, request: InferRequest, arrays):
        """The response holding `arrays` ({name: numpy array}) with the
        datatypes the model declares."""
        datatypes = {t["name"]: t["datatype"] for t in self.outputs}
        outputs = []
        for name, array in arrays.items():
            out = InferOutput(name=name, shape=list(array.shape), datatype=datatypes[name])
            out.set_data_from_numpy(array, binary_data=request.use_binary_outputs)
            outputs.append(out)
        return InferResponse(response_id=request.id if request.id else generate_uuid(),
                             model_name=self.name, infer_outputs=outputs,
                             use_binary_outputs=request.use_binary_outputs,
                             requested_outputs=request.request_outputs)


class AddSub(Signed):
    """FP32 INPUT0, INPUT1 -> OUTPUT0 = INPUT0 + INPUT1, OUTPUT1 = INPUT0 - INPUT1."""

    def __init__(self):
        super().__init__("add_sub",
                         [tensor("INPUT0", "FP32", [-1]), tensor("INPUT1", "FP32", [-1])],
                         [tensor("OUTPUT0", "FP32", [-1]), tensor("OUTPUT1", "FP32", [-1])])

    def predict(self, payload: InferRequest, headers=None):
        a = payload.get_input_by_name("INPUT0").as_numpy()
        b = payload.get_input_by_name("INPUT1").as_numpy()
        return self.answer(payload, {"OUTPUT0": a + b, "OUTPUT1": a - b})


class Identity(Signed):
    """INPUT0 -> OUTPUT0 unchanged."""

    def __init__(self, name, datatype, shape):
        super().__init__(name, [tensor("INPUT0", datatype, shape)],
                         [tensor("OUTPUT0", datatype, shape)])

    def predict(self, payload: InferRequest, headers=None):
        return self.answer(payload, {"OUTPUT0": payload.get_input_by_name("INPUT0").as_numpy()})


def loopback_only():
    """Binds KServe's two servers to 127.0.0.1 instead of every interface."""
    rest_init = rest_server.RESTServer.__init__

    def rest_on_loopback(self, *args, **kwargs):
        rest_init(self, *args, **kwargs)
        self.config.host = LOOPBACK

    rest_server.RESTServer.__init__ = rest_on_loopback

    make_server = grpc_server.aio.server

    def grpc_on_loopback(*args, **kwargs):
        server = make_server(*args, **kwargs)
        add_port = server.add_insecure_port
        server.add_insecure_port = lambda address: add_port(
            LOOPBACK + ":" + address.rsplit(":", 1)[1])
        return server

    grpc_server.aio = type("aio", (), {"server": staticmethod(grpc_on_loopback)})


if __name__ == "__main__":
    loopback_only()
    kserve.ModelServer().start([
        AddSub(),
        Identity("identity_int32", "INT32", [-1, -1]),
        Identity("identity_bytes", "BYTES", [-1, -1]),
        Identity("string_single", "BYTES", [1]),
    ])
