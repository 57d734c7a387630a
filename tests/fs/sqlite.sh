#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# sqlite.sh - an SQLite database on the mount: 10,000 rows inserted in
# transactions of 1000 (rollback journal, then WAL), read back by count and
# sum, and PRAGMA integrity_check, also after a remount.  SQLite depends on
# exact fsync, byte-range locks, truncate and (in WAL mode) shared mmap.
. "$(dirname "$0")/lib.sh"
bcf_init
command -v sqlite3 > /dev/null || bcf_skip "sqlite3 is not installed"
bcf_mount

# sql N ROWS_FROM: one transaction of 1000 rows starting at ROWS_FROM
fill_db()
{
	local db=$1 mode=$2 t i

	{
		echo "PRAGMA journal_mode=$mode;"
		echo "CREATE TABLE t (id INTEGER PRIMARY KEY, v INTEGER, s TEXT);"
		for t in $(seq 0 9); do
			echo "BEGIN;"
			for i in $(seq $((t * 1000 + 1)) $((t * 1000 + 1000))); do
				echo "INSERT INTO t VALUES ($i, $((i * 7)), 'row $i');"
			done
			echo "COMMIT;"
		done
	} | sqlite3 "$db" > "$BCF_TMP/sql.out" 2>&1 ||
		{ cat "$BCF_TMP/sql.out"; bcf_fail "sqlite3 $db ($mode)"; }
}

check_db()
{
	local db=$1 got

	got=$(sqlite3 "$db" 'SELECT count(*), sum(v), max(id) FROM t;' 2>&1)
	bcf_eq "count, sum, max of $db" "10000|350035000|10000" "$got"
	got=$(sqlite3 "$db" "SELECT s FROM t WHERE id = 4321;" 2>&1)
	bcf_eq "row 4321 of $db" "row 4321" "$got"
	got=$(sqlite3 "$db" 'PRAGMA integrity_check;' 2>&1)
	bcf_eq "integrity_check of $db" ok "$got"
}

fill_db "$BCF_MNT/rollback.db" delete
check_db "$BCF_MNT/rollback.db"
fill_db "$BCF_MNT/wal.db" wal
check_db "$BCF_MNT/wal.db"
sqlite3 "$BCF_MNT/wal.db" 'DELETE FROM t WHERE id > 5000; VACUUM;' ||
	bcf_fail "delete and vacuum"
got=$(sqlite3 "$BCF_MNT/wal.db" 'SELECT count(*), sum(v) FROM t;')
bcf_eq "after delete" "5000|87517500" "$got"
bcf_remount
check_db "$BCF_MNT/rollback.db"
got=$(sqlite3 "$BCF_MNT/wal.db" 'PRAGMA integrity_check; SELECT count(*) FROM t;')
bcf_eq "wal.db after remount" "ok
5000" "$got"
exit 0
