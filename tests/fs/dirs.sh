#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# dirs.sh - a directory a mount made itself, it knows every name of, and
# answers the lookup of a missing name without the agent (fs/dirs.c).
# Two mounts of one agent, default options; mount 1 counts its requests
# (-o metrics):
#   - 300 files created with O_EXCL in a directory mount 1 made cost it a
#     handful of LOOKUPs at most; in a directory mount 2 made, one each;
#   - the same for 60 directories of 5 creates each, made while mount 2
#     and (posix store, as root) a process on the agent's machine keep
#     creating and removing names in another directory mount 1 holds: news
#     of other objects does not cost mount 1 what it knows of its own
#     directories (none lost; one on a cephfs store, whose sweep may
#     reset every host), nor what it looks up elsewhere meanwhile (a
#     second stat of 100 names costs no request);
#   - a name mount 2 makes in a directory mount 1 made and looked a name
#     up in, is found through mount 1 within a second, and mount 1 asks
#     the agent again afterwards; the same for a name made straight in the
#     agent's store (posix: a process on the agent's machine; cephfs:
#     another Ceph client, told by the store's sweep: 30 s);
#   - every kind of name mount 1 makes in such a directory (create, mkdir,
#     symlink, link, mknod, a rename into it) is found after the kernel
#     forgot its entries (drop_caches, the directory held open);
#   - the knowledge lasts entry_timeout from the mkdir: with 1 s, a lookup
#     2 s later goes to the agent again;
#   - a name made in the store while no agent runs is found once the mount
#     reconnected to the restarted agent (the RESET forgets everything),
#     and a process whose working directory is there still has it.
. "$(dirname "$0")/lib.sh"
bcf_init
command -v python3 >/dev/null 2>&1 || bcf_skip "python3 is missing"

state=(--state-dir "$BCF_TMP/state")
bcf_listen_for_transport
agent_args+=("${state[@]}")
bcf_start_agent "$BCF_BACK" "$listen" "${agent_args[@]}" ||
	bcf_fail "bluecache-agent did not become ready"
agent=$listen
m1=$BCF_MNT
m2=$BCF_TMP/m2
bcf_mount_counted "$agent" "$opts"
bcf_mount_extra m2 "$agent" "$opts" || bcf_fail "mount 2 did not come up"
# posix: the agent watches its directory (--watch auto) only as root
store_within=1
[ "$(id -u)" = 0 ] || store_within=0
[ "${BCF_STORE:-posix}" = cephfs ] && store_within=30
# drop_caches makes the kernel forget entries; without it (not root) that
# part is left out
drop=/proc/sys/vm/drop_caches
[ -w "$drop" ] || drop=

PYTHONDONTWRITEBYTECODE=1 PYTHONPATH=$top_srcdir/tests/fs \
	timeout 300 python3 - "$m1" "$m2" \
	"$BCF_BACK" "$BCF_METRICS_PORT" "$store_within" "$drop" \
	"${BCF_STORE:-posix}" <<'PY' || bcf_fail "see above"
import os, stat, subprocess, sys, tempfile, time
from fscheck import fail
import fscheck

m1, m2, back, port, store_within, drop, store = sys.argv[1:8]
store_within = float(store_within)

def lookups():
    return fscheck.requests(port, "lookup")

def getattrs():
    return fscheck.requests(port, "getattr")

def missing(path):
    try:
        os.lstat(path)
        return False
    except FileNotFoundError:
        return True

def within(what, check, bound):
    return fscheck.within(what, check, bound)

def create_many(d, n):
    dfd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
    for i in range(n):
        fd = os.open("f%04d" % i, os.O_WRONLY | os.O_CREAT | os.O_EXCL,
                     0o644, dir_fd=dfd)
        os.write(fd, b"x" * 100)
        os.close(fd)
    os.close(dfd)

N = 300
# made here: the lookups before the creates are answered here
l0 = lookups()
os.mkdir(m1 + "/own")
create_many(m1 + "/own", N)
own = lookups() - l0
# made by mount 2: each create's lookup goes to the agent
os.mkdir(m2 + "/other")
l0 = lookups()
create_many(m1 + "/other", N)
other = lookups() - l0
print("LOOKUPs for %d creates: %d in a directory made here, %d in one "
      "made elsewhere" % (N, own, other))
if own > 10:
    fail("%d LOOKUPs for %d files created in a directory made here" %
         (own, N))
