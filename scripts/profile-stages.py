#!/usr/bin/env python3
"""Where a small request's CPU goes, by stage: the cost budget of
docs/performance.md ("The cost budget of a small request").

Reads `perf script -F comm,tid,ip,sym,dso` output of a `perf record -g`
(DWARF call graphs) of the gateway under a steady load, and names each
sample after the innermost frame that matches a stage below (a `malloc`
called from the JSON parser counts as JSON decoding). Kernel samples are
counted apart, under the stage that made the system call. Prints µs per
request for each stage, user and system apart, given the gateway's CPU
per request measured over the same load (utime+stime from /proc).

Usage: scripts/profile-stages.py PERF_SCRIPT_TXT CPU_US_PER_REQUEST
"""

import re
import sys

# (stage, pattern): the first stage whose pattern matches a frame, frames
# read from the leaf up, names the sample.
STAGES = [
    ("metrics (prometheus)", r"prometheus::"),
    ("trace context, log", r"tensorgate::telemetry|tracing_subscriber|tracing_core|tensorgate::trace::|opentelemetry"),
    ("request JSON decode", r"tensorgate::wire::(json|v2_request|json_value|json_access)\b"),
    ("answer encode (JSON or binary)", r"tensorgate::wire::(v2_response|json_write|binary)|tensorgate::json_str|infer_answer"),
    ("translate (checks, to_grpc, from_grpc, outputs)", r"tensorgate::translate::"),
    ("protobuf encode / decode", r"tensorgate::upstream::encoded|prost::"),
    ("upstream call: h2, tonic, pool", r"\bh2::|tonic::|tensorgate::upstream::|hyper::"),
    ("HTTP/1 head read and parse", r"HttpSession::read_request\b|HttpSession::read_request::|httparse"),
    ("HTTP/1 body read", r"read_request_body|do_read_body|tensorgate::front::request_body"),
    ("HTTP/1 answer write", r"write_response|prepare_response_header|tensorgate::front::write_buffer|HttpSession::write|finish_body"),
    ("header maps (http crate)", r"\bhttp::header"),
    ("scheduling: epoll, park, wake-ups", r"epoll_wait|tokio::runtime::(scheduler|task|context|time|park)|mio::poll|futex"),
    ("gateway glue (front, app, model, context)", r"tensorgate::"),
]
OTHER = "other (libc, allocator, std outside a stage)"


def main():
    path, per_request = sys.argv[1], float(sys.argv[2])
    patterns = [(name, re.compile(p)) for name, p in STAGES]
    user, kernel, total = {}, {}, 0

    def count(frames):
        nonlocal total
        if not frames:
            return
        total += 1
        name = next((n for f in frames for n, p in patterns if p.search(f)), OTHER)
        side = kernel if "[kernel.kallsyms]" in frames[0] else user
        side[name] = side.get(name, 0) + 1

    frames = []
    with open(path, errors="replace") as samples:
        for line in samples:
            if line and not line[0].isspace():
                count(frames)
                frames = []
            elif line.strip():
                frames.append(line.strip())
    count(frames)
    if not total:
        sys.exit("no samples")
    print(f"{'stage':50} {'user µs':>8} {'sys µs':>7}   ({total} samples, {per_request} µs/request)")
    sums = [0.0, 0.0]
    for name in [n for n, _ in STAGES] + [OTHER]:
        u, k = (side.get(name, 0) * per_request / total for side in (user, kernel))
        sums = [sums[0] + u, sums[1] + k]
        if u + k >= 0.05:
            print(f"{name:50} {u:8.1f} {k:7.1f}")
    print(f"{'total':50} {sums[0]:8.1f} {sums[1]:7.1f}")


if __name__ == "__main__":
    main()
