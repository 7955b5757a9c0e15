"""What a workload writes to the database: WAL bytes, table bytes, database file growth, and the worker
processes' peak memory. Imported only after Django is set up against the throwaway database.

PostgreSQL's WAL is the whole cluster's: another database busy on the same server during a run adds to
the figure (the peers' cluster, ../shared/peers/side_by_side.sh, is private to the benchmarks). A
CHECKPOINT is taken first (when the role may), so the first change to each page after it (a full-page
image) is counted the same way in every run.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from bench import walprofile
from bench.harness import note


def _vendor() -> str:
    from django.db import connection

    return connection.vendor


def _sqlite_files() -> list[Path]:
    from django.db import connection

    name = Path(str(connection.settings_dict["NAME"]))
    return [name, name.with_name(name.name + "-wal")]


def _file_bytes(paths: list[Path]) -> int:
    return sum(p.stat().st_size for p in paths if p.exists())


class WalMeter:
    """WAL bytes written during a block (PostgreSQL: pg_current_wal_lsn() before and after); on SQLite
    the growth of the database file plus its -wal file instead (its WAL is checkpointed into the file
    and reused, so it has no byte counter of its own)."""

    def __enter__(self) -> WalMeter:
        from django.db import connection

        self.vendor = _vendor()
        self.wal_bytes: int | None = None
        self.file_growth: int | None = None
        if self.vendor == "postgresql":
            with connection.cursor() as cur:
                try:
                    cur.execute("CHECKPOINT")
                except Exception as exc:  # noqa: BLE001 - not a superuser: the figure is still right, noisier
                    note(f"CHECKPOINT refused ({exc}): WAL figures include full-page images")
                cur.execute("SELECT pg_current_wal_lsn()")
                self.lsn = cur.fetchone()[0]
                if walprofile.enabled():
                    time.sleep(11)  # an idle backend flushes its statistics within 10 s (PostgreSQL 15)
                    self.counters = walprofile.counters(cur)
        else:
            self.files = _sqlite_files()
            self.size = _file_bytes(self.files)
        return self

    def __exit__(self, *exc: object) -> None:
        from django.db import connection

        if self.vendor == "postgresql":
            with connection.cursor() as cur:
                cur.execute("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), %s), pg_current_wal_lsn()", [self.lsn])
                wal_bytes, self.end_lsn = cur.fetchone()
                self.wal_bytes = int(wal_bytes)
                if walprofile.enabled():
                    # Decoded first: another session's checkpoint may recycle the segments.
                    decoded = walprofile.decode(cur, str(self.lsn), str(self.end_lsn))
                    time.sleep(11)
                    self.profile = (self.counters, walprofile.counters(cur), decoded)
        else:
            self.file_growth = _file_bytes(self.files) - self.size

    def per_step(self, steps: int) -> dict[str, Any]:
        """`wal_bytes_per_step` (null on SQLite) and, on SQLite, `db_file_growth_per_step`."""
        if self.vendor == "postgresql":
            if walprofile.enabled() and steps:
                walprofile.report(*self.profile, steps, self.wal_bytes or 0)
            return {"wal_bytes_per_step": round((self.wal_bytes or 0) / steps)}
        return {"wal_bytes_per_step": None, "db_file_growth_per_step": round((self.file_growth or 0) / steps)}


def history_tables() -> list[str]:
    """The instance table and every table whose rows belong to an instance (a foreign key to it): a
    store that adds a history table is measured without changing the bench."""
    from workflows.models import WorkflowInstance

    tables = [WorkflowInstance._meta.db_table]
    for rel in WorkflowInstance._meta.related_objects:
        if rel.one_to_many or rel.one_to_one:  # a ForeignKey / OneToOne on the other model
            table = rel.related_model._meta.db_table
            if table not in tables:
                tables.append(table)
    return tables


def table_bytes() -> int | None:
    """PostgreSQL: pg_total_relation_size (heap, TOAST and indexes) of the history tables; SQLite: the
    database and -wal files' size."""
    from django.db import connection

    if _vendor() != "postgresql":
        return _file_bytes(_sqlite_files())
    with connection.cursor() as cur:
        cur.execute("SELECT sum(pg_total_relation_size(t::regclass)) FROM unnest(%s::text[]) AS t",
                    [history_tables()])
        return int(cur.fetchone()[0] or 0)


def instance_row_bytes(instance_id: int) -> dict[str, int] | None:
    """PostgreSQL: the stored size of one instance's rows per table (sum of pg_column_size of each
    row: compressed and TOASTed values at their stored size, without indexes or free space)."""
    from django.db import connection

    from workflows.models import WorkflowInstance

    if _vendor() != "postgresql":
        return None
    sizes: dict[str, int] = {}
    with connection.cursor() as cur:
        for table in history_tables():
            column = "id" if table == WorkflowInstance._meta.db_table else "instance_id"
            cur.execute(f'SELECT coalesce(sum(pg_column_size(t.*)), 0) FROM "{table}" t WHERE {column} = %s',
                        [instance_id])
            sizes[table] = int(cur.fetchone()[0])
    return sizes


def peak_rss_mb(pids: list[int]) -> float | None:
    """The largest peak resident set (VmHWM, since the process started) among `pids`, in MB."""
    peaks = []
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    peaks.append(int(line.split()[1]) / 1024)
        except (OSError, ValueError):
            continue
    return round(max(peaks), 1) if peaks else None
