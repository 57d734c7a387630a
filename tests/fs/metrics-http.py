#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
# metrics-http.py: the HTTP side of tests/fs/metrics.sh and
# tests/agent/metrics.sh, with the standard library only.
#   get URL            print the body (exit 1 unless the status is 200)
#   loop N URL...      get every URL N times (exit 1 at the first failure)
#   status URL [METHOD] print the status code
#   hostile SECONDS HOST:PORT...  hold 200 connections to each endpoint
#       for SECONDS: half send nothing, half a request never finished
#       (a header line without its end), then close them; prints how many
#       connected (an endpoint at its connection limit leaves the rest in
#       its backlog or refuses them).
import http.client
import socket
import sys
import time
import urllib.error
import urllib.request


def get(url):
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            sys.stdout.write(r.read().decode())
            return 0
    except urllib.error.HTTPError as e:
        sys.stdout.write(e.read().decode())
        return 1


def loop(n, urls):
    for i in range(n):
        for u in urls:
            with urllib.request.urlopen(u, timeout=10) as r:
                r.read()
    return 0


def status(url, method="GET"):
    host = url.split("/")[2]
    path = "/" + "/".join(url.split("/")[3:])
    c = http.client.HTTPConnection(host, timeout=10)
    c.request(method, path)
    print(c.getresponse().status)
    return 0


def hostile(seconds, targets):
    socks = []
    deadline = time.monotonic() + seconds
    for t in targets:
        host, port = t.rsplit(":", 1)
        for i in range(200):
            s = socket.socket()
            s.setblocking(False)
            s.connect_ex((host, int(port)))
            socks.append(s)
    time.sleep(0.5)
    held = 0
    for i, s in enumerate(socks):
        try:
            s.getpeername()
        except OSError:
            continue
        held += 1
        if i % 2:
            try:
                s.send(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
            except OSError:
                pass
    print(held)
    sys.stdout.flush()
    time.sleep(max(0.0, deadline - time.monotonic()))
    for s in socks:
        s.close()
    return 0


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "get":
        sys.exit(get(sys.argv[2]))
    if cmd == "loop":
        sys.exit(loop(int(sys.argv[2]), sys.argv[3:]))
    if cmd == "status":
        sys.exit(status(*sys.argv[2:4]))
    if cmd == "hostile":
        sys.exit(hostile(float(sys.argv[2]), sys.argv[3:]))
    sys.exit(99)
