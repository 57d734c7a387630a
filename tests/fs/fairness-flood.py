#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
#
# fairness-flood.py - hold many unauthenticated connections to an agent.
#
# Usage: fairness-flood.py SOCKET COUNT STATUSFILE
# Opens up to COUNT unix connections to SOCKET; each sends one valid HELLO
# (doc/protocol.md 4.1) and then nothing, never AUTH.  A connection the
# agent closes is opened again at once, a refused connect is retried after
# 10 ms.  Every half second STATUSFILE gets "open N opened N dropped N".
# Runs until SIGTERM.
import os
import resource
import selectors
import signal
import socket
import struct
import sys
import time

BCP_MAGIC = 0x31464342
BCP_OP_HELLO = 1
BCP_FEAT_TCP_DATA = 1 << 1


def hello():
    body = struct.pack('<HHIQ', 1, 1, 0, BCP_FEAT_TCP_DATA) + os.urandom(32)
    hdr = struct.pack('<IHHIIQiI', BCP_MAGIC, 1, BCP_OP_HELLO, 0, len(body),
                      1, 0, 0)
    return hdr + body


def main():
    path, count, status = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(hard, count + 64) if hard != resource.RLIM_INFINITY \
        else count + 64
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    count = min(count, want - 64)
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
    sel = selectors.DefaultSelector()
    opened = dropped = 0
    last = 0.0
    while True:
        while len(sel.get_map()) < count:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(0.2)
            try:
                s.connect(path)
                s.sendall(hello())
            except OSError:
                s.close()
                time.sleep(0.01)
                break
            s.setblocking(False)
            sel.register(s, selectors.EVENT_READ)
            opened += 1
        for key, _ in sel.select(timeout=0.05):
            s = key.fileobj
            try:
                data = s.recv(65536)
            except BlockingIOError:
                continue
            except OSError:
                data = b''
            if not data:
                sel.unregister(s)
                s.close()
                dropped += 1
        now = time.monotonic()
        if now - last >= 0.5:
            last = now
            with open(status + '.tmp', 'w') as f:
                f.write('open %d opened %d dropped %d\n' %
                        (len(sel.get_map()), opened, dropped))
            os.replace(status + '.tmp', status)


main()
