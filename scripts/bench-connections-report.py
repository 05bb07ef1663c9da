#!/usr/bin/env python3
"""The many-connections cell's table (scripts/bench-connections), from the
load tool's open-loop reports (one JSON object a line, labels
"connections PROXY N").

Usage: bench-connections-report.py RESULTS.jsonl
"""

import json
import sys


def ms(us):
    return "%.1f ms" % (us / 1000.0) if us < 10000 else "%.0f ms" % (us / 1000.0)


def main(path):
    rows = {}
    for line in open(path):
        if line.strip():
            r = json.loads(line)
            _, proxy, conns = r["label"].split()
            rows[(proxy, int(conns))] = r
    header = ["proxy", "connections", "goodput req/s", "p50", "p99", "lost", "not sent",
              "proxy CPU µs/request", "vs 8 connections", "RSS per open connection: at open",
              "at the end"]
    table, problems = [], []
    for (proxy, conns), r in sorted(rows.items()):
        cpu = r["cpu"][0]["cpu_us_per_req"] if r.get("cpu") else None
        base = rows.get((proxy, 8))
        base_cpu = base["cpu"][0]["cpu_us_per_req"] if base and base.get("cpu") else None
        grown = r["rss_per_connection_bytes"][0] if r.get("rss_per_connection_bytes") else None
        rss = r.get("rss_kib", {})
        before, end = (rss.get(k, [None])[0] for k in ("before_open", "end"))
        at_end = None if before is None or end is None else (end - before) * 1024.0 / conns
        table.append([
            proxy, str(conns), "%.0f" % r["goodput_rps"], ms(r["p50_us"]), ms(r["p99_us"]),
            str(r["lost"]), str(r["not_sent"]),
            "-" if cpu is None else "%.0f" % cpu,
            "-" if cpu is None or not base_cpu else "%.2f×" % (cpu / base_cpu),
            "-" if grown is None or conns < 100 else "%.1f KiB" % (grown / 1024.0),
            "-" if at_end is None or conns < 100 else "%.1f KiB" % (at_end / 1024.0),
        ])
        if r["lost"]:
            problems.append("%s at %d connections: %d lost; first error: %s"
                            % (proxy, conns, r["lost"], r.get("first_error")))
    widths = [max(len(row[i]) for row in [header] + table) for i in range(len(header))]
    for row in [header] + table:
        print("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)))
    for p in problems:
        print("problem: " + p)


if __name__ == "__main__":
    main(sys.argv[1])
