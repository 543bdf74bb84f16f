# posenc_data_test(NAME name NEEDS path COMMAND cmd...): a test that needs a file of the shared data.
# Where `path` exists the test runs `cmd`; where it does not, the test is still registered and says
# what is missing: skipped (exit 77), or failed when POSENC_REQUIRE_DATA is set, as the C++ tests'
# POSENC_REQUIRE_DATA does. A test that silently did not exist could not fail in CI.
function(posenc_data_test)
  cmake_parse_arguments(ARG "" "NAME;NEEDS" "COMMAND" ${ARGN})
  if(EXISTS "${ARG_NEEDS}")
    add_test(NAME ${ARG_NAME} COMMAND ${ARG_COMMAND})
  else()
    add_test(NAME ${ARG_NAME}
             COMMAND sh -c "echo \"shared data missing: $1 (set POSENC_DATA_DIR to the folder holding golden/ and models/)\"; if [ \"\${POSENC_REQUIRE_DATA+set}\" = set ]; then exit 1; fi; exit 77"
                     sh "${ARG_NEEDS}")
    set_tests_properties(${ARG_NAME} PROPERTIES SKIP_RETURN_CODE 77)
  endif()
endfunction()
