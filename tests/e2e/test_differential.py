"""Differential tests: every case of diffcases.CASES is sent byte-for-byte
identically to Triton's own HTTP endpoint and to the gateway (which forwards to
the same Triton over gRPC); the answers must be identical in status,
Content-Type, Inference-Header-Content-Length, Content-Encoding, Accept-Encoding
and body bytes -- except for the documented ``expect_diff`` of a step.

Each step also asserts Triton's own answer against docs/protocol-v2.md, so a case
fails if the reference server does not behave as recorded.
"""

import json
import re

import pytest

from conftest import selftest_mode
from diffcases import ABSENT, CASES, SHM_REGION, shm_create, shm_remove
from rawhttp import send

COMPARED_HEADERS = ("Content-Type", "Inference-Header-Content-Length", "Content-Encoding",
                    "Accept-Encoding")
# Keys an expect_diff dict may carry: what the gateway answers instead of Triton.
# "compressed_bytes": False = compare compressed responses after decompression only
# (by default the compressed bytes themselves must be identical too).
DIFF_KEYS = {"status", "ct", "body", "error", "compressed_bytes", "why"}


@pytest.fixture(scope="module", autouse=True)
def shared_memory_file(triton_http):
    shm_create()
    yield
    send(triton_http, "POST", "/v2/systemsharedmemory/unregister")
    shm_remove()


def run_case(url, case, control_url):
    """Run the steps of case against url; setup/teardown always talk to Triton
    (control_url) directly, so a case tests only its own steps on the gateway."""
    if case.setup:
        case.setup(control_url)
    try:
        return [send(url, s.method, s.path, s.body, s.headers, s.content_length, s.chunks)
                for s in case.steps]
    finally:
        if case.teardown:
            case.teardown(control_url)


def describe(r):
    return "status=%s headers=%r body=%r" % (r.status, r.headers, r.body[:2000])


def check_triton(step, r):
    """Triton's answer must be the one recorded in docs/protocol-v2.md."""
    where = "Triton %s %s: %s" % (step.method, step.path, describe(r))
    assert r.status == step.status, where

    def check_header(name, expected):
        if expected is None:
            return
        got = r.header(name)
        if expected is ABSENT:
            assert got is None, "%s must be absent; %s" % (name, where)
        else:
            assert got == str(expected), "%s: expected %r; %s" % (name, expected, where)

    check_header("Content-Type", step.ct)
    check_header("Inference-Header-Content-Length", step.ihcl)
    check_header("Content-Encoding", step.encoding)
    if step.error is not None:
        assert json.loads(r.body) == {"error": step.error}, where
        from diffcases import err_body
        assert r.body == err_body(step.error), where
    if step.body_exact is not None:
        header, tail = r.split()
        assert header == step.body_exact, "JSON (header) differs from docs/protocol-v2.md; %s" % where
        if step.tail is not None:
            assert tail == step.tail, "binary tail differs from docs/protocol-v2.md; %s" % where
    if step.check is not None:
        step.check(r)


def normalise_numbers(body):
    return re.sub(rb"-?\d+", b"0", body)


def json_error_content_type(triton):
    """The Content-Type the gateway sends where Triton sent `triton`'s: the
    same, except that a JSON error body always goes out as application/json,
    where Triton says text/plain for errors raised before a handler read
    the body (docs/compatibility.md #9c)."""
    ct = triton.header("Content-Type")
    # A HEAD answer has no body, but its Content-Length counts the JSON one.
    error_body = triton.body.startswith(b'{"error":') or (
        triton.status >= 400 and int(triton.header("Content-Length") or 0) > 0)
    if ct == "text/plain" and error_body:
        return "application/json"
    return ct


def compare(step, t, g):
    diff = dict(step.expect_diff or {})
    unknown = set(diff) - DIFF_KEYS
    assert not unknown, "unknown expect_diff keys %s" % unknown
    ctx = "\n  triton:  %s\n  gateway: %s" % (describe(t), describe(g))

    want = diff.get("status", t.status)
    assert g.status == want, "status: gateway %s, expected %s%s" % (
        g.status, want, " (Triton %s; documented difference)" % t.status if "status" in diff else "") + ctx
    for name in COMPARED_HEADERS:
        expected = t.header(name)
        if name == "Content-Type" and "ct" in diff:
            expected = diff["ct"]
        elif name == "Content-Type":
            expected = json_error_content_type(t)
        assert g.header(name) == expected, "header %s" % name + ctx

    if "error" in diff:
        assert json.loads(g.body) == {"error": diff["error"]}, "error body" + ctx
        return
    if "body" in diff:
        assert g.body == diff["body"], "body" + ctx
        return

    if step.compare == "numbers":
        assert normalise_numbers(g.decoded_body()) == normalise_numbers(t.decoded_body()), \
            "body (numbers normalised)" + ctx
        return

    t_head, t_tail = t.split()
    g_head, g_tail = g.split()
    assert g_head == t_head, "JSON header" + ctx
    assert g_tail == t_tail, "binary tail (%d vs %d bytes)" % (len(g_tail), len(t_tail)) + ctx
    # docs/compatibility.md #16: compressed bytes may differ (zlib-ng vs zlib); the
    # decompressed bodies must be equal. A case may insist with compressed_bytes=True.
    if t.header("Content-Encoding") and diff.get("compressed_bytes", False):
        assert g.body == t.body, \
            "compressed bytes differ (decompressed bodies are equal)" + ctx


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_differential(case, triton_http, gateway):
    t_resps = run_case(triton_http, case, triton_http)
    for step, r in zip(case.steps, t_resps):
        check_triton(step, r)
    g_resps = run_case(gateway, case, triton_http)
    selftest = selftest_mode()
    for step, t, g in zip(case.steps, t_resps, g_resps):
        if selftest and step.expect_diff:
            # The "gateway" is Triton itself: it can only repeat Triton's answer.
            check_triton(step, g)
            continue
        compare(step, t, g)


def test_case_table_is_sane():
    ids = [c.id for c in CASES]
    assert len(ids) == len(set(ids))
    for c in CASES:
        for s in c.steps:
            assert 100 <= s.status <= 599, c.id
            assert set(s.expect_diff or {}) <= DIFF_KEYS, c.id
