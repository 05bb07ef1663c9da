"""The gateway's OpenAI front against a real Triton 2.51, with the official
`openai` SDK (sync and async, streamed and not, completions and chat) and
`curl -N`. Triton serves two decoupled Python-backend models, one per
backend convention (model_repository/llm_vllm: the vLLM backend's inputs;
llm_trtllm: TensorRT-LLM's); both say the prompt back a word per token
and count what they produced (the prompt `__stats__` answers the counts).
Chat is rendered with tests/fixtures/openai/tokenizer_config.json (Qwen2's
ChatML template). The gateway here has its own configuration: the chat
templates, a rename, and an API key (the SDK sends it as a bearer token).
"""

import asyncio
import json
import os
import socket
import subprocess
import time

import openai
import pytest

from conftest import REPO_ROOT, launch_gateway, selftest_mode, stop

KEY = "sk-e2e-openai"
TEMPLATE = os.path.join(REPO_ROOT, "tests", "fixtures", "openai", "tokenizer_config.json")

pytestmark = pytest.mark.skipif(selftest_mode(), reason="Triton has no OpenAI front of its own")


@pytest.fixture(scope="module")
def openai_gateway(triton_grpc, e2e_tmpdir):
    """Base URL of a gateway with the OpenAI models configured."""
    config = os.path.join(e2e_tmpdir, "openai.toml")
    with open(config, "w") as f:
        f.write(f"""
[auth]
open_groups = ["health"]
[[auth.keys]]
key = "{KEY}"
[openai.models.chat]
upstream_model = "llm_vllm"
chat_template = "{TEMPLATE}"
[openai.models.llm_trtllm]
backend = "tensorrtllm"
chat_template = "{TEMPLATE}"
""")
    gw = launch_gateway(e2e_tmpdir, "tensorgate-openai", ["--config", config,
                                                          "--upstream", triton_grpc])
    try:
        yield gw["http"]
    finally:
        stop(gw["proc"])


@pytest.fixture
def client(openai_gateway):
    return openai.OpenAI(base_url=openai_gateway + "/v1", api_key=KEY, max_retries=0)


@pytest.fixture
def async_client(openai_gateway):
    return openai.AsyncOpenAI(base_url=openai_gateway + "/v1", api_key=KEY, max_retries=0)


def chatml(*messages):
    """The prompt Qwen2's template renders (its default system message first)."""
    text = "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
    for role, content in messages:
        text += "<|im_start|>%s\n%s<|im_end|>\n" % (role, content)
    return text + "<|im_start|>assistant\n"


def said(prompt, limit=None):
    """What the models answer to `prompt`: its words, a token each."""
    return " ".join(prompt.split()[:limit])


def stats(client, model):
    return json.loads(client.completions.create(model=model, prompt="__stats__").choices[0].text)


@pytest.mark.parametrize("model", ["llm_vllm", "llm_trtllm"])
def test_a_completion_with_usage_and_finish_reasons(client, model):
    answer = client.completions.create(model=model, prompt="one two three four", max_tokens=10,
                                       temperature=0.0, extra_body={"an_unknown_field": [1]})
    assert answer.object == "text_completion" and answer.model == model
    choice = answer.choices[0]
    assert (choice.text, choice.finish_reason) == ("one two three four", "stop")
    assert (answer.usage.prompt_tokens, answer.usage.completion_tokens,
            answer.usage.total_tokens) == (4, 4, 8)
    cut = client.completions.create(model=model, prompt="one two three four", max_tokens=2)
    assert (cut.choices[0].text, cut.choices[0].finish_reason) == ("one two", "length")


@pytest.mark.parametrize("model", ["llm_vllm", "llm_trtllm"])
def test_a_streamed_completion_arrives_chunk_by_chunk(client, model):
    chunks = list(client.completions.create(model=model, prompt="a b c d", max_tokens=3,
                                            stream=True, stream_options={"include_usage": True}))
    texts = [c.choices[0].text for c in chunks if c.choices]
    assert "".join(texts) == "a b c"
    assert len([t for t in texts if t]) == 3, "one chunk per token"
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert finishes[-1] == "length" and set(finishes[:-1]) == {None}
    assert chunks[-1].choices == [] and chunks[-1].usage.total_tokens == 7


def test_chat_is_rendered_with_the_shipped_template(client):
    messages = [{"role": "user", "content": "Hello there"}]
    for model in ["chat", "llm_trtllm"]:
        answer = client.chat.completions.create(model=model, messages=messages, max_tokens=100)
        message = answer.choices[0].message
        assert answer.object == "chat.completion" and message.role == "assistant"
        assert message.content == said(chatml(("user", "Hello there"))), model
        assert answer.usage.prompt_tokens == len(chatml(("user", "Hello there")).split())


