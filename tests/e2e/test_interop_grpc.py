"""The gRPC passthrough (`--grpc-listen`) in front of MLServer and KServe
(fixture `interop`): stories with the stock tritonclient.grpc client run
against the server's own gRPC port and against the gateway's passthrough;
answers, numpy results and errors must be the same (the passthrough relays
the server's messages), and the values those of Triton's models. Besides,
what the gateway adds: compressed messages (gzip, deflate) and
grpc.health.v1.Health, which neither server serves (docs/interop.md I18,
I19)."""

import time

import grpc
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

MODELS = ("add_sub", "identity_int32", "identity_bytes", "string_single")


@pytest.fixture(scope="module")
def clients(interop):
    """(the server's own gRPC client, the passthrough's)."""
    own = grpcclient.InferenceServerClient(interop.grpc)
    via = grpcclient.InferenceServerClient(interop.gateway_grpc)
    yield own, via
    own.close()
    via.close()


def outcome(call):
    """("ok", value) or ("error", status, message) of call()."""
    try:
        return ("ok", call())
    except InferenceServerException as err:
        return ("error", err.status(), err.message())


def both(clients, story):
    own, via = clients
    return outcome(lambda: story(own)), outcome(lambda: story(via))


def make_input(name, array, datatype):
    tensor = grpcclient.InferInput(name, list(array.shape), datatype)
    tensor.set_data_from_numpy(array)
    return tensor


def add_sub(client, outputs=None, compression=None):
    """(response as JSON, {output: values}) of add_sub."""
    a = np.array([1, 2], np.float32)
    b = np.array([3, 4.5], np.float32)
    result = client.infer(
        "add_sub", [make_input("INPUT0", a, "FP32"), make_input("INPUT1", b, "FP32")],
        outputs=[grpcclient.InferRequestedOutput(name) for name in outputs or ()] or None,
        request_id="g1", compression_algorithm=compression)
    response = result.get_response(as_json=True)
    return response, {o["name"]: result.as_numpy(o["name"]).tolist() for o in response["outputs"]}


def identity(client, model, array, datatype):
    result = client.infer(model, [make_input("INPUT0", array, datatype)], request_id="g2")
    return result.get_response(as_json=True), result.as_numpy("OUTPUT0").tolist()


def test_health_and_readiness(clients):
    own, via = both(clients, lambda c: (c.is_server_live(), c.is_server_ready(),
                                        c.is_model_ready("add_sub")))
    assert own == via == ("ok", (True, True, True))


def test_readiness_of_an_unknown_model_is_the_servers_answer(clients):
    """Neither server answers `ready: false`: MLServer raises UNKNOWN,
    KServe NOT_FOUND (docs/interop.md I7)."""
    own, via = both(clients, lambda c: c.is_model_ready("nope"))
    assert own == via
    assert own[0] == "error"


def test_server_and_model_metadata_are_the_servers(clients):
    own, via = both(clients, lambda c: c.get_server_metadata(as_json=True))
    assert own == via
    for model in MODELS + ("nope",):
        own, via = both(clients, lambda c: c.get_model_metadata(model, as_json=True))
        assert own == via, model


def test_model_config_is_the_servers_refusal(clients):
    """Neither server has the ModelConfig RPC (docs/interop.md I4)."""
    own, via = both(clients, lambda c: c.get_model_config("add_sub", as_json=True))
    assert own == via == ("error", "StatusCode.UNIMPLEMENTED", "Method not found!")


def test_infer_answers_as_the_server_with_tritons_values(clients):
    own, via = both(clients, add_sub)
    assert own == via
    response, values = via[1]
    assert values == {"OUTPUT0": [4.0, 6.5], "OUTPUT1": [-2.0, -2.5]}
    assert response["id"] == "g1"


@pytest.mark.parametrize("model,array,datatype", [
    ("identity_int32", np.array([[1, -2, 3]], np.int32), "INT32"),
    ("identity_bytes", np.array([[b"ab", b"\xff\x00"]], dtype=np.object_), "BYTES"),
    ("string_single", np.array([b"hello"], dtype=np.object_), "BYTES"),
], ids=["int32", "bytes", "string_single"])
def test_identities_answer_as_the_server(clients, model, array, datatype):
    own, via = both(clients, lambda c: identity(c, model, array, datatype))
    assert own == via
    assert via[1][1] == array.tolist()


def test_requested_outputs_are_relayed_as_the_server_answers_them(clients):
    """The passthrough relays messages: both servers' gRPC fronts answer
    every output whatever the request asked for (docs/interop.md I20)."""
    own, via = both(clients, lambda c: add_sub(c, outputs=["OUTPUT1"]))
    assert own == via
    assert sorted(via[1][1]) == ["OUTPUT0", "OUTPUT1"]


