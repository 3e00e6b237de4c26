# The suites whose results run through the CPU backend's SIMD dispatch
# (core/src/backend/cpu/isa.h) also run once per SIMD level with GANFW_CPU_ISA forced,
# as test_<suite>_isa_<level>, through isa_run, which skips (exit 77) a level the CPU
# lacks. The plain test_<suite> runs the highest level the CPU has, so registering
# portable and avx2 covers every level on an AVX2 machine and on an AVX-512 one; the quick
# suites also get an explicit avx512 run. test_cpu_isa checks that each level gives the
# portable fallback's bits, so the slow test_conv_winograd (70-90 s under ASan) runs only
# once more, on the portable fallback.
add_executable(isa_run ${CMAKE_CURRENT_LIST_DIR}/isa_run.c)
target_link_libraries(isa_run PRIVATE ganfw_core)

function(ganfw_isa_tests suite)
  if(NOT TARGET ${suite})
    return()
  endif()
  get_test_property(${suite} ENVIRONMENT env)
  get_test_property(${suite} FIXTURES_REQUIRED fixtures)
  foreach(level ${ARGN})
    set(name ${suite}_isa_${level})
    add_test(NAME ${name} COMMAND isa_run ${level} $<TARGET_FILE:${suite}>)
    set_tests_properties(${name} PROPERTIES SKIP_RETURN_CODE 77)
    if(env)
      set_tests_properties(${name} PROPERTIES ENVIRONMENT "${env}")
    endif()
    if(fixtures)
      set_tests_properties(${name} PROPERTIES FIXTURES_REQUIRED "${fixtures}")
    endif()
  endforeach()
endfunction()

foreach(suite test_ops_dense test_ops_nn test_ops_elementwise test_amp_native test_cpu_isa
              test_cpu_lp_norm_act test_cpu_lp_conv)
  ganfw_isa_tests(${suite} portable avx2 avx512)
endforeach()
ganfw_isa_tests(test_amp portable avx2)
ganfw_isa_tests(test_ref_conv_bf16 avx2)
ganfw_isa_tests(test_conv_winograd portable)

# On a CPU with AMX the bf16 GEMMs run on AMX tiles; the suites whose bf16 convs run on them
# also run with GANFW_CPU_AMX=off, as test_<suite>_no_amx, through amx_off_run (skipped, exit
# 77, where there is no AMX), so that the dot-product path that CPUs without AMX take stays
# tested on AMX machines. test_cpu_gemm_bf16 covers both paths itself.
add_executable(amx_off_run ${CMAKE_CURRENT_LIST_DIR}/amx_off_run.c)
target_link_libraries(amx_off_run PRIVATE ganfw_core)

foreach(suite test_cpu_lp_conv test_ref_conv_bf16 test_amp)
  if(NOT TARGET ${suite})
    continue()
  endif()
  get_test_property(${suite} ENVIRONMENT env)
  get_test_property(${suite} FIXTURES_REQUIRED fixtures)
  add_test(NAME ${suite}_no_amx COMMAND amx_off_run $<TARGET_FILE:${suite}>)
  set_tests_properties(${suite}_no_amx PROPERTIES SKIP_RETURN_CODE 77)
  if(env)
    set_tests_properties(${suite}_no_amx PROPERTIES ENVIRONMENT "${env}")
  endif()
  if(fixtures)
    set_tests_properties(${suite}_no_amx PROPERTIES FIXTURES_REQUIRED "${fixtures}")
  endif()
endforeach()
