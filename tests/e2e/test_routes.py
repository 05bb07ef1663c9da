"""Two real Tritons with different model repositories behind tensorgate's
groups and routes, read top to bottom as a platform team's rollout:

* Triton A ("stable") serves the e2e repository. Triton B ("canary") serves
  a repository of its own, made here: its ``add_sub`` answers otherwise
  (``OUTPUT0`` is 0.5 higher: the config parameter ``skew``), so an answer
  says which Triton gave it; and its ``identity_fp32_v2`` is A's
  ``identity_fp32`` under another name.
* A 90/10 split lands 10 % on the canary; a client keyed by ``x-session-id``
  lands on one side on two gateway replicas whose files list the groups in
  opposite orders.
* A 100 % mirror to B leaves every answer byte-identical to Triton A's own;
  B's disagreement shows in the agreement metric; B killed mid-run costs no
  primary answer.
* A model renamed at the edge (``echo`` -> B's ``identity_fp32_v2``) never
  shows its upstream name to the HTTP, gRPC or v1 client.
* A SIGHUP that moves the weights from A to B under load loses nothing.
* The OpenAI front (the ``openai`` SDK) is routed as ``front = "openai"``
  on the v2 name its model id translates to; a route's rename of it to A's
  ``llm_vllm`` never shows, and its streams are never mirrored (counted).
"""

import json
import os
import shutil
import signal
import threading
import time
import urllib.error
import urllib.request

import numpy as np
import openai
import pytest
import tritonclient.grpc as grpcclient

import conftest as c

ADD_SUB = json.dumps({"inputs": [
    {"name": "INPUT0", "datatype": "FP32", "shape": [2], "data": [1, 2]},
    {"name": "INPUT1", "datatype": "FP32", "shape": [2], "data": [3, 4]}]}).encode()
ECHO = json.dumps({"inputs": [
    {"name": "INPUT0", "datatype": "FP32", "shape": [1, 2], "data": [1.5, 2.5]}]}).encode()
# OUTPUT0 of ADD_SUB on each Triton.
STABLE_SUM, CANARY_SUM = [4.0, 6.0], [4.5, 6.5]


def call(base, path, body=None, headers=(), timeout=30):
    """(status, body bytes) of a GET (body None) or POST."""
    request = urllib.request.Request(base + path, data=body, method="POST" if body is not None else "GET")
    for name, value in headers:
        request.add_header(name, value)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()


def side(body):
    """Which Triton answered ADD_SUB."""
    output0 = json.loads(body)["outputs"][0]["data"]
    return {tuple(STABLE_SUM): "stable", tuple(CANARY_SUM): "canary"}[tuple(output0)]


def canary_repository(tmpdir):
    """Triton B's repository: add_sub with a skew, identity_fp32 renamed."""
    root = os.path.join(tmpdir, "canary_repository")
    shutil.rmtree(root, ignore_errors=True)
    model_py = os.path.join(c.E2E_DIR, "model_src", "model.py")
    for name, source, edit in [
        ("add_sub", "add_sub", lambda text: text.replace(
            'parameters [\n', 'parameters [\n  { key: "skew" value: { string_value: "0.5" } },\n')),
        ("identity_fp32_v2", "identity_fp32", lambda text: text.replace(
            'name: "identity_fp32"', 'name: "identity_fp32_v2"')),
    ]:
        os.makedirs(os.path.join(root, name, "1"))
        os.symlink(model_py, os.path.join(root, name, "1", "model.py"))
        with open(os.path.join(c.MODEL_REPOSITORY, source, "config.pbtxt")) as f:
            config = edit(f.read())
        assert name in config and (name != "add_sub" or "skew" in config), config
        with open(os.path.join(root, name, "config.pbtxt"), "w") as f:
            f.write(config)
    return root


