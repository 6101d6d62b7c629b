"""Small device counters read back on the host without a host sync.

Three parts of the library need a number the GPU computed (the binning's
intersection count and overflow flag, adam_rows_'s bad-entry count, the
offload's visible-row count) but must not wait for it: the step would stall
the CPU and idle the GPU. Each report is a non-blocking copy of a small
int64 tensor into a pinned host buffer and an event recorded after it on
that tensor's stream; a later call queries the events (never waits on
them, unless asked) and reads the buffers whose copies have landed.

Buffers and events are reused once read: freeing pinned memory after an
asynchronous copy makes torch's host allocator record an event of its own,
host time before the next call's first kernel. An event stays with the
device it was first recorded on, so spares are kept per device.
"""
import collections

import torch

_SPARES_PER_DEVICE = 8


def capturing():
    return torch.cuda.is_available() and torch.cuda.is_current_stream_capturing()


class AsyncReads:
    """A queue of reports, each ``size`` int64 values read from the device.

    ``record(values, payload)`` queues one (nothing under CUDA-graph
    capture: a replay rewrites the graph's own tensor, which its caller
    reads); ``ready()`` returns ``(values, payload)`` of every report whose
    copy has landed, in the order recorded, and keeps the others.
    """

    def __init__(self, size):
        self.size = int(size)
        self.pending = collections.deque()  # (event, pinned buffer, device index, payload)
        self.spare = collections.defaultdict(list)  # device index -> read (event, pinned buffer)

    def __len__(self):
        return len(self.pending)

    def record(self, values, payload=None):
        """Queues the read of the CUDA int64 tensor ``values`` (``size``
        elements); False, queueing nothing, under capture."""
        if capturing():
            return False
        dev = values.device.index if values.device.index is not None else torch.cuda.current_device()
        spare = self.spare[dev]
        if spare:
            ev, pinned = spare.pop()
        else:
            ev, pinned = torch.cuda.Event(), torch.empty(self.size, dtype=torch.int64, pin_memory=True)
        pinned.copy_(values.reshape(self.size), non_blocking=True)
        # On the stream the copy ran on: the current stream of values'
        # device (a plain record() takes the current device's stream, which
        # differs when the tensor is not on the current device, so query()
        # could pass before the copy landed).
        ev.record(torch.cuda.current_stream(values.device))
        self.pending.append((ev, pinned, dev, payload))
        return True

    def ready(self, wait=False):
        """``[(values, payload)]`` of the landed reports, oldest first
        (``wait``: every queued report, waiting for each). Nothing under
        capture, where no event may be queried."""
        if not self.pending or capturing():
            return []
        out, keep = [], collections.deque()
        while self.pending:
            item = self.pending.popleft()
            ev, pinned, dev, payload = item
            if wait:
                ev.synchronize()
            elif not ev.query():
                keep.append(item)
                continue
            out.append((pinned.tolist(), payload))
            if len(self.spare[dev]) < _SPARES_PER_DEVICE:
                self.spare[dev].append((ev, pinned))
        self.pending = keep
        return out
