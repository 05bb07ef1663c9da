"""Two real Tritons behind one tensorgate, read top to bottom as a story:
both are found ready; plain requests alternate between them; sequences keep
their state because each stays on one Triton; then one Triton is killed while
clients are sending, and every request still gets a correct answer or a clean
503/504 (none lost, none hung), sequences that lived on the dead Triton get a
clear error, and the survivor takes all the traffic."""

import json
import os
import signal
import threading
import time
import urllib.error
import urllib.request

import pytest

import conftest as c

MODELS = ["add_sub", "sequence_accumulate"]
ADD_SUB = json.dumps({"inputs": [
    {"name": "INPUT0", "datatype": "FP32", "shape": [2], "data": [1, 2]},
    {"name": "INPUT1", "datatype": "FP32", "shape": [2], "data": [3, 4]}]}).encode()
DEADLINE_MS = 5000


def call(base, path, body=None, timeout=30):
    """(status, body text) of a GET (body None) or POST."""
    request = urllib.request.Request(base + path, data=body, method="POST" if body is not None else "GET")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


@pytest.fixture(scope="module")
def fleet(e2e_tmpdir):
    if c.selftest_mode():
        pytest.skip("the fleet story needs the gateway")
    tritons = [c.launch_triton(e2e_tmpdir, "triton-a", MODELS),
               c.launch_triton(e2e_tmpdir, "triton-b", MODELS)]
    procs = []
    try:
        for t in tritons:
            c.wait_triton_ready(t)
        config = os.path.join(e2e_tmpdir, "fleet.toml")
        with open(config, "w") as f:
            f.write("[upstream]\naddresses = [%s]\nrequest_timeout_ms = %d\n"
                    "[upstream.health]\ninterval_ms = 200\ntimeout_ms = 500\n"
                    % (", ".join('"%s"' % t["grpc"] for t in tritons), DEADLINE_MS))
        gw = c.launch_gateway(e2e_tmpdir, "tensorgate-fleet", ["--config", config], grpc=True)
        procs.append(gw["proc"])
        base, grpc_port = gw["http"], gw["grpc"]
        c.wait_until(lambda: c.http_status(base + "/v2/health/ready") == 200,
                     c.GATEWAY_START_TIMEOUT_S, gw["proc"], "tensorgate", gw["log"])
        yield {"gateway": base, "grpc": grpc_port, "tritons": tritons}
    finally:
        for p in procs + [t["proc"] for t in tritons]:
            c.stop(p)


def backends(fleet):
    status, body = call(fleet["gateway"], "/v2/tensorgate/backends")
    assert status == 200, body
    return {b["address"]: b for b in json.loads(body)["backends"]}


def add_sub_count(triton, model="add_sub"):
    """Successful inferences of `model` on one Triton (its own statistics)."""
    status, body = call(triton["http"], "/v2/models/%s/stats" % model)
    assert status == 200, body
    return json.loads(body)["model_stats"][0]["inference_stats"]["success"]["count"]


def served_since(tritons, before, total, model="add_sub"):
    """Per-Triton successes of `model` since `before`, once they add up to
    `total`: Triton counts an inference in its statistics only after the
    response has gone out, so the last one may lag the client by moments."""
    deadline = time.monotonic() + 10
    while True:
        served = [add_sub_count(t, model) - b for t, b in zip(tritons, before)]
        if sum(served) >= total or time.monotonic() > deadline:
            return served
        time.sleep(0.01)


def sequence_step(fleet, sid, value, start=False, end=False):
    body = json.dumps({"parameters": {"sequence_id": sid, "sequence_start": start,
                                      "sequence_end": end},
                       "inputs": [{"name": "INPUT0", "datatype": "INT32", "shape": [1, 1],
                                   "data": [value]}]}).encode()
    return call(fleet["gateway"], "/v2/models/sequence_accumulate/infer", body)


def test_both_tritons_are_ready_and_serve_the_models(fleet):
    view = backends(fleet)
    assert len(view) == 2
    for t in fleet["tritons"]:
        b = view[t["grpc"]]
        assert b["usable"] and b["seen_ready"], b
        assert set(MODELS) <= set(b["models"]), b


def test_plain_requests_alternate_between_the_tritons(fleet):
    before = [add_sub_count(t) for t in fleet["tritons"]]
    for _ in range(40):
        status, body = call(fleet["gateway"], "/v2/models/add_sub/infer", ADD_SUB)
        assert status == 200, body
    assert served_since(fleet["tritons"], before, 40) == [20, 20]


