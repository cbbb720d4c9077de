# The fuzz_corpus fixture: writes a tiny model of every architecture with the ember binary and
# turns them into seed inputs for the fuzz targets (see CMakeLists.txt beside this file).
#   cmake -DEMBER=<ember> -DSEED_MAKER=<fuzz_seed_maker> -DOUT=<build>/tests/fuzz -DTARGETS=<a,b,...> -P make_corpus.cmake
foreach(var EMBER SEED_MAKER OUT TARGETS)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "make_corpus.cmake: -D${var}=... is required")
  endif()
endforeach()

string(REPLACE "," ";" TARGETS "${TARGETS}")

set(models)
foreach(arch mlp bert-base gpt2 resnet50)
  execute_process(
    COMMAND ${EMBER} model new --arch ${arch} --tiny --seed 1 --out ${OUT}/models/${arch}
    RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "ember model new --arch ${arch} failed (${rc})")
  endif()
  list(APPEND models ${OUT}/models/${arch})
endforeach()

# Seeds are regenerated from scratch: a target's seed directory holds exactly this run's seeds.
file(REMOVE_RECURSE ${OUT}/seeds)
foreach(target ${TARGETS})
  file(MAKE_DIRECTORY ${OUT}/seeds/${target} ${OUT}/work/${target})
endforeach()
file(MAKE_DIRECTORY ${OUT}/artifacts)
execute_process(COMMAND ${SEED_MAKER} ${OUT}/seeds ${models} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "fuzz_seed_maker failed (${rc})")
endif()
