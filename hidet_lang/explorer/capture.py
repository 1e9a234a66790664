"""A child's output read as it comes, keeping at most a cap of it: the first `cap` bytes for the page, and the last
`TAIL_BYTES` for the server's diagnosis (the line a stopped child was at is in the traceback it printed last); the
rest is counted and dropped, so that a program printing without end costs the server no memory."""

from __future__ import annotations

import threading
from typing import BinaryIO

CHUNK_BYTES = 1 << 16
TAIL_BYTES = 1 << 16


class CappedOutput:
    """Reads `stream` to its end in a thread of its own; `text()` and `diagnosis()` once `join()` returned."""

    def __init__(self, stream: BinaryIO, cap: int) -> None:
        self.cap = cap
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream: BinaryIO) -> None:
        with stream:
            while chunk := stream.read1(CHUNK_BYTES):
                self.total += len(chunk)
                room = self.cap - len(self.head)
                if room > 0:
                    self.head += chunk[:room]
                    chunk = chunk[room:]
                if chunk:
                    self.tail = (self.tail + chunk)[-TAIL_BYTES:]

    def join(self, timeout: float | None = None) -> None:
        """Wait until the stream has ended (every process holding it is gone)."""
        self._thread.join(timeout)

    def text(self) -> str:
        """The output kept for the page, and how much more there was: '… N bytes more cut'."""
        cut = self.total - len(self.head)
        kept = self.head.decode("utf-8", "replace")
        return kept + (f"\n… {cut} bytes more cut" if cut else "")

    def diagnosis(self) -> str:
        """The start and the end of the output (for where a stopped child was, and what it was doing)."""
        return self.head.decode("utf-8", "replace") + "\n" + self.tail.decode("utf-8", "replace")
