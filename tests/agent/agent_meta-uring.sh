#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
#
# agent_meta-uring.sh - the metadata test against an agent started with
# --meta-io uring, so that both ways of running a metadata operation (the
# system call on the worker, the default, and io_uring) are checked.
T_AGENT_META_IO=uring
export T_AGENT_META_IO
exec "${top_builddir:-.}/tests/agent/agent_meta"
