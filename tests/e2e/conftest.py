"""Session fixtures for the end-to-end tests: a real Triton 2.51 server (from the
nvidia-pytriton wheel) on loopback, and the tensorgate gateway in front of
Triton's gRPC port (the interop tests' MLServer and KServe: interop.py).
The gateway binds port 0 and names its ports in its `tensorgate listening`
log line; Triton cannot (it prints port 0 back and refuses equal HTTP and
gRPC ports), so its ports are picked free just before its start, and a start
that finds one taken meanwhile is retried on new ones.

Environment:
  TENSORGATE_BIN            gateway binary (default <repo>/target/debug/tensorgate)
  TENSORGATE_E2E_SELFTEST=1 do not start the gateway; use Triton's own HTTP
                            endpoint as the "gateway" (validates the harness)
  TRITONSERVER_BIN          tritonserver binary (default: the one in the venv's
                            pytriton package, see scripts/setup-python-env)
"""

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

import pytest

# The interop suite's MLServer and KServe upstreams and their fixture.
pytest_plugins = ("interop",)

E2E_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(os.path.dirname(E2E_DIR))
MODEL_REPOSITORY = os.path.join(E2E_DIR, "model_repository")

TRITON_START_TIMEOUT_S = 120.0
GATEWAY_START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 15.0
# Starts of Triton whose ports another process took between the pick and
# Triton's bind (it then exits at once, saying so).
TRITON_PORT_ATTEMPTS = 5


def selftest_mode():
    return os.environ.get("TENSORGATE_E2E_SELFTEST", "") not in ("", "0")


def free_port():
    """A port the kernel considers free on 127.0.0.1 right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def find_tritonserver():
    explicit = os.environ.get("TRITONSERVER_BIN")
    if explicit:
        return explicit
    import importlib.util
    spec = importlib.util.find_spec("pytriton")  # locate the bundled server, no import
    if spec is None or not spec.origin:
        pytest.exit(
            "pytriton is not installed in this Python; run scripts/setup-python-env and "
            "use .venv/bin/python -m pytest tests/e2e", returncode=2)
    path = os.path.join(os.path.dirname(spec.origin), "tritonserver", "bin", "tritonserver")
    stub = os.path.join(os.path.dirname(os.path.dirname(path)), "backends", "python",
                        "triton_python_backend_stub")
    if not os.path.exists(stub):
        pytest.exit("the Python backend stub is missing; run scripts/setup-python-env",
                    returncode=2)
    return path


def launch_triton(tmpdir, name, models, extra_args=(), repository=MODEL_REPOSITORY):
    """Starts one more tritonserver (free ports, the e2e model repository or
    `repository`, only `models` loaded; `*` loads all); returns its process,
    HTTP base URL, gRPC address and log path. Wait for it with
    `wait_triton_ready`."""
    binary = find_tritonserver()
    backends = os.path.join(os.path.dirname(os.path.dirname(binary)), "backends")
    http_port, grpc_port = free_port(), free_port()
    while grpc_port == http_port:
        grpc_port = free_port()
    log_path = os.path.join(tmpdir, name + ".log")
    env = dict(os.environ)
    # The Python backend starts its stubs with the python3 on PATH: the venv's.
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    cmd = [binary, "--model-repository=" + repository, "--backend-directory=" + backends,
           "--http-address=127.0.0.1", "--http-port=%d" % http_port,
           "--grpc-address=127.0.0.1", "--grpc-port=%d" % grpc_port,
           "--allow-metrics=false", "--model-control-mode=explicit"]
    cmd += ["--load-model=" + m for m in models] + list(extra_args)
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    return {"proc": proc, "http": "http://127.0.0.1:%d" % http_port,
            "grpc": "127.0.0.1:%d" % grpc_port, "log": log_path,
            "launch": (tmpdir, name, models, tuple(extra_args), repository)}


def wait_triton_ready(triton):
    """Waits until a launched Triton is ready. If it exited because one of
    its ports was taken in the meantime, it is launched again on new ports
    (`triton` is updated in place); RuntimeError on any other failure."""
    for attempt in range(TRITON_PORT_ATTEMPTS):
        try:
            wait_until(lambda: http_status(triton["http"] + "/v2/health/ready") == 200,
                       TRITON_START_TIMEOUT_S, triton["proc"], "tritonserver", triton["log"])
            return
        except RuntimeError:
            last = attempt + 1 == TRITON_PORT_ATTEMPTS
            if last or triton["proc"].poll() is None or "already in use" not in tail(triton["log"]):
                raise
            triton.update(launch_triton(*triton["launch"]))


def gateway_binary():
    """The gateway under test: TENSORGATE_BIN or this checkout's debug build."""
    binary = os.environ.get("TENSORGATE_BIN") or os.path.join(
        REPO_ROOT, "target", "debug", "tensorgate")
    if not os.path.exists(binary):
        pytest.fail("gateway binary %s not found (build it, set TENSORGATE_BIN, or set "
                    "TENSORGATE_E2E_SELFTEST=1 to test the harness against Triton alone)"
                    % binary)
    return binary


def listening(log_path):
    """The listeners named by the gateway's `tensorgate listening` line
    ({"http": ..., "grpc": ...}), or None before it is written."""
    try:
        with open(log_path, "rb") as f:
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return None
    text = re.sub("\x1b\\[[0-9;]*m", "", text)  # colours of the log
    line = next((l for l in text.splitlines() if "tensorgate listening" in l), None)
    if line is None:
        return None
    return {key: m.group(1) for key in ("http", "grpc", "admin")
            for m in [re.search(r"\b%s=([0-9.:]+)" % key, line)] if m}