if other < N:
    fail("only %d LOOKUPs for %d files created in a directory made "
         "elsewhere: is it known in full?" % (other, N))
if sorted(os.listdir(m2 + "/own")) != ["f%04d" % i for i in range(N)]:
    fail("mount 2 does not list what mount 1 created")

# the same while names change elsewhere: mount 1 holds "churn", where
# mount 2 and a process on the agent's machine create and remove names
# (each removed file's number free for the next mkdir to take)
os.mkdir(m1 + "/churn")
missing(m1 + "/churn/nothing")
S = 100
os.mkdir(m2 + "/seen")
for i in range(S):
    with open(m2 + "/seen/s%03d" % i, "w") as f:
        f.write("seen\n")
churn = r"""
import os, sys, time
d, rate, stop = sys.argv[1], float(sys.argv[2]), sys.argv[3]
t0 = time.monotonic()
i = 0
while not os.path.exists(stop) and time.monotonic() - t0 < 60:
    p = "%s/c%d-%d" % (d, os.getpid(), i % 16)
    try:
        if i % 32 < 16:
            os.close(os.open(p, os.O_WRONLY | os.O_CREAT, 0o644))
        else:
            os.unlink(p)
    except OSError:
        pass
    i += 1
    if rate:
        time.sleep(max(0.0, t0 + i / rate - time.monotonic()))
"""
stopdir = tempfile.mkdtemp()
stopfile = stopdir + "/stop"
churners = [subprocess.Popen([sys.executable, "-c", churn, m2 + "/churn",
                              "0", stopfile]) for _ in range(2)]
if store == "posix" and store_within > 0:
    churners.append(subprocess.Popen([sys.executable, "-c", churn,
                                      back + "/churn", "4000", stopfile]))
time.sleep(0.5)
D, F = 60, 5
misses = 0
for i in range(D):
    d = m1 + "/busy%02d" % i
    os.mkdir(d)
    l0 = lookups()
    create_many(d, F)
    if lookups() != l0:
        misses += 1
# names mount 1 looks up meanwhile are cached: the second look is free
for i in range(S):
    os.stat(m1 + "/seen/s%03d" % i)
r0 = lookups() + getattrs()
for i in range(S):
    os.stat(m1 + "/seen/s%03d" % i)
asked = lookups() + getattrs() - r0
with open(stopfile, "w"):
    pass
for c in churners:
    c.wait()
os.unlink(stopfile)
os.rmdir(stopdir)
print("%d of %d directories made here while names changed elsewhere asked "
      "the agent for a missing name" % (misses, D))
if misses > (1 if store == "cephfs" else 0):
    fail("%d of %d directories made here forgot they were empty while "
         "other names changed" % (misses, D))
print("%d requests to stat %d names again while names changed elsewhere"
      % (asked, S))
if asked > (2 if store == "cephfs" else 0):
    fail("%d requests to stat %d names looked up a moment before: news "
         "of other names made them uncached" % (asked, S))

# a name mount 2 makes: found within a second, then the agent is asked
os.mkdir(m1 + "/told")
if not missing(m1 + "/told/x"):
    fail("told/x exists before it was made")
with open(m2 + "/told/x", "w") as f:
    f.write("from mount 2\n")
within("a name mount 2 made is found",
       lambda: os.stat(m1 + "/told/x").st_size == 13, 1.0)
l0 = lookups()
if not missing(m1 + "/told/y"):
    fail("told/y exists")
if lookups() == l0:
    fail("after a name was made elsewhere, a missing one is still "
         "answered without the agent")

# a name made in the store itself
if store_within > 0:
    os.mkdir(m1 + "/store")
    if not missing(m1 + "/store/z"):
        fail("store/z exists before it was made")
    with open(back + "/store/z", "w") as f:
        f.write("from the store\n")
    within("a name made in the store is found",
           lambda: os.stat(m1 + "/store/z").st_size == 15, store_within)
else:
    print("not root: the agent does not watch its directory; "
          "a name made in the store is not tried")

# every kind of name made here, once the kernel forgot it
d = m1 + "/kinds"
os.mkdir(d)
dfd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
with open(d + "/a", "w") as f:
    f.write("a\n")
os.mkdir(d + "/b")
os.symlink("a", d + "/c")
os.link(d + "/a", d + "/e")
os.mkfifo(d + "/p")
with open(m1 + "/moved", "w") as f:
    f.write("moved\n")
