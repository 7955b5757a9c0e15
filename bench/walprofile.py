"""Where a workload's WAL goes, on PostgreSQL: `BENCH_WAL_PROFILE=1 python -m bench --only W1` (or W4).

Around the measured block WalMeter also snapshots the database's own counters (transactions,
rows inserted/updated/HOT-updated/deleted per table) and, when `pg_waldump` can read the server's
pg_wal (a local cluster, the bench run as root or as the postgres user; BENCH_PGDATA names the data
directory, default /var/lib/postgresql/15/main), decodes the WAL between the two LSNs and attributes
each record's bytes to the relation of its first block (tables, indexes, TOAST), keeping only this
database's records and the commit records of the transactions that wrote them: another database busy on
the same cluster then does not count. Printed on stderr, per step, never on the JSON lines.

Full-page images (`FPW` in pg_waldump's output): the first change to a page after a checkpoint
logs the whole page. WalMeter takes a CHECKPOINT first, so each page the run touches that existed
before it costs one image; new pages (a table's or an index's tail) are logged as initialised pages.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections import defaultdict
from pathlib import Path
from typing import Any

from bench.harness import note

RECORD = re.compile(r"rmgr: (\S+)\s+len \(rec/tot\):\s+(\d+)/\s*(\d+), tx:\s+(\d+), .*?desc: (\S+)(.*)$")
BLOCK = re.compile(r"blkref #0: rel (\d+)/(\d+)/(\d+)")

TABLE_COUNTERS = ("n_tup_ins", "n_tup_upd", "n_tup_hot_upd", "n_tup_del")


def enabled() -> bool:
    return os.environ.get("BENCH_WAL_PROFILE", "") not in ("", "0")


def counters(cur: Any) -> dict[str, Any]:
    """The database's transactions and its tables' row counters (pg_stat_*: may lag by the stats
    flush interval, so they are read after a pause: see `report`)."""
    cur.execute("SELECT pg_stat_clear_snapshot()")
    cur.execute("SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = current_database()")
    xacts = int(cur.fetchone()[0])
    cur.execute(f"SELECT relname, {', '.join(TABLE_COUNTERS)} FROM pg_stat_user_tables")
    tables = {row[0]: row[1:] for row in cur.fetchall()}
    return {"xacts": xacts, "tables": tables}


def _waldump() -> str | None:
    found = shutil.which("pg_waldump")
    if found:
        return found
    for candidate in sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_waldump"), reverse=True):
        return str(candidate)
    return None


def _names(cur: Any) -> dict[int, str]:
    cur.execute("SELECT relfilenode, relname FROM pg_class WHERE relfilenode <> 0")
    names = {int(node): name for node, name in cur.fetchall()}
    cur.execute("SELECT c.reltoastrelid, c.relname FROM pg_class c WHERE c.reltoastrelid <> 0")
    for toast_oid, owner in cur.fetchall():
        cur.execute("SELECT relfilenode FROM pg_class WHERE oid = %s", [toast_oid])
        row = cur.fetchone()
        if row:
            names[int(row[0])] = f"toast({owner})"
    cur.execute("SELECT c.relfilenode, t.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
                "JOIN pg_class t ON t.oid = i.indrelid WHERE t.relname LIKE 'pg_toast_%%'")
    for node, toast in cur.fetchall():
        names[int(node)] = f"toast index {toast}"
    return names


def decode(cur: Any, start: str, end: str) -> dict[str, Any] | None:
    """This database's WAL records between two LSNs: bytes and records by relation and kind."""
    tool = _waldump()
    pgdata = Path(os.environ.get("BENCH_PGDATA", "/var/lib/postgresql/15/main"))
    if tool is None or not os.access(pgdata / "pg_wal", os.R_OK):
        note(f"WAL profile: no pg_waldump or {pgdata}/pg_wal is not readable: counters only")
        return None
    cur.execute("SELECT oid FROM pg_database WHERE datname = current_database()")
    db_oid = str(cur.fetchone()[0])
    names = _names(cur)
    proc = subprocess.run([tool, "-p", str(pgdata / "pg_wal"), "-s", start, "-e", end],
                          capture_output=True, text=True, check=False)
    result = attribute(proc.stdout.splitlines(), db_oid, names)
    result["errors"] = proc.stderr.strip().splitlines()[-1:] if proc.returncode else []
    return result


