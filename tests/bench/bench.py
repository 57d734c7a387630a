#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""bench.py - the bluecachefs benchmark: one fixed workload on every
configuration, side by side in one run.

Each configuration is mounted in a private temp dir (a tmpfs holds the
backing directories), each workload runs on a fresh mount, the kernel cache
is dropped where the workload says cold, and the mount is torn down after
it.  Everything is repeated BENCH_RUNS times with the configurations
interleaved inside each run, so that a noisy neighbour hits all of them
alike; report.py turns results.json into medians and same-run ratios.

Configurations (BENCH_CONFIGS, comma-separated, default all available):
  tmpfs           the backing directory itself (native tmpfs)
  disk            a directory under BENCH_DISK_DIR (native disk)
  bcfs-shm        bluecachefs local:DIR (private agent, unix socket, shm)
  bcfs-tcp        bluecachefs tcp://127.0.0.1:PORT to a separate agent
  sshfs           sshfs to a private sshd on 127.0.0.1 (key auth)
  bindfs          bindfs --multithreaded over tmpfs
  fuse-overlayfs  fuse-overlayfs, upper (and lower) directory on tmpfs
  bcfs-rdma       bluecachefs over rdma inside the Soft-RoCE VM (below)
  bcfs-cephfs     bluecachefs unix:SOCK (shm) to an agent with --store
                  cephfs:/bcfs-cephfs, on the run's Ceph cluster (below)
  ceph-fuse       ceph-fuse of the same cluster, rooted at /ceph-fuse
  bcfs-cephfs-nooc  bcfs-cephfs with libcephfs's object cacher off
                  (client_oc = false in the agent's ceph.conf): what
                  the cache costs; only when named in BENCH_CONFIGS

The two Ceph configurations share one throwaway cluster for the whole
run (tests/ceph/ceph-up.sh: one mon, one memstore OSD, one MDS, all on
this machine), started before the first run and stopped at the end; the
backing directory of each is its subdirectory as a host ceph-fuse mount
of the cluster sees it.  Dropping the kernel's caches does not empty
the Ceph clients' own caches (libcephfs in the agent, ceph-fuse): "cold"
is cold for the kernel only there.  The CPU of bcfs-cephfs is split into
the daemon (bluecachefs) and the server side (the agent with its
libcephfs); that of ceph-fuse is the daemon's; for both, cluster_cpu_s
is what the mon, OSD and MDS spent meanwhile.

Workloads: seq_write, seq_read (cold) of a BENCH_SEQ_SIZE file in 1 MiB
blocks; rand_read_qd1, rand_read_4j, rand_write (4 KiB, O_DIRECT,
BENCH_RUNTIME seconds each); create, stat (cold readdir + fstatat),
readback (cold), delete of BENCH_FILES files of 4 KiB; untar of a tree of
BENCH_TAR_FILES files of mixed sizes made once from a seeded generator.

For every workload: the CPU seconds (utime + stime from /proc/PID/stat,
before and after) of the FUSE daemon and of its server side (the agent;
sshd and sftp-server for sshfs), and, from the agent's shutdown summary,
the segments per BATCH_PULL/BATCH_PUSH request.

bcfs-rdma is not interleaved with the others: after all runs, one boot of
the qemu VM of tests/rdma (make bench-rdma) measures ib_write_bw,
ib_read_bw and bluecachefs sequential write and cold read over rdma,
BENCH_RUNS times, of BENCH_RDMA_MB MiB (256; 64 with BENCH_QUICK), and
the figures go to results.json as meta.rdma.  The VM is emulated: only its
ratios mean anything, so they are never set against the host's figures.
BENCH_RDMA_RESULTS=FILE reads those figures from FILE (the JSON the VM
writes) instead of booting.

Needs root (tmpfs mounts, drop_caches), /dev/fuse and fio; a configuration
whose tools are missing is left out with a note in results.json.
Only the Python standard library is used.
"""

import argparse
import datetime
import glob
import io
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import time

CLK_TCK = os.sysconf("SC_CLK_TCK")
ALL_CONFIGS = ["tmpfs", "disk", "bcfs-shm", "bcfs-tcp", "sshfs", "bindfs",
               "fuse-overlayfs", "bcfs-cephfs", "ceph-fuse", "bcfs-rdma"]
CEPH_TOOLS = ["ceph-mon", "ceph-osd", "ceph-mds", "ceph", "monmaptool",
              "rados", "ceph-fuse", "uuidgen", "bc"]
JOBS = ["seq_write", "seq_read", "rand_read_qd1", "rand_read_4j",
        "rand_write", "create", "stat", "readback", "delete", "untar"]
SEQ_FILE = "seq.dat"
META_DIR = "files"
TAR_DIR = "tree"


def log(msg):
    print("bench: " + msg, file=sys.stderr, flush=True)


def parse_size(s):
    m = re.fullmatch(r"\s*(\d+)\s*([kKmMgGtT]?)(i?[bB])?\s*", s)
    if not m:
        raise ValueError("bad size '%s'" % s)
    mult = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30,
            "t": 1 << 40}[m.group(2).lower()]
    return int(m.group(1)) * mult


def wait_for(pred, timeout, step=0.05):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(step)
    return pred()


def is_mounted(path):
    with open("/proc/self/mountinfo") as f:
        for line in f:
            if line.split()[4] == path:
                return True
    return False


def unmount_wait(mnt, proc):
    """Unmount mnt (lazily if it stays busy for 10 s) and reap proc, the
    FUSE daemon serving it (killed if it does not exit within 30 s)."""
    for _ in range(100):
        if not is_mounted(mnt):
            break
        r = subprocess.run(["fusermount3", "-u", mnt],
                           stderr=subprocess.DEVNULL)
        if r.returncode == 0:
            break
        time.sleep(0.1)
    if is_mounted(mnt):
        subprocess.run(["fusermount3", "-uz", mnt])
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def drop_caches():
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def children(pid):
    """All descendants of pid (through /proc/PID/task/*/children)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        try:
            tasks = os.listdir("/proc/%d/task" % p)
        except OSError:
            continue
        for t in tasks:
            try:
                with open("/proc/%d/task/%s/children" % (p, t)) as f:
                    kids = [int(x) for x in f.read().split()]
            except OSError:
                continue
            out.extend(kids)
            todo.extend(kids)
    return out


def cpu_ticks(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            s = f.read()
    except OSError:
        return 0
    # the command name may hold spaces: fields count from after ')'
    fields = s[s.rindex(")") + 2:].split()
    return int(fields[11]) + int(fields[12])


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def gen_tree_tar(path, nfiles, seed):
    """A tarball of nfiles of mixed sizes in nested directories: mostly
    small files, some medium, a few large, like a source tree with assets."""
    rng = random.Random(seed)
    total = 0
    with tarfile.open(path, "w") as tar:
        dirs = [""]
        for i in range(nfiles):
            if i % 25 == 0:
                parent = rng.choice(dirs)
                d = (parent + "/" if parent else "") + "d%03d" % len(dirs)
                dirs.append(d)
            r = rng.random()
            if r < 0.70:
                size = rng.randint(0, 8 << 10)
            elif r < 0.95:
                size = rng.randint(8 << 10, 128 << 10)
            else:
                size = rng.randint(128 << 10, 2 << 20)
            d = rng.choice(dirs)
            name = (d + "/" if d else "") + "f%05d" % i
            ti = tarfile.TarInfo(name)
            ti.size = size
            ti.mode = 0o644
            ti.mtime = 1700000000
            tar.addfile(ti, io.BytesIO(rng.randbytes(size)))
            total += size
    return total


class Config:
    """One filesystem to measure.  setup() once per run, mount() and
    umount() around every workload, teardown() at the end of the run.
    back is the directory the configuration serves (prepared natively);
    mnt is where the workload runs."""

    kind = "fuse"
    needs = []

    def __init__(self, bench, name):
        self.b = bench
        self.name = name
        self.dir = os.path.join(bench.tmp, "cfg-" + name)
        self.back = os.path.join(bench.tmpfs, "back-" + name)
        self.mnt = os.path.join(self.dir, "mnt")
        self.proc = None
        self.logs = []

    def missing(self):
        return [t for t in self.needs if not shutil.which(t)]

    def setup(self):
        os.makedirs(self.back, exist_ok=True)
        os.makedirs(self.mnt, exist_ok=True)

    def teardown(self):
        pass

    def daemon_pids(self):
        return [self.proc.pid] + children(self.proc.pid) if self.proc \
            else []

    def server_pids(self):
        return []

    def cluster_pids(self):
        return []

    def spawn(self, argv, logname, env=None):
        path = os.path.join(self.b.logdir, logname)
        f = open(path, "ab")
        self.logs.append(path)
        return subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, env=env), path

    def mount_argv(self):
        raise NotImplementedError

    def mount(self, tag):
        self.fslog_off = 0
        argv, env = self.mount_argv()
        self.proc, self.fslog = self.spawn(argv, self.name + ".fs.log", env)
        self.fslog_off = os.path.getsize(self.fslog)
        if not wait_for(lambda: self.proc.poll() is None and
                        is_mounted(self.mnt), 30):
            self.kill_proc()
            raise RuntimeError("%s did not mount (see %s)" %
                               (self.name, self.fslog))

    def kill_proc(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
        if self.proc:
            self.proc.wait()
        if is_mounted(self.mnt):
            subprocess.run(["fusermount3", "-uz", self.mnt])
        self.proc = None

    def umount(self):
        unmount_wait(self.mnt, self.proc)
        self.proc = None
        return {}


class NativeConfig(Config):
    kind = "native"

    def setup(self):
        os.makedirs(self.back, exist_ok=True)
        self.mnt = self.back

    def mount(self, tag):
        pass

    def umount(self):
        return {}

    def daemon_pids(self):
        return []


class TmpfsConfig(NativeConfig):
    pass


class DiskConfig(NativeConfig):
    def setup(self):
        base = self.b.args.disk_dir
        self.back = tempfile.mkdtemp(prefix="bcf-bench-disk.", dir=base)
        self.mnt = self.back

    def teardown(self):
        shutil.rmtree(self.back, ignore_errors=True)


# agent summary lines: "summary: N sessions, ..., S segments (..."
SUM_SEGS = re.compile(r"summary: .* (\d+) segments \(")
SUM_OP = re.compile(r"summary: (BATCH_PULL|BATCH_PUSH)\s+(\d+) ops")


def parse_agent_summary(text):
    segs, batches = None, 0
    for line in text.splitlines():
        m = SUM_SEGS.search(line)
        if m:
            segs = int(m.group(1))
        m = SUM_OP.search(line)
        if m:
            batches += int(m.group(2))
    if segs is None:
        return {}
    return {"segments": segs, "batches": batches}


def read_from(path, off):
    with open(path, "rb") as f:
        f.seek(off)
        return f.read().decode(errors="replace")


class BcfsShmConfig(Config):
    """bluecachefs local:DIR.  BLUECACHE_AGENT is a two-line wrapper that
    adds --log-level info, so the private agent prints its summary (and
    with it the segment counters) into the daemon's log at unmount."""

    def setup(self):
        super().setup()
        self.wrap = os.path.join(self.dir, "agent-wrapper")
        with open(self.wrap, "w") as f:
            f.write("#!/bin/sh\nexec '%s' \"$@\" --log-level info\n" %
                    self.b.agent)
        os.chmod(self.wrap, 0o755)

    def mount_argv(self):
        env = dict(os.environ, BLUECACHE_AGENT=self.wrap)
        return ([self.b.fs, "local:" + self.back, self.mnt, "-f", "-o",
                 ",".join(["transport=shm"] + self.b.bcfs_opts)], env)

    def daemon_pids(self):
        return [self.proc.pid]

    def server_pids(self):
        return children(self.proc.pid) if self.proc else []

    def umount(self):
        log_path, off = self.fslog, self.fslog_off
        super().umount()
        return parse_agent_summary(read_from(log_path, off))


class BcfsTcpConfig(Config):
    """bluecachefs over tcp to a bluecache-agent started for each mount
    (so that its shutdown summary covers exactly one workload)."""

    def setup(self):
        super().setup()
        self.secret = os.path.join(self.dir, "secret")
        with open(os.open(self.secret, os.O_WRONLY | os.O_CREAT, 0o600),
                  "w") as f:
            f.write(os.urandom(32).hex())
        self.agent = None

    def start_agent(self):
        for _ in range(3):
            self.port = free_port()
            r, w = os.pipe()
            path = os.path.join(self.b.logdir, self.name + ".agent.log")
            lf = open(path, "ab")
            self.agent_off = os.path.getsize(path)
            self.agent_log = path
            self.logs.append(path)
            p = subprocess.Popen(
                [self.b.agent, "--root", self.back, "--listen",
                 "tcp://127.0.0.1:%d" % self.port, "--secret-file",
                 self.secret, "--foreground", "--log-level", "info",
                 "--ready-fd", str(w)],
                pass_fds=(w,), stdout=lf, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL)
            os.close(w)
            with os.fdopen(r) as rf:
                ready = rf.read()
            if ready.strip() == "ready":
                self.agent = p
                return
            p.kill()
            p.wait()
        raise RuntimeError("bluecache-agent did not start (see %s)" % path)

    def mount_argv(self):
        self.start_agent()
        return ([self.b.fs, "tcp://127.0.0.1:%d" % self.port, self.mnt,
                 "-f", "-o", ",".join(["transport=tcp", "secret_file=" +
                                       self.secret] + self.b.bcfs_opts)],
                None)

    def server_pids(self):
        return [self.agent.pid] if self.agent else []

    def umount(self):
        super().umount()
        self.agent.send_signal(signal.SIGTERM)
        try:
            self.agent.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.agent.kill()
            self.agent.wait()
        self.agent = None
        return parse_agent_summary(read_from(self.agent_log,
                                             self.agent_off))

    def teardown(self):
        if self.agent:
            self.agent.kill()
            self.agent.wait()
        self.agent = None

    def kill_proc(self):
        # a failed workload: the next mount starts an agent of its own
        super().kill_proc()
        self.teardown()


class SshfsConfig(Config):
    """sshfs to a private sshd on 127.0.0.1 with its own host key, key
    authentication for root and Debian's sftp-server."""

    needs = ["sshfs", "ssh", "ssh-keygen"]

    def missing(self):
        m = super().missing()
        if not os.access("/usr/sbin/sshd", os.X_OK):
            m.append("/usr/sbin/sshd")
        return m

    def setup(self):
        super().setup()
        d = os.path.join(self.dir, "ssh")
        os.makedirs(d, exist_ok=True)
        os.chmod(d, 0o700)
        self.key = os.path.join(d, "id")
        hostkey = os.path.join(d, "host")
        for k in (self.key, hostkey):
            if not os.path.exists(k):
                subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N",
                                "", "-f", k], check=True)
        shutil.copy(self.key + ".pub", os.path.join(d, "authorized_keys"))
        sftp = "/usr/lib/openssh/sftp-server"
        if not os.path.exists(sftp):
            sftp = "internal-sftp"
        conf = os.path.join(d, "sshd_config")
        with open(conf, "w") as f:
            f.write("ListenAddress 127.0.0.1\nHostKey %s\n"
                    "AuthorizedKeysFile %s/authorized_keys\n"
                    "PidFile %s/sshd.pid\nStrictModes no\nUsePAM no\n"
                    "PasswordAuthentication no\n"
                    "KbdInteractiveAuthentication no\n"
                    "PermitRootLogin prohibit-password\n"
                    "Subsystem sftp %s\n" % (hostkey, d, d, sftp))
        # privilege separation directory sshd insists on
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
        for _ in range(3):
            self.port = free_port()
            self.sshd, _ = self.spawn(["/usr/sbin/sshd", "-D", "-e", "-f",
                                       conf, "-p", str(self.port)],
                                      self.name + ".sshd.log")

            def up():
                try:
                    socket.create_connection(("127.0.0.1", self.port),
                                             0.2).close()
                    return True
                except OSError:
                    return False
            if wait_for(lambda: self.sshd.poll() is None and up(), 10):
                return
            self.sshd.kill()
            self.sshd.wait()
        raise RuntimeError("sshd did not start")

    def mount_argv(self):
        return (["sshfs", "-f", "-p", str(self.port), "-o",
                 "IdentityFile=%s,StrictHostKeyChecking=no,"
                 "UserKnownHostsFile=/dev/null,LogLevel=ERROR,BatchMode=yes"
                 % self.key, "root@127.0.0.1:" + self.back, self.mnt],
                None)

    def server_pids(self):
        return children(self.sshd.pid)

    def teardown(self):
        self.sshd.terminate()
        try:
            self.sshd.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.sshd.kill()
            self.sshd.wait()


class BindfsConfig(Config):
    needs = ["bindfs"]

    def mount_argv(self):
        return (["bindfs", "-f", "--multithreaded", self.back, self.mnt],
                None)


class OverlayConfig(Config):
    needs = ["fuse-overlayfs"]

    def setup(self):
        super().setup()
        self.lower = os.path.join(self.b.tmpfs, "lower-" + self.name)
        self.work = os.path.join(self.b.tmpfs, "work-" + self.name)
        os.makedirs(self.lower, exist_ok=True)
        os.makedirs(self.work, exist_ok=True)

    def mount_argv(self):
        return (["fuse-overlayfs", "-f", "-o", "lowerdir=%s,upperdir=%s,"
                 "workdir=%s" % (self.lower, self.back, self.work),
                 self.mnt], None)


class RdmaVmConfig(Config):
    """bluecachefs over rdma, measured inside the Soft-RoCE VM of
    tests/rdma by bench-vm.sh (make bench-rdma): booted once per
    benchmark, after the other configurations, never interleaved with
    them (the emulated VM takes both cores).  Its figures (medians and
    every run of the boot) go to meta.rdma."""

    kind = "vm"
    needs = ["qemu-system-x86_64", "ib_read_bw", "ib_write_bw", "cpio",
             "ip", "modprobe"]

    def kernel(self):
        k = os.environ.get("RXE_VM_KERNEL")
        if k:
            return k
        try:
            ks = os.listdir("/lib/modules")
        except OSError:
            return None
        key = lambda v: [int(x) if x.isdigit() else x
                         for x in re.split(r"(\d+)", v)]
        return max(ks, key=key) if ks else None

    def missing(self):
        if self.b.args.rdma_results:
            return []
        m = super().missing()
        k = self.kernel()
        if not k or not os.access("/boot/vmlinuz-" + k, os.R_OK):
            m.append("a kernel image in /boot (linux-image-amd64)")
        elif subprocess.run(["modprobe", "-S", k, "--show-depends",
                             "rdma_rxe"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL).returncode:
            m.append("the rdma_rxe module of kernel " + k)
        if not os.access("/bin/busybox", os.X_OK):
            m.append("busybox (busybox-static)")
        if not any(f.startswith("librxe-rdmav")
                   for d in glob.glob("/usr/lib/*/libibverbs")
                   for f in os.listdir(d)):
            m.append("the rxe verbs provider (ibverbs-providers)")
        if not self.rdma_built():
            m.append("an rdma build (configure --with-rdma)")
        return m

    def rdma_built(self):
        """As tests/rdma/check-rdma.sh decides: the agent offers
        --rdma-listen and config.h defines HAVE_RDMA."""
        try:
            with open(os.path.join(self.b.args.builddir, "config.h")) as f:
                if "#define HAVE_RDMA 1" not in f.read():
                    return False
            h = subprocess.run([self.b.agent, "--help"], text=True,
                               stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, timeout=10)
        except (OSError, subprocess.SubprocessError):
            return False
        return "rdma-listen" in h.stdout

    def measure(self):
        """Boot the VM once; the figures as a dict, or {"failed": why}."""
        a = self.b.args
        path = a.rdma_results
        if path:
            log("bcfs-rdma: figures from %s (BENCH_RDMA_RESULTS)" % path)
            try:
                with open(path) as f:
                    rd = json.load(f)
            except (OSError, ValueError) as e:
                return {"failed": "BENCH_RDMA_RESULTS: %s" % e}
            rd.setdefault("source", os.path.abspath(path))
            return rd
        srcdir = os.path.dirname(os.path.dirname(os.path.dirname(
            os.path.abspath(__file__))))
        out = tempfile.mkdtemp(prefix="rdma-vm.", dir=self.b.tmp)
        vmlog = os.path.join(self.b.logdir, self.name + ".vm.log")
        tmo = int(os.environ.get("BCF_RDMA_TIMEOUT", "900"))
        env = dict(os.environ, top_srcdir=srcdir,
                   top_builddir=a.builddir, RXE_VM_OUT=out,
                   BCF_BENCH_MB=str(a.rdma_mb),
                   BCF_BENCH_RUNS=str(a.runs), BCF_RDMA_TIMEOUT=str(tmo))
        log("bcfs-rdma: booting the Soft-RoCE VM (%d MiB, %d run(s), up "
            "to %d s; console in %s)" % (a.rdma_mb, a.runs, tmo, vmlog))
        t0 = time.monotonic()
        with open(vmlog, "wb") as lf:
            # its own process group: qemu dies with it on any exit
            p = subprocess.Popen(
                ["sh", os.path.join(srcdir, "tests", "rdma",
                                    "bench-vm.sh")],
                env=env, stdout=lf, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True)
            try:
                rc = p.wait(timeout=tmo + 60)
            except BaseException:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
                raise
        secs = time.monotonic() - t0
        res = os.path.join(out, "rdma-results.json")
        if rc or not os.path.exists(res):
            return {"failed": "the VM benchmark ended with status %d "
                    "(see %s)" % (rc, vmlog)}
        with open(res) as f:
            rd = json.load(f)
        if rd.get("on_rdma") is not True:
            return {"failed": "the mount was not on rdma (see %s)" % vmlog}
        rd["source"] = "vm"
        rd["vm_seconds"] = round(secs, 1)
        log("bcfs-rdma: seq write %s, seq read %s MiB/s; ib_write_bw %s, "
            "ib_read_bw %s MiB/s (%.0f s)" % (
                rd.get("bcfs_seq_write_mibps"),
                rd.get("bcfs_seq_read_mibps"), rd.get("ib_write_bw_mibps"),
                rd.get("ib_read_bw_mibps"), secs))
        return rd


def rdma_run(bench, vms, meta):
    """The rdma figures into meta.rdma: from the VM when bcfs-rdma was
    chosen (vms), or from BENCH_RDMA_RESULTS alone."""
    if not vms and not bench.args.rdma_results:
        return
    cfg = vms[0] if vms else RdmaVmConfig(bench, "bcfs-rdma")
    rd = cfg.measure()
    if "failed" in rd:
        log("bcfs-rdma failed: %s" % rd["failed"])
    for line in rd.get("log_lines", []):
        meta["log_lines"].append("bcfs-rdma (VM): %s" % line)
    meta["rdma"] = rd


class CephCluster:
    """The run's cluster (tests/ceph/ceph-up.sh) and a host ceph-fuse
    mount of its root, where the Ceph configurations' backing
    directories are prepared."""

    def __init__(self, bench):
        self.b = bench
        self.dir = os.path.join(bench.tmp, "ceph")
        self.root = os.path.join(bench.tmp, "ceph-root")
        self.conf = None
        self.fuse = None
        srcdir = os.path.dirname(os.path.dirname(os.path.abspath(
            __file__)))
        self.up = os.path.join(srcdir, "ceph", "ceph-up.sh")
        self.down = os.path.join(srcdir, "ceph", "ceph-down.sh")

    def start(self):
        # a memstore OSD holds every configuration's sequential file in
        # memory; a full one stops the MDS's journal, and with it every
        # client's metadata
        nceph = sum(1 for c in self.b.args.configs if "ceph" in c)
        mem = max(2 << 30, (nceph + 1) * self.b.seq + (1 << 30))
        env = dict(os.environ, WITH_MDS="1", WITH_MGR="0",
                   MEMSTORE_BYTES=str(mem))
        path = os.path.join(self.b.logdir, "ceph-up.log")
        with open(path, "ab") as lf:
            out = subprocess.run([self.up, self.dir], env=env, stdout=
                                 subprocess.PIPE, stderr=lf, timeout=300)
        if out.returncode:
            raise RuntimeError("the Ceph cluster did not start (see %s)"
                               % path)
        m = re.search(r"export CEPH_CONF=(\S+)", out.stdout.decode())
        self.conf = m.group(1)
        os.makedirs(self.root, exist_ok=True)
        lf = open(os.path.join(self.b.logdir, "ceph-fuse-host.log"), "ab")
        self.fuse = subprocess.Popen(
            ["ceph-fuse", "-f", "-c", self.conf, self.root], stdout=lf,
            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        if not wait_for(lambda: self.fuse.poll() is None and
                        is_mounted(self.root), 60):
            raise RuntimeError("ceph-fuse did not mount the cluster")
        log("ceph cluster up: %s" % self.conf)

    def pids(self):
        out = []
        for f in glob.glob(os.path.join(self.dir, "run", "*.pid")):
            try:
                out.append(int(open(f).read()))
            except (OSError, ValueError):
                pass
        return out

    def stop(self):
        if self.fuse:
            unmount_wait(self.root, self.fuse)
            self.fuse = None
        subprocess.run([self.down, self.dir], timeout=120)


class CephConfig(Config):
    """Common to the two configurations on the run's Ceph cluster: the
    backing directory is the configuration's directory in the CephFS,
    seen through the host's ceph-fuse mount."""

    needs = CEPH_TOOLS

    def __init__(self, bench, name):
        super().__init__(bench, name)
        self.sub = "/" + name

    def setup(self):
        c = self.b.ceph_cluster()
        self.back = os.path.join(c.root, self.name)
        super().setup()

    def cluster_pids(self):
        return self.b.ceph.pids()


class BcfsCephConfig(CephConfig, BcfsTcpConfig):
    """bluecachefs over shm (a unix socket) to an agent started for each
    mount with --store cephfs:/bcfs-cephfs,conf=CONF."""

    def missing(self):
        miss = super().missing()
        h = subprocess.run([self.b.agent, "--help"], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT).stdout.decode()
        if "--store" not in h:
            miss.append("bluecache-agent --store")
        return miss

    def start_agent(self):
        self.sock = os.path.join(self.dir, "agent.sock")
        if os.path.exists(self.sock):
            os.unlink(self.sock)
        r, w = os.pipe()
        path = os.path.join(self.b.logdir, self.name + ".agent.log")
        lf = open(path, "ab")
        self.agent_off = os.path.getsize(path)
        self.agent_log = path
        self.logs.append(path)
        p = subprocess.Popen(
            [self.b.agent, "--store", "cephfs:%s,conf=%s" %
             (self.sub, self.agent_conf()), "--listen", "unix:" + self.sock,
             "--foreground", "--log-level", "info", "--ready-fd", str(w)],
            pass_fds=(w,), stdout=lf, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL)
        os.close(w)
        with os.fdopen(r) as rf:
            ready = rf.read()
        if ready.strip() != "ready":
            p.kill()
            p.wait()
            raise RuntimeError("bluecache-agent did not start (see %s)" %
                               path)
        self.agent = p

    def agent_conf(self):
        return self.b.ceph.conf

    def mount_argv(self):
        self.start_agent()
        return ([self.b.fs, "unix:" + self.sock, self.mnt, "-f", "-o",
                 ",".join(["transport=shm"] + self.b.bcfs_opts)], None)


class BcfsCephNoOcConfig(BcfsCephConfig):
    """bcfs-cephfs with the agent's libcephfs object cacher off."""

    def agent_conf(self):
        path = os.path.join(self.dir, "ceph-nooc.conf")
        with open(self.b.ceph.conf) as f:
            conf = f.read()
        with open(path, "w") as f:
            f.write(conf + "\n[client]\nclient_oc = false\n")
        return path


class CephFuseConfig(CephConfig):
    """ceph-fuse of the run's cluster, rooted at /ceph-fuse."""

    def mount_argv(self):
        return (["ceph-fuse", "-f", "-c", self.b.ceph.conf, "-r", self.sub,
                 self.mnt], None)


CONFIG_CLASSES = {
    "tmpfs": TmpfsConfig, "disk": DiskConfig, "bcfs-shm": BcfsShmConfig,
    "bcfs-tcp": BcfsTcpConfig, "sshfs": SshfsConfig,
    "bindfs": BindfsConfig, "fuse-overlayfs": OverlayConfig,
    "bcfs-rdma": RdmaVmConfig, "bcfs-cephfs": BcfsCephConfig,
    "ceph-fuse": CephFuseConfig, "bcfs-cephfs-nooc": BcfsCephNoOcConfig,
}


class Bench:
    def __init__(self, args):
        self.args = args
        self.fs = os.path.join(args.builddir, "fs", "bluecachefs")
        self.agent = os.path.join(args.builddir, "agent", "bluecache-agent")
        self.bcfs_opts = [o for o in args.bcfs_opts.split(",") if o]
        self.seq = parse_size(args.seq_size)
        self.tmp = None
        self.tmpfs = None
        self.ceph = None

    def ceph_cluster(self):
        """The run's Ceph cluster, started on first use."""
        if self.ceph is None:
            self.ceph = CephCluster(self)
            self.ceph.start()
        return self.ceph

    # --- workloads ---------------------------------------------------

    def fio(self, cfg, name, extra):
        out = subprocess.run(
            ["fio", "--output-format=json", "--name=" + name,
             "--filename=" + os.path.join(cfg.mnt, SEQ_FILE),
             "--size=%d" % self.seq, "--ioengine=psync"] + extra,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if out.returncode:
            raise RuntimeError("fio %s on %s: %s" % (name, cfg.name,
                                                      out.stderr.strip()))
        # fio may print notes before the JSON document
        js = json.loads(out.stdout[out.stdout.index("{"):])
        job = js["jobs"][0]
        rw = job["read"] if job["read"]["io_bytes"] else job["write"]
        r = {"bytes": rw["io_bytes"], "seconds": rw["runtime"] / 1000.0,
             "iops": rw["iops"], "mibps": rw["bw_bytes"] / (1 << 20)}
        pct = rw.get("clat_ns", {}).get("percentile", {})
        if pct:
            r["p50_us"] = pct.get("50.000000", 0) / 1000.0
            r["p99_us"] = pct.get("99.000000", 0) / 1000.0
        return r

    def job_seq_write(self, cfg):
        # fio's own bandwidth leaves out the final fsync: time the whole
        # job so that data still in a cache does not count as written
        t0 = time.perf_counter()
        r = self.fio(cfg, "seqwrite", ["--rw=write", "--bs=1M",
                                       "--end_fsync=1"])
        t = time.perf_counter() - t0
        r["fio_mibps"] = r["mibps"]
        r["seconds"] = t
        r["mibps"] = r["bytes"] / t / (1 << 20)
        r["value"], r["unit"] = r["mibps"], "MiB/s"
        return r

    def job_seq_read(self, cfg):
        r = self.fio(cfg, "seqread", ["--rw=read", "--bs=1M"])
        r["value"], r["unit"] = r["mibps"], "MiB/s"
        return r

    def rand(self, cfg, name, rw, jobs):
        extra = ["--rw=" + rw, "--bs=4k", "--direct=1", "--time_based",
                 "--runtime=%s" % self.args.runtime, "--randrepeat=0"]
        if jobs > 1:
            extra += ["--numjobs=%d" % jobs, "--group_reporting"]
        r = self.fio(cfg, name, extra)
        r["value"], r["unit"] = r["iops"], "IOPS"
        return r

    def job_rand_read_qd1(self, cfg):
        return self.rand(cfg, "randread1", "randread", 1)

    def job_rand_read_4j(self, cfg):
        return self.rand(cfg, "randread4", "randread", 4)

    def job_rand_write(self, cfg):
        return self.rand(cfg, "randwrite", "randwrite", 1)

    def files_result(self, n, t, nbytes):
        return {"files": n, "seconds": t, "bytes": nbytes,
                "value": n / t, "unit": "files/s"}

    def job_create(self, cfg):
        d = os.path.join(cfg.mnt, META_DIR)
        n, buf = self.args.files, os.urandom(4096)
        t0 = time.perf_counter()
        os.mkdir(d)
        dfd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
        for i in range(n):
            fd = os.open("f%06d" % i, os.O_WRONLY | os.O_CREAT | os.O_EXCL,
                         0o644, dir_fd=dfd)
            os.write(fd, buf)
            os.close(fd)
        os.close(dfd)
        t = time.perf_counter() - t0
        return self.files_result(n, t, n * 4096)

    def job_stat(self, cfg):
        d = os.path.join(cfg.mnt, META_DIR)
        t0 = time.perf_counter()
        dfd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
        n = 0
        with os.scandir(dfd) as it:
            for e in it:
                os.stat(e.name, dir_fd=dfd, follow_symlinks=False)
                n += 1
        os.close(dfd)
        t = time.perf_counter() - t0
        if n != self.args.files:
            raise RuntimeError("stat on %s saw %d files, not %d" %
                               (cfg.name, n, self.args.files))
        return self.files_result(n, t, 0)

    def job_readback(self, cfg):
        d = os.path.join(cfg.mnt, META_DIR)
        n, total = self.args.files, 0
        t0 = time.perf_counter()
        dfd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
        for i in range(n):
            fd = os.open("f%06d" % i, os.O_RDONLY, dir_fd=dfd)
            while True:
                b = os.read(fd, 65536)
                if not b:
                    break
                total += len(b)
            os.close(fd)
        os.close(dfd)
        t = time.perf_counter() - t0
        if total != n * 4096:
            raise RuntimeError("readback on %s read %d bytes, not %d" %
                               (cfg.name, total, n * 4096))
        return self.files_result(n, t, total)

    def job_delete(self, cfg):
        d = os.path.join(cfg.mnt, META_DIR)
        n = self.args.files
        t0 = time.perf_counter()
        dfd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
        for i in range(n):
            os.unlink("f%06d" % i, dir_fd=dfd)
        os.close(dfd)
        os.rmdir(d)
        t = time.perf_counter() - t0
        return self.files_result(n, t, 0)

    def job_untar(self, cfg):
        d = os.path.join(cfg.mnt, TAR_DIR)
        t0 = time.perf_counter()
        os.mkdir(d)
        subprocess.run(["tar", "-xf", self.tarball, "-C", d,
                        "--no-same-owner"], check=True)
        t = time.perf_counter() - t0
        return self.files_result(self.args.tar_files, t, self.tar_bytes)

    # --- native preparation between workloads ------------------------

    def prep(self, cfg, job):
        """Put the backing directory in the state the job expects, using
        the backing directory directly (never through the mount)."""
        seq = os.path.join(cfg.back, SEQ_FILE)
        if job == "seq_write":
            if os.path.exists(seq):
                os.unlink(seq)
        elif job in ("seq_read", "rand_read_qd1", "rand_read_4j",
                     "rand_write"):
            if not os.path.exists(seq) or os.path.getsize(seq) != self.seq:
                with open(seq, "wb") as f:
                    chunk = os.urandom(1 << 20)
                    for _ in range(self.seq >> 20):
                        f.write(chunk)
        elif job == "create":
            shutil.rmtree(os.path.join(cfg.back, META_DIR),
                          ignore_errors=True)
        elif job == "untar":
            shutil.rmtree(os.path.join(cfg.back, TAR_DIR),
                          ignore_errors=True)

    COLD = {"seq_read", "rand_read_qd1", "rand_read_4j", "rand_write",
            "stat", "readback", "delete"}

    def run_job(self, cfg, job, run):
        self.prep(cfg, job)
        tag = "%s-%s-%d" % (cfg.name, job, run)
        cfg.mount(tag)
        try:
            if job in self.COLD:
                drop_caches()
            server = cfg.server_pids()
            daemon = [p for p in cfg.daemon_pids() if p not in server]
            cluster = cfg.cluster_pids()
            d0 = sum(cpu_ticks(p) for p in daemon)
            s0 = sum(cpu_ticks(p) for p in server)
            c0 = sum(cpu_ticks(p) for p in cluster)
            r = getattr(self, "job_" + job)(cfg)
            # the server side may have forked since (sshd sessions)
            server = cfg.server_pids()
            d1 = sum(cpu_ticks(p) for p in daemon)
            s1 = sum(cpu_ticks(p) for p in server)
            c1 = sum(cpu_ticks(p) for p in cluster)
        except BaseException:
            cfg.kill_proc()
            raise
        r["daemon_cpu_s"] = (d1 - d0) / CLK_TCK
        r["server_cpu_s"] = (s1 - s0) / CLK_TCK
        if cluster:
            r["cluster_cpu_s"] = (c1 - c0) / CLK_TCK
        r.update(cfg.umount())
        if r.get("batches"):
            r["segs_per_batch"] = r["segments"] / r["batches"]
        r.update(config=cfg.name, job=job, run=run)
        return r

    # --- driver ------------------------------------------------------

    def check_logs(self, cfgs):
        bad = []
        pat = re.compile(r"error|Sanitizer|SUMMARY:")
        for c in cfgs:
            for path in sorted(set(c.logs)):
                if not os.path.exists(path):
                    continue
                with open(path, errors="replace") as f:
                    for line in f:
                        # ceph-fuse's farewell on a clean unmount
                        if "finished with error 0 " in line:
                            continue
                        if pat.search(line):
                            bad.append("%s: %s" % (os.path.basename(path),
                                                   line.rstrip()))
        return bad

    def main(self):
        a = self.args
        os.makedirs(a.out, exist_ok=True)
        self.logdir = os.path.join(a.out, "logs")
        os.makedirs(self.logdir, exist_ok=True)
        self.tmp = tempfile.mkdtemp(prefix="bcf-bench.",
                                    dir=os.environ.get("TMPDIR", "/tmp"))
        os.chmod(self.tmp, 0o755)
        self.tmpfs = os.path.join(self.tmp, "tmpfs")
        os.mkdir(self.tmpfs)
        subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=0755",
                        "bcf-bench", self.tmpfs], check=True)
        cfgs = []
        try:
            return self.run_all(cfgs)
        finally:
            for c in cfgs:
                if c.proc:
                    c.kill_proc()
            if self.ceph:
                self.ceph.stop()
            subprocess.run(["umount", "-l", self.tmpfs])
            shutil.rmtree(self.tmp, ignore_errors=True)

    def run_all(self, cfgs):
        a = self.args
        skipped = {}
        for name in a.configs:
            c = CONFIG_CLASSES[name](self, name)
            miss = c.missing()
            if name.startswith("bcfs") and not (os.access(self.fs, os.X_OK)
                                                and os.access(self.agent,
                                                              os.X_OK)):
                miss.append("bluecachefs and bluecache-agent (build first)")
            if miss:
                skipped[name] = "missing: " + ", ".join(miss)
                log("leaving out %s (%s)" % (name, skipped[name]))
                continue
            cfgs.append(c)
        # bcfs-rdma runs once, after the runs (rdma_run)
        vms = [c for c in cfgs if c.kind == "vm"]
        cfgs[:] = [c for c in cfgs if c.kind != "vm"]
        self.tarball = os.path.join(self.tmpfs, "tree.tar")
        self.tar_bytes = gen_tree_tar(self.tarball, a.tar_files, 20240601)
        meta = {
            "date": datetime.datetime.now().isoformat(timespec="seconds"),
            "command": " ".join(sys.argv),
            "host": os.uname().nodename, "kernel": os.uname().release,
            "cpus": os.cpu_count(),
            "loadavg_start": open("/proc/loadavg").read().split()[:3],
            "seq_size": self.seq, "runs": a.runs, "files": a.files,
            "tar_files": a.tar_files, "tar_bytes": self.tar_bytes,
            "runtime": a.runtime, "bcfs_opts": self.bcfs_opts,
            "configs": [c.name for c in cfgs], "skipped": skipped,
            "jobs": a.jobs,
        }
        results = []
        t_start = time.monotonic()
        for run in range(a.runs):
            for c in cfgs:
                try:
                    c.setup()
                except (RuntimeError, OSError,
                        subprocess.SubprocessError) as e:
                    log("%s run %d: set-up failed: %s" % (c.name, run, e))
                    results.extend({"config": c.name, "job": j, "run": run,
                                    "failed": str(e)} for j in a.jobs)
                    continue
                try:
                    for job in a.jobs:
                        t0 = time.monotonic()
                        try:
                            r = self.run_job(c, job, run)
                        except (RuntimeError, OSError,
                                subprocess.CalledProcessError) as e:
                            log("%s %s run %d failed: %s" %
                                (c.name, job, run, e))
                            results.append({"config": c.name, "job": job,
                                            "run": run, "failed": str(e)})
                            continue
                        results.append(r)
                        log("run %d %-14s %-13s %12.1f %-7s (%.1f s)" %
                            (run, c.name, job, r["value"], r["unit"],
                             time.monotonic() - t0))
                finally:
                    c.teardown()
                # free the tmpfs for the next configuration
                shutil.rmtree(c.back, ignore_errors=True)
        meta["wall_seconds"] = round(time.monotonic() - t_start, 1)
        meta["loadavg_end"] = open("/proc/loadavg").read().split()[:3]
        meta["log_lines"] = self.check_logs(cfgs)
        rdma_run(self, vms, meta)
        out = os.path.join(a.out, "results.json")
        with open(out, "w") as f:
            json.dump({"meta": meta, "results": results}, f, indent=1)
        log("wrote %s (%.0f s)" % (out, meta["wall_seconds"]))
        return 0


def main():
    env = os.environ.get
    quick = env("BENCH_QUICK", "") not in ("", "0")
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--builddir", default=env("top_builddir", "."))
    p.add_argument("--out", default=None)
    p.add_argument("--seq-size", default=env("BENCH_SEQ_SIZE",
                                             "256M" if quick else "1G"))
    p.add_argument("--runs", type=int, default=int(env(
        "BENCH_RUNS", "1" if quick else "3")))
    p.add_argument("--files", type=int, default=int(env(
        "BENCH_FILES", "500" if quick else "5000")))
    p.add_argument("--tar-files", type=int, default=int(env(
        "BENCH_TAR_FILES", "200" if quick else "2000")))
    p.add_argument("--runtime", type=float, default=float(env(
        "BENCH_RUNTIME", "1" if quick else "4")))
    p.add_argument("--configs", default=env("BENCH_CONFIGS",
                                            ",".join(ALL_CONFIGS)))
    p.add_argument("--jobs", default=env("BENCH_JOBS", ",".join(JOBS)))
    p.add_argument("--disk-dir", default=env("BENCH_DISK_DIR", "/var/tmp"))
    p.add_argument("--bcfs-opts", default=env("BENCH_BCFS_OPTS", ""))
    p.add_argument("--rdma-results", default=env("BENCH_RDMA_RESULTS", ""))
    p.add_argument("--rdma-mb", type=int, default=int(env(
        "BENCH_RDMA_MB", "64" if quick else "256")))
    a = p.parse_args()
    a.configs = [c for c in a.configs.split(",") if c]
    a.jobs = [j for j in a.jobs.split(",") if j]
    for c in a.configs:
        if c not in CONFIG_CLASSES:
            p.error("unknown configuration '%s'" % c)
    for j in a.jobs:
        if j not in JOBS:
            p.error("unknown workload '%s'" % j)
    if a.out is None:
        a.out = os.path.join(a.builddir, "bench-results",
                             datetime.datetime.now().strftime(
                                 "%Y%m%d-%H%M%S"))
    a.builddir = os.path.abspath(a.builddir)
    a.out = os.path.abspath(a.out)
    if os.geteuid() != 0:
        log("needs root (tmpfs mounts, drop_caches)")
        return 77
    if not os.path.exists("/dev/fuse") or not shutil.which("fusermount3"):
        log("needs /dev/fuse and fusermount3")
        return 77
    if not shutil.which("fio"):
        log("needs fio (contrib/install-deps.sh --bench)")
        return 77
    print(a.out)
    return Bench(a).main()


if __name__ == "__main__":
    sys.exit(main())
