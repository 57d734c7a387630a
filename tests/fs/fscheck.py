# SPDX-License-Identifier: GPL-2.0-or-later
"""fscheck.py - what the Python parts of the FUSE tests share: failures
counted rather than fatal, waiting for a change to show, a mount's
request counts from its metrics endpoint (-o metrics), and counts taken
again when something else emptied the kernel's caches meanwhile."""
import sys
import time
import urllib.request

failed = 0


def fail(what):
    """Report a failure and go on; exit with status() at the end."""
    global failed
    print("FAIL: " + what, file=sys.stderr)
    failed += 1


def status():
    return 1 if failed else 0


def within(what, check, bound):
    """check() true within bound seconds, polled every 10 ms; an OSError
    counts as not yet.  Prints how long it took."""
    t0 = time.monotonic()
    while True:
        try:
            if check():
                print("%s: %.3f s" % (what, time.monotonic() - t0))
                return True
        except OSError:
            pass
        if time.monotonic() - t0 > bound:
            fail("%s: not within %.1f s" % (what, bound))
            return False
        time.sleep(0.01)


def metrics(port):
    """The lines of the metrics endpoint of the mount on port."""
    url = "http://127.0.0.1:%s/metrics" % port
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.read().decode().splitlines()


def requests(port, op):
    """Requests of op the mount whose metrics are on port sent the agent."""
    key = 'bluecachefs_requests_total{op="%s"}' % op
    for line in metrics(port):
        if line.startswith(key + " "):
            return int(float(line.split()[1]))
    return 0


def drops():
    """How often the kernel's caches were dropped (drop_caches, by any
    program: another test running beside this one, say)."""
    try:
        with open("/proc/vmstat") as f:
            return [l for l in f if l.startswith(("drop_pagecache ",
                                                  "drop_slab "))]
    except OSError:
        return []


def notices(port):
    """Notifications of changes the mount whose metrics are on port had
    from its agent, of every kind."""
    return sum(int(float(l.split()[1])) for l in metrics(port)
               if l.startswith("bluecachefs_notices_total{"))


def undisturbed(what, run, tries=3, port=None):
    """run(n): its result, from a run (n = 0, 1, ..) during which nothing
    dropped the kernel's caches (the pages or entries a count of requests
    relies on are gone then); None, said so, when each run was.  With
    port (a mount's metrics), a run whose result is not 0 while the agent
    told that mount of changes is taken again too (a store may report a
    change of its own, which drops the pages it names), but the last
    try's result stands whatever it was told."""
    for n in range(tries):
        d0 = drops()
        k0 = notices(port) if port else 0
        r = run(n)
        if drops() != d0:
            print("%s: the kernel's caches were dropped meanwhile" % what)
            continue
        k = notices(port) - k0 if port else 0
        if r and k and n + 1 < tries:
            print("%s: %d notifications of changes came meanwhile" %
                  (what, k))
            continue
        return r
    print("%s: not judged, the caches were dropped during each of %d "
          "runs" % (what, tries))
    return None
