#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
# Install what bluecachefs needs on Debian 12 (bookworm), from Debian's
# archive only.  Without arguments: build and run.  --tests adds what the
# test suite uses (clang for the fuzzer, the tools the FUSE tests drive,
# qemu + Debian's kernel for the Soft-RoCE RDMA suite, libcephfs and a
# Ceph cluster's daemons for the cephfs store).  --bench adds what
# `make bench` compares with and draws with (sshfs, bindfs, fuse-overlayfs,
# fio, gnuplot, perf) and the workload of tests/bench/dbench.sh.
set -eu
build="autoconf automake make gcc pkg-config
	libfuse3-dev fuse3 liburing-dev libssl-dev libinih-dev libattr1-dev
	libibverbs-dev librdmacm-dev ibverbs-providers"
# the metrics endpoints; promtool checks their output in the tests
build="$build libmicrohttpd-dev"
tests="clang libclang-rt-14-dev python3 rsync sqlite3 git attr util-linux
	xz-utils tar procps psmisc systemd
	qemu-system-x86 linux-image-amd64 busybox-static cpio kmod iproute2
	ibverbs-utils rdmacm-utils perftest"
tests="$tests prometheus"
# the cephfs store: libcephfs to build it (configure --with-cephfs), and
# the daemons, tools and ceph-fuse of the throwaway cluster its tests
# start (tests/ceph/ceph-up.sh)
tests="$tests libcephfs-dev ceph-mon ceph-osd ceph-mds ceph-fuse ceph-common
	uuid-runtime bc"
bench="fio gnuplot-nox sshfs openssh-server openssh-client bindfs
	fuse-overlayfs linux-perf dbench"
pkgs=$build
case "${1:-}" in
--tests) pkgs="$build $tests" ;;
--bench) pkgs="$build $tests $bench" ;;
"") ;;
*) echo "usage: $0 [--tests | --bench]" >&2; exit 2 ;;
esac
sudo=
[ "$(id -u)" -eq 0 ] || sudo=sudo
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
# shellcheck disable=SC2086
$sudo apt-get install -y -qq --no-install-recommends $pkgs >/dev/null
echo "install-deps: installed: $(echo $pkgs | wc -w) packages"
