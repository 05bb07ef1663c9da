"""The harness itself: a Triton whose port another process took between the
pick and Triton's bind is started again on new ports, instead of failing the
run (the one place the suite picks ports before a process binds them)."""

import socket

import conftest as c


def test_a_taken_port_makes_triton_start_again_on_new_ports(e2e_tmpdir, monkeypatch):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        picks = iter([busy])
        real = c.free_port
        monkeypatch.setattr(c, "free_port", lambda: next(picks, None) or real())
        triton = c.launch_triton(e2e_tmpdir, "triton-taken-port", ["add_sub"])
        first = triton["proc"]
        try:
            c.wait_triton_ready(triton)
            assert first.returncode not in (None, 0), "the first start should have failed"
            assert triton["proc"] is not first
            assert triton["http"] != "http://127.0.0.1:%d" % busy
            assert c.http_status(triton["http"] + "/v2/models/add_sub/ready") == 200
        finally:
            c.stop(first)
            c.stop(triton["proc"])
