/*
 * netx_mr.c - the network transport's registrations of payload buffers, for
 * devices that need every buffer registered (the provider's FI_MR_LOCAL:
 * verbs, EFA; or COLLIE_OFI_MR_ALL).
 *
 * A buffer inside memory from collie_mem_alloc is registered once for its
 * whole region, and the registration is kept while the region lives. The
 * cache is keyed by the region's id, which no later region shares
 * (shm_mem.c), so once collie_mem_free frees a region its registration
 * never serves a buffer again, even one at the same address; entries of
 * regions that are gone are deregistered at the next miss and at close.
 * Any other buffer is registered for the time its payload moves: collie
 * cannot see the user free it, and a registration kept past a free would
 * send the old pages' bytes (the stale-registration hazard). Providers
 * that pin memory keep their own cache with a memory monitor for that.
 */
#include <stdint.h>

#include "transport/netx_int.h"
#include "transport/shm.h"

/* Whether entry e's region still lives under its id. */
static int
mr_live(const struct netx_mrc *e)
{
  struct collie__shm_mem_ref ref;
  return collie__shm_mem_find(e->base, 1, &ref) && ref.id == e->id;
}

static void
mr_drop(struct netx_xport *x, struct netx_mrc *e)
{
  x->ops->dereg(x->dev, e->mr);
  *e = x->mrc[--x->nmrc];
}

collie_result_t
collie__netx_mr_get(struct netx_xport *x, void *buf, size_t len, struct collie__netdev_mr **mr,
                    int *cached)
{
  struct collie__shm_mem_ref ref;
  *cached = 0;
  if (collie__shm_mem_find(buf, len, &ref)) {
    for (int i = 0; i < x->nmrc; i++)
      if (x->mrc[i].id == ref.id) {
        x->mrc[i].users++;
        x->mrc[i].last = ++x->mrc_clock;
        *mr = x->mrc[i].mr;
        *cached = 1;
        return COLLIE_SUCCESS;
      }
    for (int i = x->nmrc - 1; i >= 0; i--) /* regions freed since */
      if (x->mrc[i].users == 0 && !mr_live(&x->mrc[i])) mr_drop(x, &x->mrc[i]);
    if (x->nmrc == NETX_MRC) { /* full: the least recently used idle one goes */
      int lru = -1;
      for (int i = 0; i < x->nmrc; i++)
        if (x->mrc[i].users == 0 && (lru < 0 || x->mrc[i].last < x->mrc[lru].last)) lru = i;
      if (lru >= 0) mr_drop(x, &x->mrc[lru]);
    }
    if (x->nmrc < NETX_MRC) {
      void *base = (char *)buf - ref.off;
      collie_result_t rc = x->ops->reg(x->dev, base, ref.region_len, mr);
      if (rc != COLLIE_SUCCESS) return rc;
      x->mrc[x->nmrc++] = (struct netx_mrc){
          .id = ref.id, .base = base, .mr = *mr, .users = 1, .last = ++x->mrc_clock};
      *cached = 1;
      return COLLIE_SUCCESS;
    }
  }
  return x->ops->reg(x->dev, buf, len, mr);
}

void
collie__netx_mr_put(struct netx_xport *x, struct collie__netdev_mr *mr, int cached)
{
  if (!mr) return;
  if (!cached) {
    x->ops->dereg(x->dev, mr);
    return;
  }
  for (int i = 0; i < x->nmrc; i++)
    if (x->mrc[i].mr == mr) {
      x->mrc[i].users--;
      return;
    }
}

void
collie__netx_mr_clear(struct netx_xport *x)
{
  while (x->nmrc > 0) mr_drop(x, &x->mrc[x->nmrc - 1]);
}
