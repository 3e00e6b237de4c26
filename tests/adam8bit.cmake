# test_adam8bit compares against tests/ref/gen_adam8bit.py's references (written by the
# ref_generate fixture, as the test_ref_* suites) and loads the adam8bit and adam plugins.
set_tests_properties(test_adam8bit PROPERTIES FIXTURES_REQUIRED torch_refs)
add_dependencies(test_adam8bit ganfw_plugin_adam8bit ganfw_plugin_adam)
