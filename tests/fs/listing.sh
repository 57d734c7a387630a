#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# listing.sh - the kernel keeps a directory's listing while the agent
# tells of changes (fs/ops_dir.c), and a kept listing is always right.
# One agent that does not watch its directory (--watch no: what changes
# there is told to nobody), two mounts of it; mount 1 counts its requests
# (-o metrics), mount 2 keeps names 1 s (-o entry_timeout=1):
#   - 40 listings of a directory of 200 names in a row cost mount 1 the
#     READDIRs of one (without the cache: 40 times as many);
#   - each change mount 1 makes in it (create, remove, rename in it, in,
#     out, mkdir, rmdir, a hard link, a symlink) is listed at once;
#   - a change mount 2 makes is listed through mount 1 within a second
#     (the agent tells);
#   - a change made in the agent's directory, which nobody is told of, is
#     listed through mount 2 within entry_timeout (a kept listing is never
#     older than the names it brought);
#   - seekdir back to a telldir position of a kept listing reads the same
#     names on;
#   - the next part of a listing, read ahead while the kernel takes in
#     one, is whole, and is not what the kernel is told of a name this
#     mount changed (chmod and a write, an unlink) after it was read;
#     read ahead with attributes, it answers a READDIR without them.
. "$(dirname "$0")/lib.sh"
bcf_init
command -v python3 >/dev/null 2>&1 || bcf_skip "python3 is missing"
[ "${BCF_STORE:-posix}" = posix ] || bcf_skip "the agent's directory is a posix store's"

bcf_listen_for_transport
bcf_start_agent "$BCF_BACK" "$listen" "${agent_args[@]}" --watch no ||
	bcf_fail "bluecache-agent did not become ready"
m1=$BCF_MNT
m2=$BCF_TMP/m2
bcf_mount_counted "$listen" "$opts"
bcf_mount_extra m2 "$listen" "$opts,entry_timeout=1" ||
	bcf_fail "mount 2 did not come up"

PYTHONDONTWRITEBYTECODE=1 PYTHONPATH=$top_srcdir/tests/fs \
	timeout 300 python3 - "$m1" "$m2" "$BCF_BACK" "$BCF_METRICS_PORT" \
	<<'PY' || bcf_fail "see above"
import ctypes, os, sys, time, urllib.request
from fscheck import fail, undisturbed
import fscheck

m1, m2, back, port = sys.argv[1:5]

def readdirs():
    url = "http://127.0.0.1:%s/metrics" % port
    text = urllib.request.urlopen(url, timeout=10).read().decode()
    for line in text.splitlines():
        if line.startswith('bluecachefs_requests_total{op="readdir"}'):
            return int(float(line.split()[1]))
    fail("mount 1's metrics have no readdir count")
    return 0

def listing(d):
    return sorted(os.listdir(d))

def check(what, d, want):
    got = listing(d)
    if got != sorted(want):
        fail("%s: %s lists %s, expected %s" % (what, d, got, sorted(want)))

def within(what, secs, d, want):
    end = time.monotonic() + secs
    while listing(d) != sorted(want):
        if time.monotonic() > end:
            check(what + " (after %g s)" % secs, d, want)
            return
        time.sleep(0.05)

d1 = os.path.join(m1, "d")
os.mkdir(d1)
names = ["f%03d" % i for i in range(200)]
for n in names:
    open(os.path.join(d1, n), "w").close()

# listed once, then kept
check("first listing", d1, names)
def listings(n):
    r0 = readdirs()
    check("second listing", d1, names)
    one = max(readdirs() - r0, 1)
    r0 = readdirs()
    for i in range(40):
        check("listing %d" % i, d1, names)
    asked = readdirs() - r0
    print("READDIRs of one listing: %d; of 40 in a row: %d" % (one, asked))
    return one, asked
one, asked = undisturbed("the kept listing", listings) or (1, 0)
if asked > one:
    fail("40 listings in a row asked the agent %d times (one: %d)"
         % (asked, one))

# every change of this mount is listed at once
def change(what, f, want):
    f()
    check("after " + what, d1, want)
    names[:] = want

change("a create", lambda: open(os.path.join(d1, "new"), "w").close(),
       names + ["new"])
change("a remove", lambda: os.unlink(os.path.join(d1, "f000")),
       [n for n in names if n != "f000"])
change("a rename in the directory",
       lambda: os.rename(os.path.join(d1, "new"), os.path.join(d1, "newer")),
       [n for n in names if n != "new"] + ["newer"])
open(os.path.join(m1, "outside"), "w").close()
change("a rename into it",
       lambda: os.rename(os.path.join(m1, "outside"),
                         os.path.join(d1, "inside")),
       names + ["inside"])
change("a rename out of it",
       lambda: os.rename(os.path.join(d1, "inside"),
                         os.path.join(m1, "outside")),
       [n for n in names if n != "inside"])
change("a mkdir", lambda: os.mkdir(os.path.join(d1, "sub")),
       names + ["sub"])
change("an rmdir", lambda: os.rmdir(os.path.join(d1, "sub")),
       [n for n in names if n != "sub"])
change("a hard link",
       lambda: os.link(os.path.join(d1, "f001"), os.path.join(d1, "hard")),
       names + ["hard"])
change("a symlink",
       lambda: os.symlink("f001", os.path.join(d1, "soft")),
       names + ["soft"])

