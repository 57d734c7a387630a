# SPDX-License-Identifier: GPL-2.0-or-later
"""fscheck.py - what the Python parts of the FUSE tests share: failures
counted rather than fatal, waiting for a change to show, and a mount's
request counts from its metrics endpoint (-o metrics)."""
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


def requests(port, op):
    """Requests of op the mount whose metrics are on port sent the agent."""
    url = "http://127.0.0.1:%s/metrics" % port
    key = 'bluecachefs_requests_total{op="%s"}' % op
    with urllib.request.urlopen(url, timeout=10) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(key + " "):
                return int(float(line.split()[1]))
    return 0
