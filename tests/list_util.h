/* Tests of the util area; see test-list.h for the entry format. */
#define TEST_LIST_UTIL(XX)                                                                         \
  XX(topo_uneven_hosts, topo_uneven_hosts, 0, "auto", 10)                                          \
  XX(stage_extents, stage_extents, 0, "auto", 10)                                                  \
  XX(stage_no_driver_shm_2, stage_no_driver, 2, "shm", 20)                                         \
  XX(ipc_cache_handles, ipc_cache_handles, 0, "auto", 10)                                          \
  XX(ipc_cache_directed, ipc_cache_directed, 0, "auto", 10)                                        \
  XX(ipc_cache_limits, ipc_cache_limits, 0, "auto", 10)                                            \
  XX(cuda_grid_shape, cuda_grid_shape, 0, "auto", 10)                                              \
  XX(cuda_fake_direct_shm_1, cuda_fake_direct, 1, "shm", 30)                                       \
  XX(cuda_fake_host_only_features_shm_2, cuda_fake_host_only_features, 2, "shm", 30)               \
  XX(cuda_fake_direct_shm_2, cuda_fake_direct, 2, "shm", 60)                                       \
  XX(cuda_fake_direct_shm_3, cuda_fake_direct, 3, "shm", 60)                                       \
  XX(cuda_fake_alltoallv_mismatch_shm_3, cuda_fake_alltoallv_mismatch, 3, "shm", 30)               \
  XX(cuda_fake_direct_quick_shm_9, cuda_fake_direct_quick, 9, "shm", 90)                           \
  XX(cuda_fake_gpu_each_shm_3, cuda_fake_gpu_each, 3, "shm", 60)                                   \
  XX(cuda_fake_gpu_each_quick_shm_9, cuda_fake_gpu_each_quick, 9, "shm", 90)                       \
  XX(cuda_fake_unshareable_shm_3, cuda_fake_unshareable, 3, "shm", 60)                             \
  XX(cuda_fake_open_fails_shm_2, cuda_fake_open_fails, 2, "shm", 60)                               \
  XX(cuda_fake_pipeline_mixed_4, cuda_fake_pipeline, 4, "mixed", 90)                               \
  XX(cuda_fake_pipeline_tcp_3, cuda_fake_pipeline, 3, "tcp", 90)                                   \
  XX(cuda_fake_staged_area_shm_3, cuda_fake_staged_area, 3, "shm", 60)                             \
  XX(cuda_fake_staged_area_tcp_2, cuda_fake_staged_area, 2, "tcp", 60)                             \
  XX(cuda_fake_staged_area_fails_shm_2, cuda_fake_staged_area_fails, 2, "shm", 60)                 \
  XX(cuda_fake_stream_deadline_shm_2, cuda_fake_stream_deadline, 2, "shm", 30)                     \
  XX(cuda_fake_p2p_kinds_shm_3, cuda_fake_p2p_kinds, 3, "shm", 60)                                 \
  XX(cuda_fake_p2p_kinds_tcp_2, cuda_fake_p2p_kinds, 2, "tcp", 60)                                 \
  XX(cuda_fake_p2p_gpu_each_shm_2, cuda_fake_p2p_gpu_each, 2, "shm", 60)                           \
  XX(cuda_fake_p2p_sender_gave_up_shm_2, cuda_fake_p2p_sender_gave_up, 2, "shm", 30)               \
  XX(cuda_fake_p2p_open_fails_shm_3, cuda_fake_p2p_open_fails, 3, "shm", 60)                       \
  XX(cuda_fake_kinds_differ_shm_2, cuda_fake_kinds_differ, 2, "shm", 30)                           \
  XX(topo_world_and_split_mixed_4, topo_world_and_split, 4, "mixed", 30)                           \
  XX(copy_stream_every_alignment, copy_stream_every_alignment, 0, "auto", 30)                      \
  XX(copy_around_threshold, copy_around_threshold, 0, "auto", 30)                                  \
  XX(backoff_rounds, backoff_rounds, 0, "auto", 30)                                                \
  XX(backoff_crowded, backoff_crowded, 0, "auto", 30)                                              \
  XX(proc_cpu_self, proc_cpu_self, 0, "auto", 30)                                                  \
  XX(coarse_clock_bounds, coarse_clock_bounds, 0, "auto", 30)
