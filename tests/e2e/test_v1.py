"""A legacy v1 client flow (TensorRT Inference Server 1.x HTTP API) against
the gateway in front of a real Triton's gRPC port: health, status, raw
inference at batch 1 and 2, classification, mixed raw and class outputs, an
explicit version, and errors.

The flow does what the v1 client library does (v1 §2–3):
it fetches the binary status for the model's config, sends NV-InferRequest
in protobuf text with the raw inputs input-major, and reads the answer
strictly -- NV-Status and NV-InferResponse parsed with the 2020 schema
(unknown fields fail), the body sliced in header order by batch_byte_size,
model name, version and classes taken from the binary trailer."""

import http.client
import os

import numpy as np
import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, text_format

# The 2020 client schema, the part this flow reads. Nested types are
# flattened: text and binary formats only see field names and numbers.
ENUMS = {
    "RequestStatusCode": ["INVALID", "SUCCESS", "UNKNOWN", "INTERNAL", "NOT_FOUND",
                          "INVALID_ARG", "UNAVAILABLE", "UNSUPPORTED", "ALREADY_EXISTS"],
    "DataType": ["TYPE_INVALID", "TYPE_BOOL", "TYPE_UINT8", "TYPE_UINT16", "TYPE_UINT32",
                 "TYPE_UINT64", "TYPE_INT8", "TYPE_INT16", "TYPE_INT32", "TYPE_INT64",
                 "TYPE_FP16", "TYPE_FP32", "TYPE_FP64", "TYPE_STRING"],
    "ModelReadyState": ["MODEL_UNKNOWN", "MODEL_READY", "MODEL_UNAVAILABLE", "MODEL_LOADING",
                        "MODEL_UNLOADING"],
}
# name: [(field, number, type, repeated)]; type is a scalar, "enum:X" or "msg:X".
MESSAGES = {
    "RequestStatus": [("code", 1, "enum:RequestStatusCode", False), ("msg", 2, "string", False),
                      ("server_id", 3, "string", False), ("request_id", 4, "uint64", False)],
    "Raw": [("dims", 1, "int64", True), ("batch_byte_size", 2, "uint64", False)],
    "Class": [("idx", 1, "int32", False), ("value", 2, "float", False),
              ("label", 3, "string", False)],
    "Classes": [("cls", 1, "msg:Class", True)],
    "ResponseOutput": [("name", 1, "string", False), ("raw", 2, "msg:Raw", False),
                       ("batch_classes", 3, "msg:Classes", True)],
    "InferResponseHeader": [("id", 5, "uint64", False), ("model_name", 1, "string", False),
                            ("model_version", 2, "int64", False),
                            ("batch_size", 3, "uint32", False),
                            ("output", 4, "msg:ResponseOutput", True)],
    "ModelInput": [("name", 1, "string", False), ("data_type", 2, "enum:DataType", False),
                   ("dims", 4, "int64", True)],
    "ModelOutput": [("name", 1, "string", False), ("data_type", 2, "enum:DataType", False),
                    ("dims", 3, "int64", True)],
    "ModelConfig": [("name", 1, "string", False), ("max_batch_size", 4, "int32", False),
                    ("input", 5, "msg:ModelInput", True), ("output", 6, "msg:ModelOutput", True)],
    "ModelVersionStatus": [("ready_state", 1, "enum:ModelReadyState", False)],
    "VersionStatusEntry": [("key", 1, "int64", False), ("value", 2, "msg:ModelVersionStatus", False)],
    "ModelStatus": [("config", 1, "msg:ModelConfig", False),
                    ("version_status", 2, "msg:VersionStatusEntry", True)],
    "ModelStatusEntry": [("key", 1, "string", False), ("value", 2, "msg:ModelStatus", False)],
    "ServerStatus": [("id", 1, "string", False), ("model_status", 4, "msg:ModelStatusEntry", True)],
}
F = descriptor_pb2.FieldDescriptorProto


def _schema():
    proto = descriptor_pb2.FileDescriptorProto(name="v1_client_test.proto", package="v1test",
                                               syntax="proto3")
    for name, values in ENUMS.items():
        enum = proto.enum_type.add(name=name)
        for number, value in enumerate(values):
            enum.value.add(name=value, number=number)
    for name, fields in MESSAGES.items():
        message = proto.message_type.add(name=name)
        for field, number, kind, repeated in fields:
            f = message.field.add(name=field, number=number,
                                  label=F.LABEL_REPEATED if repeated else F.LABEL_OPTIONAL)
            if kind.startswith("enum:"):
                f.type, f.type_name = F.TYPE_ENUM, ".v1test." + kind[5:]
            elif kind.startswith("msg:"):
                f.type, f.type_name = F.TYPE_MESSAGE, ".v1test." + kind[4:]
            else:
                f.type = getattr(F, "TYPE_" + kind.upper())
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return {name: message_factory.GetMessageClass(pool.FindMessageTypeByName("v1test." + name))
            for name in MESSAGES}


