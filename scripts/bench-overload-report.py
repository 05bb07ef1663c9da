#!/usr/bin/env python3
"""The overload cell's table (scripts/bench-overload), from the load tool's
open-loop reports (one JSON object a line, labels "overload CELL").

Usage: bench-overload-report.py RESULTS.jsonl
"""

import json
import sys

CAPACITY = 400.0  # fixed_capacity: 4 at once, 10 ms each
QUEUE_BOUND_MS = 100.0  # queue_timeout_ms of the admission table
SERVICE_MS = 10.0
CELLS = {
    "on": "tensorgate, admission on",
    "off": "tensorgate, admission off",
    "nginx": "nginx limit_conn 4 -> tensorgate (off)",
    "triton": "tensorgate, admission on -> Triton",
}


def ms(us):
    return "%.1f ms" % (us / 1000.0) if us < 10000 else "%.0f ms" % (us / 1000.0)


def share(part, whole):
    return "-" if whole == 0 else "%.0f %%" % (100.0 * part / whole)


def main(path):
    rows = {}
    for line in open(path):
        if line.strip():
            r = json.loads(line)
            rows[r["label"].split()[-1]] = r
    header = ["cell", "offered req/s", "goodput req/s", "of capacity", "admitted p50",
              "admitted p99", "503s", "503 p50", "503 p99", "503s with Retry-After",
              "high-priority p99 (unloaded)", "timeouts", "lost", "not sent (client)"]
    table, problems = [], []
    for cell, name in CELLS.items():
        r = rows.get(cell)
        if r is None:
            continue
        w = r["window_s"]
        refused = r["refused"]
        high, idle = r["high"], r["unloaded"]["high"]
        table.append([
            name, "%.0f" % (r["offered"] / w), "%.0f" % r["goodput_rps"],
            "%.0f %%" % (100.0 * r["goodput_rps"] / CAPACITY), ms(r["p50_us"]), ms(r["p99_us"]),
            share(refused, r["sent"]), ms(r["refused_p50_us"]) if refused else "-",
            ms(r["refused_p99_us"]) if refused else "-",
            share(refused - r["refused_without_retry_after"], refused),
            "%s (%s)" % (ms(high["p99_us"]), ms(idle["p99_us"])), str(r["timeouts"]),
            str(r["lost"]), str(r["not_sent"]),
        ])
        if r.get("validation") not in ("ok", None):
            problems.append("%s: validation: %s" % (name, r["validation"]))
        if r["lost"]:
            problems.append("%s: %d lost (other statuses %s, I/O errors %d, timeouts %d, 503s "
                            "without Retry-After %d); first error: %s"
                            % (name, r["lost"], r["other_statuses"], r["io_errors"],
                               r["timeouts"], r["refused_without_retry_after"],
                               r.get("first_error")))
    if not table:
        print("no overload results in " + path)
        return
    widths = [max(len(h), *(len(row[i]) for row in table)) for i, h in enumerate(header)]
    line = lambda cells: "| " + " | ".join(c.ljust(widths[i]) for i, c in enumerate(cells)) + " |"
    print()
    print(line(header))
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for row in table:
        print(line(row))
    print()
    print("Offered: 1,200 req/s of Poisson arrivals (3x the upstream's 400), 200 connections, "
          "10 % with x-priority: 1. Goodput = 200s a second; lost = sent and answered "
          "neither 200 nor 503 with Retry-After (timeouts, resets, other statuses); not sent = "
          "due while all 200 connections were busy (the client's loss, not the server's).")

    for cell in ("on", "triton"):
        r = rows.get(cell)
        if r is None:
            continue
        high, idle = r["high"], r["unloaded"]["high"]
        refused = r["refused"]
        checks = [
            ("goodput >= 95 % of 400 req/s", "%.0f req/s" % r["goodput_rps"],
             r["goodput_rps"] >= 0.95 * CAPACITY),
            ("admitted p99 <= %.0f ms (queue bound + 2 x %.0f ms)"
             % (QUEUE_BOUND_MS + 2 * SERVICE_MS, SERVICE_MS), ms(r["p99_us"]),
             r["p99_us"] <= (QUEUE_BOUND_MS + 2 * SERVICE_MS) * 1000),
            ("refusals p99 <= 1 ms", ms(r["refused_p99_us"]) if refused else "no refusal",
             refused > 0 and r["refused_p99_us"] <= 1000),
            ("every 503 with Retry-After", share(refused - r["refused_without_retry_after"], refused),
             refused > 0 and r["refused_without_retry_after"] == 0),
            ("high-priority p99 <= its unloaded p99 + 10 ms",
             "%s vs %s" % (ms(high["p99_us"]), ms(idle["p99_us"])),
             high["ok"] > 0 and high["p99_us"] <= idle["p99_us"] + 10000),
            ("0 lost (every request a 200 or a 503 with Retry-After)", str(r["lost"]),
             r["lost"] == 0),
        ]
        print()
        print("Targets, %s:" % CELLS[cell])
        for what, got, ok in checks:
            print("  %-58s %-22s %s" % (what, got, "met" if ok else "MISSED"))
    for p in problems:
        print("PROBLEM: " + p)
    print("raw results: " + path)


if __name__ == "__main__":
    main(sys.argv[1])
