#!/usr/bin/env python3
"""The OpenAI front's benchmark (scripts/bench runs it; docs/performance.md,
"OpenAI streams"): the same token stream of the demo upstream's `llm_vllm`
read (a) directly over gRPC `ModelStreamInfer` and (b) through tensorgate
as `POST /v1/completions` with `"stream": true` (server-sent events).

* time to first token: from the request's first byte sent to the first
  response (a) or the first `data:` event (b), one request at a time on a
  kept-alive connection, p50 and p99 of each and the difference, measured
  by the `first_token` tool (crates/tensorgate-load: h2 and raw sockets, so
  neither leg pays for a client library);
* gateway CPU per streamed event: the gateway process's CPU time (the sum
  of its threads' /proc/PID/task/*/schedstat, nanoseconds) over many
  concurrent long streams, divided by the events it sent; and the CPU of a
  one-token request, the per-request part of it.

Usage: bench-openai.py --gateway http://H:P --gateway-pid PID --upstream H:P
                       --first-token BIN
                       [--requests N] [--cpu-requests N] [--tokens N] [--streams N]
                       [--json FILE]
"""

import argparse
import glob
import http.client
import json
import subprocess
import sys
import threading
import time
from urllib.parse import urlparse


MODEL = "llm_vllm"


def prompt(tokens):
    return " ".join("w%d" % i for i in range(tokens))


def cpu_ns(pid):
    """CPU time of every thread of `pid` so far, in nanoseconds."""
    total = 0
    for path in glob.glob("/proc/%d/task/*/schedstat" % pid):
        try:
            with open(path) as f:
                total += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass  # a thread that ended meanwhile
    return total


class Gateway:
    """One kept-alive HTTP/1.1 connection to the gateway."""

    def __init__(self, url):
        parsed = urlparse(url)
        self.conn = http.client.HTTPConnection(parsed.hostname, parsed.port, timeout=60)

    def stream(self, tokens):
        """Seconds to the first event, and the events of one stream."""
        body = json.dumps({"model": MODEL, "prompt": prompt(tokens), "max_tokens": tokens,
                           "stream": True})
        started = time.perf_counter()
        self.conn.request("POST", "/v1/completions", body,
                          {"Content-Type": "application/json"})
        response = self.conn.getresponse()
        if response.status != 200:
            raise RuntimeError("status %d: %s" % (response.status, response.read()[:200]))
        first, seen = None, b""
        while not seen.endswith(b"data: [DONE]\n\n"):
            chunk = response.read1(65536)
            if not chunk:
                raise RuntimeError("the stream ended before [DONE]")
            if first is None:
                first = time.perf_counter() - started
            seen += chunk
        response.read()  # the chunked body's end: the connection is reusable
        return first, seen.count(b"\n\n")


def first_tokens(args):
    """The first_token tool's run: both legs, one request at a time."""
    host, port = urlparse(args.gateway).hostname, urlparse(args.gateway).port
    out = subprocess.run([args.first_token, "--upstream", args.upstream,
                          "--gateway", "%s:%d" % (host, port), "--model", MODEL,
                          "--rounds", str(args.requests)],
                         capture_output=True, check=True, timeout=600)
    return json.loads(out.stdout)


def cpu_per_event(args):
    """Gateway CPU per event over `streams` concurrent clients, each
    sending `requests` streams of `tokens` tokens; then per 1-token request."""

    def run(tokens, requests, counts):
        gateway = Gateway(args.gateway)
        for _ in range(requests):
            counts.append(gateway.stream(tokens)[1])

    def measure(tokens, requests):
        counts, threads = [], []
        before = cpu_ns(args.gateway_pid)
        for _ in range(args.streams):
            threads.append(threading.Thread(target=run, args=(tokens, requests, counts)))
            threads[-1].start()
        for thread in threads:
            thread.join()
        return cpu_ns(args.gateway_pid) - before, sum(counts), len(counts)

    measure(args.tokens, 1)  # warm-up
    long_cpu, events, streams = measure(args.tokens, args.cpu_requests)
    short_cpu, _, short_streams = measure(1, args.cpu_requests)
    return {
        "events": events,
        "streams": streams,
        "cpu_us_per_event": long_cpu / 1000.0 / events,
        "cpu_us_per_one_token_request": short_cpu / 1000.0 / short_streams,
    }


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--gateway", required=True)
    parser.add_argument("--gateway-pid", type=int, required=True)
    parser.add_argument("--upstream", required=True)
    parser.add_argument("--first-token", required=True,
                        help="the first_token tool (crates/tensorgate-load)")
    parser.add_argument("--requests", type=int, default=200,
                        help="first-token rounds (each one direct and one through the gateway)")
    parser.add_argument("--cpu-requests", type=int, default=20,
                        help="streams per client in the CPU measurement")
    parser.add_argument("--tokens", type=int, default=200)
    parser.add_argument("--streams", type=int, default=4)
    parser.add_argument("--json")
    args = parser.parse_args()
    result = {**first_tokens(args), **cpu_per_event(args)}
    cpu = result
    result["added_p50_us"] = result["gateway_p50_us"] - result["direct_p50_us"]
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f)
    print()
    print("| stream of llm_vllm (demo upstream) | first token p50 | p99 |")
    print("|---|---|---|")
    print("| gRPC ModelStreamInfer, direct | %.0f µs | %.0f µs |"
          % (result["direct_p50_us"], result["direct_p99_us"]))
    print("| /v1/completions stream through tensorgate | %.0f µs | %.0f µs |"
          % (result["gateway_p50_us"], result["gateway_p99_us"]))
    print()
    print("added to the first token at p50: %.0f µs (target <= 1000 µs)" % result["added_p50_us"])
    print("gateway CPU per streamed event: %.1f µs over %d events in %d streams of %d tokens, "
          "%d at a time (target <= 20 µs)" % (cpu["cpu_us_per_event"], cpu["events"],
                                                cpu["streams"], args.tokens, args.streams))
    print("gateway CPU per one-token request (the per-request part): %.0f µs"
          % cpu["cpu_us_per_one_token_request"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
