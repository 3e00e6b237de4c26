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
