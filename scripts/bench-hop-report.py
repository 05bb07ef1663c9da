"""Tables and plot of the hop benchmark (scripts/bench-hop), run by it with
the Python of target/bench/venv (matplotlib).

Usage: bench-hop-report.py RESULTS.tsv CLK_TCK PLOT.png NGINX_VERSION

RESULTS.tsv has one line per cell: label, kind (pa: perf_analyzer CSV, load:
load tool JSON), that file, proxy CPU clock ticks over the cell, requests
Triton served in it, the gateway's peak RSS in kB ("-": not measured).
"""
import csv
import json
import os
import sys
import time

RESULTS, HZ, PLOT, NGINX = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]

CASES = [("small-c8", "small (2×16), c=8"), ("small-c1", "small (2×16), c=1"),
         ("1mib-c4", "2×1 MiB, c=4")]
TARGETS = [("http", "direct", "Triton HTTP direct"), ("http", "nginx", "nginx → Triton HTTP"),
           ("http", "pingora", "bare pingora → Triton HTTP"),
           ("http", "hop", "bare hop: pingora HTTP/1 + h2 → Triton gRPC"),
           ("http", "tensorgate", "tensorgate HTTP → gRPC"), ("grpc", "direct", "Triton gRPC direct"),
           ("grpc", "nginx", "nginx grpc_pass"), ("grpc", "pingora", "bare pingora h2c"),
           ("grpc", "tensorgate", "tensorgate passthrough")]
# Proxies whose CPU and req/s are also shown against nginx's.
MEASURED = ("pingora", "hop", "tensorgate")

cells = {}  # label -> dict(rps, p50, p99, cpu, rss_kb)
problems = []


def read_pa(label, path, ticks, served, kernel_ticks, rss="-"):
    if not os.path.exists(path):
        log = path[:-len(".csv")] + ".log"
        tail = open(log).read().strip().splitlines()[-3:] if os.path.exists(log) else []
        problems.append("%s: perf_analyzer failed: %s" % (label, " / ".join(tail)))
        return None
    with open(path) as f:
        row = next(csv.DictReader(f))
    proxied = not label.endswith(" direct")
    return {"rps": float(row["Inferences/Second"]), "p50": float(row["p50 latency"]),
            "p99": float(row["p99 latency"]), "requests": served,
            "cpu": ticks / HZ * 1e6 / served if proxied and served > 0 else None,
            "kernel": kernel_ticks / HZ * 1e6 / served
            if proxied and served > 0 and kernel_ticks is not None else None,
            "rss_kb": None if rss == "-" else int(rss)}


def read_load(label, path, rss):
    try:
        r = json.load(open(path))
    except (OSError, ValueError):
        problems.append("%s: no result from the load tool (%s)" % (label, path))
        return None
    if r["errors"] or r.get("warmup_errors") or r.get("validation") not in ("ok", None) \
            or r["requests"] == 0:
        problems.append("%s: %d errors (%s), validation: %s, first error: %s"
                        % (label, r["errors"], r.get("error_statuses"), r.get("validation"),
                           r.get("first_error")))
    cpu = r["cpu"][0]["cpu_us_per_req"] if r["cpu"] else None
    return {"rps": r["rps"], "p50": r["p50_us"], "p99": r["p99_us"], "cpu": cpu,
            "mean": r["mean_us"], "rate": r.get("rate_mb_s"),
            "requests": r["requests"], "rss_kb": None if rss == "-" else int(rss)}


for line in open(RESULTS):
    # Results from before the kernel column have six fields.
    label, kind, path, ticks, served, rss, kernel = (line.rstrip("\n").split("\t") + ["-"])[:7]
    if kind == "pa":
        cell = read_pa(label, path, int(ticks), int(served),
                       None if kernel == "-" else int(kernel), rss)
    else:
        cell = read_load(label, path, rss)
    if cell is not None:
        cells[label] = cell


def us(v):
    if v is None:
        return "-"
    return "%.0f µs" % v if v < 10000 else "%.1f ms" % (v / 1000)


