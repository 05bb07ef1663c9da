"""One Python-backend implementation shared by every model of the e2e model
repository (each ``model_repository/<m>/1/model.py`` is a symlink to this file).

The behaviour is selected by the model config parameter ``kind``:

* ``identity``   every input ``INPUT<i>`` is returned unchanged as ``OUTPUT<i>``
                 (BF16 goes through DLPack because numpy has no bfloat16).
* ``add_sub``    ``OUTPUT0 = INPUT0 + INPUT1``, ``OUTPUT1 = INPUT0 - INPUT1``
                 (plus the config parameter ``skew`` on ``OUTPUT0``, default
                 0: a model that answers otherwise, for shadow traffic).
* ``accumulate`` sequence model: ``OUTPUT0`` = running sum of ``INPUT0`` for the
                 sequence given by the CORRID control input (reset on START,
                 forgotten after END).
* ``repeat``     decoupled: ``INPUT0`` (INT32, one element) = N; sends N
                 responses with ``OUTPUT0`` = [i] (INT32), then the final flag.
* ``slow``       identity that first sleeps ``delay_ms`` milliseconds (request
                 parameter ``delay_ms``; default: config parameter
                 ``default_delay_ms``).
* ``tokens``     a stand-in for an LLM (TensorRT-LLM's tensor names): the words
                 of ``text_input`` (BYTES) repeated up to ``max_tokens`` (INT32,
                 optional; default: the number of words) are the tokens.
                 Non-decoupled: one response, ``text_output`` = the tokens
                 joined by spaces. Decoupled: one response per token, request
                 parameter ``delay_ms`` apart; between tokens it checks whether
                 the request was cancelled and, if so, stops and writes the
                 number of tokens sent to the file named by the request
                 parameter ``cancel_marker`` (tests read it).
* ``vllm``, ``trtllm`` language models for the gateway's OpenAI front, one
                 per backend convention: the inputs of Triton's vLLM backend
                 (``text_input``, ``stream``, ``sampling_parameters`` JSON,
                 ``exclude_input_in_output``, ``return_num_*_tokens``) or of its
                 TensorRT-LLM backend (``text_input``, ``max_tokens``, ``stream``
                 and optional sampling inputs, batch shapes). Deterministic:
                 the prompt's words are the tokens, in order, up to max_tokens;
                 streamed one response per token (config parameter
                 ``token_delay_ms`` apart, stopping when cancelled) or whole.
                 Each response carries ``num_input_tokens`` (the prompt's words)
                 and ``num_output_tokens`` (its own tokens). A word ``FAIL``
                 fails the request at that token. The model counts the tokens
                 it produced and the requests cancelled; the prompt
                 ``__stats__`` answers them as JSON (one instance: it is
                 answered after every earlier request has ended).

(The 2.51 Python backend cannot attach response parameters, so no model here
produces any.)
"""

import json
import time

import numpy as np
import triton_python_backend_utils as pb_utils


def _param(config, key, default=None):
    value = config.get("parameters", {}).get(key)
    if value is None:
        return default
    return value.get("string_value", default)


