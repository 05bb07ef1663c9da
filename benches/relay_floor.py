#!/usr/bin/env python3
"""The kernel's floor for relaying a stream event by event, on the machine it
runs on (docs/performance.md, "OpenAI streams"): a relay that does only what
any per-event relay must -- wait for readiness (epoll), one recv from the
upstream, one send to the client, no batching -- between an upstream writing
STREAMS streams of SIZE-byte messages, out of step (one every GAP_MS / STREAMS,
to each stream in turn, as independent clients' would be), and a client
reading them. Prints the relay process's user and system CPU per event
(`os.times`). The system part is what the kernel charges for those three
calls whatever language makes them; the user part is Python's and not the
point. No gateway is involved.

Usage: benches/relay_floor.py [EVENTS_PER_STREAM]   (default 2000)
"""
import multiprocessing as mp
import os
import selectors
import socket
import sys
import time

STREAMS, GAP_MS, SIZE = 4, 2.0, 120
EVENTS = int(sys.argv[1]) if len(sys.argv) > 1 else 2000


def listener(port_q):
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    port_q.put(srv.getsockname()[1])
    conns = [srv.accept()[0] for _ in range(STREAMS)]
    for c in conns:
        c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return conns


def upstream(port_q):
    conns = listener(port_q)
    msg = b"x" * SIZE
    step = GAP_MS / 1000 / STREAMS
    for i in range(EVENTS * STREAMS):
        started = time.perf_counter()
        conns[i % STREAMS].sendall(msg)
        time.sleep(max(0.0, step - (time.perf_counter() - started)))
    for c in conns:
        c.close()


def client(port_q, done_q):
    conns = listener(port_q)
    sel = selectors.DefaultSelector()
    for c in conns:
        sel.register(c, selectors.EVENT_READ)
    got, open_ = 0, STREAMS
    while open_:
        for key, _ in sel.select():
            data = key.fileobj.recv(65536)
            if not data:
                sel.unregister(key.fileobj)
                open_ -= 1
            got += len(data)
    done_q.put(got)


def main():
    up_q, cl_q, done_q = mp.Queue(), mp.Queue(), mp.Queue()
    sink = mp.Process(target=client, args=(cl_q, done_q))
    sink.start()
    sink_port = cl_q.get()
    outs = [socket.create_connection(("127.0.0.1", sink_port)) for _ in range(STREAMS)]
    source = mp.Process(target=upstream, args=(up_q,))
    source.start()
    port = up_q.get()
    ins = [socket.create_connection(("127.0.0.1", port)) for _ in range(STREAMS)]
    sel = selectors.EpollSelector()
    for i, o in zip(ins, outs):
        o.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sel.register(i, selectors.EVENT_READ, o)
    before = os.times()
    waits = reads = 0
    open_ = STREAMS
    while open_:
        waits += 1
        for key, _ in sel.select():
            data = key.fileobj.recv(65536)
            reads += 1
            if not data:
                sel.unregister(key.fileobj)
                key.data.close()
                open_ -= 1
                continue
            key.data.sendall(data)  # one write per read: no batching
    after = os.times()
    source.join()
    got = done_q.get()
    sink.join()
    n = STREAMS * EVENTS
    assert got == n * SIZE, (got, n * SIZE)
    print("events %d (recv %d, epoll_wait %d)" % (n, reads, waits))
    print("relay CPU per event: user %.1f us, system %.1f us" % (
        (after.user - before.user) / n * 1e6, (after.system - before.system) / n * 1e6))


if __name__ == "__main__":
    main()
