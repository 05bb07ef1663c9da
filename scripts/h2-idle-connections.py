#!/usr/bin/env python3
"""What an idle h2 connection costs a server in resident memory (issue 43):
opens N connections to 127.0.0.1:PORT with prior knowledge (h2c, as gRPC
clients do), each after the preface and a SETTINGS exchange (with
--request, also one GET of /v2/health/ready), answers the server's SETTINGS
and PINGs, and prints how much the process PID's VmRSS grew per connection.
Raw frames on asyncio streams: no h2 library to install, and the client's
own cost stays out of the server's.

Usage: h2-idle-connections.py PORT N PID [--request]
       (raise `ulimit -n` above N first)"""
import asyncio, sys, struct

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
def frame(t, flags, sid, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([t, flags]) + struct.pack(">I", sid) + payload

def rss(pid):
    for l in open(f"/proc/{pid}/status"):
        if l.startswith("VmRSS:"):
            return int(l.split()[1])

async def one(port, request, conns):
    r, w = await asyncio.open_connection("127.0.0.1", port)
    w.write(PREFACE + frame(4, 0, 0))
    if request:
        # HEADERS: :method GET, :scheme http, :path /v2/health/ready, :authority x (literal, no indexing)
        def lit(name, value):
            return bytes([0x00, len(name)]) + name + bytes([len(value)]) + value
        block = bytes([0x82, 0x86]) + lit(b":path", b"/v2/health/ready") + lit(b":authority", b"x")
        w.write(frame(1, 0x5, 1, block))
    await w.drain()
    conns.append((r, w))
    async def pump():
        try:
            while True:
                head = await r.readexactly(9)
                n = int.from_bytes(head[:3], "big"); t, flags = head[3], head[4]
                body = await r.readexactly(n)
                if t == 4 and not flags & 1:
                    w.write(frame(4, 1, 0)); await w.drain()
                elif t == 6 and not flags & 1:
                    w.write(frame(6, 1, 0, body)); await w.drain()
        except Exception:
            pass
    asyncio.ensure_future(pump())

async def main():
    port, n, pid = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    request = "--request" in sys.argv
    conns = []
    before = rss(pid)
    for i in range(0, n, 200):
        await asyncio.gather(*(one(port, request, conns) for _ in range(min(200, n - i))))
    await asyncio.sleep(3)
    after = rss(pid)
    alive = sum(1 for r, w in conns if not r.at_eof())
    print(f"{n} h2 connections ({'one request each' if request else 'no request'}), {alive} open: RSS {before} -> {after} KiB, {(after-before)*1024/n:.0f} B per connection")
    for r, w in conns:
        w.close()

asyncio.run(main())