class TritonPythonModel:
    def initialize(self, args):
        self.config = json.loads(args["model_config"])
        self.kind = _param(self.config, "kind", "identity")
        self.default_delay_ms = float(_param(self.config, "default_delay_ms", "0"))
        self.skew = float(_param(self.config, "skew", "0"))
        self.inputs = [i["name"] for i in self.config.get("input", [])]
        self.outputs = {o["name"]: o for o in self.config.get("output", [])}
        self.sums = {}
        policy = self.config.get("model_transaction_policy", {})
        self.decoupled = bool(policy.get("decoupled", False))
        self.token_delay_s = float(_param(self.config, "token_delay_ms", "0")) / 1000.0
        self.batching = int(self.config.get("max_batch_size", 0)) > 0
        self.produced = 0
        self.cancelled = 0
        if self.kind not in ("identity", "add_sub", "accumulate", "repeat", "slow", "tokens",
                             "vllm", "trtllm"):
            raise pb_utils.TritonModelException("unknown model kind " + repr(self.kind))

    # -- helpers ---------------------------------------------------------
    @staticmethod
    def _request_parameters(request):
        try:
            return json.loads(request.parameters() or "{}")
        except Exception:  # pragma: no cover - older backends
            return {}

    @staticmethod
    def _response(request, tensors):
        return pb_utils.InferenceResponse(output_tensors=tensors)

    def _identity_tensors(self, request):
        tensors = []
        for name in self.inputs:
            tensor = pb_utils.get_input_tensor_by_name(request, name)
            if tensor is None:
                continue
            out_name = "OUTPUT" + name[len("INPUT"):]
            if self.outputs.get(out_name, {}).get("data_type") == "TYPE_BF16":
                tensors.append(pb_utils.Tensor.from_dlpack(out_name, tensor.to_dlpack()))
            else:
                tensors.append(pb_utils.Tensor(out_name, tensor.as_numpy()))
        return tensors

    # -- kinds -----------------------------------------------------------
    def _identity(self, request):
        return self._response(request, self._identity_tensors(request))

    def _slow(self, request):
        delay_ms = self._request_parameters(request).get("delay_ms", self.default_delay_ms)
        time.sleep(max(0.0, float(delay_ms)) / 1000.0)
        return self._response(request, self._identity_tensors(request))

    def _add_sub(self, request):
        a = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
        b = pb_utils.get_input_tensor_by_name(request, "INPUT1").as_numpy()
        if a.shape != b.shape:
            return pb_utils.InferenceResponse(
                error=pb_utils.TritonError(
                    "INPUT0 and INPUT1 must have the same shape, got %s and %s"
                    % (list(a.shape), list(b.shape))
                )
            )
        dtype = pb_utils.triton_string_to_numpy(self.outputs["OUTPUT0"]["data_type"])
        return self._response(
            request,
            [
                pb_utils.Tensor("OUTPUT0", (a + b + self.skew).astype(dtype)),
                pb_utils.Tensor("OUTPUT1", (a - b).astype(dtype)),
            ],
        )

    def _accumulate(self, request):
        value = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
        start = pb_utils.get_input_tensor_by_name(request, "START").as_numpy()
        end = pb_utils.get_input_tensor_by_name(request, "END").as_numpy()
        corrid = pb_utils.get_input_tensor_by_name(request, "CORRID").as_numpy()
        key = corrid.reshape(-1)[0].item()
        if isinstance(key, bytes):
            key = key.decode("utf-8", "replace")
        if int(start.reshape(-1)[0]) != 0:
            self.sums[key] = 0
        total = self.sums.get(key, 0) + int(value.reshape(-1).sum())
        self.sums[key] = total
        if int(end.reshape(-1)[0]) != 0:
            self.sums.pop(key, None)
        out = np.full(value.shape, total, dtype=np.int32)
        return pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("OUTPUT0", out)])

    def _repeat(self, request):
        sender = request.get_response_sender()
        count = int(pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy().reshape(-1)[0])
        for i in range(max(0, count)):
            sender.send(
                pb_utils.InferenceResponse(
                    output_tensors=[pb_utils.Tensor("OUTPUT0", np.array([i], dtype=np.int32))]
                )
            )
        sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None

    @staticmethod
    def _words(request):
        text = pb_utils.get_input_tensor_by_name(request, "text_input").as_numpy().reshape(-1)
        words = b" ".join(text).split() or [b""]
        limit = pb_utils.get_input_tensor_by_name(request, "max_tokens")
        count = len(words) if limit is None else int(limit.as_numpy().reshape(-1)[0])
        return [words[i % len(words)] for i in range(max(0, count))]

    @staticmethod
    def _text(values):
        return pb_utils.Tensor("text_output", np.array(values, dtype=np.object_))

    def _tokens(self, request):
        words = self._words(request)
        if not self.decoupled:
            return self._response(request, [self._text([b" ".join(words)])])
        params = self._request_parameters(request)
        delay_s = max(0.0, float(params.get("delay_ms", 0))) / 1000.0
        sender = request.get_response_sender()
        sent = 0
        for word in words:
            if sent > 0:
                self._pause(sender, delay_s)
            if sender.is_cancelled():
                marker = params.get("cancel_marker")
                if marker:
                    with open(marker, "w") as f:
                        f.write(str(sent))
                break
            sender.send(pb_utils.InferenceResponse(output_tensors=[self._text([word])]))
            sent += 1
        sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None

    @staticmethod
    def _pause(sender, seconds):
        """Sleeps, but stops early when the request is cancelled."""
        end = time.monotonic() + seconds
        while not sender.is_cancelled():
            left = end - time.monotonic()
            if left <= 0:
                return
            time.sleep(min(left, 0.01))

    # -- language models (the OpenAI front) --------------------------------
    def _vllm(self, request):
        params = json.loads(self._llm_text(request, "sampling_parameters") or "{}")
        self._generate(request, int(params.get("max_tokens", 16)))

    def _trtllm(self, request):
        limit = pb_utils.get_input_tensor_by_name(request, "max_tokens")
        self._generate(request, int(limit.as_numpy().reshape(-1)[0]))

    @staticmethod
    def _llm_text(request, name):
        tensor = pb_utils.get_input_tensor_by_name(request, name)
        if tensor is None:
            return None
        return tensor.as_numpy().reshape(-1)[0].decode("utf-8")

    @staticmethod
    def _llm_flag(request, name, default):
        tensor = pb_utils.get_input_tensor_by_name(request, name)
        return default if tensor is None else bool(tensor.as_numpy().reshape(-1)[0])

    def _llm_response(self, text, prompt_tokens, tokens):
        shape = (1, 1) if self.batching else (1,)
        return pb_utils.InferenceResponse(output_tensors=[
            pb_utils.Tensor("text_output", np.array([text.encode("utf-8")], dtype=np.object_).reshape(shape)),
            pb_utils.Tensor("num_input_tokens", np.array([prompt_tokens], dtype=np.uint32).reshape(shape)),
            pb_utils.Tensor("num_output_tokens", np.array([tokens], dtype=np.uint32).reshape(shape)),
        ])

    def _generate(self, request, max_tokens):
        sender = request.get_response_sender()
        final = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
        prompt = self._llm_text(request, "text_input")
        if prompt == "__stats__":
            stats = json.dumps({"produced": self.produced, "cancelled": self.cancelled})
            sender.send(self._llm_response(stats, 1, 1), flags=final)
            return
        words = prompt.split()
        tokens = [w if i == 0 else " " + w for i, w in enumerate(words[:max(0, max_tokens)])]
        echo = "" if self._llm_flag(request, "exclude_input_in_output", True) else prompt
        if not self._llm_flag(request, "stream", False):
            if "FAIL" in words[:len(tokens)]:
                error = pb_utils.TritonError("the model failed at token %d" % words.index("FAIL"))
                sender.send(pb_utils.InferenceResponse(error=error), flags=final)
                return
            self.produced += len(tokens)
            sender.send(self._llm_response(echo + "".join(tokens), len(words), len(tokens)),
                        flags=final)
            return
        for i, token in enumerate(tokens):
            if i > 0:
                self._pause(sender, self.token_delay_s)
            if sender.is_cancelled():
                self.cancelled += 1
                break
            if token.strip() == "FAIL":
                error = pb_utils.TritonError("the model failed at token %d" % i)
                sender.send(pb_utils.InferenceResponse(error=error), flags=final)
                return
            text = (echo + token) if i == 0 else token
            sender.send(self._llm_response(text, len(words), 1))
            self.produced += 1
        sender.send(flags=final)

    # -- entry point -----------------------------------------------------
    def execute(self, requests):
        handler = getattr(self, "_" + self.kind)
        if self.decoupled:
            for request in requests:
                handler(request)
            return None
        responses = []
        for request in requests:
            try:
                responses.append(handler(request))
            except Exception as exc:  # report as a model error, keep the model alive
                responses.append(pb_utils.InferenceResponse(error=pb_utils.TritonError(str(exc))))
        return responses

    def finalize(self):
        self.sums.clear()
