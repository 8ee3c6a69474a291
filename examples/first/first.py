import numpy as np
import collie

comm = collie.new_comm()                      # the job collierun (or torchrun) started
x = np.full(4, comm.get_rank(), dtype=np.float32)
comm.all_reduce(x)                            # in place: the sum over the ranks
print(f"rank {comm.get_rank()} of {comm.get_size()}: {x}")
comm.finalize()
