# Test plugins for tests/test_plugin_host.c: valid ones and broken ones, each a MODULE
# library ganfw_<name>.so in <build>/tests/plugins/ (never <build>/plugins/, so that the
# real search path does not see them), built with hidden visibility like real plugins.
set(GANFW_TEST_PLUGIN_DIR ${PROJECT_BINARY_DIR}/tests/plugins)
set(GANFW_TEST_PLUGIN_SRC ${CMAKE_CURRENT_LIST_DIR}/plugins)
add_custom_target(ganfw_test_plugins)

# ganfw_test_plugin(NAME SOURCE [DIR dir] [DEFS defs...]): ganfw_NAME.so from SOURCE.
function(ganfw_test_plugin name source)
  cmake_parse_arguments(TP "" "DIR;TARGET" "DEFS" ${ARGN})
  if(NOT TP_DIR)
    set(TP_DIR ${GANFW_TEST_PLUGIN_DIR})
  endif()
  if(NOT TP_TARGET)
    set(TP_TARGET ganfw_testplugin_${name})
  endif()
  add_library(${TP_TARGET} MODULE ${GANFW_TEST_PLUGIN_SRC}/${source})
  target_include_directories(${TP_TARGET} PRIVATE ${PROJECT_SOURCE_DIR}/core/include)
  target_compile_definitions(${TP_TARGET} PRIVATE ${TP_DEFS})
  set_target_properties(${TP_TARGET} PROPERTIES
    PREFIX "" OUTPUT_NAME ganfw_${name} C_VISIBILITY_PRESET hidden
    LIBRARY_OUTPUT_DIRECTORY ${TP_DIR})
  add_dependencies(ganfw_test_plugins ${TP_TARGET})
endfunction()

# Valid plugins, one per kind.
ganfw_test_plugin(tpmodel model.c)
ganfw_test_plugin(tpsgd sgd.c)
ganfw_test_plugin(tpmem memory.c)
ganfw_test_plugin(tplayer layer.c)
# The same name in a later search directory, with another version: the search-order test.
ganfw_test_plugin(tpmodel model.c DIR ${GANFW_TEST_PLUGIN_DIR}/alt
                  TARGET ganfw_testplugin_tpmodel_alt DEFS [[TP_VERSION="9.9.9-alt"]])
# A model of a family no trainer drives.
ganfw_test_plugin(badfamily model.c DEFS [[TP_NAME="badfamily"]] TP_FAMILY=5)

# Descriptors the host must refuse, one field wrong each (bad_desc.c); newminor is valid.
ganfw_test_plugin(badabi bad_desc.c DEFS [[TP_NAME="badabi"]] TP_ABI_MAJOR=2 TP_ABI_MINOR=0)
ganfw_test_plugin(newminor bad_desc.c DEFS [[TP_NAME="newminor"]] TP_ABI_MINOR=99)
# A newer plugin whose vtable is larger than this core's: only the core's size is copied.
ganfw_test_plugin(bigvt bad_desc.c DEFS [[TP_NAME="bigvt"]] TP_ABI_MINOR=99
                  "TP_VT_SIZE=(sizeof(ganfw_optim_vt) + 64)")
# Trainers: a valid one, one built for a newer minor (it may call step calls this core lacks)
# and one from before trainers existed (ABI 1.5).
ganfw_test_plugin(tptrainer trainer.c DEFS [[TP_NAME="tptrainer"]])
ganfw_test_plugin(newtrainer trainer.c DEFS [[TP_NAME="newtrainer"]] TP_ABI_MINOR=99)
ganfw_test_plugin(oldtrainer trainer.c DEFS [[TP_NAME="oldtrainer"]] TP_ABI_MINOR=5)
# A GAN written as a trainer, with a generator(): `ganfw sample` and `score` of its runs.
ganfw_test_plugin(tpgan gan_trainer.c)
ganfw_test_plugin(smalldesc bad_desc.c DEFS [[TP_NAME="smalldesc"]] TP_DESC_SIZE=16)
ganfw_test_plugin(badkind bad_desc.c DEFS [[TP_NAME="badkind"]] TP_KIND=7)
ganfw_test_plugin(noname bad_desc.c DEFS [[TP_NAME=""]])
ganfw_test_plugin(wrongname bad_desc.c DEFS [[TP_NAME="othername"]])
ganfw_test_plugin(nullvt bad_desc.c DEFS [[TP_NAME="nullvt"]] TP_NULL_VTABLE=1)
ganfw_test_plugin(smallvt bad_desc.c DEFS [[TP_NAME="smallvt"]] TP_VT_SIZE=8)
ganfw_test_plugin(nullmember bad_desc.c DEFS [[TP_NAME="nullmember"]] TP_NULL_STEP=1)
# ABI 1.1 kind tags: a memory descriptor carrying an optimizer's (tagged) vtable, a model
# descriptor carrying one, an unknown tag, and a 1.1 plugin that left the tag 0.
ganfw_test_plugin(wrongtag bad_desc.c DEFS [[TP_NAME="wrongtag"]] TP_KIND=2)
ganfw_test_plugin(wrongtagmodel bad_desc.c DEFS [[TP_NAME="wrongtagmodel"]] TP_KIND=0)
ganfw_test_plugin(badtag bad_desc.c DEFS [[TP_NAME="badtag"]] TP_VT_TAG=0x12345678)
ganfw_test_plugin(notag bad_desc.c DEFS [[TP_NAME="notag"]] TP_VT_TAG=0)
# An optimizer descriptor over vtables tagged as an objective's and a trainer's: the message
# names the descriptor kind the tag belongs to.
ganfw_test_plugin(objtagoptim bad_desc.c DEFS [[TP_NAME="objtagoptim"]]
                  TP_VT_TAG=GANFW_VT_TAG_OBJECTIVE)