PB = _schema()
# Triton itself no longer speaks v1: nothing to compare in self-test mode.
pytestmark = pytest.mark.skipif(os.environ.get("TENSORGATE_E2E_SELFTEST", "") not in ("", "0"),
                                reason="the v1 API is the gateway's own")
NUMPY = {"TYPE_INT32": np.int32, "TYPE_FP32": np.float32}


class V1Error(Exception):
    pass


class V1Client:
    """What the v1 client library does over HTTP, in Python."""

    def __init__(self, base):
        self.hostport = base.split("://", 1)[1]

    def _send(self, method, path, headers=(), body=b""):
        conn = http.client.HTTPConnection(self.hostport, timeout=60)
        try:
            conn.putrequest(method, path, skip_accept_encoding=True)
            conn.putheader("User-Agent", "libcurl-agent/1.0")
            conn.putheader("Accept", "*/*")
            for name, value in headers:
                conn.putheader(name, value)
            if method == "POST":
                conn.putheader("Content-Length", str(len(body)))
            conn.endheaders()
            if body:
                conn.send(body)
            response = conn.getresponse()
            return response.status, response.headers, response.read()
        finally:
            conn.close()

    def _status_ok(self, status, headers):
        value = headers.get("NV-Status")
        if value is None:
            raise V1Error("request did not return status")
        parsed = text_format.Parse(value, PB["RequestStatus"]())  # strict: unknown fields fail
        if parsed.code != 1:
            raise V1Error("[%s %d] %s" % (parsed.server_id, parsed.request_id, parsed.msg))
        assert status == 200, "HTTP %d with NV-Status SUCCESS" % status
        return parsed

    def is_live(self):
        return self._send("GET", "/api/health/live")[0] == 200

    def is_ready(self):
        return self._send("GET", "/api/health/ready")[0] == 200

    def status(self, model):
        status, headers, body = self._send("GET", "/api/status/%s?format=binary" % model)
        self._status_ok(status, headers)
        server = PB["ServerStatus"].FromString(body)
        for entry in server.model_status:
            if entry.key == model:
                return entry.value
        raise V1Error('unable to find status information for "%s"' % model)

    def run(self, model, inputs, outputs, batch_size, version=None):
        """inputs: {name: [array per batch entry]}; outputs: {name: None (raw) | K}."""
        config = self.status(model).config
        if batch_size > max(config.max_batch_size, 1):
            raise V1Error("run batch-size %d exceeds maximum batch size" % batch_size)
        dtypes = {o.name: NUMPY[PB["ModelOutput"].DESCRIPTOR.fields_by_name["data_type"]
                                .enum_type.values_by_number[o.data_type].name]
                  for o in config.output}
        header = "batch_size: %d" % batch_size
        body = b""
        for name, entries in inputs.items():
            dims = " ".join("dims: %d" % d for d in entries[0].shape)
            header += ' input { name: "%s" %s }' % (name, dims)
            body += b"".join(e.tobytes() for e in entries)
        for name, k in outputs.items():
            header += ' output { name: "%s"%s }' % (name, "" if k is None else " cls { count: %d }" % k)
        path = "/api/infer/%s%s?format=binary" % (model, "" if version is None else "/%d" % version)
        status, headers, data = self._send(
            "POST", path, [("Content-Type", "application/octet-stream"),
                           ("NV-InferRequest", header)], body)
        self._status_ok(status, headers)
        response = text_format.Parse(headers["NV-InferResponse"], PB["InferResponseHeader"]())
        if not response.model_name:
            raise V1Error("infer request did not return response header")
        assert response.batch_size == batch_size
        results, offset = {}, 0
        for output in response.output:  # header order defines the body layout
            if output.HasField("raw"):
                size = output.raw.batch_byte_size
                array = np.frombuffer(data[offset:offset + size], dtype=dtypes[output.name])
                results[output.name] = array.reshape([batch_size] + list(output.raw.dims))
                offset += size
        trailer = PB["InferResponseHeader"].FromString(data[offset:])
        if not trailer.model_name:
            raise V1Error("infer request did not return result header")
        for output in trailer.output:
            if outputs.get(output.name) is not None:
                results[output.name] = [[(c.idx, c.value, c.label) for c in entry.cls]
                                        for entry in output.batch_classes]
        missing = [name for name in outputs if name not in results]
        if missing:
            raise V1Error("unable to find result for output '%s'" % missing[0])
        return trailer, results


