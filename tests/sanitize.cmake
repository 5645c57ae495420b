# compute-sanitizer on every kernel of the build (label: sanitize): one test per tool and dtype,
# each running scripts/sanitize.sh on a few small shapes, 8 runs at once (logs and summary.md
# under <build>/sanitize/<tool>_<dtype>/).
#
# Without compute-sanitizer or without a GPU the script exits 77 and ctest reports the test as
# skipped, not passed, so CI (no GPU) stays green without claiming a clean run. On a GPU machine
# a plain `ctest` runs them too; scripts/device_run.sh runs them in its own stage
# (`ctest -L sanitize`) and leaves them out of its test stage (`-LE sanitize`).
find_program(FL_COMPUTE_SANITIZER compute-sanitizer
  HINTS ${CUDAToolkit_BIN_DIR} ${CUDAToolkit_BIN_DIR}/../compute-sanitizer
  DOC "compute-sanitizer, for the tests labelled sanitize")
if(NOT FL_COMPUTE_SANITIZER)
  message(STATUS "flash_ladder: compute-sanitizer not found; the sanitize tests will skip")
endif()

foreach(tool memcheck racecheck synccheck initcheck)
  foreach(dtype fp16 bf16)
    add_test(NAME sanitize_${tool}_${dtype}
      COMMAND bash ${CMAKE_SOURCE_DIR}/scripts/sanitize.sh
        --build ${CMAKE_BINARY_DIR} --out ${CMAKE_BINARY_DIR}/sanitize/${tool}_${dtype}
        --sanitizer "${FL_COMPUTE_SANITIZER}" --dtype ${dtype} --jobs 8 ${tool})
    # RUN_SERIAL: each test already runs 8 processes on the GPU at once; it is kept apart from
    # the other GPU tests. The timeout is generous for racecheck, the slow tool.
    set_tests_properties(sanitize_${tool}_${dtype} PROPERTIES
      LABELS sanitize SKIP_RETURN_CODE 77 TIMEOUT 900 RUN_SERIAL TRUE)
  endforeach()
endforeach()