def launch_gateway(tmpdir, name, args, grpc=False):
    """Starts the gateway with `args`, its HTTP listener (and the gRPC one if
    `grpc`) on port 0; returns its process, HTTP base URL, gRPC address and
    log path once the log names its ports. RuntimeError if it exits first."""
    cmd = [gateway_binary()] + list(args) + ["--listen", "127.0.0.1:0"]
    if grpc:
        cmd += ["--grpc-listen", "127.0.0.1:0"]
    log_path = os.path.join(tmpdir, name + ".log")
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_until(lambda: listening(log_path) is not None, GATEWAY_START_TIMEOUT_S, proc,
                   "tensorgate", log_path)
        ports = listening(log_path)
        return {"proc": proc, "http": "http://" + ports["http"], "grpc": ports.get("grpc"),
                "admin": ports.get("admin"), "log": log_path}
    except BaseException:
        # Whatever failed here, the caller never gets the process to stop.
        stop(proc)
        raise


def http_status(url, timeout=1.0):
    """Status of a GET to url, or None if nothing answers (yet)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return resp.status
    except urllib.error.HTTPError as err:
        return err.code
    except (urllib.error.URLError, OSError):
        return None


def tail(path, lines=60):
    try:
        with open(path, "rb") as f:
            data = f.read().decode("utf-8", "replace").splitlines()
    except OSError as err:
        return "(no log: %s)" % err
    return "\n".join(data[-lines:])


def wait_until(predicate, deadline_s, proc, what, log_path):
    """Poll predicate() until it is true; fail early if proc died."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if predicate():
            return
        if proc.poll() is not None:
            raise RuntimeError("%s exited with code %s during startup; log tail:\n%s"
                               % (what, proc.returncode, tail(log_path)))
        time.sleep(0.1)  # poll interval of the readiness check, not a synchronisation
    raise RuntimeError("%s not ready after %.0fs; log tail:\n%s" % (what, deadline_s, tail(log_path)))


def stop(proc):
    """Stops proc and every process of its session (each process the suite
    starts leads a session of its own, `start_new_session=True`): SIGTERM,
    SIGKILL after STOP_TIMEOUT_S; then whatever of the group is left, such
    as a Triton Python backend stub that outlived its server."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=STOP_TIMEOUT_S)
    kill_group(proc)


def kill_group(proc):
    """SIGKILL to what is left of proc's process group."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


TIMINGS = {}


def pytest_terminal_summary(terminalreporter):
    for line in TIMINGS.values():
        terminalreporter.write_line(line)


@pytest.fixture(scope="session")
def e2e_tmpdir(request):
    """Logs of tritonserver and the gateway; kept if a test failed."""
    path = tempfile.mkdtemp(prefix="tensorgate-e2e-")
    yield path
    if request.session.testsfailed:
        TIMINGS["logs"] = "[e2e] logs kept in %s" % path
    else:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="session")
def triton_server(e2e_tmpdir):
    """Starts tritonserver; yields (http_base_url, grpc_host_port)."""
    started = time.monotonic()
    triton = launch_triton(e2e_tmpdir, "tritonserver", ["*"])
    try:
        wait_triton_ready(triton)
    except RuntimeError as err:
        stop(triton["proc"])
        pytest.exit(str(err), returncode=3)
    TIMINGS["triton"] = "[e2e] tritonserver ready in %.1fs (HTTP %s, gRPC %s)" % (
        time.monotonic() - started, triton["http"], triton["grpc"])
    try:
        yield triton["http"], triton["grpc"]
    finally:
        stop(triton["proc"])


@pytest.fixture(scope="session")
def triton_http(triton_server):
    return triton_server[0]


@pytest.fixture(scope="session")
def triton_grpc(triton_server):
    return triton_server[1]


# The gateway's gRPC passthrough address (set when the gateway starts).
GATEWAY_GRPC = {}


@pytest.fixture(scope="session")
def gateway_grpc(gateway, triton_grpc):
    """HOST:PORT of the gateway's gRPC passthrough (Triton's own gRPC port in
    self-test mode). The gateway binds it before its HTTP port answers."""
    return GATEWAY_GRPC.get("address", triton_grpc)


@pytest.fixture(scope="session")
def gateway(triton_http, triton_grpc, e2e_tmpdir):
    """Base URL of the gateway (Triton's own HTTP URL in self-test mode)."""
    if selftest_mode():
        yield triton_http
        return
    try:
        gw = launch_gateway(e2e_tmpdir, "tensorgate", ["--upstream", triton_grpc], grpc=True)
    except RuntimeError as err:
        pytest.fail(str(err))
    GATEWAY_GRPC["address"] = gw["grpc"]
    proc, base = gw["proc"], gw["http"]
    TIMINGS["gateway"] = "[e2e] gateway %s listening on %s (upstream %s)" % (
        gateway_binary(), base, triton_grpc)
    try:
        yield base
    finally:
        stop(proc)
        if proc.returncode not in (0, -15, None):
            sys.stderr.write("[e2e] tensorgate exited with %s; log tail:\n%s\n"
                             % (proc.returncode, tail(gw["log"])))
