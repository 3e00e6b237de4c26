/* amx_off_run PROGRAM [ARGS...]: runs PROGRAM with GANFW_CPU_AMX=off where this CPU has AMX
 * (core/src/backend/cpu/isa.h), so that its bf16 GEMMs take the AVX-512 BF16 dot-product path
 * that CPUs without AMX run; elsewhere exits 77, which tests/isa.cmake tells CTest means
 * "skipped" (the plain run of the suite takes that path already), after saying why. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "backend/cpu/isa.h"

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: amx_off_run PROGRAM [ARGS...]\n");
    return 2;
  }
  if (!ganfw_cpu_amx_supported() || ganfw_cpu_isa_supported() < GANFW_CPU_ISA_AVX512) {
    printf("amx_off_run: skipped: no AMX here (or no tile data from the OS): the plain run "
           "already multiplies bf16 without it\n");
    return 77;
  }
  if (setenv("GANFW_CPU_AMX", "off", 1) != 0) {
    perror("amx_off_run: setenv");
    return 2;
  }
  printf("amx_off_run: GANFW_CPU_AMX=off\n");
  fflush(stdout);
  execv(argv[1], argv + 1);
  fprintf(stderr, "amx_off_run: cannot run %s: ", argv[1]);
  perror(NULL);
  return 2;
}
