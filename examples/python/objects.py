"""objects.py - collectives over Python objects (pickled).

    collierun -n 4 /usr/bin/python3 examples/python/objects.py

Works without numpy: the sizes travel first, then the pickled bytes.
"""

from _common import communicator
from collie import objcol


def main(comm=None):
    with communicator(comm, "objects") as comm:
        rank, size = comm.get_rank(), comm.get_size()

        everyone = [None] * size
        objcol.all_gather_object(everyone, {"rank": rank, "host": "node%d" % (rank // 2)}, group=comm)
        assert [d["rank"] for d in everyone] == list(range(size))

        config = [{"lr": 0.1, "layers": [64, 64]}, "adam"] if rank == 0 else [None, None]
        objcol.broadcast_object_list(config, src=0, group=comm)
        assert config[1] == "adam" and config[0]["layers"] == [64, 64]

        gathered = [None] * size if rank == 0 else None
        objcol.gather_object(("metrics", rank, [rank] * rank), gathered, dst=0, group=comm)
        if rank == 0:
            assert [g[1] for g in gathered] == list(range(size))

        shard = [None]
        objcol.scatter_object_list(shard, ["shard-%d" % q for q in range(size)] if rank == 0 else None,
                                   src=0, group=comm)
        assert shard[0] == "shard-%d" % rank

        if size > 1:
            if rank == 0:
                objcol.send_object_list(["hello", {"from": 0}], dst=1, group=comm)
            elif rank == 1:
                got = [None, None]
                objcol.recv_object_list(got, src=0, group=comm)
                assert got == ["hello", {"from": 0}]
        if rank == 0:
            print("objects: gathered", gathered, flush=True)
        return {"everyone": everyone, "shard": shard[0]}


if __name__ == "__main__":
    main()
