"""Appending to a file past the page cache (O_DIRECT): a release's shards are gigabytes that no
process here reads again, and copying them into the page cache is most of a buffered write's
CPU (the kernel's copy, its page allocations) and all of its wait for dirty pages."""

from __future__ import annotations

import mmap
import os

BLOCK = 4096  # offsets, sizes and buffer addresses of direct writes are multiples of it
STAGING_BYTES = 8 << 20


class DirectAppender:
    """A write-only file that appends what it is given in whole blocks, written from a
    page-aligned staging buffer with O_DIRECT; ``close`` writes the last block padded and cuts
    the file to the bytes given. Open it with ``open_direct`` (None where the file system or the
    platform has no direct writes)."""

    def __init__(self, descriptor: int, staging_bytes: int = STAGING_BYTES):
        self.descriptor = descriptor
        self.staging = mmap.mmap(-1, max(staging_bytes // BLOCK, 1) * BLOCK)
        self.held = 0  # bytes at the staging's start not written yet
        self.written = 0  # bytes in the file, whole blocks until closed

    def write(self, data) -> int:
        view = memoryview(data).cast("B")
        size = len(view)
        while len(view):
            taken = min(len(self.staging) - self.held, len(view))
            self.staging[self.held : self.held + taken] = view[:taken]
            self.held += taken
            view = view[taken:]
            self._write_blocks(self.held // BLOCK * BLOCK)
        return size

    def _write_blocks(self, size: int) -> None:
        done = 0
        with memoryview(self.staging) as staging:
            while done < size:
                done += os.pwrite(self.descriptor, staging[done:size], self.written + done)
        self.written += size
        left = self.held - size
        if size and left:
            self.staging.move(0, size, left)
        self.held = left

    def flush(self) -> None:
        """Nothing waits in a user-space buffer but the last partial block, which only
        ``close`` can write."""

    def fileno(self) -> int:
        return self.descriptor

    def close(self) -> None:
        if self.descriptor < 0:
            return
        try:
            size = self.written + self.held
            if self.held:
                self.staging[self.held : BLOCK] = bytes(BLOCK - self.held)
                self.held = BLOCK
                self._write_blocks(BLOCK)
                os.ftruncate(self.descriptor, size)
        finally:
            os.close(self.descriptor)
            self.descriptor = -1
            self.staging.close()


def open_direct(path: str) -> DirectAppender | None:
    """A direct appender to the (empty) file at ``path``, or None where direct writes are not
    to be had (tmpfs, a platform without O_DIRECT): a block is written and taken back to
    find out."""
    flag = getattr(os, "O_DIRECT", 0)
    if not flag:
        return None
    try:
        descriptor = os.open(path, os.O_WRONLY | flag)
    except OSError:
        return None
    appender = DirectAppender(descriptor)
    try:  # a file system may take the flag and refuse the writes
        appender.staging[:BLOCK] = bytes(BLOCK)
        with memoryview(appender.staging) as staging:
            os.pwrite(descriptor, staging[:BLOCK], 0)
        os.ftruncate(descriptor, 0)
    except OSError:
        appender.close()
        return None
    return appender