def num(v, fmt="%.0f"):
    return "-" if v is None else fmt % v


def ratio(a, b):
    return "%.2f×" % (a / b) if a is not None and b else ""


def table(header, rows):
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h)
              for i, h in enumerate(header)]
    line = lambda cs: "| " + " | ".join(c.ljust(widths[i]) for i, c in enumerate(cs)) + " |"
    print()
    print(line(header))
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for r in rows:
        print(line(r))


# -- 1. perf_analyzer -----------------------------------------------------------------
rows = []
for case, cname in CASES:
    for proto, who, tname in TARGETS:
        c = cells.get("%s %s %s" % (case, proto, who))
        if c is None:
            continue
        direct = cells.get("%s %s direct" % (case, proto))
        nginx = cells.get("%s %s nginx" % (case, proto))
        added = "+" + us(c["p50"] - direct["p50"]) if who != "direct" and direct else ""
        vs = (ratio(c["cpu"], nginx and nginx["cpu"]), ratio(c["rps"], nginx and nginx["rps"])) \
            if who in MEASURED and nginx else ("", "")
        rows.append([cname, proto.upper(), tname, "%.1f" % c["rps"], us(c["p50"]), us(c["p99"]),
                     added.replace("+-", "-"), num(c["cpu"]), vs[0], vs[1]])
print("\nThe hop against nginx %s (perf_analyzer, binary tensors, add_sub FP32):" % NGINX)
table(["cell", "protocol", "target", "req/s", "p50", "p99", "p50 added",
       "proxy CPU µs/req", "CPU vs nginx", "req/s vs nginx"], rows)


# The same in docs/performance.md's shape: one column per proxy.
def get(case, proto, who, key):
    c = cells.get("%s %s %s" % (case, proto, who))
    return None if c is None else c[key]


def cpu_cell(case, proto, who):
    v = get(case, proto, who, "cpu")
    if v is None:
        return "-"
    if who not in MEASURED:
        return "%.0f" % v
    r = ratio(v, get(case, proto, "nginx", "cpu"))
    return "%.0f (%s nginx)" % (v, r) if r else "%.0f" % v


def kernel_cell(case, proto, who):
    v = get(case, proto, who, "kernel")
    return "-" if v is None else "%.0f" % v


def added_cell(case, proto, who):
    a, d = get(case, proto, who, "p50"), get(case, proto, "direct", "p50")
    return "-" if a is None or d is None else ("%+.0f µs" % (a - d))


PROXIES = [("http", "nginx"), ("grpc", "nginx"), ("http", "pingora"), ("grpc", "pingora"),
           ("http", "hop"), ("http", "tensorgate"), ("grpc", "tensorgate")]
summary = [
    ["small, c=8: proxy CPU µs/request"] + [cpu_cell("small-c8", p, w) for p, w in PROXIES],
    ["small, c=8: of which kernel, µs"] + [kernel_cell("small-c8", p, w) for p, w in PROXIES],
    ["small, c=1: proxy CPU µs/request"] + [cpu_cell("small-c1", p, w) for p, w in PROXIES],
    ["small, c=1: of which kernel, µs"] + [kernel_cell("small-c1", p, w) for p, w in PROXIES],
    ["small, c=1: p50 added to the direct call"] + [added_cell("small-c1", p, w) for p, w in PROXIES],
    ["2×1 MiB, c=4: proxy CPU µs/request"] + [cpu_cell("1mib-c4", p, w) for p, w in PROXIES],
    ["2×1 MiB, c=4: req/s"] + [num(get("1mib-c4", p, w, "rps"), "%.1f") for p, w in PROXIES],
]
print("\nThe same, one column per proxy:")
table(["cell", "nginx → Triton HTTP", "nginx `grpc_pass`", "bare pingora HTTP (floor)",
       "bare pingora h2c (floor)", "bare hop HTTP → gRPC (floor)", "tensorgate HTTP → gRPC",
       "tensorgate passthrough"], summary)