def test_async_chat_streamed_and_not(async_client):
    system = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    prompt = ("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
              "<|im_start|>assistant\n")

    async def run():
        whole = await async_client.chat.completions.create(model="chat", messages=system,
                                                           max_tokens=3)
        stream = await async_client.chat.completions.create(model="chat", messages=system,
                                                            max_tokens=3, stream=True)
        deltas = [c.choices[0].delta async for c in stream]
        return whole, deltas

    whole, deltas = asyncio.run(run())
    assert whole.choices[0].message.content == said(prompt, 3)
    assert whole.choices[0].finish_reason == "length"
    assert deltas[0].role == "assistant"
    assert "".join(d.content or "" for d in deltas) == said(prompt, 3)


def test_curl_sees_server_sent_events(openai_gateway):
    body = json.dumps({"model": "llm_vllm", "prompt": "x y", "stream": True})
    out = subprocess.run(
        ["curl", "-sN", openai_gateway + "/v1/completions", "-H", "Authorization: Bearer " + KEY,
         "-H", "Content-Type: application/json", "-d", body],
        capture_output=True, timeout=60, check=True).stdout.decode()
    events = [e for e in out.split("\n\n") if e]
    assert all(e.startswith("data: ") for e in events), out
    assert events[-1] == "data: [DONE]"
    texts = [json.loads(e[6:])["choices"][0]["text"] for e in events[:-1]
             if json.loads(e[6:])["choices"]]
    assert "".join(texts) == "x y"


def test_a_disconnect_stops_the_model(client, openai_gateway):
    """The first event comes while the model generates; closing the
    connection cancels the request upstream, and the model stops."""
    before = stats(client, "llm_vllm")
    prompt = " ".join("w%d" % i for i in range(2000))  # 2000 tokens, 5 ms apart
    body = json.dumps({"model": "llm_vllm", "prompt": prompt, "max_tokens": 2000,
                       "stream": True}).encode()
    host, port = openai_gateway.split("//")[1].split(":")
    sock = socket.create_connection((host, int(port)))
    try:
        sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
                     b"Content-Length: %d\r\n\r\n%s" % (KEY.encode(), len(body), body))
        started = time.monotonic()
        received = b""
        sock.settimeout(30)
        while b"\n\n" not in received:
            chunk = sock.recv(4096)
            assert chunk, received
            received += chunk
        assert time.monotonic() - started < 5, "the first token did not wait for the rest"
        assert b" 200 " in received.split(b"\r\n", 1)[0]
        assert b'"text":"w0"' in received
    finally:
        sock.close()
    # One instance: this is answered once the cancelled request has ended.
    after = stats(client, "llm_vllm")
    assert after["cancelled"] == before["cancelled"] + 1
    produced = after["produced"] - before["produced"]
    assert 0 < produced < 2000, produced


def test_a_model_failing_mid_stream_raises_in_the_sdk(client):
    stream = client.completions.create(model="llm_trtllm", prompt="a b FAIL c", stream=True)
    texts = []
    with pytest.raises(openai.APIError, match="the model failed at token 2"):
        for chunk in stream:
            texts.append(chunk.choices[0].text)
    assert "".join(texts) == "a b"
    with pytest.raises(openai.BadRequestError, match="the model failed at token 1"):
        client.completions.create(model="llm_vllm", prompt="a FAIL")


def test_refusals_are_the_sdks_exceptions(client, openai_gateway):
    user = [{"role": "user", "content": "x"}]
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(model="chat", messages=user, n=2)
    assert refused.value.body["param"] == "n"
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(model="chat", messages=user, logprobs=True)
    assert refused.value.body["param"] == "logprobs"
    tool = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(model="chat", messages=user, tools=[tool])
    assert refused.value.body["param"] == "tools"
    with pytest.raises(openai.BadRequestError, match="has no chat template"):
        client.chat.completions.create(model="llm_vllm", messages=user)
    with pytest.raises(openai.NotFoundError) as missing:
        client.completions.create(model="no_such_model", prompt="x")
    assert missing.value.body["code"] == "model_not_found"
    with pytest.raises(openai.NotFoundError):
        client.completions.create(model="add_sub", prompt="x")
    stranger = openai.OpenAI(base_url=openai_gateway + "/v1", api_key="sk-wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        stranger.models.list()


def test_the_models_listing(client):
    ids = [m.id for m in client.models.list()]
    assert {"chat", "llm_vllm", "llm_trtllm"} <= set(ids), ids
    assert "add_sub" not in ids
    assert client.models.retrieve("chat").id == "chat"
