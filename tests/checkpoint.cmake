# checkpoint_torch: the DC-GAN checkpoint that test_checkpoint writes loads into PyTorch's
# DC-GAN with load_state_dict(strict=True) and reproduces ganfw's eval-mode outputs
# (tests/check_checkpoint_torch.py). test_checkpoint is its fixture.
if(GANFW_TORCH_PYTHON)
  add_test(NAME checkpoint_torch
           COMMAND ${GANFW_TORCH_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/check_checkpoint_torch.py
                   ${CMAKE_CURRENT_BINARY_DIR}/checkpoint_dcgan.safetensors
                   --io ${CMAKE_CURRENT_BINARY_DIR}/checkpoint_dcgan_io.safetensors)
  set_tests_properties(test_checkpoint PROPERTIES FIXTURES_SETUP checkpoint_dcgan)
  set_tests_properties(checkpoint_torch PROPERTIES FIXTURES_REQUIRED checkpoint_dcgan)
endif()
