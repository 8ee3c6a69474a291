/*
 * exec_stall_shim.c - an LD_PRELOAD library for collierun's tests: a forked
 * rank whose environment has COLLIE_LOCAL_RANK equal to the shim's
 * COLLIE_TEST_EXEC_STALL stops for 30 s before its exec, as a child that
 * deadlocked between fork and exec did (a lock held by another thread at the
 * fork). collierun must still honour --timeout and a SIGTERM meanwhile.
 */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int execvpe(const char *file, char *const argv[], char *const envp[]);

int
execvpe(const char *file, char *const argv[], char *const envp[])
{
  const char *who = getenv("COLLIE_TEST_EXEC_STALL"); /* collierun's own environment */
  if (who) {
    size_t n = strlen("COLLIE_LOCAL_RANK=");
    for (char *const *e = envp; *e; e++)
      if (!strncmp(*e, "COLLIE_LOCAL_RANK=", n) && !strcmp(*e + n, who)) sleep(30);
  }
  int (*real)(const char *, char *const[], char *const[]) =
      (int (*)(const char *, char *const[], char *const[]))dlsym(RTLD_NEXT, "execvpe");
  return real ? real(file, argv, envp) : -1;
}
