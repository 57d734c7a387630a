#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""namespace-check.py - random operations on names, compared with a local
directory.

Usage: namespace-check.py TESTDIR REFDIR [OPS]

Applies the same random operations to TESTDIR (a mount) and REFDIR (a
local directory) on a small set of names two levels deep: mkdir, rmdir,
unlink, rename (plain, RENAME_NOREPLACE, RENAME_EXCHANGE), link, symlink,
creating, truncating and appending files, fallocate (hole punching
too), chmod, chown (as root), utimensat, setting,
removing and reading an extended attribute, readlink, reads, stats and
listings, and reads, writes and fstat through
descriptors kept open across all of that.  Every result (the value, or
the errno) must be the reference's.  After a change, whether it moved
the mtime and the ctime of the names it touched and of their
directories must be the reference's too; so must the whole tree every 50
operations.

Environment:
  BCF_SEED=N           replay a run (the seed is printed first)
  NS_NO_EXCHANGE=1     leave RENAME_EXCHANGE out (a store without it)
  NS_SECOND=DIR        a second mount of the same agent: every change is
                       made through either mount at random, and after
                       each one every name must look the same through
                       the other within a second (their mtime and ctime
                       those the first mount shows), and so must reads
                       and fstat through descriptors kept open there
Exit 0 when everything matched, 1 after the first differences (at most
20 are shown).
"""
import ctypes
import errno
import os
import random
import stat
import sys
import time

libc = ctypes.CDLL(None, use_errno=True)
RENAME_NOREPLACE, RENAME_EXCHANGE = 1, 2
FALLOC_KEEP_SIZE, FALLOC_PUNCH_HOLE = 1, 2
AT_FDCWD = -100
NAMES = ["a", "b", "c", "d", "a/x", "a/y", "b/x", "b/z", "a/x/q", "d/q"]
# longer than a clock tick of HZ=100, so that a change moves a coarse time
PAUSE = 0.012


def renameat2(a, b, flags):
    if libc.renameat2(AT_FDCWD, a.encode(), AT_FDCWD, b.encode(), flags) < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


def res(f, *a):
    """('ok', value) or ('err', errno name)"""
    try:
        return ("ok", f(*a))
    except OSError as e:
        return ("err", errno.errorcode.get(e.errno, e.errno))


def summary(s):
    return (stat.S_IFMT(s.st_mode), stat.S_IMODE(s.st_mode),
            -1 if stat.S_ISDIR(s.st_mode) else s.st_size, s.st_nlink,
            s.st_uid, s.st_gid)


def lstat(p):
    return summary(os.lstat(p))


def listing(p):
    return sorted(os.listdir(p))


def content(p):
    with open(p, "rb") as f:
        return f.read()


def times(p):
    try:
        s = os.lstat(p)
        return (s.st_mtime_ns, s.st_ctime_ns)
    except OSError:
        return None


def write_to(p, flags, data):
    fd = os.open(p, flags)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def fallocate(p, mode, off, length):
    fd = os.open(p, os.O_WRONLY | os.O_NONBLOCK)
    try:
        if libc.fallocate(fd, mode, ctypes.c_long(off),
                          ctypes.c_long(length)) < 0:
            e = ctypes.get_errno()
            raise OSError(e, os.strerror(e))
    finally:
        os.close(fd)


def do(op, base, a, b, data, mode):
    pa = os.path.join(base, a)
    pb = os.path.join(base, b)
    if op == "mkdir":
        return os.mkdir(pa, mode)
    if op == "rmdir":
        return os.rmdir(pa)
    if op == "unlink":
        return os.unlink(pa)
    if op == "rename":
        return os.rename(pa, pb)
    if op == "noreplace":
        return renameat2(pa, pb, RENAME_NOREPLACE)
    if op == "exchange":
        return renameat2(pa, pb, RENAME_EXCHANGE)
    if op == "link":
        return os.link(pa, pb, follow_symlinks=False)
    if op == "symlink":
        return os.symlink(b, pa)
    if op == "create":
        fd = os.open(pa, os.O_CREAT | os.O_EXCL | os.O_WRONLY, mode)
        os.write(fd, data)
        return os.close(fd)
    if op == "trunc":
        return write_to(pa, os.O_WRONLY | os.O_TRUNC, data)
    if op == "append":
        return write_to(pa, os.O_WRONLY | os.O_APPEND, data)
    if op == "truncate":
        return os.truncate(pa, len(data) * 3)
    if op == "chmod":
        return os.chmod(pa, mode)
    if op == "chown":
        # to the owner it has or to nobody: chown(2) marks ctime either
        # way, and clears set-ID bits
        own = 0 if mode & 0o100 else 65534
        return os.chown(pa, own, own if mode & 0o10 else -1,
                        follow_symlinks=False)
    if op == "fallocate":
        # 4 KiB from len(data): past the size (half the time), kept to
        # it, or a hole punched
        return fallocate(pa, (0, 0, FALLOC_KEEP_SIZE,
                              FALLOC_KEEP_SIZE | FALLOC_PUNCH_HOLE)[
                                  len(data) % 4], len(data), 4096)
    if op == "utime":
        return os.utime(pa, ns=(10**18, 15 * 10**17), follow_symlinks=False)
    if op == "setxattr":
        return os.setxattr(pa, "user.k", data)
    if op == "rmxattr":
        return os.removexattr(pa, "user.k")
    if op == "getxattr":
        return (os.getxattr(pa, "user.k"), sorted(os.listxattr(pa)))
    if op == "readlink":
        return os.readlink(pa)
    if op == "read":
        return content(pa)
    if op == "stat":
        return lstat(pa)
    if op == "list":
        return listing(pa)
    raise ValueError(op)


QUERIES = ("readlink", "read", "stat", "list", "getxattr")


def main():
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    test, ref = sys.argv[1], sys.argv[2]
    nops = int(sys.argv[3]) if len(sys.argv) > 3 else 1500
    second = os.environ.get("NS_SECOND")
    seed = int(os.environ.get("BCF_SEED") or random.randrange(1 << 30))
    print("seed %d (BCF_SEED=%d replays it)" % (seed, seed), flush=True)
    rng = random.Random(seed)
    ops = ["mkdir", "rmdir", "unlink", "rename", "noreplace", "link",
           "symlink", "create", "trunc", "append", "truncate", "chmod",
           "fallocate",
           "utime", "setxattr", "rmxattr", "getxattr", "readlink", "read",
           "stat", "list", "openkeep", "fdop"]
    if not os.environ.get("NS_NO_EXCHANGE"):
        ops.append("exchange")
    if os.geteuid() == 0:
        ops.append("chown")
    fds = []			# (test fd, reference fd, name, its mount)
    last = test			# the mount the last change went through
    bad = 0

    def differs(what):
        nonlocal bad
        print(what, flush=True)
        bad += 1

    for i in range(nops):
        op = rng.choice(ops)
        a, b = rng.choice(NAMES), rng.choice(NAMES)
        data = bytes(rng.randrange(256) for _ in range(rng.randrange(50)))
        mode = rng.choice([0o755, 0o644, 0o600, 0o700, 0o777])
        where = test
        if second and rng.random() < 0.5:
            where = second
        if op == "openkeep":
            t = res(os.open, os.path.join(where, a), os.O_RDWR)
            r = res(os.open, os.path.join(ref, a), os.O_RDWR)
            if t[0] == "ok" and r[0] == "ok":
                fds.append((t[1], r[1], a, where))
                if len(fds) > 6:
                    x = fds.pop(0)
                    os.close(x[0])
                    os.close(x[1])
                t = r = ("ok", None)
            elif t[0] == "ok":
                os.close(t[1])
            elif r[0] == "ok":
                os.close(r[1])
        elif op == "fdop":
            if not fds:
                continue
            tf, rf, n, fdm = rng.choice(fds)
            k = rng.randrange(3)
            if k == 0:
                off = rng.randrange(100)
                t, r = (res(os.pwrite, tf, data, off),
                        res(os.pwrite, rf, data, off))
                last = fdm
            else:
                if k == 1:
                    look = lambda f: os.pread(f, 200, 0)
                else:
                    look = lambda f: summary(os.fstat(f))
                r = res(look, rf)
                # a change through the other mount reaches a descriptor
                # kept open here within a second (its notification)
                t0 = time.monotonic()
                while True:
                    t = res(look, tf)
                    if (t == r or fdm == last or
                            time.monotonic() - t0 > 1.0):
                        break
                    time.sleep(0.01)
            op = ("fd-pwrite", "fd-pread", "fd-fstat")[k] + "(%s)" % n
        else:
            touched = ["", os.path.dirname(a), os.path.dirname(b), a]
            if second and last != where:
                # the last change came through the other mount: its news
                # reach this one within a second (changes by name were
                # waited for after them, a pwrite through a kept
                # descriptor was not)
                for x in touched:
                    t0 = time.monotonic()
                    while (times(os.path.join(where, x)) !=
                           times(os.path.join(last, x)) and
                           time.monotonic() - t0 <= 1.0):
                        time.sleep(0.01)
            tt = [times(os.path.join(where, x)) for x in touched]
            rt = [times(os.path.join(ref, x)) for x in touched]
            time.sleep(PAUSE)
            t = res(do, op, where, a, b, data, mode)
            r = res(do, op, ref, a, b, data, mode)
            if op not in QUERIES:
                last = where
            if t == r and t[0] == "ok" and op not in QUERIES:
                for j, x in enumerate(touched):
                    ta = times(os.path.join(where, x))
                    ra = times(os.path.join(ref, x))
                    if None in (tt[j], ta, rt[j], ra):
                        continue
                    moved_t = (ta[0] != tt[j][0], ta[1] != tt[j][1])
                    moved_r = (ra[0] != rt[j][0], ra[1] != rt[j][1])
                    if moved_t != moved_r:
                        differs("%d %s %s %s: (mtime, ctime) of '%s' "
                                "moved %s, in the reference %s"
                                % (i, op, a, b, x, moved_t, moved_r))
        if t != r:
            differs("%d %s %s %s%s: %r, in the reference %r"
                    % (i, op, a, b, " (second mount)" if where != test
                       else "", t, r))
        if second and not op.startswith("fd") and op != "openkeep":
            other = test if where == second else second
            # every name: a change through a symlinked directory
            # changes another directory than the names it was given
            for x in [""] + NAMES:
                # the times as the mount that made the change has them
                want = (res(lstat, os.path.join(ref, x)),
                        res(listing, os.path.join(ref, x)),
                        res(content, os.path.join(ref, x)),
                        times(os.path.join(where, x)))
                t0 = time.monotonic()
                while True:
                    got = (res(lstat, os.path.join(other, x)),
                           res(listing, os.path.join(other, x)),
                           res(content, os.path.join(other, x)),
                           times(os.path.join(other, x)))
                    if got == want or time.monotonic() - t0 > 1.0:
                        break
                    time.sleep(0.01)
                if got != want:
                    differs("%d %s %s %s: '%s' through the other mount "
                            "after 1 s: %r, in the reference %r"
                            % (i, op, a, b, x, got, want))
        if i % 50 == 49:
            for x in [""] + NAMES:
                t = res(lstat, os.path.join(test, x))
                r = res(lstat, os.path.join(ref, x))
                if t != r:
                    differs("%d tree '%s': %r, in the reference %r"
                            % (i, x, t, r))
                elif t[0] == "ok" and t[1][0] == stat.S_IFDIR:
                    t = res(listing, os.path.join(test, x))
                    r = res(listing, os.path.join(ref, x))
                    if t != r:
                        differs("%d listing of '%s': %r, in the reference "
                                "%r" % (i, x, t, r))
        if bad >= 20:
            break
    for tf, rf, _, _ in fds:
        os.close(tf)
        os.close(rf)
    print("%d operations, %d differences" % (i + 1, bad), flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