def attribute(lines: list[str], db_oid: str, names: dict[int, str]) -> dict[str, Any]:
    """pg_waldump's record lines → bytes and records by relation (its first block's) and by kind, for the
    database `db_oid`, plus the block-less records (commits) of the transactions that wrote to it."""
    by_rel: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])  # records, bytes, FPIs, FPI record bytes
    by_kind: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    ours: set[str] = set()
    pending: list[tuple[str, str, int]] = []  # records without a block of this db: (tx, kind, bytes)
    for line in lines:
        match = RECORD.search(line)
        if not match:
            continue
        rmgr, _rec, tot, tx, desc, rest = match.groups()
        size = int(tot)
        kind = f"{rmgr} {desc}"
        block = BLOCK.search(rest)
        if block is None:
            pending.append((tx, kind, size))
            continue
        if block.group(2) != db_oid:
            continue
        if tx != "0":  # 0: no transaction (pruning, vacuum); its block-less records are not ours
            ours.add(tx)
        rel = names.get(int(block.group(3)), f"relfilenode {block.group(3)}")
        entry = by_rel[rel]
        entry[0] += 1
        entry[1] += size
        if "FPW" in rest:
            entry[2] += rest.count("FPW")
            entry[3] += size
        by_kind[kind][0] += 1
        by_kind[kind][1] += size
    for tx, kind, size in pending:
        if tx in ours:
            entry = by_rel["(commit records)" if "COMMIT" in kind else f"({kind})"]
            entry[0] += 1
            entry[1] += size
            by_kind[kind][0] += 1
            by_kind[kind][1] += size
    return {"by_rel": dict(by_rel), "by_kind": dict(by_kind), "transactions": len(ours)}


def report(before: dict[str, Any], after: dict[str, Any], decoded: dict[str, Any] | None, steps: int,
           wal_bytes: int) -> None:
    """Print the profile on stderr, per step."""
    note(f"WAL profile: {wal_bytes / steps:,.0f} WAL bytes per step (whole cluster), "
         f"{(after['xacts'] - before['xacts']) / steps:.2f} transactions per step")
    for table, row in sorted(after["tables"].items()):
        old = before["tables"].get(table, (0,) * len(TABLE_COUNTERS))
        delta = [new - was for new, was in zip(row, old, strict=True)]
        if any(delta):
            note("  rows per step  " + table.ljust(34) + "  ".join(
                f"{name[6:]} {value / steps:5.2f}" for name, value in zip(TABLE_COUNTERS, delta, strict=True)))
    if decoded is None:
        return
    total = sum(entry[1] for entry in decoded["by_rel"].values())
    note(f"  this database's WAL records: {total / steps:,.0f} bytes per step "
         f"({decoded['transactions'] / steps:.2f} writing transactions per step)")
    for rel, (records, size, fpis, fpi_bytes) in sorted(decoded["by_rel"].items(), key=lambda kv: -kv[1][1]):
        note(f"  {rel:<44} {size / steps:7.0f} B/step  {records / steps:5.2f} records/step"
             + (f"  {fpis} FPIs ({fpi_bytes / steps:.0f} B/step in records with one)" if fpis else ""))
    for kind, (records, size) in sorted(decoded["by_kind"].items(), key=lambda kv: -kv[1][1])[:14]:
        note(f"    {kind:<42} {size / steps:7.0f} B/step  {records / steps:5.2f} records/step")
    for error in decoded["errors"]:
        note(f"  pg_waldump: {error}")
