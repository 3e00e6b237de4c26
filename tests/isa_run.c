/* isa_run LEVEL PROGRAM [ARGS...]: runs PROGRAM with GANFW_CPU_ISA=LEVEL when this CPU runs
 * that SIMD level (core/src/backend/cpu/isa.h), else exits 77, which tests/isa.cmake tells
 * CTest means "skipped", after saying why. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/cpu/isa.h"

int main(int argc, char **argv) {
  ganfw_cpu_isa level;
  if (argc < 3 || ganfw_cpu_isa_parse(argv[1], &level) != 0) {
    fprintf(stderr, "usage: isa_run portable|avx2|avx512 PROGRAM [ARGS...]\n");
    return 2;
  }
  const ganfw_cpu_isa have = ganfw_cpu_isa_supported();
  if (level > have) {
    printf("isa_run: skipped: this CPU runs SIMD level %s at most, not %s\n",
           ganfw_cpu_isa_name(have), ganfw_cpu_isa_name(level));
    return 77;
  }
  if (setenv("GANFW_CPU_ISA", ganfw_cpu_isa_name(level), 1) != 0) {
    perror("isa_run: setenv");
    return 2;
  }
  printf("isa_run: GANFW_CPU_ISA=%s (CPU supports up to %s)\n", ganfw_cpu_isa_name(level),
         ganfw_cpu_isa_name(have));
  fflush(stdout);
  execv(argv[2], argv + 2);
  fprintf(stderr, "isa_run: cannot run %s: ", argv[2]);
  perror(NULL);
  return 2;
}
