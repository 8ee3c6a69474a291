"""collie.distributed's CUDA timing on torch.distributed, without a GPU:
collie._torch_calls.call with a stand-in torch.distributed (a world of 4 at
rank 0, one process) and stand-in CUDA events and tensors, so what is
checked is the plumbing the GPU path relies on: the time is the events'
(not the CPU's), a row waits until the GPU has passed the end event and is
written at the next step boundary that finds it passed, an async call's end
event is recorded after wait(), close() waits for events still pending, and
the timing log gets the row with the label. scripts/gpu_check.sh runs the
real thing on a GPU."""

import csv
import os
import types

import pytest

torch = pytest.importorskip("torch")

from collie import _torch_calls as tc  # noqa: E402
import collie.distributed as cd  # noqa: E402
from collie import timing  # noqa: E402


class FakeEvent:
    """A CUDA event whose GPU time the test sets: passed when `gpu_ms` is set."""

    made = []

    def __init__(self, enable_timing=False):
        assert enable_timing
        self.gpu_ms = None
        self.recorded_on = None
        FakeEvent.made.append(self)

    def record(self, stream):
        # As a CUDA event recorded again (the wrappers reuse read events):
        # not reached until the GPU passes this new record, the latest one.
        self.recorded_on = stream
        self.gpu_ms = None
        if self in FakeEvent.made:
            FakeEvent.made.remove(self)
        FakeEvent.made.append(self)

    def query(self):
        return self.gpu_ms is not None

    def synchronize(self):
        # The GPU "reaches" this event when waited for, and every event
        # recorded before it on the stream (one stream here), 1 ms apart.
        for i, ev in enumerate(FakeEvent.made[:FakeEvent.made.index(self) + 1]):
            if ev.gpu_ms is None:
                ev.gpu_ms = 1000.0 + i

    def elapsed_time(self, end):
        assert self.gpu_ms is not None and end.gpu_ms is not None, "elapsed_time before both events completed"
        return end.gpu_ms - self.gpu_ms


class FakeTensor:
    is_cuda = True
    device = "cuda:0"

    def numel(self):
        return 1000

    def element_size(self):
        return 4


class FakeWork:
    def __init__(self):
        self.waited = False

    def wait(self):
        self.waited = True
        return True

    def is_completed(self):
        return self.waited


@pytest.fixture
def fake_cuda(monkeypatch, tmp_path):
    FakeEvent.made = []
    monkeypatch.setattr(torch.cuda, "Event", FakeEvent)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: "stream-of-%s" % device)
    d = types.SimpleNamespace(get_rank=lambda group=None: 0, get_world_size=lambda group=None: 4,
                              get_backend=lambda group=None: "nccl")
    with pytest.warns(UserWarning, match="keep their settings"):  # the session's communicator
        cd.configure({"runtime": {"comms_log": {"enabled": True, "dir": str(tmp_path)}}})
    yield d, tmp_path
    tc.close()
    cd.configure(None)


def rows(path):
    if not os.path.exists(path):
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_cuda_rows_wait_for_events(fake_cuda, rank):
    d, tmp = fake_cuda
    path = os.path.join(str(tmp), "comms.csv")
    t = FakeTensor()
    lg = timing.init_timing_logger(rank, str(tmp / "timing"))
    try:
        tc.step_begin(d, 1, 0)
        assert tc.call(d, lambda: None, tc.ALLREDUCE, t, 4000, None, False, 0, "layer1", None) is None
        s1, e1 = FakeEvent.made[-2:]
        assert (s1.recorded_on, e1.recorded_on) == ("stream-of-cuda:0", "stream-of-cuda:0")
        w = tc.call(d, FakeWork, tc.ALLREDUCE, t, 4000, None, True, 0, None, None)
        assert len(FakeEvent.made) == 3, "the async call's end event is recorded at its wait, not at issue"
        s2 = FakeEvent.made[-1]
        assert w.wait() is True and w._work.waited
        e2 = FakeEvent.made[-1]
        assert e2 is not s2 and e2.recorded_on == "stream-of-cuda:0"
        tc.step_end(d)
        assert rows(path) == [], "step 1 written before the GPU passed its events"
        s1.gpu_ms, e1.gpu_ms = 10.0, 12.5  # 2.5 ms of GPU time
        s2.gpu_ms, e2.gpu_ms = 20.0, 20.25
        tc.step_begin(d, 2, 0)  # a step boundary drains what the GPU passed
        got = rows(path)
        assert len(got) == 1 and got[0]["step"] == "1", got
        assert got[0]["bytes_all_reduce"] == "12000", got  # 2 calls x 2(p-1)/p x 4000 at p = 4
        assert got[0]["t_all_reduce_ms"] == "2.750", got  # the events' times, not the CPU's
        tc.call(d, lambda: None, tc.BROADCAST, t, 4000, None, False, 0, None, None)
        assert len(FakeEvent.made) == 4, "the broadcast reuses two read events rather than making new ones"
        tc.step_end(d)
        tc.close()  # waits for the events still pending (FakeEvent.synchronize)
        got = rows(path)
        assert [r["step"] for r in got] == ["1", "2"] and got[1]["bytes_broadcast"] == "4000", got
        assert got[1]["t_broadcast_ms"] == "1.000", got
        lg.flush()
        with open(lg.path, newline="") as f:
            trows = list(csv.DictReader(f))
        mine = [r for r in trows if r["layer_name"] == "layer1"]
        assert len(mine) == 1 and mine[0]["elapsed_ms"] == "2.500" and mine[0]["iteration"] == "1", trows
    finally:
        timing.shutdown_timing_logger()
