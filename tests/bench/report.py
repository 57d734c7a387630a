#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""report.py - turn a benchmark's results.json into results.md (medians,
same-run ratios and the performance targets, each met or not met) and a
chart (gnuplot SVG) of the medians and of the ratios.

    report.py RESULTS_DIR [--no-chart]

Every ratio is taken between two configurations of the same run and the
median of those per-run ratios is reported: on a shared, noisy machine an
absolute time says little, a ratio measured side by side says more.
Only the Python standard library is used; the chart needs gnuplot.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys

DATA_JOBS = ["seq_write", "seq_read", "rand_read_qd1", "rand_read_4j",
             "rand_write"]
META_JOBS = ["create", "stat", "readback", "delete", "untar"]
JOB_TITLES = {
    "seq_write": "seq write 1M", "seq_read": "seq read 1M (cold)",
    "rand_read_qd1": "4K rand read QD1", "rand_read_4j": "4K rand read 4 jobs",
    "rand_write": "4K rand write", "create": "create 4K files",
    "stat": "readdir+stat (cold)", "readback": "read back (cold)",
    "delete": "delete", "untar": "untar tree",
}
SUBJECT = "bcfs-shm"
PASSTHROUGHS = ["bindfs", "fuse-overlayfs"]
GIB = float(1 << 30)


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def fmt(v, digits=3):
    if v is None:
        return "-"
    if abs(v) >= 1000:
        return "%.0f" % v
    return "%.*g" % (digits, v)


