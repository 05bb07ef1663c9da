"""The interop harness itself (interop.py): a server whose port another
process took between the pick and the bind is started again on new ports
(MLServer's gRPC bind and KServe's HTTP bind fail with different texts),
and a stopped server leaves no process of its session behind."""

import os
import socket

import pytest

import conftest as c
import interop as servers


@pytest.mark.parametrize("name,taken", [("mlserver", "grpc"), ("kserve", "http")])
def test_a_taken_port_makes_the_server_start_again_on_new_ports(e2e_tmpdir, monkeypatch,
                                                                name, taken):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        real = c.free_port
        # two_free_ports picks the HTTP port first, then the gRPC one.
        picks = iter([real(), port] if taken == "grpc" else [port])
        monkeypatch.setattr(c, "free_port", lambda: next(picks, None) or real())
        label = name + "-taken-port"
        server = servers.start_server(e2e_tmpdir, name, label)
        try:
            first_log = os.path.join(e2e_tmpdir, label + "-0.log")
            assert any(m in c.tail(first_log, 400) for m in servers.PORT_TAKEN)
            assert ":%d" % port not in server["http"] + " " + server["grpc"]
            assert c.http_status(server["http"] + "/v2/models/add_sub/ready") == 200
            assert servers.grpc_ready(server["grpc"])
        finally:
            c.stop(server["proc"])
    with pytest.raises(ProcessLookupError):
        os.killpg(server["proc"].pid, 0)  # nothing of its session is left
