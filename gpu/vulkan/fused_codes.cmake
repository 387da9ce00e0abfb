# Generates FusedCode's and EpilogueAct's numbers for the shaders from the elementwise list,
# at build time:
#   cmake -DLIST=engine/ops/elementwise_list.h -DGLSL=<out>/fused_codes.glsl
#         -DCHECK=<out>/fused_codes_check.h -P gpu/vulkan/fused_codes.cmake
# GLSL has no enums and its preprocessor cannot count, so the shaders' switches
# (shaders/ew_apply.glsl, shaders/epilogue.glsl) expand the lists themselves and take each
# entry's number from here:
#   #define FC_Relu 10u      (MLS_ELEMENTWISE: after Input 0 and Const 1)
#   #define EA_Relu 1u       (MLS_EPILOGUE_ACTS: after None 0)
# The numbers are the entries' places in their list, as the C++ enums number them; CHECK
# gets a static_assert per entry that says so, which kernels_elementwise.cpp compiles, so
# this reading of the lists cannot drift from the C++ preprocessor's.
cmake_minimum_required(VERSION 3.25)
foreach(var LIST GLSL CHECK)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "fused_codes.cmake: -D${var}=... is required")
  endif()
endforeach()

file(READ "${LIST}" list_text)

# The entries of `#define macro(X)`: from its #define to the first line that does not
# continue. Block comments go; anything left that is not an entry (the regular expression
# `entry`), a line continuation or blank space is something this reading would get wrong, so
# it stops the build.
function(list_entries macro entry form out)
  string(FIND "${list_text}" "#define ${macro}(X)" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "${LIST}: no '#define ${macro}(X)'")
  endif()
  string(SUBSTRING "${list_text}" ${at} -1 text)
  string(REGEX MATCH "^#define ${macro}\\(X\\)([^\n]*\\\\\n)*[^\n]*" body "${text}")
  string(REGEX REPLACE "^#define ${macro}\\(X\\)" "" body "${body}")
  string(REGEX REPLACE "/\\*([^*]|\\*+[^*/])*\\*+/" "" body "${body}")
  string(REGEX REPLACE "${entry}" "" rest "${body}")
  string(REGEX REPLACE "[ \t\n\\\\]" "" rest "${rest}")
  if(NOT rest STREQUAL "")
    message(FATAL_ERROR "${LIST}: ${macro} holds text that is not an entry ${form}: '${rest}'")
  endif()
  string(REGEX MATCHALL "${entry}" entries "${body}")
  set(names "")
  foreach(e IN LISTS entries)
    string(REGEX REPLACE "${entry}" "\\1" name "${e}")
    if(name IN_LIST names)
      message(FATAL_ERROR "${LIST}: ${name} is listed twice in ${macro}")
    endif()
    list(APPEND names ${name})
  endforeach()
  set(${out} ${names} PARENT_SCOPE)
endfunction()

list_entries(MLS_ELEMENTWISE
             "X\\(([A-Za-z][A-Za-z0-9]*), *([a-z][a-z0-9_]*), *([a-z][a-z0-9_]*), *([12]), *([012])\\)"
             "X(Name, text, op, operands, params)" codes)
list_entries(MLS_EPILOGUE_ACTS "X\\(([A-Za-z][A-Za-z0-9]*), *([a-z][a-z0-9_]*)\\)" "X(Name, text)" acts)

string(CONCAT glsl "// Generated from ${LIST} by gpu/vulkan/fused_codes.cmake: FusedCode's and\n"
                   "// EpilogueAct's numbers.\n#ifndef MLS_FUSED_CODES_GLSL\n#define MLS_FUSED_CODES_GLSL\n")
string(CONCAT check "// Generated from ${LIST} by gpu/vulkan/fused_codes.cmake: the shaders' numbers\n"
                    "// (fused_codes.glsl) are FusedCode's and EpilogueAct's.\n#pragma once\n"
                    "#include \"engine/ops/fused.h\"\n")
# prefix: the GLSL names' (FC, EA); type: the C++ enum; first: the number of the list's first
# entry; macro: the list, which C++ counts to check the number of entries read here.
function(number prefix type first macro names)
  set(code ${first})
  foreach(name IN LISTS names)
    string(APPEND glsl "#define ${prefix}_${name} ${code}u\n")
    string(APPEND check "static_assert(static_cast<int>(mls::${type}::${name}) == ${code}, "
                        "\"fused_codes.cmake numbered ${prefix}_${name} otherwise than C++\");\n")
    math(EXPR code "${code} + 1")
  endforeach()
  string(APPEND check "#define MLS_FC_COUNT(...) +1\n"
                      "static_assert(${first} ${macro}(MLS_FC_COUNT) == ${code}, "
                      "\"fused_codes.cmake read another number of ${macro} entries than C++\");\n"
                      "#undef MLS_FC_COUNT\n")
  set(glsl "${glsl}" PARENT_SCOPE)
  set(check "${check}" PARENT_SCOPE)
endfunction()
string(APPEND glsl "#define FC_Input 0u\n#define FC_Const 1u\n")
number(FC FusedCode 2 MLS_ELEMENTWISE "${codes}")
string(APPEND glsl "#define EA_None 0u\n")
number(EA EpilogueAct 1 MLS_EPILOGUE_ACTS "${acts}")
string(APPEND glsl "#endif\n")
# Written only when changed, so the shaders rebuild only when a number moved.
file(CONFIGURE OUTPUT "${GLSL}" CONTENT "${glsl}" @ONLY)
file(CONFIGURE OUTPUT "${CHECK}" CONTENT "${check}" @ONLY)
