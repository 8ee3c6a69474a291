/*
 * isa.c - runtime dispatch of the reduction kernels: which per-ISA table
 * (kernels_gen.h compiled as portable, AVX2 or AVX-512) serves this process.
 *
 * The choice is made once, at the first lookup, by asking the CPU, and kept
 * in an atomic; two threads racing on the first lookup both compute the same
 * answer, so no lock or pthread_once is needed. It is ordinary code running
 * after main's constructors, unlike the ifunc resolvers of target_clones,
 * which run during relocation and crashed under ThreadSanitizer.
 *
 * The CPU check: __builtin_cpu_supports for AVX2, FMA and AVX-512 (libgcc
 * sets those only when XGETBV shows the OS saves the YMM / ZMM state), and
 * CPUID leaf 1 directly for F16C, because clang (14) does not know "f16c" as
 * a __builtin_cpu_supports name. F16C needs the YMM state too, which the AVX2
 * check has already established.
 */
#include <stdatomic.h>
#include <stddef.h>
#include <string.h>

#include "reduce/reduce.h"
#include "reduce/kernels_int.h"

#ifdef REDUCE_HAVE_X86
#include <cpuid.h>
#endif

struct isa_entry {
  const char *name;
  const collie__reduce_table_t *table;
  int (*supported)(void);
};

static int
isa_always(void)
{
  return 1;
}

#ifdef REDUCE_HAVE_X86
static int
isa_has_f16c(void)
{
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
  return (c & bit_F16C) != 0;
}

static int
isa_has_avx2(void)
{
  /* Idempotent; needed only if we run before libgcc's own constructor (a
   * user's constructor calling into collie), and cheap. */
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && isa_has_f16c();
}

static int
isa_has_avx512(void)
{
  return isa_has_avx2() && __builtin_cpu_supports("avx512f") &&
         __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
         __builtin_cpu_supports("avx512dq");
}
#endif

/* Best first: the first supported entry is the one used. */
static const struct isa_entry isa_list[] = {
#ifdef REDUCE_HAVE_X86
    {"avx512", &collie__reduce_table_avx512, isa_has_avx512},
    {"avx2", &collie__reduce_table_avx2, isa_has_avx2},
#endif
    {"portable", &collie__reduce_table_portable, isa_always},
};
#define ISA_COUNT (sizeof isa_list / sizeof isa_list[0])

/* 1 + the index into isa_list of the chosen table; 0 until the first lookup. */
static atomic_int isa_chosen;

static const struct isa_entry *
isa_get(void)
{
  int k = atomic_load_explicit(&isa_chosen, memory_order_acquire);
  if (k == 0) {
    k = (int)ISA_COUNT; /* the portable table, last, always qualifies */
    for (size_t i = 0; i < ISA_COUNT; i++) {
      if (isa_list[i].supported()) {
        k = (int)i + 1;
        break;
      }
    }
    atomic_store_explicit(&isa_chosen, k, memory_order_release);
  }
  return &isa_list[k - 1];
}

static collie__reduce_fn
isa_lookup(const collie__reduce_table_t *table, collie_dtype_t dtype, collie_op_t op)
{
  /* As unsigned, so that negative values are out of range too. */
  if ((unsigned)dtype >= (unsigned)COLLIE_DTYPE_COUNT_ ||
      (unsigned)op >= (unsigned)COLLIE_OP_COUNT_)
    return NULL;
  return (*table)[dtype][op];
}

collie__reduce_fn
collie__reduce_kernel(collie_dtype_t dtype, collie_op_t op)
{
  return isa_lookup(isa_get()->table, dtype, op);
}

const char *
collie__reduce_isa(void)
{
  return isa_get()->name;
}

collie__reduce_fn
collie__reduce_kernel_isa(collie_dtype_t dtype, collie_op_t op, const char *isa)
{
  if (!isa) return NULL;
  for (size_t i = 0; i < ISA_COUNT; i++) {
    if (strcmp(isa_list[i].name, isa) == 0)
      return isa_list[i].supported() ? isa_lookup(isa_list[i].table, dtype, op) : NULL;
  }
  return NULL;
}
