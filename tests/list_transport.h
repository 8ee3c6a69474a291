/* Tests of the transport area; see test-list.h for the entry format. */
#define TEST_LIST_TRANSPORT(XX)                                                                    \
  XX(shm_ring_sizes_2, shm_ring_sizes, 2, "shm", 30)                                               \
  XX(shm_ring_sizes_3, shm_ring_sizes, 3, "shm", 30)                                               \
  XX(shm_ring_sizes_8, shm_ring_sizes, 8, "shm", 30)                                               \
  XX(shm_many_inflight_2, shm_many_inflight, 2, "shm", 30)                                         \
  XX(shm_many_inflight_3, shm_many_inflight, 3, "shm", 30)                                         \
  XX(shm_alltoall_3, shm_alltoall, 3, "shm", 30)                                                   \
  XX(shm_alltoall_8, shm_alltoall, 8, "shm", 30)                                                   \
  XX(shm_mismatch_slot_2, shm_mismatch_slot, 2, "shm", 30)                                         \
  XX(shm_mismatch_len_2, shm_mismatch_len, 2, "shm", 30)                                           \
  XX(shm_peer_dies_2, shm_peer_dies, 2, "shm", 30)                                                 \
  XX(shm_peer_dies_3, shm_peer_dies, 3, "shm", 30)                                                 \
  XX(shm_peer_dies_8, shm_peer_dies, 8, "shm", 30)                                                 \
  XX(shm_peer_closes_2, shm_peer_closes, 2, "shm", 30)                                             \
  XX(shm_peer_aborts_2, shm_peer_aborts, 2, "shm", 30)                                             \
  XX(shm_open_timeout_3, shm_open_timeout, 3, "shm", 30)                                           \
  XX(shm_open_no_leader_2, shm_open_no_leader, 2, "shm", 30)                                       \
  XX(shm_stale_segment_3, shm_stale_segment, 3, "shm", 30)                                         \
  XX(shm_bad_input_2, shm_bad_input, 2, "shm", 30)                                                 \
  XX(shm_pingpong_2, shm_pingpong, 2, "shm", 60)
