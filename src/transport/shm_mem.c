/*
 * shm_mem.c - memory that the ranks on one host read in place
 * (collie_mem_alloc, collie_mem_free).
 *
 * A single copy between ranks (shm.c) is normally the receiver's
 * process_vm_readv of the sender's buffer: one pass over the bytes, but a
 * kernel copy with ordinary stores, page by page, at about half the speed of
 * a streaming memcpy on the reference machine. A buffer from collie_mem_alloc
 * is a memfd of its own, mapped shared. A send from inside one names the
 * region (its id, length and the offset) beside the address; the receiver
 * takes a duplicate of the sender's descriptor (pidfd_getfd, which needs the
 * same permission as process_vm_readv), maps it once, and from then on copies
 * out of the mapping in user space with collie__copy. Where that fails (an
 * old kernel, a refused pidfd) the address is still there and the receiver
 * reads it as before, so the region only ever makes a copy faster.
 *
 * Identity. A region's id is (generation << 32 | the sender's fd). The fd
 * number alone would be reused after a free; the generation is new with
 * every allocation, so a receiver's cached mapping of a freed region never
 * matches a later one, and it never maps a reused fd that is not a region of
 * that id (the sender holds the fd open until the send completes: the buffer
 * must outlive a posted send in any case).
 *
 * Peers keep up to COLLIE__SHM_MEM_MAPS mappings per channel, replaced in
 * turn and dropped when the communicator is destroyed; a freed region's pages
 * return to the system when the last such mapping goes.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "transport/shm_int.h"
#include "util/error.h"

struct mem_region {
  uintptr_t base;
  size_t len;
  uint64_t id;
};

/* Process-wide: any communicator's sends look here. */
static pthread_mutex_t mem_lock = PTHREAD_MUTEX_INITIALIZER;
static struct mem_region *mem_regs;
static size_t mem_n, mem_cap;
static uint64_t mem_gen;
static _Atomic size_t mem_live; /* mem_n, for a lock-free "none" on every send */

_Atomic uint64_t collie__shm_mem_mapped_reads;

static int
mem_memfd(size_t bytes)
{
  int fd = memfd_create("collie-mem", MFD_CLOEXEC);
  if (fd >= 0 && ftruncate(fd, (off_t)bytes) != 0) {
    int e = errno;
    close(fd);
    errno = e;
    return -1;
  }
  return fd;
}

void *
collie__shm_mem_alloc(size_t bytes)
{
  if (bytes == 0) {
    collie__err(COLLIE_INVALID_ARGUMENT, "collie_mem_alloc: bytes is 0");
    return NULL;
  }
  if (bytes > (size_t)INT64_MAX) {
    collie__err(COLLIE_INVALID_ARGUMENT, "collie_mem_alloc: %zu bytes is more than a file holds",
                bytes);
    return NULL;
  }
  int fd = mem_memfd(bytes);
  if (fd < 0) {
    collie__err_errno(COLLIE_SYSTEM_ERROR, "collie_mem_alloc: memfd of %zu bytes", bytes);
    return NULL;
  }
  void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    collie__err_errno(COLLIE_SYSTEM_ERROR, "collie_mem_alloc: mapping %zu bytes", bytes);
    close(fd);
    return NULL;
  }
  pthread_mutex_lock(&mem_lock);
  if (mem_n == mem_cap) {
    size_t cap = mem_cap ? 2 * mem_cap : 16;
    struct mem_region *r = realloc(mem_regs, cap * sizeof(*r));
    if (!r) {
      pthread_mutex_unlock(&mem_lock);
      munmap(p, bytes);
      close(fd);
      collie__err(COLLIE_SYSTEM_ERROR, "collie_mem_alloc: out of memory for the region table");
      return NULL;
    }
    mem_regs = r;
    mem_cap = cap;
  }
  mem_regs[mem_n++] =
      (struct mem_region){(uintptr_t)p, bytes, (++mem_gen << 32) | (uint64_t)(uint32_t)fd};
  atomic_store_explicit(&mem_live, mem_n, memory_order_release);
  pthread_mutex_unlock(&mem_lock);
  return p;
}

collie_result_t
collie__shm_mem_free(void *ptr)
{
  if (!ptr) return COLLIE_SUCCESS;
  pthread_mutex_lock(&mem_lock);
  size_t i = 0;
  while (i < mem_n && mem_regs[i].base != (uintptr_t)ptr) i++;
  if (i == mem_n) {
    pthread_mutex_unlock(&mem_lock);
    return collie__err(COLLIE_INVALID_ARGUMENT,
                       "collie_mem_free: %p is not memory from collie_mem_alloc (or was freed)",
                       ptr);
  }
  struct mem_region r = mem_regs[i];
  mem_regs[i] = mem_regs[--mem_n];
  atomic_store_explicit(&mem_live, mem_n, memory_order_release);
  pthread_mutex_unlock(&mem_lock);
  munmap((void *)r.base, r.len);
  close((int)(uint32_t)r.id);
  return COLLIE_SUCCESS;
}

int
collie__shm_mem_find(const void *buf, size_t len, struct collie__shm_mem_ref *out)
{
  if (atomic_load_explicit(&mem_live, memory_order_acquire) == 0) return 0;
  uintptr_t b = (uintptr_t)buf;
  int found = 0;
  pthread_mutex_lock(&mem_lock);
  for (size_t i = 0; i < mem_n && !found; i++) {
    const struct mem_region *r = &mem_regs[i];
    if (b >= r->base && b - r->base <= r->len && len <= r->len - (b - r->base)) {
      out->id = r->id;
      out->region_len = r->len;
      out->off = b - r->base;
      found = 1;
    }
  }
  pthread_mutex_unlock(&mem_lock);
  return found;
}

static int
mem_getfd(int pidfd, int fd)
{
#ifdef SYS_pidfd_getfd
  return (int)syscall(SYS_pidfd_getfd, pidfd, fd, 0);
#else
  (void)pidfd;
  (void)fd;
  errno = ENOSYS;
  return -1;
#endif
}

const char *
collie__shm_mem_map(struct collie__shm_chan *ch, uint64_t id, size_t region_len)
{
  struct collie__shm_mem_map *m = ch->maps;
  for (int i = 0; i < COLLIE__SHM_MEM_MAPS; i++)
    if (m[i].base && m[i].id == id && m[i].len == region_len) return m[i].base;
  if (ch->pidfd < 0 || ch->maps_failed) return NULL;
  int fd = mem_getfd(ch->pidfd, (int)(uint32_t)id);
  if (fd < 0) {
    /* No pidfd_getfd here (or no permission): read through the kernel from
     * now on, and say so once. */
    ch->maps_failed = 1;
    COLLIE_INFO("SHM",
                "rank %d's collie_mem_alloc memory is read with process_vm_readv: "
                "pidfd_getfd: %s",
                ch->rank, strerror(errno));
    return NULL;
  }
  void *p = mmap(NULL, region_len, PROT_READ, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) return NULL;
  struct collie__shm_mem_map *slot = &m[ch->maps_next];
  ch->maps_next = (ch->maps_next + 1) % COLLIE__SHM_MEM_MAPS;
  if (slot->base) munmap((void *)slot->base, slot->len);
  *slot = (struct collie__shm_mem_map){id, region_len, p};
  return p;
}

void
collie__shm_mem_unmap_all(struct collie__shm_chan *ch)
{
  for (int i = 0; i < COLLIE__SHM_MEM_MAPS; i++)
    if (ch->maps[i].base) {
      munmap((void *)ch->maps[i].base, ch->maps[i].len);
      ch->maps[i].base = NULL;
    }
}
