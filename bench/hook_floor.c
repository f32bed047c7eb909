/* The do-nothing hook of bench/hook_bench.mjs: reads its stdin to the end and exits 0, printing
 * nothing. Built static by bench/run_hooks.sh (cc -O2 -static), so its cost is the kernel's
 * fork/exec/exit and a pipe read: the floor any hook process pays. */
#include <unistd.h>

int main(void) {
  char buf[65536];
  while (read(0, buf, sizeof buf) > 0) {
  }
  return 0;
}
