"""The interop suite's upstreams (a pytest plugin, loaded by conftest.py):
MLServer 1.7.1 and KServe ModelServer 0.21.0, each run from a venv of its own
(scripts/setup-interop-env) with the custom models in interop_models/, on
loopback ports picked free just before the start, and a tensorgate in front
of each one's gRPC port (`--upstream`, HTTP front and `--grpc-listen`
passthrough). docs/interop.md tells what the tests found.

Like Triton (conftest.py), neither server can report a port it chose
itself, so a start whose port another process took in between (the server
exits saying so) is retried on new ports. Each server runs in a session of
its own and is stopped as a whole process group, so no child outlives the
run.

Environment:
  TENSORGATE_MLSERVER_VENV, TENSORGATE_KSERVE_VENV
      the servers' venvs (default <repo>/.venv-mlserver, <repo>/.venv-kserve)
"""

import os
import subprocess
import time
from dataclasses import dataclass

import pytest
import tritonclient.grpc as grpcclient

import conftest as c

MODELS_DIR = os.path.join(c.E2E_DIR, "interop_models")
SERVERS = ("mlserver", "kserve")
START_TIMEOUT_S = 120.0
# Starts whose ports another process took between the pick and the bind.
PORT_ATTEMPTS = 5
# What each server logs when one of its ports is taken (it then exits):
# uvicorn for HTTP, grpcio for gRPC.
PORT_TAKEN = ("address already in use", "Failed to bind to address")


@dataclass
class Upstream:
    """One running server with its gateway."""
    name: str          # "mlserver" or "kserve"
    http: str          # the server's own HTTP front (base URL)
    grpc: str          # the server's own gRPC port (HOST:PORT)
    gateway: str       # tensorgate's HTTP front (base URL), upstream = grpc
    gateway_grpc: str  # tensorgate's gRPC passthrough (HOST:PORT)


def venv(name):
    return (os.environ.get("TENSORGATE_%s_VENV" % name.upper())
            or os.path.join(c.REPO_ROOT, ".venv-" + name))


def server_command(name, http_port, grpc_port):
    """(argv, extra environment, working directory) that start server `name`
    with the suite's models."""
    models = os.path.join(MODELS_DIR, name)
    if name == "mlserver":
        # models/settings.json: loopback, inference in the server's own
        # process, no metrics port (docs/interop.md, "How the suite runs").
        return ([os.path.join(venv(name), "bin", "mlserver"), "start", models],
                {"MLSERVER_HTTP_PORT": str(http_port), "MLSERVER_GRPC_PORT": str(grpc_port)},
                models)
    return ([os.path.join(venv(name), "bin", "python"), os.path.join(models, "serve.py"),
             "--http_port", str(http_port), "--grpc_port", str(grpc_port)], {}, models)


def two_free_ports():
    first, second = c.free_port(), c.free_port()
    while second == first:
        second = c.free_port()
    return first, second


def launch_server(tmpdir, name, log_name):
    """Starts server `name` on free ports in a session of its own, its output
    in <tmpdir>/<log_name>.log; returns {"proc", "http", "grpc", "log"} at
    once (see start_server)."""
    http_port, grpc_port = two_free_ports()
    argv, extra_env, cwd = server_command(name, http_port, grpc_port)
    if not os.path.exists(argv[0]):
        pytest.fail("%s is not installed (%s missing): run scripts/setup-python-env"
                    % (name, argv[0]))
    log_path = os.path.join(tmpdir, log_name + ".log")
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=cwd,
                                env=dict(os.environ, **extra_env), stdin=subprocess.DEVNULL,
                                start_new_session=True)
    return {"proc": proc, "http": "http://127.0.0.1:%d" % http_port,
            "grpc": "127.0.0.1:%d" % grpc_port, "log": log_path}


def grpc_ready(address):
    client = grpcclient.InferenceServerClient(address)
    try:
        return client.is_server_ready(client_timeout=1.0)
    except Exception:  # not listening yet: any failure means "not yet"
        return False
    finally:
        client.close()


def start_server(tmpdir, name, label=None):
    """Launches server `name` and waits until both its fronts are ready. A
    start that failed because one of its ports was taken meanwhile is
    retried on new ports; RuntimeError on any other failure. The output of
    attempt N is in <tmpdir>/<label or name>-N.log."""
    for attempt in range(PORT_ATTEMPTS):
        server = launch_server(tmpdir, name, "%s-%d" % (label or name, attempt))
        try:
            c.wait_until(lambda: c.http_status(server["http"] + "/v2/health/ready") == 200
                         and grpc_ready(server["grpc"]),
                         START_TIMEOUT_S, server["proc"], name, server["log"])
            return server
        except RuntimeError:
            c.stop(server["proc"])
            taken = any(m in c.tail(server["log"], 400) for m in PORT_TAKEN)
            if attempt + 1 == PORT_ATTEMPTS or not taken:
                raise
    raise AssertionError("unreachable")


@pytest.fixture(scope="session", params=SERVERS)
def interop(request, e2e_tmpdir):
    """One server (each in turn) with a tensorgate in front of its gRPC port."""
    if c.selftest_mode():
        pytest.skip("the interop tests need the gateway (self-test mode runs Triton alone)")
    name = request.param
    started = time.monotonic()
    try:
        server = start_server(e2e_tmpdir, name)
    except RuntimeError as err:
        pytest.fail(str(err))
    gw = None
    try:
        gw = c.launch_gateway(e2e_tmpdir, "tensorgate-" + name, ["--upstream", server["grpc"]],
                              grpc=True)
        c.wait_until(lambda: c.http_status(gw["http"] + "/v2/health/ready") == 200,
                     c.GATEWAY_START_TIMEOUT_S, gw["proc"], "tensorgate", gw["log"])
        c.TIMINGS[name] = "[e2e] %s ready in %.1fs (HTTP %s, gRPC %s; gateway %s)" % (
            name, time.monotonic() - started, server["http"], server["grpc"], gw["http"])
        yield Upstream(name, server["http"], server["grpc"], gw["http"], gw["grpc"])
    except RuntimeError as err:
        pytest.fail(str(err))
    finally:
        if gw is not None:
            c.stop(gw["proc"])
        c.stop(server["proc"])
