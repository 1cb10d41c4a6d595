"""A whole segment of a tag that a server handed to one client alone."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass


@dataclass(frozen=True)
class Segment:
    """The IDs first, first + stride, …, last of tag (count of them), for
    this client alone (Client.take_segment). stride is above 1 when the tag
    is served from several databases, each with its share of the IDs."""

    tag: str
    first: int
    last: int
    stride: int

    @property
    def count(self) -> int:
        """The number of IDs in the segment."""
        return (self.last - self.first) // self.stride + 1

    def __len__(self) -> int:
        return self.count

    def __iter__(self) -> Iterator[int]:
        """The segment's IDs in increasing order."""
        return iter(range(self.first, self.last + 1, self.stride))
