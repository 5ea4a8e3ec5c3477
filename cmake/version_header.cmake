cmake_minimum_required(VERSION 3.20)
# Run at build time (cmake -P), so that the commit is that of the build, not of the last
# configure: writes OUTPUT with VERSION and `git describe --always --dirty` of SOURCE_DIR
# ("unknown" outside a git checkout). The file is rewritten only when its text changes.
execute_process(COMMAND git -C ${SOURCE_DIR} describe --always --dirty --abbrev=12 --exclude=*
                OUTPUT_VARIABLE GIT_COMMIT OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR GIT_COMMIT STREQUAL "")
  set(GIT_COMMIT unknown)
endif()
file(CONFIGURE OUTPUT ${OUTPUT} @ONLY CONTENT
  "#pragma once\ninline constexpr const char kGtraceVersion[] = \"@VERSION@\";\ninline constexpr const char kGtraceGitCommit[] = \"@GIT_COMMIT@\";\n")