ganfw_test_plugin(trainertagoptim bad_desc.c DEFS [[TP_NAME="trainertagoptim"]]
                  TP_VT_TAG=GANFW_VT_TAG_TRAINER)
# Malformed config-key tables (GANFW_EXT_CONFIG_KEYS).
ganfw_test_plugin(badkeys bad_desc.c DEFS [[TP_NAME="badkeys"]] TP_BAD_KEYS=1)
ganfw_test_plugin(badkeylist bad_desc.c DEFS [[TP_NAME="badkeylist"]] TP_BAD_KEYS=2)
ganfw_test_plugin(dupkeys bad_desc.c DEFS [[TP_NAME="dupkeys"]] TP_BAD_KEYS=3)

# Files the loader or the entry lookup must refuse.
ganfw_test_plugin(noentry noentry.c)
ganfw_test_plugin(nullentry nullentry.c)
ganfw_test_plugin(unresolved unresolved.c) # MODULE libraries link with undefined symbols
add_custom_command(OUTPUT ${GANFW_TEST_PLUGIN_DIR}/ganfw_notelf.so
  COMMAND ${CMAKE_COMMAND} -E make_directory ${GANFW_TEST_PLUGIN_DIR}
  COMMAND ${CMAKE_COMMAND} -E copy ${GANFW_TEST_PLUGIN_SRC}/notelf.txt
          ${GANFW_TEST_PLUGIN_DIR}/ganfw_notelf.so
  DEPENDS ${GANFW_TEST_PLUGIN_SRC}/notelf.txt
  COMMENT "Writing the not-a-shared-object test plugin ganfw_notelf.so")
add_custom_target(ganfw_testplugin_notelf DEPENDS ${GANFW_TEST_PLUGIN_DIR}/ganfw_notelf.so)
add_dependencies(ganfw_test_plugins ganfw_testplugin_notelf)

# Plugins built against the frozen ABI 1.0 headers.
include(${CMAKE_CURRENT_LIST_DIR}/abi10/abi10.cmake)

if(TARGET test_plugin_host)
  add_dependencies(test_plugin_host ganfw_test_plugins)
  # The suite checks each valid plugin's dynamic symbol table with this nm.
  target_compile_definitions(test_plugin_host PRIVATE GANFW_NM="${CMAKE_NM}")
endif()
if(TARGET test_fid)
  add_dependencies(test_fid ganfw_testplugin_tpgan) # a trainer plugin's run, scored
endif()

# tests/test_plugin_crash.c: plugins that crash or hang while loading, a valid optimizer
# whose create or step segfaults when its config asks, and a model whose layer does, in a
# folder of their own (so that the listings and searches of the suites above never meet
# them).
set(GANFW_CRASH_PLUGIN_DIR ${GANFW_TEST_PLUGIN_DIR}/crash)
ganfw_test_plugin(crashopt crash.c DIR ${GANFW_CRASH_PLUGIN_DIR} DEFS TP_CRASH=NONE)
ganfw_test_plugin(ctorsegv crash.c DIR ${GANFW_CRASH_PLUGIN_DIR}
                  DEFS TP_CRASH=CTOR_SEGV [[TP_NAME="ctorsegv"]])
ganfw_test_plugin(entryabort crash.c DIR ${GANFW_CRASH_PLUGIN_DIR}
                  DEFS TP_CRASH=ENTRY_ABORT [[TP_NAME="entryabort"]])
ganfw_test_plugin(ctorhang crash.c DIR ${GANFW_CRASH_PLUGIN_DIR}
                  DEFS TP_CRASH=CTOR_HANG [[TP_NAME="ctorhang"]])
# A classifier model whose own layer (net_custom) segfaults in a forward when asked.
ganfw_test_plugin(crashlayer crash_layer.c DIR ${GANFW_CRASH_PLUGIN_DIR})
if(TARGET test_plugin_crash)
  add_dependencies(test_plugin_crash ganfw ganfw_testplugin_crashopt ganfw_testplugin_ctorsegv
                   ganfw_testplugin_entryabort ganfw_testplugin_ctorhang
                   ganfw_testplugin_crashlayer)
  foreach(plugin cnn adam)
    if(TARGET ganfw_plugin_${plugin})
      add_dependencies(test_plugin_crash ganfw_plugin_${plugin})
    endif()
  endforeach()
endif()

# tests/test_dist.c: two builds of one optimizer (drift.c, one constant apart), each in a
# folder of its own: ranks that find different ones under one config are refused at start.
ganfw_test_plugin(tpdrift drift.c DIR ${GANFW_TEST_PLUGIN_DIR}/drift_a
                  TARGET ganfw_testplugin_tpdrift_a DEFS TP_LR_SCALE=1.0)
ganfw_test_plugin(tpdrift drift.c DIR ${GANFW_TEST_PLUGIN_DIR}/drift_b
                  TARGET ganfw_testplugin_tpdrift_b DEFS TP_LR_SCALE=1.01)
if(TARGET test_dist)
  add_dependencies(test_dist ganfw ganfw_plugin_dcgan ganfw_plugin_adam
                   ganfw_testplugin_tpdrift_a ganfw_testplugin_tpdrift_b)
endif()