def user(case, proto, who):
    """User-space CPU µs per request: the proxy's CPU less its kernel part."""
    c, k = get(case, proto, who, "cpu"), get(case, proto, who, "kernel")
    return None if c is None or k is None else c - k


# -- 1b. the access log: the small HTTP cell at c=8 with each proxy's log on ------------
log_rows = []
for who, name in (("nginx", "nginx (default access_log, to a file)"),
                  ("tensorgate", "tensorgate (default access log, to its log file)")):
    off, on = get("small-c8", "http", who, "cpu"), get("small-c8", "http", who + "-logged", "cpu")
    log_rows.append([name, num(off), num(on), num(None if off is None or on is None else on - off)])
if any(r[2] != "-" for r in log_rows):
    print("\nThe access log (small HTTP, c=8: proxy CPU µs/request without and with it):")
    table(["proxy", "log off", "log on", "the log's cost, µs/request"], log_rows)


# -- 1c. issue 28's goals, as ratios of this run ------------------------------------------
def goal(text, value, target, met):
    return [text, value, target, "-" if met is None else ("met" if met else "not met")]


def cpu_ratio(case, proto):
    t, n = get(case, proto, "tensorgate", "cpu"), get(case, proto, "nginx", "cpu")
    return None if t is None or not n else t / n


def added_ratio(proto):
    d = get("small-c1", proto, "direct", "p50")
    t, n = get("small-c1", proto, "tensorgate", "p50"), get("small-c1", proto, "nginx", "p50")
    return None if None in (d, t, n) or n - d <= 0 else (t - d) / (n - d)


def fmt_ratio(v):
    return "-" if v is None else "%.2f×" % v


def at_most(v, limit):
    return None if v is None else v <= limit


logged_cost = None
if get("small-c8", "http", "tensorgate-logged", "cpu") is not None:
    logged_cost = get("small-c8", "http", "tensorgate-logged", "cpu") - get("small-c8", "http", "tensorgate", "cpu")
r_http, r_grpc = cpu_ratio("small-c8", "http"), cpu_ratio("small-c8", "grpc")
c1 = [cpu_ratio("small-c1", p) for p in ("http", "grpc")] + [added_ratio(p) for p in ("http", "grpc")]
u_http, u_grpc = user("small-c8", "http", "tensorgate"), user("small-c8", "grpc", "tensorgate")
mib = cpu_ratio("1mib-c4", "http")
goals = [
    goal("1. access log, µs/request (log on − off)", num(logged_cost), "≤ 5", at_most(logged_cost, 5)),
    goal("2. small HTTP → gRPC, c=8: CPU vs nginx", fmt_ratio(r_http), "≤ 1.5×", at_most(r_http, 1.5)),
    goal("3. passthrough, c=8: CPU vs grpc_pass", fmt_ratio(r_grpc), "≤ 1.3×", at_most(r_grpc, 1.3)),
    goal("4. c=1: CPU vs nginx (HTTP, gRPC); added p50 vs nginx's (HTTP, gRPC)",
         ", ".join(fmt_ratio(v) for v in c1), "≤ 2× each",
         None if None in c1 else all(v <= 2 for v in c1)),
    goal("5. user-space CPU, c=8, µs/request (HTTP, passthrough)", "%s, %s" % (num(u_http), num(u_grpc)),
         "≤ 40", None if None in (u_http, u_grpc) else max(u_http, u_grpc) <= 40),
    goal("6. 2×1 MiB HTTP, c=4: CPU vs nginx", fmt_ratio(mib), "≤ 1×", at_most(mib, 1)),
]
for key, name in (("bigjson", "w4 random"), ("bigjson-integral", "w5 integral")):
    t, d = cells.get(key + " tensorgate"), cells.get(key + " direct")
    v = None if t is None or d is None or not d["rps"] else t["rps"] / d["rps"]
    goals.append(goal("6. big JSON (%s): req/s vs Triton HTTP" % name, fmt_ratio(v), "≥ 2×",
                      None if v is None else v >= 2))
print("\nIssue 28's goals in this run:")
table(["goal", "this run", "target", ""], goals)