class Report:
    def __init__(self, data):
        self.meta = data["meta"]
        self.rows = [r for r in data["results"] if "failed" not in r]
        self.failed = [r for r in data["results"] if "failed" in r]
        self.configs = self.meta["configs"]
        self.jobs = [j for j in DATA_JOBS + META_JOBS
                     if j in self.meta["jobs"]]
        self.by = {}
        for r in self.rows:
            self.by.setdefault((r["config"], r["job"]), {})[r["run"]] = r

    def get(self, cfg, job, run, key="value"):
        r = self.by.get((cfg, job), {}).get(run)
        return r.get(key) if r else None

    def runs(self):
        return sorted({r["run"] for r in self.rows})

    def median(self, cfg, job, key="value"):
        return med([r.get(key) for r in self.by.get((cfg, job), {}).values()])

    def cpu(self, r, side):
        """CPU seconds per GiB moved (data workloads) or CPU milliseconds
        per 1000 files (metadata workloads)."""
        key = "daemon_cpu_s" if side == "daemon" else "server_cpu_s"
        if side == "both":
            c = r["daemon_cpu_s"] + r["server_cpu_s"]
        else:
            c = r[key]
        if r["job"] in DATA_JOBS:
            return c / (r["bytes"] / GIB) if r["bytes"] else None
        return c * 1000.0 / (r["files"] / 1000.0)

    def cpu_median(self, cfg, job, side):
        return med([self.cpu(r, side)
                    for r in self.by.get((cfg, job), {}).values()])

    def cpu_of(self, r, key):
        """As cpu(), for one CPU figure of the row (None if absent)."""
        if r.get(key) is None:
            return None
        if r["job"] in DATA_JOBS:
            return r[key] / (r["bytes"] / GIB) if r["bytes"] else None
        return r[key] * 1000.0 / (r["files"] / 1000.0)

    def ceph_cpu(self, cfgs):
        """The Ceph rows' CPU, each process apart: the bluecachefs
        daemon and the agent (libcephfs inside) for bcfs-cephfs,
        ceph-fuse for ceph-fuse, and the cluster (mon, OSD, MDS)."""
        cols = []
        for c in cfgs:
            if c == "bcfs-cephfs":
                cols += [(c, "daemon_cpu_s", "bcfs-cephfs bluecachefs"),
                         (c, "server_cpu_s", "bcfs-cephfs agent")]
            else:
                cols.append((c, "daemon_cpu_s", "ceph-fuse ceph-fuse"))
            cols.append((c, "cluster_cpu_s", "%s cluster" % c))
        L = ["## CPU on a CephFS", "",
             "Seconds per GiB moved (data workloads) or milliseconds per "
             "1000 files (metadata workloads), median over runs, of each "
             "process apart; cluster: the mon, OSD and MDS meanwhile.", "",
             "| workload | " + " | ".join(t for _, _, t in cols) + " |",
             "|---|" + "---|" * len(cols)]
        for j in self.jobs:
            L.append("| %s | " % JOB_TITLES[j] + " | ".join(
                fmt(med([self.cpu_of(r, k) for r in
                         self.by.get((c, j), {}).values()]))
                for c, k, _ in cols) + " |")
        L.append("")
        return L

    def best_pass(self, job, run):
        vals = [self.get(c, job, run) for c in PASSTHROUGHS]
        vals = [v for v in vals if v is not None]
        return max(vals) if vals else None

    def ratio(self, cfg, job, ref):
        """Median over runs of cfg/ref measured in the same run; ref is a
        configuration name or "pass" for the better passthrough."""
        out = []
        for run in self.runs():
            a = self.get(cfg, job, run)
            b = self.best_pass(job, run) if ref == "pass" else \
                self.get(ref, job, run)
            if a is not None and b:
                out.append(a / b)
        return med(out)

    # --- targets -----------------------------------------------------

    def targets(self):
        s = SUBJECT
        if s not in self.configs:
            return [("all other targets", None,
                     "%s was not measured in this run" % s)] + \
                self.rdma_targets()
        return self.host_targets() + self.rdma_targets()

    def host_targets(self):
        out = []
        s = SUBJECT
        have_pass = any(p in self.configs for p in PASSTHROUGHS)
        for j in self.jobs:
            need = 0.8 if j == "rand_read_qd1" else 1.0
            r = self.ratio(s, j, "pass") if have_pass else None
            out.append(("%s >= %.1fx the better of bindfs/fuse-overlayfs"
                        % (j, need), None if r is None else r >= need,
                        "%sx" % fmt(r)))
        for j in self.jobs:
            need = 5.0 if j in DATA_JOBS else 4.0
            r = self.ratio(s, j, "sshfs") if "sshfs" in self.configs \
                else None
            out.append(("%s >= %.0fx sshfs" % (j, need),
                        None if r is None else r >= need,
                        "%sx" % fmt(r)))
        for j in ("seq_write", "seq_read"):
            if j not in self.jobs:
                continue
            mine = self.cpu_median(s, j, "both")
            theirs = [self.cpu_median(p, j, "daemon") for p in PASSTHROUGHS
                      if p in self.configs]
            theirs = [t for t in theirs if t is not None]
            ok = None if mine is None or not theirs else \
                mine <= min(theirs)
            out.append(("%s daemon+agent CPU/GiB <= the passthroughs' "
                        "daemon CPU/GiB" % j, ok,
                        "%s vs %s s/GiB" % (fmt(mine), " / ".join(
                            fmt(t) for t in theirs) or "-")))
        return out

    # --- rdma (Soft-RoCE VM, meta.rdma) ------------------------------

    def rdma(self):
        """meta.rdma when it holds figures, else None."""
        rd = self.meta.get("rdma")
        return rd if rd and "failed" not in rd else None

    def rdma_ratio(self, num, den):
        """Median of the per-run ratios num/den of the VM's runs (ratios
        of one run are measured side by side), else the ratio of the
        medians (a summary without per_run)."""
        rd = self.rdma()
        if not rd:
            return None
        out = [r[num] / r[den] for r in rd.get("per_run", [])
               if r.get(num) is not None and r.get(den)]
        if out:
            return med(out)
        if rd.get(num) is not None and rd.get(den):
            return rd[num] / rd[den]
        return None

    def rdma_targets(self):
        what = "rdma seq read >= 0.9x ib_read_bw (Soft-RoCE VM)"
        rd = self.meta.get("rdma")
        r = self.rdma_ratio("bcfs_seq_read_mibps", "ib_read_bw_mibps")
        if r is None:
            why = "not measured in this run"
            if rd and "failed" in rd:
                why = "failed: %s" % rd["failed"]
            elif "bcfs-rdma" in self.meta.get("skipped", {}):
                why = "left out: %s" % self.meta["skipped"]["bcfs-rdma"]
            return [(what, None, why)]
        return [(what, r >= 0.9, "%sx: %s vs %s MiB/s" % (
            fmt(r), fmt(rd.get("bcfs_seq_read_mibps")),
            fmt(rd.get("ib_read_bw_mibps"))))]

    def rdma_markdown(self):
        rd = self.meta.get("rdma")
        if not rd:
            return []
        L = ["## bcfs-rdma (Soft-RoCE VM)", ""]
        if "failed" in rd:
            L += ["Not measured: %s." % rd["failed"], ""]
            return L
        size = rd.get("size")
        L.append("bluecachefs over rdma and the perftest tools on the same "
                 "device (%s) in one boot of an emulated (TCG) guest "
                 "(kernel %s, %s vCPUs): %s of sequential 1 MiB I/Os and "
                 "messages, median of %s run(s)%s.  Emulated: only the "
                 "ratios mean anything, and they are never set against "
                 "the host's figures." % (
                     rd.get("device", "?"), rd.get("guest_kernel", "?"),
                     rd.get("guest_cpus", "?"),
                     "%d MiB" % (size >> 20) if size else "?",
                     rd.get("runs", "?"),
                     "" if rd.get("source", "vm") == "vm" else
                     "; figures from %s" % rd["source"]))
        L.append("")
        L.append("| measurement | MiB/s | segs/batch |")
        L.append("|---|---|---|")
        for key, title, sk in (
                ("bcfs_seq_write_mibps", "bcfs-rdma seq write 1M "
                 "(agent RDMA READs)", "segs_per_batch_write"),
                ("bcfs_seq_read_mibps", "bcfs-rdma seq read 1M (cold; "
                 "agent RDMA WRITEs)", "segs_per_batch_read"),
                ("ib_write_bw_mibps", "ib_write_bw", None),
                ("ib_read_bw_mibps", "ib_read_bw", None)):
            L.append("| %s | %s | %s |" % (title, fmt(rd.get(key)),
                                           fmt(rd.get(sk)) if sk else ""))
        L.append("")
        L.append("Ratios (median of same-run ratios):")
        L.append("")
        for num, den, note in (
                ("bcfs_seq_read_mibps", "ib_read_bw_mibps", "the target"),
                ("bcfs_seq_read_mibps", "ib_write_bw_mibps",
                 "information: a host read is the agent's RDMA WRITE"),
                ("bcfs_seq_write_mibps", "ib_read_bw_mibps",
                 "information: a host write is the agent's RDMA READ")):
            L.append("- %s / %s = %sx (%s)" % (
                num.replace("_mibps", ""), den.replace("_mibps", ""),
                fmt(self.rdma_ratio(num, den)), note))
        L.append("")
        return L

    # --- Markdown ----------------------------------------------------

    def markdown(self):
        m = self.meta
        L = []
        L.append("# bluecachefs benchmark, %s" % m["date"])
        L.append("")
        L.append("`%s` on %s (kernel %s, %d CPUs), %d run(s), %.0f s; "
                 "load average %s at start, %s at end." %
                 (m["command"], m["host"], m["kernel"], m["cpus"],
                  m["runs"], m.get("wall_seconds", 0),
                  " ".join(m["loadavg_start"]),
                  " ".join(m.get("loadavg_end", []))))
        L.append("Sequential file %d MiB; random I/O %g s per job (4 KiB, "
                 "O_DIRECT, psync); %d files of 4 KiB; untar of %d files "
                 "(%.1f MiB)." % (m["seq_size"] >> 20, m["runtime"],
                                  m["files"], m["tar_files"],
                                  m["tar_bytes"] / 1048576.0))
        if m.get("bcfs_opts"):
            L.append("bluecachefs options: `%s`." % ",".join(m["bcfs_opts"]))
        for c, why in sorted(m.get("skipped", {}).items()):
            L.append("Left out: %s (%s)." % (c, why))
        L.append("")
        L.append("## Medians")
        L.append("")
        L.append("| workload | unit | " + " | ".join(self.configs) + " |")
        L.append("|---|---|" + "---|" * len(self.configs))
        for j in self.jobs:
            unit = next((r["unit"] for r in self.rows if r["job"] == j), "")
            L.append("| %s | %s | " % (JOB_TITLES[j], unit) + " | ".join(
                fmt(self.median(c, j)) for c in self.configs) + " |")
        if "rand_read_qd1" in self.jobs:
            for key, what in (("p50_us", "p50"), ("p99_us", "p99")):
                L.append("| 4K rand read QD1 %s latency | us | " % what +
                         " | ".join(fmt(self.median(c, "rand_read_qd1", key))
                                    for c in self.configs) + " |")
        L.append("")
        L.append("## Ratios (median of same-run ratios)")
        L.append("")
        refs = [("tmpfs", "tmpfs"), ("pass", "best passthrough"),
                ("sshfs", "sshfs"), ("ceph-fuse", "ceph-fuse")]
        refs = [(r, t) for r, t in refs if r == "pass" and any(
            p in self.configs for p in PASSTHROUGHS) or r in self.configs]
        fuse = [c for c in self.configs if c not in ("tmpfs", "disk")]
        for ref, title in refs:
            L.append("**vs %s**" % title)
            L.append("")
            L.append("| workload | " + " | ".join(fuse) + " |")
            L.append("|---|" + "---|" * len(fuse))
            for j in self.jobs:
                L.append("| %s | " % JOB_TITLES[j] + " | ".join(
                    fmt(self.ratio(c, j, ref)) for c in fuse) + " |")
            L.append("")
        ceph = [c for c in ("bcfs-cephfs", "ceph-fuse") if c in self.configs]
        if ceph:
            L += self.ceph_cpu(ceph)
        L.append("## CPU and batching")
        L.append("")
        L.append("CPU of the FUSE daemon + its server side (the agent; "
                 "ssh + sshd/sftp-server for sshfs) in seconds per GiB "
                 "moved (data workloads) or milliseconds per 1000 files "
                 "(metadata workloads); median over runs.  Segments per "
                 "batch: the agent's segments / (BATCH_PULL + BATCH_PUSH "
                 "requests) from its shutdown summary.")
        L.append("")
        L.append("| workload | " + " | ".join(
            "%s daemon+server" % c for c in fuse) + " | " + " | ".join(
            "%s segs/batch" % c for c in fuse if c.startswith("bcfs")) +
            " |")
        L.append("|---|" + "---|" * (len(fuse) + len(
            [c for c in fuse if c.startswith("bcfs")])))
        for j in self.jobs:
            cells = []
            for c in fuse:
                d = self.cpu_median(c, j, "daemon")
                s = self.cpu_median(c, j, "server")
                cells.append("%s + %s" % (fmt(d), fmt(s)))
            for c in fuse:
                if c.startswith("bcfs"):
                    cells.append(fmt(self.median(c, j, "segs_per_batch")))
            L.append("| %s | " % JOB_TITLES[j] + " | ".join(cells) + " |")
        L.append("")
        L += self.rdma_markdown()
        L.append("## Targets (%s, same-run ratios)" % SUBJECT)
        L.append("")
        for what, ok, val in self.targets():
            st = "not measured" if ok is None else ("met" if ok else
                                                    "NOT MET")
            L.append("- %s: **%s** (%s)" % (what, st, val))
        L.append("")
        if self.failed:
            L.append("## Failed measurements")
            L.append("")
            for r in self.failed:
                L.append("- %s %s run %d: %s" % (r["config"], r["job"],
                                                 r["run"], r["failed"]))
            L.append("")
        if m.get("log_lines"):
            L.append("## Unexpected daemon log lines")
            L.append("")
            for line in m["log_lines"][:20]:
                L.append("    " + line)
            L.append("")
        return "\n".join(L)

    # --- chart -------------------------------------------------------

    def chart(self, outdir, name="results.svg"):
        if not self.rows:
            # bcfs-rdma alone: its few figures are in the tables
            print("report: no configuration of this machine was "
                  "measured: no chart", file=sys.stderr)
            return None
        data = os.path.join(outdir, "chart.dat")
        with open(data, "w") as f:
            for j in self.jobs:
                f.write("# %s\n" % j)
                for i, c in enumerate(self.configs):
                    v = self.median(c, j)
                    f.write("%d \"%s\" %s\n" % (i, c, "NaN" if v is None
                                                else "%.6g" % v))
                f.write("\n\n")
            f.write("# ratios of %s\n" % SUBJECT)
            # the references measured: gnuplot refuses an all-NaN series
            have_cols = [False, False, False]
            for j in self.jobs:
                rs = [self.ratio(SUBJECT, j, "tmpfs"),
                      self.ratio(SUBJECT, j, "pass"),
                      self.ratio(SUBJECT, j, "sshfs")]
                for i, v in enumerate(rs):
                    have_cols[i] |= v is not None
                f.write("\"%s\" %s %s %s\n" % (
                    j, *("NaN" if v is None else "%.6g" % v
                         for v in rs)))
        units = {j: next((r["unit"] for r in self.rows if r["job"] == j),
                         "") for j in self.jobs}
        cols = 3
        have_ratios = any(have_cols)
        panels = len(self.jobs) + (1 if have_ratios else 0)
        nrows = (panels + cols - 1) // cols
        g = []
        g.append("set terminal svg size 1500,%d dynamic font 'sans,10' "
                 "background '#ffffff'" % (300 * nrows + 40))
        g.append("set output '%s'" % os.path.join(outdir, name))
        g.append("set multiplot title 'bluecachefs benchmark %s: medians "
                 "of %d run(s)'" % (self.meta["date"], self.meta["runs"]))
        g.append("set style fill solid 0.8 border -1")
        g.append("set boxwidth 0.7")
        g.append("set grid ytics")
        g.append("set xtics rotate by -30 font ',9'")
        g.append("unset key")
        g.append("set logscale y")
        g.append("set yrange [*:*]")
        h = 1.0 / nrows * 0.97
        w = 1.0 / cols
        for k, j in enumerate(self.jobs):
            row, col = divmod(k, cols)
            g.append("set origin %f,%f" % (col * w, 0.97 - (row + 1) * h))
            g.append("set size %f,%f" % (w, h))
            g.append("set title '%s (%s)'" % (JOB_TITLES[j], units[j]))
            g.append("plot '%s' index %d using 1:3:($1+1):xtic(2) "
                     "with boxes lc variable" % (data, k))
        if have_ratios:
            self.chart_ratios(g, data, cols, w, h, have_cols)
        g.append("unset multiplot")
        script = os.path.join(outdir, "chart.gp")
        with open(script, "w") as f:
            f.write("\n".join(g) + "\n")
        if not shutil.which("gnuplot"):
            print("report: gnuplot is missing: no chart (script in %s)" %
                  script, file=sys.stderr)
            return None
        if subprocess.run(["gnuplot", script]).returncode:
            # e.g. nothing to plot in a panel: the tables still stand
            print("report: gnuplot failed: no chart (script in %s)" %
                  script, file=sys.stderr)
            return None
        return os.path.join(outdir, name)

    def chart_ratios(self, g, data, cols, w, h, have_cols):
        """The last panel: SUBJECT's ratios (only when it was measured
        beside a reference), one series per reference measured."""
        k = len(self.jobs)
        row, col = divmod(k, cols)
        g.append("set origin %f,%f" % (col * w, 0.97 - (row + 1) * h))
        g.append("set size %f,%f" % (w * (cols - col), h))
        g.append("set title '%s ratios (same run): vs tmpfs, vs best "
                 "passthrough (target 1, QD1 0.8), vs sshfs (target 5 "
                 "data / 4 metadata)'" % SUBJECT)
        g.append("set style data histogram")
        g.append("set style histogram clustered gap 1")
        g.append("set boxwidth 0.9 relative")
        g.append("set key top left font ',9'")
        g.append("set yrange [0.01:*]")
        g.append("set arrow 1 from graph 0, first 1 to graph 1, first 1 "
                 "nohead dt 2 lc rgb 'black'")
        g.append("set arrow 2 from graph 0, first 5 to graph 1, first 5 "
                 "nohead dt 3 lc rgb 'red'")
        series = []
        for i, title in enumerate(("vs tmpfs", "vs best passthrough",
                                   "vs sshfs")):
            if have_cols[i]:
                series.append("'%s' index %d using %d%s title '%s'" % (
                    data if not series else "", len(self.jobs), i + 2,
                    ":xtic(1)" if not series else "", title))
        g.append("plot " + ", ".join(series))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("dir")
    p.add_argument("--no-chart", action="store_true")
    a = p.parse_args()
    with open(os.path.join(a.dir, "results.json")) as f:
        rep = Report(json.load(f))
    md = rep.markdown()
    chart = None if a.no_chart else rep.chart(a.dir)
    if chart:
        md += "\n![chart](%s)\n" % os.path.basename(chart)
    with open(os.path.join(a.dir, "results.md"), "w") as f:
        f.write(md)
    print(os.path.join(a.dir, "results.md"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
