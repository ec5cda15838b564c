"""RowGroupFill: how full the spans table's last row group is, so checkpoints fall on row-group boundaries.

A DuckDB checkpoint rewrites, whole, every row group that gained rows since the previous checkpoint. A
checkpoint in the middle of a row group writes it part-full, and the next one writes it again with the
rows added since; DuckDB also merges part-full neighbours, rewriting them once more. Checkpointing each
group once, when it is full, nearly halves the write cost per row and keeps every checkpoint short
(bench/RESULTS.md, store writes).

So the store writer fills one row group at a time: it takes no more rows into a transaction than the
group has room for, checkpoints once the group is full, and checkpoints first when the next transaction
does not fit in what is left (a checkpoint for time or memory can still come part-way).

How DuckDB places the rows of a committed transaction (1.5, checked by ``tests/test_row_groups.py``):
into the last row group while they fit, the rest spilling into new groups; after a checkpoint, into a new
group when the last one is full; a transaction of a whole group or more always starts new groups. After a
checkpoint that left the last group part-full (one for time or memory), where the next rows go depends
on sizes (DuckDB may append to it, or merge it with its successor); the estimate assumes a new group.
A wrong estimate costs speed only, never data.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["RowGroupFill"]


@dataclass(slots=True)
class RowGroupFill:
    """The last row group of one table: ``rows`` in it (of ``size``), and whether any of them were
    appended since the last checkpoint (``unsaved``)."""

    size: int
    rows: int = 0
    unsaved: bool = False

    @property
    def room(self) -> int:
        """Rows the next transaction can add to the current group; after a checkpoint, a new group's."""
        return self.size - self.rows if self.unsaved else self.size

    @property
    def full(self) -> bool:
        return self.rows >= self.size

    def fits(self, rows: int) -> bool:
        return rows <= self.room

    def appended(self, rows: int) -> None:
        """A transaction committed ``rows`` new rows to the table."""
        if rows <= 0:
            return
        added = self.rows + rows if self.unsaved and rows < self.size else rows
        self.rows = (added - 1) % self.size + 1
        self.unsaved = True

    def checkpointed(self) -> None:
        self.unsaved = False
