/* bench/cuda_ipc_probe.c - can two processes on one GPU share device memory
 * here, with the driver opened at run time? (issue 21's ground: libcollie
 * must not link libcuda; several ranks on one GPU exchange CUDA IPC handles
 * or cuMem POSIX-fd handles.)
 *
 * Opens libcuda.so.1 with dlopen, resolves every entry point through
 * cuGetProcAddress_v2 (so the versioned symbols are the ones the driver
 * chooses), forks, and in each process: the parent allocates two buffers,
 * fills them, hands (a) a legacy IPC handle and (b) a cuMemCreate allocation
 * exported as a POSIX file descriptor (sent over a unix socket) to the child;
 * the child maps both, checks the parent's bytes, writes its own, and the
 * parent checks those. Prints what worked, the time of each open, and exits
 * non-zero on any failure. Never run by CI (no GPU there):
 *
 *   cc -O2 -I/usr/local/cuda/include bench/cuda_ipc_probe.c -o /tmp/probe -ldl && /tmp/probe
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cuda_probe_load.h"

static struct {
  CUresult (*mem_alloc)(CUdeviceptr *, size_t);
  CUresult (*htod)(CUdeviceptr, const void *, size_t);
  CUresult (*dtoh)(void *, CUdeviceptr, size_t);
  CUresult (*ipc_get)(CUipcMemHandle *, CUdeviceptr);
  CUresult (*ipc_open)(CUdeviceptr *, CUipcMemHandle, unsigned);
  CUresult (*ipc_close)(CUdeviceptr);
  CUresult (*granularity)(size_t *, const CUmemAllocationProp *, CUmemAllocationGranularity_flags);
  CUresult (*create)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *,
                     unsigned long long);
  CUresult (*export_fd)(void *, CUmemGenericAllocationHandle, CUmemAllocationHandleType,
                        unsigned long long);
  CUresult (*import_fd)(CUmemGenericAllocationHandle *, void *, CUmemAllocationHandleType);
  CUresult (*reserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
  CUresult (*map)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
  CUresult (*set_access)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
  CUresult (*error_string)(CUresult, const char **);
  CUresult (*driver_version)(int *);
} cu;

static const char *who = "parent";

static void
die(const char *what, CUresult rc)
{
  const char *s = "?";
  if (cu.error_string) cu.error_string(rc, &s);
  printf("%s: FAILED %s: CUresult %d (%s)\n", who, what, (int)rc, s);
  exit(1);
}
#define CK(call, what)                                                                             \
  do {                                                                                             \
    CUresult rc_ = (call);                                                                         \
    if (rc_ != CUDA_SUCCESS) die(what, rc_);                                                       \
  } while (0)

static void
load(void)
{
  static const struct probe_sym want[] = {
      {"cuMemAlloc", (void **)&cu.mem_alloc},
      {"cuMemcpyHtoD", (void **)&cu.htod},
      {"cuMemcpyDtoH", (void **)&cu.dtoh},
      {"cuIpcGetMemHandle", (void **)&cu.ipc_get},
      {"cuIpcOpenMemHandle", (void **)&cu.ipc_open},
      {"cuIpcCloseMemHandle", (void **)&cu.ipc_close},
      {"cuMemGetAllocationGranularity", (void **)&cu.granularity},
      {"cuMemCreate", (void **)&cu.create},
      {"cuMemExportToShareableHandle", (void **)&cu.export_fd},
      {"cuMemImportFromShareableHandle", (void **)&cu.import_fd},
      {"cuMemAddressReserve", (void **)&cu.reserve},
      {"cuMemMap", (void **)&cu.map},
      {"cuMemSetAccess", (void **)&cu.set_access},
      {"cuGetErrorString", (void **)&cu.error_string},
      {"cuDriverGetVersion", (void **)&cu.driver_version},
  };
  probe_load(want, sizeof want / sizeof want[0]);
}

static void
send_fd(int sock, int fd, const void *data, size_t n)
{
  char ctl[CMSG_SPACE(sizeof(int))];
  memset(ctl, 0, sizeof ctl);
  struct iovec iov = {(void *)data, n};
  struct msghdr m = {0};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  if (fd >= 0) {
    m.msg_control = ctl;
    m.msg_controllen = sizeof ctl;
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &fd, sizeof(int));
  }
  if (sendmsg(sock, &m, 0) != (ssize_t)n) {
    perror("sendmsg");
    exit(1);
  }
}

static int
recv_fd(int sock, void *data, size_t n)
{
  char ctl[CMSG_SPACE(sizeof(int))];
  struct iovec iov = {data, n};
  struct msghdr m = {0};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  m.msg_control = ctl;
  m.msg_controllen = sizeof ctl;
  if (recvmsg(sock, &m, MSG_WAITALL) != (ssize_t)n) {
    perror("recvmsg");
    exit(1);
  }
  struct cmsghdr *c = CMSG_FIRSTHDR(&m);
  int fd = -1;
  if (c && c->cmsg_type == SCM_RIGHTS) memcpy(&fd, CMSG_DATA(c), sizeof(int));
  return fd;
}

static void
setup(void)
{
  CUresult rc;
  const char *failed = probe_context(&rc);
  if (failed) CK(rc, failed);
}

static CUmemAllocationProp
fd_prop(void)
{
  CUmemAllocationProp p;
  memset(&p, 0, sizeof p);
  p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  p.location.id = 0;
  p.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  return p;
}

static CUdeviceptr
map_fd_alloc(CUmemGenericAllocationHandle h, size_t size)
{
  CUdeviceptr va;
  CK(cu.reserve(&va, size, 0, 0, 0), "cuMemAddressReserve");
  CK(cu.map(va, size, 0, h, 0), "cuMemMap");
  CUmemAccessDesc a;
  memset(&a, 0, sizeof a);
  a.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  a.location.id = 0;
  a.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  CK(cu.set_access(va, size, &a, 1), "cuMemSetAccess");
  return va;
}

enum { N = 1 << 20 };

static void
fill(uint32_t *p, uint32_t seed)
{
  for (uint32_t i = 0; i < N; i++) p[i] = seed * 2654435761u + i;
}

static int
check(const uint32_t *p, uint32_t seed, const char *what)
{
  for (uint32_t i = 0; i < N; i++)
    if (p[i] != seed * 2654435761u + i) {
      printf("%s: %s: word %u is %u, want %u\n", who, what, i, p[i], seed * 2654435761u + i);
      return 1;
    }
  return 0;
}

int
main(void)
{
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv)) {
    perror("socketpair");
    return 1;
  }
  uint32_t *host = malloc(N * sizeof(uint32_t));
  pid_t pid = fork();
  load();
  if (pid == 0) {
    who = "child";
    setup();
    CUipcMemHandle ih;
    size_t fsz;
    recv_fd(sv[1], &ih, sizeof ih);
    int fd = recv_fd(sv[1], &fsz, sizeof fsz);
    CUdeviceptr a;
    double t0 = probe_now_us();
    CK(cu.ipc_open(&a, ih, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS), "cuIpcOpenMemHandle");
    double t1 = probe_now_us();
    CK(cu.dtoh(host, a, N * 4), "read the parent's IPC buffer");
    int bad = check(host, 1, "legacy IPC read");
    fill(host, 3);
    CK(cu.htod(a, host, N * 4), "write the parent's IPC buffer");
    printf("child: legacy IPC open %.0f us, read %s\n", t1 - t0, bad ? "WRONG" : "ok");
    if (fd < 0) {
      printf("child: no fd came\n");
      return 1;
    }
    CUmemGenericAllocationHandle gh;
    t0 = probe_now_us();
    CK(cu.import_fd(&gh, (void *)(intptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
       "cuMemImportFromShareableHandle");
    CUdeviceptr b = map_fd_alloc(gh, fsz);
    t1 = probe_now_us();
    CK(cu.dtoh(host, b, N * 4), "read the parent's fd buffer");
    bad |= check(host, 2, "cuMem fd read");
    fill(host, 4);
    CK(cu.htod(b, host, N * 4), "write the parent's fd buffer");
    printf("child: cuMem fd import+map %.0f us, read %s\n", t1 - t0, bad ? "WRONG" : "ok");
    CK(cu.ipc_close(a), "cuIpcCloseMemHandle");
    char done = bad ? 'x' : 'k';
    send_fd(sv[1], -1, &done, 1);
    return bad;
  }
  setup();
  int ver = 0;
  cu.driver_version(&ver);
  printf("driver API %d, entry points through cuGetProcAddress_v2\n", ver);
  CUdeviceptr a, b;
  CK(cu.mem_alloc(&a, N * 4), "cuMemAlloc");
  fill(host, 1);
  CK(cu.htod(a, host, N * 4), "cuMemcpyHtoD");
  CUipcMemHandle ih;
  CK(cu.ipc_get(&ih, a), "cuIpcGetMemHandle");
  CUmemAllocationProp p = fd_prop();
  size_t gran = 0;
  CK(cu.granularity(&gran, &p, CU_MEM_ALLOC_GRANULARITY_MINIMUM), "cuMemGetAllocationGranularity");
  size_t fsz = (N * 4 + gran - 1) / gran * gran;
  CUmemGenericAllocationHandle gh;
  CK(cu.create(&gh, fsz, &p, 0), "cuMemCreate (POSIX fd shareable)");
  b = map_fd_alloc(gh, fsz);
  fill(host, 2);
  CK(cu.htod(b, host, N * 4), "cuMemcpyHtoD");
  int fd = -1;
  CK(cu.export_fd(&fd, gh, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
     "cuMemExportToShareableHandle");
  send_fd(sv[0], -1, &ih, sizeof ih);
  send_fd(sv[0], fd, &fsz, sizeof fsz);
  char done = 0;
  recv_fd(sv[0], &done, 1);
  int st = 0;
  waitpid(pid, &st, 0);
  int bad = done != 'k' || !WIFEXITED(st) || WEXITSTATUS(st) != 0;
  CK(cu.dtoh(host, a, N * 4), "cuMemcpyDtoH");
  bad |= check(host, 3, "the child's IPC write");
  CK(cu.dtoh(host, b, N * 4), "cuMemcpyDtoH");
  bad |= check(host, 4, "the child's fd write");
  printf("cuda_ipc_probe: %s\n",
         bad ? "FAILED" : "both handle kinds work between two processes on one GPU");
  return bad;
}