def test_unknown_model_is_the_servers_error(clients):
    own, via = both(clients, lambda c: identity(c, "nope", np.array([1], np.int32), "INT32"))
    assert own == via
    assert own[:2] == ("error", "StatusCode.NOT_FOUND")


@pytest.mark.parametrize("algorithm", ["gzip", "deflate"])
def test_compressed_messages_from_tritonclient(clients, algorithm):
    """tritonclient.grpc's compression_algorithm: both servers take it on
    their own port; so must the passthrough (docs/interop.md I18)."""
    own, via = both(clients, lambda c: add_sub(c, compression=algorithm))
    assert own[0] == "ok", own
    assert via == own


def test_a_message_above_the_servers_limit_is_the_servers_refusal(interop, clients):
    """The passthrough relays the server's own RESOURCE_EXHAUSTED
    (docs/interop.md I15)."""
    mib = {"mlserver": 2.5, "kserve": 4.5}[interop.name]
    a = np.arange(int(mib * 1024 * 1024) // 4, dtype=np.float32)

    def big(client):
        inputs = [make_input("INPUT0", a, "FP32"), make_input("INPUT1", a, "FP32")]
        return client.infer("add_sub", inputs, client_timeout=120).get_response(as_json=True)

    own, via = both(clients, big)
    assert own == via
    assert own[:2] == ("error", "StatusCode.RESOURCE_EXHAUSTED")


# grpc.health.v1.Health, by hand: grpcio-health-checking 1.85 needs
# protobuf 7, which tritonclient's pin excludes, and the two messages are
# one field each (HealthCheckRequest.service = 1, HealthCheckResponse.status
# = 1).
HEALTH = "/grpc.health.v1.Health/"
SERVING_STATUS = {0: "UNKNOWN", 1: "SERVING", 2: "NOT_SERVING", 3: "SERVICE_UNKNOWN"}


def health_request(service):
    data = service.encode()
    assert len(data) < 128  # a one-byte length
    return b"\x0a" + bytes([len(data)]) + data if data else b""


def health_status(message):
    if not message:
        return SERVING_STATUS[0]
    assert message[0] == 0x08 and message[1] < 128, message
    return SERVING_STATUS[message[1]]


def health_check(address, service):
    """The status Check answers, or ("error", code)."""
    with grpc.insecure_channel(address) as channel:
        check = channel.unary_unary(HEALTH + "Check", request_serializer=health_request,
                                    response_deserializer=health_status)
        try:
            return check(service, timeout=30)
        except grpc.RpcError as err:
            return ("error", err.code())


def health_watch_first(address, service):
    """The first status Watch streams."""
    with grpc.insecure_channel(address) as channel:
        watch = channel.unary_stream(HEALTH + "Watch", request_serializer=health_request,
                                     response_deserializer=health_status)
        stream = watch(service, timeout=30)
        try:
            return next(stream)
        finally:
            stream.cancel()


def status_once_set(address, service, deadline_s=30.0):
    """Check's answer once it is no longer the state of a gateway that has
    not finished its first health pass (NOT_SERVING, or an unknown name):
    the statuses follow the pool's health passes."""
    deadline = time.monotonic() + deadline_s
    while True:
        status = health_check(address, service)
        if status == "SERVING" or time.monotonic() > deadline:
            return status
        time.sleep(0.1)  # poll interval of a readiness check, not a synchronisation


def test_grpc_health_checking_on_the_passthrough(interop):
    """Kubernetes' gRPC probes: the gateway serves grpc.health.v1 for the
    whole server and per model; the servers do not (docs/interop.md I19).
    KServe has no RepositoryIndex, so the gateway never learns its models'
    names: those are unknown (NOT_FOUND)."""
    assert health_check(interop.grpc, "") == ("error", grpc.StatusCode.UNIMPLEMENTED)
    for service in ("", "inference.GRPCInferenceService"):
        assert status_once_set(interop.gateway_grpc, service) == "SERVING", service
    assert health_watch_first(interop.gateway_grpc, "") == "SERVING"
    if interop.name == "kserve":
        assert health_check(interop.gateway_grpc, "add_sub") == ("error",
                                                                 grpc.StatusCode.NOT_FOUND)
    else:
        assert status_once_set(interop.gateway_grpc, "add_sub") == "SERVING"
        assert health_watch_first(interop.gateway_grpc, "add_sub") == "SERVING"