# -- 2. big JSON ----------------------------------------------------------------------
for key, title in (("bigjson", "load tool w4: 2×262,144 random FP32 in [0, 1) as JSON"),
                   ("bigjson-integral", "load tool w5: 2×262,144 integral FP32 as JSON, `262143.0`")):
    rows = []
    direct = cells.get(key + " direct")
    for who, tname in (("direct", "Triton HTTP direct"), ("tensorgate", "tensorgate HTTP → gRPC")):
        c = cells.get(key + " " + who)
        if c is None:
            continue
        rss = "-" if c.get("rss_kb") is None else "%.0f MB" % (c["rss_kb"] / 1024)
        rows.append([tname, "%.1f" % c["rps"], us(c["p50"]), us(c["p99"]),
                     num(c["cpu"]) if who == "tensorgate" else "-", rss if who == "tensorgate" else "-",
                     ratio(c["rps"], direct and direct["rps"]) if who == "tensorgate" else ""])
    print("\nBig JSON (%s, 2 connections):" % title)
    table(["target", "req/s", "p50", "p99", "gateway CPU µs/req", "gateway peak RSS",
           "req/s vs Triton"], rows)


# -- 2b. large binary tensors -------------------------------------------------------------
def large_tables(prefix, targets, title):
    for mib in sorted({int(l.split()[0][len(prefix):]) for l in cells if l.startswith(prefix)}):
        rows = []
        direct = cells.get("%s%d direct" % (prefix, mib))
        for who, tname in targets:
            c = cells.get("%s%d %s" % (prefix, mib, who))
            if c is None:
                continue
            rss = "-" if c.get("rss_kb") is None else "%.0f MB" % (c["rss_kb"] / 1024)
            rows.append([tname, "%.2f" % c["rps"], us(c["p50"]), us(c["p99"]),
                         "-" if who == "direct" else num(c["cpu"] and c["cpu"] / 1000, "%.1f"),
                         rss, "" if who == "direct" else ratio(c["p50"], direct and direct["p50"])])
        print("\n" + title % mib)
        table(["target", "req/s", "p50", "p99", "proxy CPU ms/req", "gateway peak RSS",
               "p50 vs direct"], rows)


large_tables("large-", (("direct", "Triton HTTP direct"), ("nginx", "nginx → Triton HTTP"),
                        ("tensorgate", "tensorgate HTTP → gRPC")),
             "Large binary tensors (load tool w3: 2×%d MiB FP32, binary in and out, 1 connection):")
large_tables("largegrpc-", (("direct", "Triton gRPC direct"), ("nginx", "nginx `grpc_pass`"),
                            ("tensorgate", "tensorgate passthrough")),
             "Large binary tensors over gRPC (perf_analyzer: 2×%d MiB FP32, concurrency 1):")


# -- 2c. pipelining: each leg alone, then both through tensorgate ----------------------
def legs_tables():
    for mib in sorted({int(l.split()[0][len("legs-"):]) for l in cells if l.startswith("legs-")}):
        grpc = cells.get("legs-%d grpc-leg" % mib)
        rate = None
        rows = []
        for suffix, pace in (("", "paced"), ("-unpaced", "loopback")):
            http = cells.get("legs-%d http-leg%s" % (mib, suffix))
            if http is None or grpc is None:
                continue
            rate = rate or http.get("rate")
            slower = max(http, grpc, key=lambda c: c["p50"])
            for who, name, c in (("http", "HTTP leg alone (nginx answers a file)", http),
                                 ("grpc", "gRPC leg alone (load → demo upstream)"
                                  + (" (as above)" if suffix else ""), grpc),
                                 ("tg", "tensorgate HTTP → demo upstream",
                                  cells.get("legs-%d tensorgate%s" % (mib, suffix)))):
                if c is None:
                    continue
                rss = "-" if c.get("rss_kb") is None else "%.0f MB" % (c["rss_kb"] / 1024)
                tg = who == "tg"
                rows.append([pace, name, str(c["requests"]), us(c["p50"]), us(c["mean"]),
                             us(c["p99"]), num(c["cpu"] and c["cpu"] / 1000, "%.1f") if tg else "-",
                             rss if tg else "-", ratio(c["p50"], slower["p50"]) if tg else "",
                             ratio(c["p50"], http["p50"] + grpc["p50"]) if tg else ""])
        print("\nPipelining, 2×%d MiB through the demo upstream (load tool w3, 1 connection; "
              "paced: the HTTP side held to %s MB/s each way):" % (mib, num(rate)))
        table(["client link", "target", "requests", "p50", "mean", "p99", "gateway CPU ms/req",
               "gateway peak RSS", "p50 vs slower leg", "p50 vs sum of legs"], rows)


