"""new_comm(store=<object>): a communicator that meets through a key-value
store of the caller's (torch.distributed's Store here, as the torch backend
uses it; any object with set/get/add/wait), with no port or directory of
collie's own; and the errors of that path."""

import datetime
import os

import numpy as np
import pytest

import collie


class DictStore:
    """A store of one process (a job of one rank), recording what collie asked."""

    def __init__(self):
        self.kv, self.calls = {}, []

    def set(self, key, value):
        self.calls.append("set")
        self.kv[key] = bytes(value)

    def get(self, key):
        self.calls.append("get")
        return self.kv[key]

    def add(self, key, delta):
        self.calls.append("add")
        v = int(self.kv.get(key, b"0")) + delta
        self.kv[key] = str(v).encode()
        return v

    def wait(self, keys, timeout):
        self.calls.append("wait")
        missing = [k for k in keys if k not in self.kv]
        if missing:
            raise RuntimeError("Wait timeout: %s" % missing)


def test_torch_file_store(comm, rank, size, shared_dir):
    """Every rank of the session meets through a torch FileStore (rank and
    size given), runs collectives, splits (the split meets through the same
    store) and finalizes; the store holds collie's keys afterwards."""
    dist = pytest.importorskip("torch.distributed")
    store = dist.FileStore(os.path.join(shared_dir, "store"), size)
    c = collie.new_comm(name="kv", store=store, rank=rank, world_size=size, timeout=20)
    try:
        x = np.full(100, rank + 1, dtype=np.int64)
        c.all_reduce(x)
        assert (x == size * (size + 1) // 2).all()
        s = c.split_color(rank % 2)
        y = np.ones(3, dtype=np.float32)
        s.all_reduce(y)
        assert y[0] == len(range(rank % 2, size, 2))
        s.finalize()
        if size > 1:
            assert int(store.add("world-inits/%d" % rank, 0)) == 1
    finally:
        c.finalize()


def test_store_object_errors(comm, monkeypatch):
    with pytest.raises(collie.InvalidArgument, match=r"has no set\(\) method \(expected set, get, add and wait"):
        collie.new_comm(name="kv", store=object(), rank=0, world_size=1)

    class NoWait:
        set = get = add = staticmethod(lambda *a: None)

    with pytest.raises(collie.InvalidArgument, match=r"has no wait\(\) method"):
        collie.new_comm(name="kv", store=NoWait(), rank=0, world_size=1)
    # Without rank and world_size, they come from the launcher's variables
    # (torchcomms' new_comm(backend, device, store=store)); with none set:
    for var in ("COLLIE_RANK", "COLLIE_WORLD_SIZE", "RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_RANK",
                "OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMI_SIZE", "SLURM_PROCID", "SLURM_NTASKS"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(collie.InvalidArgument, match="needs rank and world_size"):
        collie.new_comm(name="kv", store=DictStore())
    monkeypatch.setenv("RANK", "zero")
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(collie.InvalidArgument, match="RANK = 'zero'"):
        collie.new_comm(name="kv", store=DictStore())
    with pytest.raises(collie.InvalidArgument, match="must be"):
        collie.new_comm(name="kv", store="udp://x:1")


def test_store_object_one_rank():
    """A job of one rank needs no store: collie never calls it."""
    st = DictStore()
    c = collie.new_comm(name="kv1", store=st, rank=0, world_size=1)
    c.finalize()
    assert st.calls == []


def test_store_object_timeout_names_key():
    """Rank 1 of 2 whose rank 0 never comes: the init fails at its timeout
    naming the key it waited for and what the store said."""
    st = DictStore()
    with pytest.raises(collie.Timeout, match=r'store get "nonce/1".*the store said: get .nonce/1.'):
        collie.new_comm(name="kv2", store=st, rank=1, world_size=2, timeout=datetime.timedelta(milliseconds=300))
    assert "add" in st.calls and "wait" in st.calls


def test_store_object_raising_callback():
    """A store whose set raises: the init fails (never a crash, never a
    success) with collie's message and the store's own text."""

    class Broken(DictStore):
        def set(self, key, value):
            raise OSError("disk full")

    with pytest.raises(collie.RemoteError, match="disk full"):
        collie.new_comm(name="kv3", store=Broken(), rank=0, world_size=2, timeout=1)