@pytest.fixture(scope="module")
def tritons(e2e_tmpdir):
    if c.selftest_mode():
        pytest.skip("routes need the gateway")
    stable = c.launch_triton(e2e_tmpdir, "triton-stable", ["add_sub", "identity_fp32", "llm_vllm"])
    canary = c.launch_triton(e2e_tmpdir, "triton-canary", ["add_sub", "identity_fp32_v2"],
                             repository=canary_repository(e2e_tmpdir))
    try:
        for t in (stable, canary):
            c.wait_triton_ready(t)
        yield {"stable": stable, "canary": canary}
    finally:
        for t in (stable, canary):
            c.stop(t["proc"])


def groups_toml(tritons, order=("stable", "canary")):
    """`[upstreams.NAME]` for each Triton, in `order`."""
    return "".join(
        '[upstreams.%s]\naddresses = ["%s"]\nrequest_timeout_ms = 10000\n'
        "[upstreams.%s.health]\ninterval_ms = 200\ntimeout_ms = 1000\n\n"
        % (name, tritons[name]["grpc"], name) for name in order)


class Gateway:
    """A gateway with its own config file, stopped when the test ends."""

    def __init__(self, tmpdir, name, text):
        self.config = os.path.join(tmpdir, name + ".toml")
        self.write(text)
        gw = c.launch_gateway(tmpdir, name, ["--config", self.config, "--admin-listen", "127.0.0.1:0"],
                              grpc=True)
        self.proc, self.base, self.grpc, self.log = gw["proc"], gw["http"], gw["grpc"], gw["log"]
        self.admin = "http://" + gw["admin"]
        c.wait_until(lambda: c.http_status(self.base + "/v2/health/ready") == 200,
                     c.GATEWAY_START_TIMEOUT_S, self.proc, "tensorgate", self.log)

    def write(self, text):
        with open(self.config, "w") as f:
            f.write(text)

    def metric(self, series):
        """The value of `series` (labels in any order), 0 when absent."""
        name, _, labels = series.partition("{")
        wanted = sorted(l for l in labels.rstrip("}").split(",") if l)
        _, text = call(self.admin, "/metrics")
        for line in text.decode().splitlines():
            if line.startswith("#") or " " not in line:
                continue
            key, value = line.rsplit(" ", 1)
            n, _, ls = key.partition("{")
            if n == name and sorted(l for l in ls.rstrip("}").split(",") if l) == wanted:
                return float(value)
        return 0.0

    def wait_metric(self, series, at_least):
        c.wait_until(lambda: self.metric(series) >= at_least, 30, self.proc, "tensorgate", self.log)

    def stop(self):
        c.stop(self.proc)


@pytest.fixture
def gateways(e2e_tmpdir):
    started = []

    def start(name, text):
        gw = Gateway(e2e_tmpdir, name, text)
        started.append(gw)
        return gw

    yield start
    for gw in started:
        gw.stop()