# another mount's change: the agent tells mount 1
d2 = os.path.join(m2, "d")
check("mount 2's listing", d2, names)
open(os.path.join(d2, "from2"), "w").close()
within("mount 2's create, through mount 1", 1, d1, names + ["from2"])
names.append("from2")
os.unlink(os.path.join(d2, "from2"))
within("mount 2's remove, through mount 1", 1, d1,
       [n for n in names if n != "from2"])
names.remove("from2")

# told to nobody: mount 2 keeps its listing entry_timeout (1 s) at most
check("mount 2's listing again", d2, names)
open(os.path.join(back, "d", "behind"), "w").close()
within("a name made behind the agent, through mount 2", 3, d2,
       names + ["behind"])
names.append("behind")

# seekdir to a telldir position of a kept listing
libc = ctypes.CDLL(None, use_errno=True)
libc.opendir.restype = ctypes.c_void_p
libc.opendir.argtypes = [ctypes.c_char_p]
libc.readdir.restype = ctypes.c_void_p
libc.readdir.argtypes = [ctypes.c_void_p]
libc.telldir.restype = ctypes.c_long
libc.telldir.argtypes = [ctypes.c_void_p]
libc.seekdir.argtypes = [ctypes.c_void_p, ctypes.c_long]
libc.closedir.argtypes = [ctypes.c_void_p]
OFF_NAME = 19		# struct dirent64: d_ino, d_off, d_reclen, d_type

def rest(dp):
    out = []
    while True:
        e = libc.readdir(dp)
        if not e:
            return out
        out.append(ctypes.string_at(e + OFF_NAME).decode())

for k in range(2):		# filled, then kept
    dp = libc.opendir(d1.encode())
    if not dp:
        fail("opendir %s" % d1)
        break
    for i in range(100):
        libc.readdir(dp)
    pos = libc.telldir(dp)
    tail = rest(dp)
    libc.seekdir(dp, pos)
    again = rest(dp)
    libc.closedir(dp)
    if not tail or tail != again:
        fail("listing %d: %d names after telldir, %d after seekdir there"
             % (k, len(tail), len(again)))

# read ahead: each getdents64 is one READDIR(PLUS) part; the next part is
# read while this mount changes a name in it
libc.syscall.restype = ctypes.c_long
SYS_getdents64 = 217

def getdents(fd):
    buf = ctypes.create_string_buffer(32768)
    n = libc.syscall(SYS_getdents64, fd, buf, len(buf))
    if n < 0:
        fail("getdents64: errno %d" % ctypes.get_errno())
        return None
    out, pos = [], 0
    while pos < n:
        reclen = int.from_bytes(buf.raw[pos + 16:pos + 18], "little")
        name = buf.raw[pos + OFF_NAME:pos + reclen].split(b"\0")[0]
        out.append(name.decode())
        pos += reclen
    return out

big = os.path.join(m1, "big")
os.mkdir(big)
for i in range(1500):
    open(os.path.join(big, "b%04d" % i), "w").close()
order = os.listdir(os.path.join(back, "big"))	# the agent's order

def write_file(path, data):
    with open(path, "wb") as f:
        f.write(data)

def look(names):
    # as ls -l: the kernel then asks for the next part with attributes
    for n in names:
        if n not in (".", ".."):
            os.lstat(os.path.join(big, n))

def parts(act, looking=True):
    fd = os.open(big, os.O_RDONLY | os.O_DIRECTORY)
    first = getdents(fd)
    if looking:
        look(first)
    got = list(first)
    victim = None
    last = [n for n in first if n in order]
    if act and last:
        i = order.index(last[-1]) + 1
        if i < len(order):
            victim = order[i]	# the first name of the part read ahead
            time.sleep(0.3)
            act(victim)
    while True:
        more = getdents(fd)
        if not more:
            break
        if looking:
            look(n for n in more if n != victim)
        got += more
    os.close(fd)
    return got, victim

def whole(what, got):
    want = sorted(os.listdir(os.path.join(back, "big")) + [".", ".."])
    if sorted(got) != want:
        fail("a listing of %d names %s: %d names, %d missing, %d twice"
             % (len(want), what, len(got), len(set(want) - set(got)),
                len(got) - len(set(got))))

for k, (what, act, check_victim) in enumerate([
        ("nothing", None, None),
        ("a chmod and a write",
         lambda v: (os.chmod(os.path.join(big, v), 0o600),
                    write_file(os.path.join(big, v), b"changed")),
         lambda st: st is not None and
         (st.st_mode & 0o7777, st.st_size) == (0o600, 7)),
        ("an unlink", lambda v: os.unlink(os.path.join(big, v)),
         lambda st: st is None)]):
    # a change to the directory drops the listing the kernel kept
    open(os.path.join(big, "bump%d" % k), "w").close()
    order = os.listdir(os.path.join(back, "big"))
    got, victim = parts(act)
    if act is None:
        whole("read in parts", got)
        continue
    if victim is None:
        fail("%s: the first part held the whole listing" % what)
        continue
    try:
        st = os.lstat(os.path.join(big, victim))
    except FileNotFoundError:
        st = None
    if not check_victim(st):
        fail("after %s of %s between two parts of its listing, it is %s"
             % (what, victim, "gone" if st is None else
                "mode %o size %d" % (st.st_mode & 0o7777, st.st_size)))

# as ls: nobody looks at the names, so the kernel asks for the parts after
# the first without attributes; the part read ahead with them answers
open(os.path.join(big, "bump-ls"), "w").close()
whole("nobody looked at", parts(None, looking=False)[0])
sys.exit(fscheck.status())
PY
bcf_umount
echo PASS