os.rename(m1 + "/moved", d + "/m")
names = ["a", "b", "c", "e", "m", "p"]
if drop:
    with open(drop, "w") as f:
        f.write("2\n")
l0 = lookups()
for n in names:
    if missing(d + "/" + n):
        fail("kinds/%s made here is not found after the kernel forgot it"
             % n)
print("%d LOOKUPs for %d names after drop_caches" % (lookups() - l0,
                                                      len(names)))
if not missing(d + "/nothing"):
    fail("kinds/nothing exists")
if sorted(os.listdir(d)) != names:
    fail("kinds lists %s" % sorted(os.listdir(d)))
os.close(dfd)
sys.exit(fscheck.status())
PY

# as long as a negative entry: entry_timeout=1, then the agent is asked
bcf_mount_extra m3 "$agent" "$opts,entry_timeout=1,metrics=127.0.0.1:0" ||
	bcf_fail "mount 3 did not come up"
port3=$(sed -n 's|.*metrics on http://[^ ]*:\([0-9]*\)/metrics.*|\1|p' \
	"$BCF_TMP/fs-m3.log" | tail -1)
[ -n "$port3" ] || bcf_fail "mount 3 did not say where its metrics are"
lookups3()
{
	python3 "$top_srcdir/tests/fs/metrics-http.py" get \
		"http://127.0.0.1:$port3/metrics" |
		awk '$1 == "bluecachefs_requests_total{op=\"lookup\"}" {
			print int($2) }'
}
m3=$BCF_TMP/m3
# back to back: the knowledge lasts only a second from the mkdir, and a
# loaded machine may take that long to ask for the counts in between
l0=$(lookups3)
mkdir "$m3/short" || bcf_fail "mkdir short"
[ -e "$m3/short/a" ] && bcf_fail "short/a exists"
l1=$(lookups3)
bcf_eq "LOOKUPs for a new name and a missing one in it at once" \
	"$((l0 + 1))" "$l1"
sleep 2
# from inside: a path through short would look short up again too
(cd "$m3/short" && for n in b1 b2 b3 b4 b5; do
	[ -e "$n" ] && exit 1
done; exit 0) || bcf_fail "short/b* exist"
l2=$(lookups3)
[ "$l2" -ge $((l1 + 5)) ] ||
	bcf_fail "2 s after the mkdir, with entry_timeout=1, $((l2 - l1)) LOOKUPs for 5 missing names"
bcf_umount_extra m3 || bcf_fail "mount 3 did not unmount"

# made in the store while no agent ran: found after the reconnect
mkdir "$m1/restart" || bcf_fail "mkdir restart"
[ -e "$m1/restart/r" ] && bcf_fail "restart/r exists before it was made"
# a process whose working directory is in the mount keeps it through
# the reconnect's RESET: the kernel is told to look names up again, not
# to forget them (getcwd() of a forgotten directory fails with ENOENT)
(
	cd "$m1/restart" || exit 1
	n=0
	until [ -e "$BCF_TMP/cwd.go" ] || [ $n -gt 300 ]; do
		sleep 0.05
		n=$((n + 1))
	done
	/bin/pwd -P > "$BCF_TMP/cwd.out" 2>&1
) &
cwd_pid=$!
kill -KILL "$BCF_AGENT_PID"
wait "$BCF_AGENT_PID" 2>/dev/null
BCF_AGENT_PID=
printf 'made while no agent ran\n' > "$BCF_BACK/restart/r" ||
	bcf_fail "cannot make restart/r in the store"
bcf_start_agent "$BCF_BACK" "$listen" "${agent_args[@]}" ||
	bcf_fail "bluecache-agent did not start again"
n=0
until [ -e "$m1/restart/r" ]; do
	n=$((n + 1))
	[ $n -gt 100 ] && bcf_fail "restart/r not found 10 s after the restart"
	sleep 0.1
done
bcf_log "restart/r found $((n / 10)).$((n % 10)) s after the restart"
bcf_eq "restart/r read" "made while no agent ran" "$(cat "$m1/restart/r")"
touch "$BCF_TMP/cwd.go"
wait "$cwd_pid"
bcf_eq "the working directory after the reconnect" "$m1/restart" \
	"$(cat "$BCF_TMP/cwd.out")"
echo PASS