def test_a_90_10_split_lands_10_percent_on_the_canary(tritons, gateways):
    gw = gateways("tensorgate-split", groups_toml(tritons)
                  + '[[routes]]\nmodels = ["add_sub"]\nsplit = { stable = 90, canary = 10 }\n')
    sides = {"stable": 0, "canary": 0}
    lock = threading.Lock()

    def client():
        for _ in range(250):
            status, body = call(gw.base, "/v2/models/add_sub/infer", ADD_SUB)
            assert status == 200, body
            with lock:
                sides[side(body)] += 1

    threads = [threading.Thread(target=client) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    share = sides["canary"] / 2000
    assert abs(share - 0.10) <= 0.005, sides
    assert gw.metric('tensorgate_route_calls_total{rule="routes[0]",group="canary",outcome="ok"}') \
        == sides["canary"]


def test_a_keyed_client_stays_on_one_side_on_two_replicas(tritons, gateways):
    rule = ('[[routes]]\nmodels = ["add_sub"]\nsplit = { %s }\nsticky_header = "x-session-id"\n')
    one = gateways("tensorgate-replica-1", groups_toml(tritons)
                   + rule % "stable = 50, canary = 50")
    other = gateways("tensorgate-replica-2", groups_toml(tritons, ("canary", "stable"))
                     + rule % "canary = 50, stable = 50")
    seen = {}
    for session in range(60):
        headers = [("X-Session-Id", "client-%d" % session)]
        answers = set()
        for gw in (one, other, one, other):
            status, body = call(gw.base, "/v2/models/add_sub/infer", ADD_SUB, headers)
            assert status == 200, body
            answers.add(side(body))
        assert len(answers) == 1, (session, answers)
        seen[session] = answers.pop()
    assert set(seen.values()) == {"stable", "canary"}, seen


def test_a_mirror_changes_no_answer_and_judges_the_shadow(tritons, gateways):
    gw = gateways("tensorgate-mirror", groups_toml(tritons)
                  + '[[routes]]\nname = "shadowed"\nmodels = ["add_sub"]\ngroup = "stable"\n'
                  'mirror = { group = "canary", percent = 100 }\n')
    _, expected = call(tritons["stable"]["http"], "/v2/models/add_sub/infer", ADD_SUB)
    for _ in range(100):
        status, body = call(gw.base, "/v2/models/add_sub/infer", ADD_SUB)
        assert (status, body) == (200, expected), "the primary answer, byte for byte"
    # The canary adds 0.5: every mirrored answer disagrees.
    gw.wait_metric('tensorgate_mirror_agreement_total{rule="shadowed",verdict="differ"}', 100)
    assert gw.metric('tensorgate_mirror_agreement_total{rule="shadowed",verdict="agree"}') == 0
    # The shadow killed while clients send: not one primary answer fails.
    errors = []

    def client():
        for _ in range(100):
            status, body = call(gw.base, "/v2/models/add_sub/infer", ADD_SUB)
            if (status, body) != (200, expected):
                errors.append((status, body))

    threads = [threading.Thread(target=client) for _ in range(4)]
    for t in threads:
        t.start()
    c.stop(tritons["canary"]["proc"])
    for t in threads:
        t.join()
    assert errors == []
    gw.wait_metric('tensorgate_mirror_calls_total{rule="shadowed",group="canary",outcome="error"}', 1)
    # Later tests need the canary again.
    tritons["canary"].update(c.launch_triton(*tritons["canary"]["launch"]))
    c.wait_triton_ready(tritons["canary"])


def test_a_renamed_model_never_shows_its_upstream_name(tritons, gateways):
    gw = gateways("tensorgate-rename", groups_toml(tritons)
                  + '[upstream]\naddresses = ["%s"]\n\n' % tritons["stable"]["grpc"]
                  + '[[routes]]\nmodels = ["echo"]\ngroup = "canary"\nupstream_model = "identity_fp32_v2"\n')
    hidden = b"identity_fp32_v2"
    for method, path, body in [
        ("POST", "/v2/models/echo/infer", ECHO),
        ("GET", "/v2/models/echo", None),
        ("GET", "/v2/models/echo/config", None),
        ("GET", "/v2/models/echo/ready", None),
        ("GET", "/v2/models/echo/stats", None),
        ("POST", "/v2/models/echo/versions/7/infer", ECHO),
        ("GET", "/api/status/echo", None),
    ]:
        status, answer = call(gw.base, path, body)
        assert hidden not in answer, (method, path, answer)
    status, answer = call(gw.base, "/v2/models/echo/infer", ECHO)
    assert status == 200 and json.loads(answer)["model_name"] == "echo", answer
    status, answer = call(gw.base, "/v2/models/echo/versions/7/infer", ECHO)
    assert (status, json.loads(answer)) == (
        404, {"error": "Request for unknown model: 'echo' version 7 is not found"})
    client = grpcclient.InferenceServerClient(gw.grpc)
    try:
        tensor = grpcclient.InferInput("INPUT0", [1, 2], "FP32")
        tensor.set_data_from_numpy(np.array([[1.5, 2.5]], dtype=np.float32))
        result = client.infer("echo", [tensor])
        assert result.get_response().model_name == "echo"
        assert result.as_numpy("OUTPUT0").tolist() == [[1.5, 2.5]]
        assert client.get_model_metadata("echo").name == "echo"
        assert client.get_model_config("echo").config.name == "echo"
        assert client.is_model_ready("echo")
    finally:
        client.close()


def test_a_sighup_moves_the_weights_under_load_and_loses_nothing(tritons, gateways):
    rule = '[[routes]]\nmodels = ["add_sub"]\nsplit = { stable = %d, canary = %d }\n'
    gw = gateways("tensorgate-reload", groups_toml(tritons) + rule % (100, 0))
    sides = {"stable": 0, "canary": 0}
    failures = []
    stop = threading.Event()
    lock = threading.Lock()

    def client():
        while not stop.is_set():
            status, body = call(gw.base, "/v2/models/add_sub/infer", ADD_SUB)
            with lock:
                if status == 200:
                    sides[side(body)] += 1
                else:
                    failures.append((status, body))

    threads = [threading.Thread(target=client) for _ in range(4)]
    for t in threads:
        t.start()
    c.wait_until(lambda: sides["stable"] >= 100, 60, gw.proc, "tensorgate", gw.log)
    gw.write(groups_toml(tritons) + rule % (0, 100))
    os.kill(gw.proc.pid, signal.SIGHUP)
    c.wait_until(lambda: sides["canary"] >= 100, 60, gw.proc, "tensorgate", gw.log)
    stop.set()
    for t in threads:
        t.join()
    assert failures == []
    # Every request the gateway counted was answered, by one side or the other.
    answered = sum(gw.metric('tensorgate_route_calls_total{rule="routes[0]",group="%s",outcome="ok"}' % g)
                   for g in ("stable", "canary"))
    assert answered == sides["stable"] + sides["canary"]
    _, view = call(gw.base, "/v2/tensorgate/backends")
    assert json.loads(view)["routes"][0]["split"] == {"canary": 100, "stable": 0}


def test_the_openai_front_is_routed_as_a_front_of_its_own(tritons, gateways):
    # The OpenAI id "helper" is the v2 model "assistant"; the rule, for the
    # OpenAI front only, sends "assistant" to A as its llm_vllm and would
    # mirror it to B. No default group: nothing else is routed anywhere.
    gw = gateways("tensorgate-openai-routes", groups_toml(tritons)
                  + '[openai.models.helper]\nupstream_model = "assistant"\n\n'
                  '[[routes]]\nname = "openai-assistant"\nfront = "openai"\nmodels = ["assistant"]\n'
                  'group = "stable"\nupstream_model = "llm_vllm"\n'
                  'mirror = { group = "canary", percent = 100 }\n')
    client = openai.OpenAI(base_url=gw.base + "/v1", api_key="unused", max_retries=0)
    answer = client.completions.create(model="helper", prompt="a b c", max_tokens=3)
    assert (answer.model, answer.choices[0].text) == ("helper", "a b c")
    chunks = list(client.completions.create(model="helper", prompt="d e", max_tokens=2, stream=True))
    assert chunks and {chunk.model for chunk in chunks} == {"helper"}
    assert "".join(chunk.choices[0].text for chunk in chunks if chunk.choices) == "d e"
    assert gw.metric('tensorgate_route_calls_total{rule="openai-assistant",group="stable",outcome="ok"}') == 2
    # Streams are never mirrored: counted as skipped, nothing sent to B.
    assert gw.metric('tensorgate_mirror_skipped_total{rule="openai-assistant",reason="streamed"}') == 2
    for outcome in ("ok", "error"):
        assert gw.metric('tensorgate_mirror_calls_total{rule="openai-assistant",group="canary",outcome="%s"}'
                         % outcome) == 0
    # The rule is the OpenAI front's: the v2 front's "assistant" matches none.
    status, body = call(gw.base, "/v2/models/assistant/generate", json.dumps({"text_input": "a"}).encode())
    assert (status, json.loads(body)) == (404, {"error": "no route matches model 'assistant'"})
    # An OpenAI id no rule takes: OpenAI's 404, naming what the client sent.
    with pytest.raises(openai.NotFoundError) as refused:
        client.completions.create(model="nobody", prompt="a")
    assert "'nobody'" in str(refused.value)
