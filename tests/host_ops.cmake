# test_host_ops compares the host's tensor math against PyTorch references
# (tests/ref/gen_host_ops.py) without the test_ref_ prefix, so it asks for the fixture itself.
if(TEST test_host_ops)
  set_tests_properties(test_host_ops PROPERTIES FIXTURES_REQUIRED torch_refs)
endif()
