import torch
import torch.distributed as dist
import collie.torch                           # registers the "collie" backend

dist.init_process_group("collie")             # env:// from collierun or torchrun
t = torch.full((4,), float(dist.get_rank()))
dist.all_reduce(t)                            # the sum over the ranks
print(f"rank {dist.get_rank()}: {t}")
dist.destroy_process_group()
