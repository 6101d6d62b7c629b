"""nurec_ops/_async_read.AsyncReads: device counters read back without a
host sync (the binning's capacity reports, adam_rows_'s status and the
offload's visible counts all go through it). CUDA only: on the CPU no part
of the library reads asynchronously."""
import pytest
import torch

from nurec_ops._async_read import AsyncReads

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")]


def _late_value(value, stream):
    """A [2] int64 tensor that `stream` fills with `value` only after ~50 ms
    of device time, so that a report of it cannot have landed at once."""
    with torch.cuda.stream(stream):
        t = torch.zeros(2, dtype=torch.int64, device="cuda")
        torch.cuda._sleep(100_000_000)
        t.fill_(value)
    return t


def test_a_report_lands_after_its_stream_reaches_it():
    """Recorded on a side stream, the report waits for that stream, not for
    the default one (a plain Event.record() would take the current device's
    default stream and read the buffer before the copy)."""
    reads = AsyncReads(2)
    side = torch.cuda.Stream()
    t = _late_value(7, side)
    with torch.cuda.stream(side):
        assert reads.record(t, "first")
    assert reads.ready() == []  # the side stream is still asleep
    assert len(reads) == 1
    side.synchronize()
    assert reads.ready() == [([7, 7], "first")]
    assert len(reads) == 0


def test_landed_reports_in_order_and_pending_kept():
    reads = AsyncReads(2)
    for v in (1, 2, 3):
        reads.record(torch.full((2,), v, dtype=torch.int64, device="cuda"), v)
    side = torch.cuda.Stream()
    late = _late_value(9, side)
    with torch.cuda.stream(side):
        reads.record(late, 9)
    for ev, _, _, _ in list(reads.pending)[:3]:  # those three landed (not the whole device: the sanitizers
        ev.synchronize()                          # serialize streams, and a device sync would wait for the sleep)
    assert [p for _, p in reads.ready()] == [1, 2, 3]
    assert len(reads) == 1
    assert reads.ready(wait=True) == [([9, 9], 9)]


def test_buffers_are_reused_once_read():
    """A read buffer serves the next report (freeing pinned memory after an
    asynchronous copy costs host time in torch's allocator)."""
    reads = AsyncReads(1)
    reads.record(torch.ones(1, dtype=torch.int64, device="cuda"))
    first = reads.pending[0][1].data_ptr()
    assert reads.ready(wait=True) == [([1], None)]
    reads.record(torch.full((1,), 5, dtype=torch.int64, device="cuda"))
    assert reads.pending[0][1].data_ptr() == first
    assert reads.ready(wait=True) == [([5], None)]


def test_nothing_is_queued_or_read_under_capture():
    reads = AsyncReads(1)
    t = torch.zeros(1, dtype=torch.int64, device="cuda")
    reads.record(t + 1, "before")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    g = torch.cuda.CUDAGraph()
    with torch.cuda.stream(s), torch.cuda.graph(g, stream=s):
        u = t + 2
        assert reads.record(u) is False
        assert reads.ready() == []  # no event may be queried while capturing
    torch.cuda.current_stream().wait_stream(s)
    assert reads.ready(wait=True) == [([1], "before")]
    assert len(reads) == 0