@pytest.fixture(scope="module")
def v1(gateway):
    return V1Client(gateway)


def test_health(v1):
    assert v1.is_live()
    assert v1.is_ready()


def test_status_has_the_v1_config(v1):
    status = v1.status("identity_int32")
    assert status.config.max_batch_size == 8
    assert [(i.name, i.data_type, list(i.dims)) for i in status.config.input] == \
        [("INPUT0", 8, [-1])]  # TYPE_INT32
    ready = {e.key: e.value.ready_state for e in status.version_status}
    assert ready == {1: 1}  # version 1 MODEL_READY
    with pytest.raises(V1Error, match=r"^\[inference:0 \d+\] no status available for unknown "
                                      r"model 'nosuch'$"):
        v1.status("nosuch")


def test_raw_infer_batch_1_and_2(v1):
    a = np.arange(6, dtype=np.int32)
    b = np.arange(100, 106, dtype=np.int32)
    trailer, results = v1.run("identity_int32", {"INPUT0": [a]}, {"OUTPUT0": None}, 1)
    assert (trailer.model_name, trailer.model_version, trailer.batch_size) == \
        ("identity_int32", 1, 1)
    np.testing.assert_array_equal(results["OUTPUT0"], [a])
    _, results = v1.run("identity_int32", {"INPUT0": [a, b]}, {"OUTPUT0": None}, 2)
    np.testing.assert_array_equal(results["OUTPUT0"], [a, b])


def test_class_infer_per_batch_entry(v1):
    a = np.array([3, 9, 1, 7], dtype=np.int32)
    b = np.array([50, 10, 40, 20], dtype=np.int32)
    _, results = v1.run("identity_int32", {"INPUT0": [a, b]}, {"OUTPUT0": 2}, 2)
    assert results["OUTPUT0"] == [[(1, 9.0, ""), (3, 7.0, "")], [(0, 50.0, ""), (2, 40.0, "")]]


def test_mixed_raw_and_labelled_classes(v1):
    a = np.array([1.0, 5.0, 3.0, 2.0], dtype=np.float32)
    b = np.full(4, 0.5, dtype=np.float32)
    _, results = v1.run("add_sub_label", {"INPUT0": [a], "INPUT1": [b]},
                        {"OUTPUT1": None, "OUTPUT0": 3}, 1)
    np.testing.assert_array_equal(results["OUTPUT1"], [a - b])
    assert results["OUTPUT0"] == [[(1, 5.5, "label_one"), (2, 3.5, "label_two"),
                                   (3, 2.5, "label_three")]]


def test_explicit_version(v1):
    a = np.array([1.5, -2.0], dtype=np.float32)
    trailer, results = v1.run("add_sub", {"INPUT0": [a], "INPUT1": [a]},
                              {"OUTPUT0": None}, 1, version=1)
    assert trailer.model_version == 1
    np.testing.assert_array_equal(results["OUTPUT0"], [a + a])
    with pytest.raises(V1Error, match=r"version 7"):
        v1.run("add_sub", {"INPUT0": [a], "INPUT1": [a]}, {"OUTPUT0": None}, 1, version=7)


def test_errors_carry_status_and_message(v1):
    one = np.array([1.0], dtype=np.float32).tobytes()
    two_inputs = 'input { name: "INPUT0" dims: 1 } input { name: "INPUT1" dims: 1 }'
    cases = [
        # The client checks batch size against max_batch_size 0 as "1 allowed";
        # the gateway refuses 2 on a model without batching.
        ("add_sub", "batch_size: 2 " + two_inputs, one * 4,
         r"^\[inference:0 \d+\] inference request batch-size must be 1 for 'add_sub'"),
        ("add_sub", "batch_size: 1 " + two_inputs, one * 3,
         "unexpected additional input data for model 'add_sub'"),
        ("add_sub", "batch_size: 1 " + two_inputs.replace("dims: 1 }", "dims: 1 dims: 1 }", 1),
         one * 2, "unexpected shape for input 'INPUT0' for model 'add_sub'"),
        ("nosuch", "batch_size: 1 " + two_inputs, one * 2,
         "Request for unknown model: 'nosuch' is not found"),
    ]
    for model, header, body, message in cases:
        status, headers, data = v1._send("POST", "/api/infer/%s?format=binary" % model,
                                         [("NV-InferRequest", header)], body)
        assert (status, data) == (400, b""), header
        with pytest.raises(V1Error, match=message):
            v1._status_ok(status, headers)
