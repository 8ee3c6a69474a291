"""collie.objcol: every object collective, with objects of different sizes
per rank (sizes exchanged first), on the default communicator and on an
explicit group, and their argument errors."""

import pytest

import collie
from collie import objcol


def obj_of(rank):
    return {"rank": rank, "payload": "x" * (rank * 1000 + 1), "nested": [rank, (rank, None)], "set": {rank}}


def test_all_gather_object(comm, rank, size):
    out = [None] * size
    objcol.all_gather_object(out, obj_of(rank), group=comm)
    assert out == [obj_of(q) for q in range(size)]
    out2 = [None] * size
    objcol.all_gather_object(out2, rank)  # group=None: the default communicator
    assert out2 == list(range(size))


def test_gather_object(comm, rank, size):
    for dst in range(size):
        out = [None] * size if rank == dst else None
        objcol.gather_object(obj_of(rank), out, dst=dst, group=comm)
        if rank == dst:
            assert out == [obj_of(q) for q in range(size)]


def test_broadcast_object_list(comm, rank, size):
    src = size - 1
    lst = [obj_of(src), "two", 3.0] if rank == src else [None, None, None]
    objcol.broadcast_object_list(lst, src=src, group=comm)
    assert lst == [obj_of(src), "two", 3.0]


def test_scatter_object_list(comm, rank, size):
    out = [None]
    objcol.scatter_object_list(out, [obj_of(q) for q in range(size)] if rank == 0 else None, src=0, group=comm)
    assert out[0] == obj_of(rank)


def test_send_recv_object_list(comm, rank, size):
    if size < 2:
        pytest.skip("needs 2 ranks")
    if rank == 0:
        objcol.send_object_list([obj_of(0), b"bytes"], dst=size - 1, group=comm, tag=5)
    elif rank == size - 1:
        got = [None, None]
        assert objcol.recv_object_list(got, src=0, group=comm, tag=5) == 0
        assert got == [obj_of(0), b"bytes"]


def test_objcol_errors(comm, rank, size):
    with pytest.raises(collie.InvalidArgument, match="object_list has %d entries, expected %d" % (size + 1, size)):
        objcol.all_gather_object([None] * (size + 1), 1, group=comm)
    with pytest.raises(collie.InvalidArgument, match="must be a list"):
        objcol.broadcast_object_list((1, 2), group=comm)
    with pytest.raises(collie.InvalidArgument, match="at least one entry"):
        objcol.scatter_object_list([], None, group=comm)
    with pytest.raises(collie.InvalidArgument, match="dst is required"):
        objcol.send_object_list([None], None, group=comm)
    with pytest.raises(collie.InvalidArgument, match=r"not a collie Comm.*Its forms: all_gather_object\(comm, "
                                                     r"object_list, obj.*all_gather_object\(object_list, obj, group"):
        objcol.all_gather_object([None] * size, 1, group="world")
    # Neither form: the message names both.
    with pytest.raises(collie.InvalidArgument, match=r"missing a required argument: 'obj'.*Its forms"):
        objcol.all_gather_object(comm, [None] * size)
    with pytest.raises(collie.InvalidArgument, match=r"scatter_object_list\(comm, root, scatter_object_output_list"):
        objcol.scatter_object_list(comm, [None])
    out = [None] * size
    objcol.all_gather_object(out, "still fine", group=comm)
    assert out == ["still fine"] * size


def test_torchcomms_forms(comm, rank, size):
    """torchcomms' calls, the communicator first and root= (the issue's
    objcol.all_gather_object(comm, output, my_object)), with a timeout."""
    out = [None] * size
    objcol.all_gather_object(comm, out, obj_of(rank))
    assert out == [obj_of(q) for q in range(size)]
    root = size - 1
    got = [None] * size if rank == root else None
    objcol.gather_object(comm, obj_of(rank), root, got, timeout=20)
    if rank == root:
        assert got == [obj_of(q) for q in range(size)]
    lst = ["a", {"b": 2}] if rank == root else [None, None]
    objcol.broadcast_object_list(comm, lst, root=root)
    assert lst == ["a", {"b": 2}]
    one = [None]
    objcol.scatter_object_list(comm, 0, one, [obj_of(q) for q in range(size)] if rank == 0 else None)
    assert one[0] == obj_of(rank)
    if size > 1:
        if rank == 0:
            objcol.send_object_list(comm, ["to", size - 1], size - 1)
        elif rank == size - 1:
            got = [None, None]
            objcol.recv_object_list(comm, got, 0)
            assert got == ["to", size - 1]


def test_recv_object_list_any_source(comm, rank, size):
    """src None: whichever rank sends first; the sender's rank comes back."""
    if size < 2:
        pytest.skip("needs 2 ranks")
    if rank == 0:
        senders = []
        for _ in range(size - 1):
            got = [None]
            src = objcol.recv_object_list(got, None, group=comm, tag=3)
            assert got == [obj_of(src)]
            senders.append(src)
        assert sorted(senders) == list(range(1, size))
    else:
        objcol.send_object_list([obj_of(rank)], 0, group=comm, tag=3)


def test_torchcomms_objcol_example(comm):
    """torchcomms' objcol example as its users run it, with collie's
    communicator in place of `new_comm("ncclx", torch.device("cuda"))`: any
    picklable object per rank, gathered to every rank in rank order."""
    rank = comm.get_rank()
    world_size = comm.get_size()

    objects_to_gather = [
        ["foo", "bar"],  # Rank 0
        {"key": "value"},  # Rank 1
        42,  # Rank 2
        (1, 2, 3),  # Rank 3
    ]
    my_object = objects_to_gather[rank] if rank < len(objects_to_gather) else None

    output = [None for _ in range(world_size)]
    objcol.all_gather_object(comm, output, my_object)

    assert output == [objects_to_gather[q] if q < len(objects_to_gather) else None for q in range(world_size)]
    assert isinstance(output[-1], type(objects_to_gather[world_size - 1]))  # a tuple stays a tuple
