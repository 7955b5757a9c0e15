"""bench/walprofile.py: pg_waldump's records are attributed to this database's relations and to the commits
of the transactions that wrote them; another database's records and transactions do not count."""

from __future__ import annotations

from bench.walprofile import attribute

LINES = [
    # this database (18799): a leaf insert into relfilenode 19051 and a heap insert with a full-page image
    "rmgr: Btree       len (rec/tot):     72/    72, tx:      22616, lsn: 0/08000138, prev 0/080000F8, "
    "desc: INSERT_LEAF off 126, blkref #0: rel 1663/18799/19051 blk 31",
    "rmgr: Heap        len (rec/tot):     59/  8251, tx:      22616, lsn: 0/08000180, prev 0/08000138, "
    "desc: INSERT off 3 flags 0x00, blkref #0: rel 1663/18799/19031 blk 1 FPW",
    # pruning outside a transaction (tx 0), in this database
    "rmgr: Heap2       len (rec/tot):     56/    56, tx:          0, lsn: 0/08000200, prev 0/08000180, "
    "desc: PRUNE latestRemovedXid 0 nredirected 0 ndead 1, blkref #0: rel 1663/18799/19031 blk 1",
    # another database (5), its transaction and its commit
    "rmgr: Heap        len (rec/tot):     54/   300, tx:      22617, lsn: 0/08000300, prev 0/08000200, "
    "desc: INSERT off 4 flags 0x00, blkref #0: rel 1663/5/16384 blk 0",
    "rmgr: Transaction len (rec/tot):     34/    34, tx:      22617, lsn: 0/08000400, prev 0/08000300, "
    "desc: COMMIT 2026-12-05 12:00:00.000001 UTC",
    # our commit, and a block-less record outside any transaction
    "rmgr: Transaction len (rec/tot):     34/    34, tx:      22616, lsn: 0/08000500, prev 0/08000400, "
    "desc: COMMIT 2026-12-05 12:00:00.000002 UTC",
    "rmgr: Standby     len (rec/tot):     50/    50, tx:          0, lsn: 0/08000600, prev 0/08000500, "
    "desc: RUNNING_XACTS nextXid 22618 latestCompletedXid 22616 oldestRunningXid 22618",
]


def test_records_go_to_this_databases_relations_and_its_transactions_commits() -> None:
    result = attribute(LINES, "18799", {19051: "unique_event_seq", 19031: "workflows_event"})
    assert result["by_rel"] == {
        "unique_event_seq": [1, 72, 0, 0],
        "workflows_event": [2, 8251 + 56, 1, 8251],
        "(commit records)": [1, 34, 0, 0],
    }
    assert result["transactions"] == 1
    assert result["by_kind"]["Transaction COMMIT"] == [1, 34]
    assert "Standby RUNNING_XACTS" not in result["by_kind"]


def test_an_unknown_relation_is_named_by_its_file_node() -> None:
    result = attribute(LINES[:1], "18799", {})
    assert result["by_rel"] == {"relfilenode 19051": [1, 72, 0, 0]}
