#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
# The systemd unit as installed starts the agent and serves a mount:
# `make install` into a temporary prefix, then run the installed unit's
# ExecStart the way systemd would, with the unit's capability bounding set,
# ambient capabilities, NoNewPrivileges and LimitMEMLOCK (systemd's default
# 8 MiB when the unit sets none) reproduced by setpriv and prlimit, and
# mount it with bluecachefs.  `systemd-analyze verify` must be clean on the
# installed unit.
set -u
fail() { echo "FAIL: $*"; exit 1; }
skip() { echo "SKIP: $*"; exit 77; }
[ -n "${top_builddir:-}" ] || { echo "top_builddir unset"; exit 99; }
[ "$(id -u)" -eq 0 ] || skip "the unit runs the agent as root: needs root"
for t in setpriv prlimit python3 fusermount3; do
	command -v $t > /dev/null || skip "no $t"
done
[ -c /dev/fuse ] || skip "no /dev/fuse"
fs="$top_builddir/fs/bluecachefs"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/service.XXXXXX") || exit 99
apid=
cleanup() {
	fusermount3 -u "$tmp/mnt" 2> /dev/null
	[ -n "$apid" ] && kill "$apid" 2> /dev/null && wait "$apid"
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# install, as a packager would, into a prefix of our own
p="$tmp/p"
timeout 300 make -s -C "$top_builddir" install prefix="$p" \
	> "$tmp/install.log" 2>&1 || { cat "$tmp/install.log"; fail "make install"; }
unit="$p/lib/systemd/system/bluecache-agent.service"
conf="$p/etc/bluecache/agent.conf"
[ -f "$unit" ] || fail "no unit installed at $unit"
[ -f "$conf" ] || fail "no configuration installed at $conf"

# installing again keeps a configuration that was edited
echo "# edited" >> "$conf"
timeout 300 make -s -C "$top_builddir" install prefix="$p" \
	> "$tmp/install.log" 2>&1 || { cat "$tmp/install.log"; fail "make install again"; }
tail -n 1 "$conf" | grep -qx "# edited" || fail "make install overwrote $conf"

if command -v systemd-analyze > /dev/null; then
	MANPATH="$p/share/man" timeout 120 systemd-analyze verify "$unit" \
		> "$tmp/verify" 2>&1 || { cat "$tmp/verify"; fail "systemd-analyze verify"; }
	[ -s "$tmp/verify" ] && { cat "$tmp/verify"; fail "systemd-analyze verify is not clean"; }
else
	echo "no systemd-analyze: not verifying the unit (install systemd)"
fi

# the unit's settings (the last assignment of a key wins)
key() { sed -n "s/^$1=//p" "$unit" | tail -n 1; }
exec_start=$(key ExecStart)
bounding=$(key CapabilityBoundingSet)
ambient=$(key AmbientCapabilities)
nnp=$(key NoNewPrivileges)
memlock=$(key LimitMEMLOCK)
user=$(key User)
[ -n "$exec_start" ] || fail "no ExecStart"
case $exec_start in
"$p/sbin/bluecache-agent "*) ;;
*) fail "ExecStart is not the installed agent: $exec_start" ;;
esac
case $exec_start in
*" --config $conf "*) ;;
*) fail "ExecStart does not read the installed configuration: $exec_start" ;;
esac
[ -z "$user" ] || skip "the unit runs as $user: not reproduced here"
caps() {	# CAP_A CAP_B -> -all,+a,+b
	printf -- '-all'
	for c in $1; do
		printf ',+%s' "$(echo "${c#CAP_}" | tr 'A-Z' 'a-z')"
	done
}
case $memlock in
""|infinity) [ -n "$memlock" ] && memlock=unlimited || memlock=8388608 ;;
esac
set -- setpriv --bounding-set "$(caps "$bounding")" \
	--inh-caps "$(caps "$ambient")" --ambient-caps "$(caps "$ambient")"
[ "$nnp" = yes ] && set -- "$@" --no-new-privs

# the configuration as an administrator edits it: a data root, a secret,
# a unix socket of our own
mkdir "$tmp/root" "$tmp/mnt" || exit 99
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$tmp/secret"
chmod 600 "$tmp/secret"
sed -i -e "s|^root = .*|root = $tmp/root|" \
	-e "s|^secret-file = .*|secret-file = $tmp/secret|" \
	-e '/^listen = /d' -e "s|^workers = .*|workers = 1|" "$conf"
echo "listen = unix:$tmp/agent.sock" >> "$conf"

# a sandbox without CAP_SYS_RESOURCE cannot raise the hard limit: keep it
if ! prlimit --memlock="$memlock" true 2> /dev/null; then
	echo "cannot set LimitMEMLOCK=$memlock here; keeping $(ulimit -l) KiB"
	memlock=$(prlimit --noheadings --raw --output SOFT --memlock)
fi
# shellcheck disable=SC2086
prlimit --memlock="$memlock" -- "$@" $exec_start > "$tmp/agent.log" 2>&1 &
apid=$!
i=0
while [ $i -lt 100 ] && [ ! -S "$tmp/agent.sock" ] &&
      kill -0 $apid 2> /dev/null; do
	sleep 0.1
	i=$((i + 1))
done
[ -S "$tmp/agent.sock" ] || { cat "$tmp/agent.log"; fail "the agent did not start as the unit starts it"; }

"$fs" "unix:$tmp/agent.sock" "$tmp/mnt" -o secret_file="$tmp/secret" \
	2> "$tmp/fs.log" || { cat "$tmp/fs.log" "$tmp/agent.log"; fail "mount"; }
echo hello > "$tmp/mnt/f" || fail "write through the mount"
[ "$(cat "$tmp/root/f")" = hello ] || fail "the write did not reach the root"
fusermount3 -u "$tmp/mnt" || fail "unmount"
kill -TERM $apid
wait $apid
rc=$?
apid=
[ $rc -eq 0 ] || { cat "$tmp/agent.log"; fail "agent exit $rc"; }
if grep -q error "$tmp/agent.log"; then cat "$tmp/agent.log"; fail "error in log"; fi
echo PASS
exit 0
