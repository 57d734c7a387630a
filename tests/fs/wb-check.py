#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""wb-check.py DIR - what a new file's writes look like while they may be
gathered by the daemon (fs/wb.c), against what a local file system does.

Every case creates a file in DIR, writes it in records as tar and cp do,
and looks at it before close in every way another process could: stat,
a listing with stat (READDIRPLUS), fstat, a second descriptor reading it,
mmap, ftruncate, writes out of order, O_APPEND.  After close the file
must hold exactly what was written.  Run on a plain directory first, it
proves its own expectations.  Exit 0 when all pass; one line per failure.
"""
import mmap
import os
import sys

REC = 10240
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL: " + what, file=sys.stderr)


def pattern(n, seed):
    return bytes((i * 7 + seed) & 0xFF for i in range(n))


def content(path):
    with open(path, "rb") as f:
        return f.read()


def create(path, extra=0, rw=False):
    acc = os.O_RDWR if rw else os.O_WRONLY
    return os.open(path, acc | os.O_CREAT | os.O_EXCL | extra, 0o644)


def case_seen_before_close(d):
    path = os.path.join(d, "seen")
    fd = create(path, rw=True)
    want = b""
    for i in range(10):
        rec = pattern(REC, i)
        os.write(fd, rec)
        want += rec
    check(os.stat(path).st_size == len(want), "seen: stat(path) size")
    check(os.fstat(fd).st_size == len(want), "seen: fstat size")
    sizes = {e.name: e.stat().st_size for e in os.scandir(d)}
    check(sizes.get("seen") == len(want), "seen: listing's size %r" %
          sizes.get("seen"))
    fd2 = os.open(path, os.O_RDONLY)
    check(os.read(fd2, 1 << 20) == want, "seen: a second descriptor reads")
    # writes after the second open, through either descriptor
    os.write(fd, pattern(100, 99))
    want += pattern(100, 99)
    check(os.pread(fd2, 1 << 20, 0) == want, "seen: second read, later writes")
    os.close(fd2)
    os.close(fd)
    check(content(path) == want, "seen: content after close")


def case_out_of_order(d):
    path = os.path.join(d, "order")
    fd = create(path)
    img = bytearray(8 * REC)
    for rec, off in ((0, 0), (1, 5 * REC), (2, 2 * REC), (3, 2 * REC + 100),
                     (4, 7 * REC), (5, REC)):
        data = pattern(REC, rec)
        os.pwrite(fd, data, off)
        img[off:off + REC] = data
    check(os.stat(path).st_size == len(img), "order: size before close")
    os.close(fd)
    check(content(path) == bytes(img), "order: content")


def case_truncate(d):
    path = os.path.join(d, "trunc")
    fd = create(path)
    for i in range(3):
        os.write(fd, pattern(REC, i))
    os.ftruncate(fd, 5000)
    check(os.stat(path).st_size == 5000, "trunc: size after ftruncate")
    os.pwrite(fd, pattern(1000, 7), 5000)
    want = pattern(REC, 0)[:5000] + pattern(1000, 7)
    check(os.stat(path).st_size == 6000, "trunc: size after a write")
    os.truncate(path, 3 * REC)
    want += bytes(3 * REC - 6000)
    os.pwrite(fd, pattern(10, 8), 3 * REC)
    want += pattern(10, 8)
    os.close(fd)
    check(content(path) == want, "trunc: content")


def case_mmap(d):
    path = os.path.join(d, "mapped")
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
    os.write(fd, pattern(8192, 1))
    m = mmap.mmap(fd, 8192)
    check(m[:8192] == pattern(8192, 1), "mmap: mapped pages read")
    m[100:200] = b"m" * 100
    m.flush()
    m.close()
    os.write(fd, pattern(REC, 2))
    want = bytearray(pattern(8192, 1))
    want[100:200] = b"m" * 100
    want += pattern(REC, 2)
    os.fsync(fd)
    os.close(fd)
    check(content(path) == bytes(want), "mmap: content")


def case_append(d):
    path = os.path.join(d, "append")
    fd = create(path, os.O_APPEND)
    want = b""
    for i in range(5):
        os.write(fd, pattern(REC, i))
        want += pattern(REC, i)
    check(os.fstat(fd).st_size == len(want), "append: size")
    os.close(fd)
    check(content(path) == want, "append: content")


def case_fsync_then_more(d):
    path = os.path.join(d, "synced")
    fd = create(path)
    want = b""
    for i in range(4):
        os.write(fd, pattern(REC, i))
        want += pattern(REC, i)
        if i == 1:
            os.fsync(fd)
            check(content(path) == want, "synced: content after fsync")
    os.close(fd)
    check(content(path) == want, "synced: content")


def case_rename_unlink(d):
    path = os.path.join(d, "moved")
    fd = create(path)
    os.write(fd, pattern(REC, 3))
    os.rename(path, path + "2")
    os.write(fd, pattern(REC, 4))
    os.close(fd)
    check(content(path + "2") == pattern(REC, 3) + pattern(REC, 4),
          "moved: content after a rename while open")
    fd = create(path)
    os.write(fd, pattern(REC, 5))
    os.unlink(path)
    os.write(fd, pattern(REC, 6))
    check(os.fstat(fd).st_size == 2 * REC, "moved: size of an unlinked file")
    os.close(fd)
    check(not os.path.exists(path), "moved: the unlinked name is gone")


def main():
    if len(sys.argv) != 2:
        print("usage: wb-check.py DIR", file=sys.stderr)
        return 2
    d = os.path.join(sys.argv[1], "wb-check")
    os.mkdir(d)
    for case in (case_seen_before_close, case_out_of_order, case_truncate,
                 case_mmap, case_append, case_fsync_then_more,
                 case_rename_unlink):
        case(d)
    if failures:
        print("%d case(s) failed" % len(failures), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
