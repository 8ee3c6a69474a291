/* The ofi transport (src/transport/netx.c over ofi.c; issue 40), every rank
 * reaching every other through libfabric's pick here (tcp;ofi_rxm, or
 * FI_PROVIDER's): the collective matrix at 2 to 4 ranks; then send/recv,
 * groups and splits, and failures (mismatches, deadlines, dead and aborting
 * ranks, shrink) as tcp runs them; device buffers staged through the host.
 * With COLLIE_NET=ofi ("netofi": two fake hosts of two ranks each), ofi
 * between hosts beside shm within them, in one communicator.
 * Only in a build with libfabric's headers (tests/CMakeLists.txt); the
 * build without has ofi_missing (list_transport.h) alone. */
#define TEST_LIST_OFI(XX)                                                                          \
  XX(ofi_netdev_pair, ofi_netdev_pair, 0, "", 60)                                                  \
  XX(ofi_provider_mismatch_2, ofi_provider_mismatch, 2, "ofi", 30)                                 \
  XX(ofi_wrong_token_2, ofi_wrong_token, 2, "ofi", 30)                                             \
  XX(ofi_truncated_address_2, ofi_truncated_address, 2, "ofi", 30)                                 \
  XX(ofi_registration_fails_2, ofi_registration_fails, 2, "ofi", 30)                               \
  XX(ofi_registration_cache_2, ofi_registration_cache, 2, "ofi", 30)                               \
  XX(ofi_stranger_messages_2, ofi_stranger_messages, 2, "ofi", 30)                                 \
  XX(xport_peer_aborts_ofi_2, tcp_peer_aborts, 2, "ofi", 30)                                       \
  XX(xport_abort_from_thread_ofi_2, tcp_abort_from_thread, 2, "ofi", 30)                           \
  XX(xport_failed_open_tells_why_ofi_3, tcp_failed_open_tells_why, 3, "ofi", 30)                   \
  XX(matrix_allreduce_ofi_2, matrix_allreduce, 2, "ofi", 120)                                      \
  XX(matrix_allreduce_ofi_3, matrix_allreduce, 3, "ofi", 120)                                      \
  XX(matrix_allreduce_ofi_4, matrix_allreduce, 4, "ofi", 120)                                      \
  XX(matrix_reduce_ofi_2, matrix_reduce, 2, "ofi", 120)                                            \
  XX(matrix_reduce_ofi_3, matrix_reduce, 3, "ofi", 120)                                            \
  XX(matrix_reduce_ofi_4, matrix_reduce, 4, "ofi", 120)                                            \
  XX(matrix_reduce_scatter_ofi_2, matrix_reduce_scatter, 2, "ofi", 120)                            \
  XX(matrix_reduce_scatter_ofi_3, matrix_reduce_scatter, 3, "ofi", 120)                            \
  XX(matrix_reduce_scatter_ofi_4, matrix_reduce_scatter, 4, "ofi", 120)                            \
  XX(matrix_allgather_ofi_2, matrix_allgather, 2, "ofi", 120)                                      \
  XX(matrix_allgather_ofi_3, matrix_allgather, 3, "ofi", 120)                                      \
  XX(matrix_allgather_ofi_4, matrix_allgather, 4, "ofi", 120)                                      \
  XX(matrix_allgatherv_ofi_2, matrix_allgatherv, 2, "ofi", 120)                                    \
  XX(matrix_allgatherv_ofi_3, matrix_allgatherv, 3, "ofi", 120)                                    \
  XX(matrix_allgatherv_ofi_4, matrix_allgatherv, 4, "ofi", 120)                                    \
  XX(matrix_broadcast_ofi_2, matrix_broadcast, 2, "ofi", 120)                                      \
  XX(matrix_broadcast_ofi_3, matrix_broadcast, 3, "ofi", 120)                                      \
  XX(matrix_broadcast_ofi_4, matrix_broadcast, 4, "ofi", 120)                                      \
  XX(matrix_alltoall_ofi_2, matrix_alltoall, 2, "ofi", 120)                                        \
  XX(matrix_alltoall_ofi_3, matrix_alltoall, 3, "ofi", 120)                                        \
  XX(matrix_alltoall_ofi_4, matrix_alltoall, 4, "ofi", 120)                                        \
  XX(matrix_alltoallv_ofi_2, matrix_alltoallv, 2, "ofi", 120)                                      \
  XX(matrix_alltoallv_ofi_3, matrix_alltoallv, 3, "ofi", 120)                                      \
  XX(matrix_alltoallv_ofi_4, matrix_alltoallv, 4, "ofi", 120)                                      \
  XX(matrix_gather_ofi_2, matrix_gather, 2, "ofi", 120)                                            \
  XX(matrix_gather_ofi_3, matrix_gather, 3, "ofi", 120)                                            \
  XX(matrix_gather_ofi_4, matrix_gather, 4, "ofi", 120)                                            \
  XX(matrix_scatter_ofi_2, matrix_scatter, 2, "ofi", 120)                                          \
  XX(matrix_scatter_ofi_3, matrix_scatter, 3, "ofi", 120)                                          \
  XX(matrix_scatter_ofi_4, matrix_scatter, 4, "ofi", 120)                                          \
  XX(recv_any_each_once_ofi_3, recv_any_takes_each_once, 3, "ofi", 30)                             \
  XX(recv_any_other_tags_ofi_3, recv_any_skips_other_tags, 3, "ofi", 30)                           \
  XX(recv_any_errors_ofi_2, recv_any_errors, 2, "ofi", 30)                                         \
  XX(p2p_tags_independent_ofi_2, p2p_tags_independent, 2, "ofi", 30)                               \
  XX(p2p_any_status_ofi_3, p2p_any_source_any_tag_status, 3, "ofi", 30)                            \
  XX(p2p_short_direct_ofi_2, p2p_short_direct, 2, "ofi", 30)                                       \
  XX(p2p_truncated_ofi_2, p2p_truncated, 2, "ofi", 30)                                             \
  XX(p2p_probe_ofi_2, p2p_probe, 2, "ofi", 30)                                                     \
  XX(p2p_ssend_ofi_2, p2p_ssend, 2, "ofi", 30)                                                     \
  XX(p2p_before_collective_ofi_3, p2p_before_collective, 3, "ofi", 30)                             \
  XX(p2p_unexpected_bounded_ofi_2, p2p_unexpected_bounded, 2, "ofi", 30)                           \
  XX(p2p_nonblocking_ofi_3, p2p_nonblocking_exchange, 3, "ofi", 30)                                \
  XX(p2p_posted_progress_ofi_2, p2p_posted_progress, 2, "ofi", 30)                                 \
  XX(p2p_posted_wait_other_thread_ofi_3, p2p_posted_wait_other_thread, 3, "ofi", 30)               \
  XX(group_ring_ofi_3, group_ring_exchange, 3, "ofi", 60)                                          \
  XX(split_ofi_2, split_even_odd, 2, "ofi", 60)                                                    \
  XX(sendrecv_mismatch_ofi_3, sendrecv_mismatch, 3, "ofi", 30)                                     \
  XX(timeout_ofi_3, timeout_names_peer, 3, "ofi", 30)                                              \
  XX(mismatch_count_ofi_3, mismatch_count, 3, "ofi", 30)                                           \
  XX(allreduce_large_ofi_2, allreduce_large, 2, "ofi", 120)                                        \
  XX(persistent_collectives_ofi_2, persistent_collectives, 2, "ofi", 60)                           \
  XX(init_twice_ofi_2, init_twice, 2, "ofi", 30)                                                   \
  XX(kill_rank_ofi_2, kill_rank_mid_allreduce, 2, "ofi", 30)                                       \
  XX(kill_rank_broadcast_ofi_3, kill_rank_mid_broadcast, 3, "ofi", 30)                             \
  XX(kill_rank_alltoall_ofi_3, kill_rank_mid_alltoall, 3, "ofi", 30)                               \
  XX(abort_reaches_peers_ofi_3, abort_reaches_peers, 3, "ofi", 30)                                 \
  XX(abort_reason_reaches_peers_ofi_3, abort_reason_reaches_peers, 3, "ofi", 30)                   \
  XX(destroy_meets_collective_ofi_2, destroy_meets_collective, 2, "ofi", 30)                       \
  XX(split_rank_killed_ofi_3, split_rank_killed, 3, "ofi", 40)                                     \
  XX(failure_names_first_cause_ofi_3, failure_names_first_cause, 3, "ofi", 30)                     \
  XX(shrink_rank0_killed_ofi_3, shrink_rank0_killed, 3, "ofi", 30)                                 \
  XX(shrink_exclude_ofi_3, shrink_exclude, 3, "ofi", 30)                                           \
  XX(window_put_signal_ofi_3, window_put_signal, 3, "ofi", 60)                                     \
  XX(window_peer_dies_ofi_3, window_peer_dies, 3, "ofi", 30)                                       \
  XX(cuda_fake_p2p_kinds_ofi_2, cuda_fake_p2p_kinds, 2, "ofi", 60)                                 \
  XX(cuda_fake_pipeline_ofi_3, cuda_fake_pipeline, 3, "ofi", 90)                                   \
  XX(matrix_allreduce_netofi_4, matrix_allreduce, 4, "netofi", 120)                                \
  XX(matrix_allgather_netofi_4, matrix_allgather, 4, "netofi", 120)                                \
  XX(matrix_reduce_scatter_netofi_4, matrix_reduce_scatter, 4, "netofi", 120)                      \
  XX(matrix_alltoallv_netofi_4, matrix_alltoallv, 4, "netofi", 120)                                \
  XX(matrix_broadcast_netofi_4, matrix_broadcast, 4, "netofi", 120)                                \
  XX(p2p_nonblocking_netofi_3, p2p_nonblocking_exchange, 3, "netofi", 60)