legs_tables()


# -- 3. sweeps --------------------------------------------------------------------------
def sweep(kind):
    points = {}
    for label, c in cells.items():
        parts = label.split()
        if parts[0] == kind:
            points.setdefault(parts[1], []).append((int(parts[2]), c))
    return {who: sorted(p, key=lambda x: x[0]) for who, p in points.items()}


def size(n):
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return "%g %s" % (n / scale, unit)
    return "%d B" % n


def sweep_table(kind, title, fmt):
    s = sweep(kind)
    xs = sorted({x for p in s.values() for x, _ in p})
    by = {who: dict(p) for who, p in s.items()}
    rows = []
    for x in xs:
        t, n = by.get("tensorgate", {}).get(x), by.get("nginx", {}).get(x)
        rows.append([fmt(x), num(t and t["rps"], "%.1f"), num(t and t["cpu"]),
                     num(n and n["rps"], "%.1f"), num(n and n["cpu"]),
                     ratio(t and t["cpu"], n and n["cpu"])])
    print("\n" + title)
    table([kind, "tensorgate req/s", "tensorgate CPU µs/req", "nginx req/s",
           "nginx CPU µs/req", "CPU vs nginx"], rows)
    return s


conns = sweep_table("conns", "CPU per request against connections (load tool w1, small binary):", str)
sizes = sweep_table("bytes", "CPU per request against bytes per input (load tool w3, binary, "
                    "2 connections):", size)

try:
    import matplotlib.pyplot as plt
except ImportError:
    problems.append("no matplotlib: no plot")
else:
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    names = {"tensorgate": "tensorgate HTTP → Triton gRPC", "nginx": "nginx %s → Triton HTTP" % NGINX}
    for ax, s in ((left, conns), (right, sizes)):
        for who in ("tensorgate", "nginx"):
            pts = [(x, c["cpu"]) for x, c in s.get(who, []) if c["cpu"]]
            if pts:
                ax.plot(*zip(*pts), marker="o", label=names[who])
        ax.set_ylabel("proxy CPU µs per request")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    left.set_xscale("log", base=2)
    left.set_xticks([x for x, _ in conns.get("tensorgate", [])])
    left.set_xticklabels([str(x) for x, _ in conns.get("tensorgate", [])])
    left.set_ylim(bottom=0)
    left.set_xlabel("connections (2×16 FP32, binary)")
    right.set_xscale("log", base=2)
    right.set_yscale("log")
    right.set_xlabel("bytes per input tensor (binary, 2 connections)")
    right.set_xticks([x for x, _ in sizes.get("tensorgate", [])])
    right.set_xticklabels([size(x) for x, _ in sizes.get("tensorgate", [])], rotation=45)
    fig.suptitle("Proxy CPU per request in front of one Triton (scripts/bench, %s)"
                 % time.strftime("%Y-%m-%d"))
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(PLOT)), exist_ok=True)
    fig.savefig(PLOT, dpi=100)
    print("\nplot: " + PLOT)

print("\nproxy CPU = utime+stime of the proxy's processes (nginx: master + worker) over the "
      "whole cell / the requests Triton served in it (perf_analyzer) or in the measured window "
      "(load tool). p50 added = p50 - the direct call's p50, same protocol.")
for p in problems:
    print("PROBLEM: " + p)
print("raw results: " + RESULTS)
