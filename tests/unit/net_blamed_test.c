/*
 * net_blamed_test.c - whom a peer's failure blames (collie__net_blamed):
 * the rank its reason names first, however many other ranks the reason
 * lists after it (a timeout's pending sends to the reader among them), and
 * the reader itself when the reason blames it; none for a peer that died
 * without a reason. A rank in its timeout's grace adopts a cause that blames
 * another rank and ignores one that blames itself (src/transport/net.c).
 */
#include "runner.h"
#include "transport/transport.h"

TEST_IMPL(net_blamed)
{
  /* Rank 0 waited on rank 2 and still had a send to rank 1 pending: it
   * blames rank 2, though its reason names rank 1 (the reader) too. */
  ASSERT(collie__net_blamed("tcp: rank 0 (world rank 0, pid 11, 127.0.0.1:4000) aborted its "
                            "communicator during allreduce #2802 (step 1), after: timed out "
                            "waiting for recv from rank 2 (world rank 2) (allreduce #2802, 0 of "
                            "64 bytes); send to rank 1 (world rank 1) (allreduce #2802, 64 bytes, "
                            "waiting for the receiver to take them)") == 2);
  /* A reason that blames the reader: rank 1 waited on rank 0, told it. */
  ASSERT(collie__net_blamed("tcp: rank 1 (world rank 1, pid 12, 127.0.0.1:4001) aborted its "
                            "communicator during allreduce #2803, after: timed out waiting for "
                            "recv from rank 0 (world rank 0) (allreduce #2803, 0 of 64 bytes)") ==
         0);
  /* A chain: the teller took its cause from rank 3's abort. */
  ASSERT(collie__net_blamed("shm: rank 1 (world rank 5, pid 13) aborted its communicator, after: "
                            "tcp: rank 3 (world rank 7, pid 14, 10.0.0.2:4000) aborted its "
                            "communicator, after: timed out waiting for rank 9") == 7);
  /* A death, and a reason naming no rank: nothing to blame. */
  ASSERT(collie__net_blamed("shm: rank 2 (world rank 2, pid 15) died during barrier #8") == -1);
  ASSERT(collie__net_blamed("tcp: rank 2 (world rank 2) aborted its communicator, after: "
                            "the communicator was aborted by collie_comm_abort") == -1);
  ASSERT(collie__net_blamed("") == -1);
}
