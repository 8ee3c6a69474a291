#!/usr/bin/env python3
"""torchcomms' CUDA-graph example, on collie: an AllReduce captured into a
graph and replayed: each replay sums the tensor's current contents again.
Needs a GPU (scripts/gpu_check.sh step cuda_graph; docs/gpu.md, "CUDA
graphs").
Run: collierun -n 2 python3 ex6_cuda_graph.py
"""
import torch

import collie


def main() -> None:
    device = torch.device("cuda:0")
    comm = collie.new_comm("collie", device)
    rank = comm.get_rank()

    tensor = torch.ones(10, device=device) * rank
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        comm.all_reduce(tensor, collie.ReduceOp.SUM, async_op=True)
        # work.wait() must not be called inside graph capture
    for _ in range(10):
        graph.replay()
        torch.cuda.current_stream().synchronize()
    comm.finalize()


if __name__ == "__main__":
    main()
