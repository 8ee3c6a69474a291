/* A build without nvcc (or with -DCOLLIE_DEVICE_CODE=OFF): no device code,
 * so no direct CUDA path; device buffers are staged through host memory. */
#include <stddef.h>

const int collie__cuda_ptx_count = 0;
const char collie__cuda_ptx_desc[] = "none (built without nvcc)";
const unsigned char *const collie__cuda_ptx[1] = {NULL};
