# Generates FusedCode's numbers for the shaders from the elementwise list, at build time:
#   cmake -DLIST=engine/ops/elementwise_list.h -DGLSL=<out>/fused_codes.glsl
#         -DCHECK=<out>/fused_codes_check.h -P gpu/vulkan/fused_codes.cmake
# GLSL has no enums and its preprocessor cannot count, so the shaders' switches
# (shaders/ew_apply.glsl) expand the list themselves and take each entry's number from here:
#   #define FC_Relu 10u
# The numbers are the entries' places in the list after Input (0) and Const (1), as the C++
# enum numbers them; CHECK gets a static_assert per entry that says so, which
# kernels_elementwise.cpp compiles, so this reading of the list cannot drift from the C++
# preprocessor's.
cmake_minimum_required(VERSION 3.25)
foreach(var LIST GLSL CHECK)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "fused_codes.cmake: -D${var}=... is required")
  endif()
endforeach()

file(READ "${LIST}" text)
# The body of MLS_ELEMENTWISE(X): from its #define to the first line that does not continue.
string(FIND "${text}" "#define MLS_ELEMENTWISE(X)" at)
if(at EQUAL -1)
  message(FATAL_ERROR "${LIST}: no '#define MLS_ELEMENTWISE(X)'")
endif()
string(SUBSTRING "${text}" ${at} -1 text)
string(REGEX MATCH "^#define MLS_ELEMENTWISE\\(X\\)([^\n]*\\\\\n)*[^\n]*" body "${text}")
string(REGEX REPLACE "^#define MLS_ELEMENTWISE\\(X\\)" "" body "${body}")
# Block comments go; anything left that is not an entry, a line continuation or blank space
# is something this reading would get wrong, so it stops the build.
string(REGEX REPLACE "/\\*([^*]|\\*+[^*/])*\\*+/" "" body "${body}")
set(entry "X\\(([A-Za-z][A-Za-z0-9]*), *([a-z][a-z0-9_]*), *([a-z][a-z0-9_]*), *([12]), *([012])\\)")
string(REGEX REPLACE "${entry}" "" rest "${body}")
string(REGEX REPLACE "[ \t\n\\\\]" "" rest "${rest}")
if(NOT rest STREQUAL "")
  message(FATAL_ERROR "${LIST}: MLS_ELEMENTWISE holds text that is not an entry "
                      "X(Name, text, op, operands, params): '${rest}'")
endif()
string(REGEX MATCHALL "${entry}" entries "${body}")

set(glsl "// Generated from ${LIST} by gpu/vulkan/fused_codes.cmake: FusedCode's numbers.\n")
string(APPEND glsl "#define FC_Input 0u\n#define FC_Const 1u\n")
string(CONCAT check "// Generated from ${LIST} by gpu/vulkan/fused_codes.cmake: the shaders' numbers\n"
                    "// (fused_codes.glsl) are FusedCode's.\n#pragma once\n#include \"engine/ops/fused.h\"\n")
set(code 2)
set(names "")
foreach(e IN LISTS entries)
  string(REGEX REPLACE "${entry}" "\\1" name "${e}")
  if(name IN_LIST names)
    message(FATAL_ERROR "${LIST}: ${name} is listed twice")
  endif()
  list(APPEND names ${name})
  string(APPEND glsl "#define FC_${name} ${code}u\n")
  string(APPEND check "static_assert(static_cast<int>(mls::FusedCode::${name}) == ${code}, "
                      "\"fused_codes.cmake numbered FC_${name} otherwise than C++\");\n")
  math(EXPR code "${code} + 1")
endforeach()
string(APPEND check "#define MLS_FC_COUNT(...) +1\n"
                    "static_assert(2 MLS_ELEMENTWISE(MLS_FC_COUNT) == ${code}, "
                    "\"fused_codes.cmake read another number of entries than C++\");\n"
                    "#undef MLS_FC_COUNT\n")
# Written only when changed, so the shaders rebuild only when a number moved.
file(CONFIGURE OUTPUT "${GLSL}" CONTENT "${glsl}" @ONLY)
file(CONFIGURE OUTPUT "${CHECK}" CONTENT "${check}" @ONLY)
