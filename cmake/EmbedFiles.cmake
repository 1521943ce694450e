# te_embed_files(<output .cc> SYMBOL <function> FILES <name>=<path>...)
# Generates <output> at build time (src/api/cmake/embed_files.cmake): the
# function `std::span<const EmbeddedFile> taskengine::api::<function>()` over
# the files, each served under <name>. Regenerated when a file changes.
function(te_embed_files output)
  cmake_parse_arguments(E "" "SYMBOL" "FILES" ${ARGN})
  set(paths)
  foreach(entry IN LISTS E_FILES)
    string(REGEX REPLACE "^[^=]*=" "" path "${entry}")
    list(APPEND paths "${path}")
  endforeach()
  list(JOIN E_FILES "|" joined)
  set(script ${PROJECT_SOURCE_DIR}/src/api/cmake/embed_files.cmake)
  add_custom_command(
    OUTPUT ${output}
    COMMAND ${CMAKE_COMMAND} -DOUTPUT=${output} -DSYMBOL=${E_SYMBOL} "-DFILES=${joined}"
            -P ${script}
    DEPENDS ${paths} ${script}
    COMMENT "Embedding ${E_SYMBOL}"
    VERBATIM)
  # Data arrays compile on their own: no gain in a unity batch, and each
  # generated file has the same internal names.
  set_source_files_properties(${output} PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)
endfunction()
