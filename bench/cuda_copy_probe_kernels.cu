/* bench/cuda_copy_probe_kernels.cu - the two kernels bench/cuda_copy_probe.c
 * launches: nothing (a launch's own cost) and a byte copy (a small copy
 * between device memory and mapped page-locked host memory done by the
 * compute engine instead of the driver's copy path). Built to PTX by
 * scripts/gpu_check.sh (nvcc -ptx) and loaded by the probe at run time. */
extern "C" __global__ void
probe_noop(void)
{
}

extern "C" __global__ void
probe_copy(unsigned char *dst, const unsigned char *src, unsigned long long n)
{
  unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) dst[i] = src[i];
}
