"""MLServer custom models of the interop suite (tests/e2e/test_interop*.py):
the same signatures and results as the Triton models of the same names in
tests/e2e/model_repository, written as a new MLServer user writes them
(mlserver.MLModel with NumpyCodec; each folder's model-settings.json names
the class and declares the inputs and outputs)."""

import numpy as np
from mlserver import MLModel
from mlserver.codecs import NumpyCodec
from mlserver.types import InferenceRequest, InferenceResponse, ResponseOutput


def encoded(name: str, array: np.ndarray):
    """The output with the array's own shape (NumpyCodec writes a 1-D array
    as [N, 1])."""
    output = NumpyCodec.encode_output(name, array)
    output.shape = list(array.shape)
    return output


def named(request: InferenceRequest, name: str):
    for tensor in request.inputs:
        if tensor.name == name:
            return tensor
    raise ValueError("missing input '%s'" % name)


class AddSub(MLModel):
    """FP32 INPUT0, INPUT1 -> OUTPUT0 = INPUT0 + INPUT1, OUTPUT1 = INPUT0 - INPUT1."""

    async def predict(self, payload: InferenceRequest) -> InferenceResponse:
        a = NumpyCodec.decode_input(named(payload, "INPUT0"))
        b = NumpyCodec.decode_input(named(payload, "INPUT1"))
        return InferenceResponse(
            model_name=self.name, model_version=self.version, id=payload.id,
            outputs=[encoded("OUTPUT0", a + b), encoded("OUTPUT1", a - b)])


class Identity(MLModel):
    """INPUT0 -> OUTPUT0 unchanged, whatever its datatype (the tensor's data
    as MLServer decoded it, BYTES elements as bytes)."""

    async def predict(self, payload: InferenceRequest) -> InferenceResponse:
        tensor = named(payload, "INPUT0")
        output = ResponseOutput(name="OUTPUT0", shape=tensor.shape, datatype=tensor.datatype,
                                data=tensor.data)
        return InferenceResponse(model_name=self.name, model_version=self.version,
                                 id=payload.id, outputs=[output])