def test_grpc_clients_are_balanced_per_call_too(fleet):
    import numpy as np
    import tritonclient.grpc as grpcclient

    client = grpcclient.InferenceServerClient(fleet["grpc"])
    try:
        assert client.is_server_ready()
        before = [add_sub_count(t) for t in fleet["tritons"]]
        for _ in range(20):  # one connection, balanced per call
            a = grpcclient.InferInput("INPUT0", [2], "FP32")
            b = grpcclient.InferInput("INPUT1", [2], "FP32")
            a.set_data_from_numpy(np.array([1, 2], dtype=np.float32))
            b.set_data_from_numpy(np.array([3, 4], dtype=np.float32))
            result = client.infer("add_sub", [a, b])
            assert result.as_numpy("OUTPUT0").tolist() == [4.0, 6.0]
        assert served_since(fleet["tritons"], before, 20) == [10, 10]
        # A gRPC sequence keeps its state on one Triton as well.
        total = 0
        for step, value in enumerate([5, 6, 7]):
            x = grpcclient.InferInput("INPUT0", [1, 1], "INT32")
            x.set_data_from_numpy(np.array([[value]], dtype=np.int32))
            result = client.infer("sequence_accumulate", [x], sequence_id=77,
                                  sequence_start=(step == 0), sequence_end=(step == 2))
            total += value
            assert result.as_numpy("OUTPUT0").tolist() == [[total]]
    finally:
        client.close()


def test_sequences_keep_their_state_on_one_triton(fleet):
    ids = list(range(101, 109))
    sums = {sid: 0 for sid in ids}
    for step in range(4):
        for sid in ids:  # interleaved: any misrouting would break a running sum
            value = sid + step
            status, body = sequence_step(fleet, sid, value, start=(step == 0), end=(step == 3))
            assert status == 200, body
            sums[sid] += value
            assert json.loads(body)["outputs"][0]["data"] == [sums[sid]], (sid, body)


def test_killing_a_triton_mid_run_loses_nothing(fleet):
    tritons = fleet["tritons"]
    # Three live sequences on each Triton (each Triton's own statistics say
    # where a sequence went; extra ones are ended at once).
    owners = {}
    sid = 200
    while min(list(owners.values()).count(t["grpc"]) for t in tritons) < 3:
        sid += 1
        assert sid < 260, owners
        before = [add_sub_count(t, "sequence_accumulate") for t in tritons]
        status, body = sequence_step(fleet, sid, 1, start=True)
        assert status == 200, body
        served = served_since(tritons, before, 1, "sequence_accumulate")
        owner = [t["grpc"] for t, n in zip(tritons, served) if n > 0][0]
        if list(owners.values()).count(owner) < 3:
            owners[sid] = owner
        else:
            assert sequence_step(fleet, sid, 0, end=True)[0] == 200
    victim = tritons[1]

    tally = {"sent": 0, "correct": 0, "503": 0, "504": 0, "wrong": [], "hung": 0, "slowest": 0.0}
    lock = threading.Lock()
    answered = threading.Semaphore(0)

    def client(n):
        for _ in range(n):
            with lock:
                tally["sent"] += 1
            started = time.monotonic()
            try:
                status, body = call(fleet["gateway"], "/v2/models/add_sub/infer", ADD_SUB,
                                    timeout=DEADLINE_MS / 1000 + 5)
            except OSError:
                status, body = None, "hung"
            took = time.monotonic() - started
            with lock:
                tally["slowest"] = max(tally["slowest"], took)
                if status is None:
                    tally["hung"] += 1
                elif status == 200 and "[4.0,6.0]" in body and "[-2.0,-2.0]" in body:
                    tally["correct"] += 1
                elif status in (503, 504) and body.startswith('{"error":"'):
                    tally[str(status)] += 1
                else:
                    tally["wrong"].append((status, body))
            answered.release()

    threads = [threading.Thread(target=client, args=(100,)) for _ in range(4)]
    for t in threads:
        t.start()
    for _ in range(80):
        answered.acquire()
    os.killpg(victim["proc"].pid, signal.SIGKILL)  # the server and its backend stubs
    victim["proc"].wait()
    for t in threads:
        t.join()
    lost = tally["sent"] - tally["correct"] - tally["503"] - tally["504"] - len(tally["wrong"]) - tally["hung"]
    print("\n[fleet] sent %d, correct %d, clean 503 %d, clean 504 %d, wrong %d, hung %d, lost %d, slowest %.0f ms"
          % (tally["sent"], tally["correct"], tally["503"], tally["504"], len(tally["wrong"]),
             tally["hung"], lost, tally["slowest"] * 1000))
    assert tally["sent"] == 400
    assert lost == 0 and tally["hung"] == 0 and not tally["wrong"], tally
    assert tally["slowest"] < DEADLINE_MS / 1000 + 1
    assert tally["correct"] >= 360, tally

    # Sequences on the dead Triton: a clear error; the others carry on.
    for sid, owner in owners.items():
        status, body = sequence_step(fleet, sid, 2, end=True)
        if owner == victim["grpc"]:
            assert status == 503, body
            assert "start the sequence again" in body, body
        else:
            assert status == 200, body
            assert json.loads(body)["outputs"][0]["data"] == [3], body

    # The survivor takes everything.
    survivor = tritons[0]
    before = add_sub_count(survivor)
    for _ in range(10):
        status, body = call(fleet["gateway"], "/v2/models/add_sub/infer", ADD_SUB)
        assert status == 200, body
    assert served_since([survivor], [before], 10) == [10]
    assert not backends(fleet)[victim["grpc"]]["usable"]
