# Proof that the elementwise list (engine/ops/elementwise_list.h) is the one home of its
# facts: an op or an epilogue act added to it either works on every backend or fails the
# build, with a message naming it. Run by CTest (tests/CMakeLists.txt):
#   cmake -DSOURCE_DIR=<repo> -DWORK_DIR=<scratch> -DCXX=<c++> [-DGLSLC=<glslc>]
#         [-DNVCC=<nvcc>] -P tests/gpu/elementwise_list_check.cmake
# Each case writes a copy of the list (and, where it says so, copies of the formula files)
# under WORK_DIR, which the compilers search before the source tree, and compiles the real
# consumers against it: the CPU kernels and the list's C++ tables, the three elementwise
# shaders (glslc, when found) and the CUDA interpreter (nvcc, when found); for the epilogue
# acts, the CPU GEMM and the fused ops' tables, the four shaders with an epilogue and the
# CUDA epilogue.
cmake_minimum_required(VERSION 3.25)
foreach(var SOURCE_DIR WORK_DIR CXX)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "elementwise_list_check.cmake: -D${var}=... is required")
  endif()
endforeach()

set(list_h ${SOURCE_DIR}/engine/ops/elementwise_list.h)
set(last_entry "  X(ClampBackward, clamp_backward, clamp_backward, 2, 2)")
set(last_act "  X(Silu, silu)")
file(READ ${list_h} list_text)
foreach(last IN ITEMS "${last_entry}" "${last_act}")
  string(FIND "${list_text}" "${last}\n" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "the check expects a list of ${list_h} to end with '${last}': update it")
  endif()
endforeach()
set(failures 0)

# A scratch tree whose list has `entries` added after its last entry (none: "") and, when
# given, `acts` after the last epilogue act.
function(scratch_tree name entries)
  set(dir ${WORK_DIR}/${name})
  file(REMOVE_RECURSE ${dir})
  set(text "${list_text}")
  if(NOT entries STREQUAL "")
    string(REPLACE "${last_entry}\n" "${last_entry} \\\n  ${entries}\n" text "${text}")
  endif()
  if(ARGC GREATER 2)
    string(REPLACE "${last_act}\n" "${last_act} \\\n  ${ARGV2}\n" text "${text}")
  endif()
  file(WRITE ${dir}/engine/ops/elementwise_list.h "${text}")
  set(dir ${dir} PARENT_SCOPE)
endfunction()

# Runs a command; `expect` is "ok" or the text its failure must show.
function(expect what expect)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(expect STREQUAL "ok")
    if(rc EQUAL 0)
      message(STATUS "ok: ${what} builds")
      return()
    endif()
    message(SEND_ERROR "${what}: expected to build, failed:\n${out}")
  elseif(rc EQUAL 0)
    message(SEND_ERROR "${what}: expected to fail naming '${expect}', but it built")
  else()
    string(FIND "${out}" "${expect}" found)
    if(NOT found EQUAL -1)
      message(STATUS "ok: ${what} fails naming '${expect}'")
      return()
    endif()
    message(SEND_ERROR "${what}: failed without naming '${expect}':\n${out}")
  endif()
  math(EXPR n "${failures} + 1")
  set(failures ${n} PARENT_SCOPE)
endfunction()

function(cxx what expect dir src)
  expect("${what}: ${src}" "${expect}" ${CXX} -std=c++20 -fsyntax-only -Wall -Wextra -Wpedantic -Wno-missing-field-initializers -Werror -I ${dir}
         -I ${SOURCE_DIR} ${SOURCE_DIR}/${src})
  set(failures ${failures} PARENT_SCOPE)
endfunction()

# The shaders compile from a copy of the shader folder in dir (the formulas sit in
# common.glsl beside them), with FusedCode's and EpilogueAct's numbers generated from dir's
# list: the shaders named after dir, else the three elementwise ones.
function(glsl what expect dir)
  if(NOT GLSLC)
    return()
  endif()
  set(shaders ${ARGN})
  if(NOT shaders)
    set(shaders elementwise ew_simple fused)
  endif()
  expect("${what}: fused_codes.cmake" ok ${CMAKE_COMMAND} -DLIST=${dir}/engine/ops/elementwise_list.h
         -DGLSL=${dir}/gpu/vulkan/fused_codes.glsl -DCHECK=${dir}/gpu/vulkan/fused_codes_check.h
         -P ${SOURCE_DIR}/gpu/vulkan/fused_codes.cmake)
  if(NOT EXISTS ${dir}/shaders)
    file(COPY ${SOURCE_DIR}/gpu/vulkan/shaders DESTINATION ${dir})
  endif()
  foreach(shader IN LISTS shaders)
    expect("${what}: ${shader}.comp" "${expect}" ${GLSLC} --target-env=vulkan1.2 -Werror -I ${dir} -I ${SOURCE_DIR}
           -o ${dir}/${shader}.spv ${dir}/shaders/${shader}.comp)
  endforeach()
  set(failures ${failures} PARENT_SCOPE)
endfunction()

# The device sources named after dir (default: the interpreter, elementwise).
function(cuda what expect dir)
  if(NOT NVCC)
    return()
  endif()
  set(sources ${ARGN})
  if(NOT sources)
    set(sources elementwise)
  endif()
  foreach(src IN LISTS sources)
    expect("${what}: ${src}.cu" "${expect}" ${NVCC} -std=c++17 -arch=sm_80 -I ${dir} -I ${SOURCE_DIR} -c
           -o ${dir}/${src}.o ${SOURCE_DIR}/gpu/cuda/device/${src}.cu)
  endforeach()
  set(failures ${failures} PARENT_SCOPE)
endfunction()

# The consumers of the epilogue acts: the C++ tables and checks, the CPU's epilogue, the
# shaders that apply epilogue() and the CUDA epilogue (in common.cuh, which linalg.cu reads).
function(epilogue_consumers what expect_cxx expect_glsl expect_cuda dir)
  cxx("${what}" "${expect_cxx}" ${dir} engine/ops/fused_ops.cpp)
  cxx("${what}" "${expect_cxx}" ${dir} engine/cpu/gemm.cpp)
  glsl("${what}" "${expect_glsl}" ${dir} matmul matmul_lowp matmul_rows conv2d)
  cuda("${what}" "${expect_cuda}" ${dir} linalg)
  set(failures ${failures} PARENT_SCOPE)
endfunction()

# Appends `code` to a copy of a formula file in dir, after the line `anchor`.
function(add_formula dir file anchor code)
  file(READ ${SOURCE_DIR}/${file} text)
  string(FIND "${text}" "${anchor}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "${file} has no '${anchor}' to add a formula before: update the check")
  endif()
  string(REPLACE "${anchor}" "${code}\n${anchor}" text "${text}")
  file(WRITE ${dir}/${file} "${text}")
endfunction()

# 1. A new op without formulas: every backend's build stops and names the missing formula.
scratch_tree(no_formula "X(Frobnicate, frobnicate, frobnicate, 1, 0)")
cxx("new op, no formula" "frobnicate" ${dir} engine/cpu/elementwise_kernels.cpp)
cxx("new op, no formula" "frobnicate" ${dir} engine/cpu/fused_kernels.cpp)
glsl("new op, no formula" "frobnicate_" ${dir})
cuda("new op, no formula" "frobnicate_f" ${dir})

# 2. The same op with its formula written once per language, and an epilogue act that applies
# it: everything builds (so the failures above and in 6 come from the missing formulas, not
# from these command lines).
scratch_tree(with_formula "X(Frobnicate, frobnicate, frobnicate, 1, 0)" "X(Frobnicate, frobnicate)")
add_formula(${dir} engine/cpu/scalar_math.h "}  // namespace mls::cpu::scalar"
            "inline float frobnicate(float x) { return x * x; }")
add_formula(${dir} gpu/cuda/device/common.cuh "// The activation of a GEMM or convolution epilogue"
            "__device__ inline float frobnicate_f(float x) { return x * x; }")
file(COPY ${SOURCE_DIR}/gpu/vulkan/shaders DESTINATION ${dir})
file(READ ${dir}/shaders/common.glsl glsl_text)
file(WRITE ${dir}/shaders/common.glsl "${glsl_text}\nfloat frobnicate_(float x) { return x * x; }\n")
cxx("new op with formulas" ok ${dir} engine/cpu/elementwise_kernels.cpp)
cxx("new op with formulas" ok ${dir} engine/cpu/fused_kernels.cpp)
cxx("new op with formulas" ok ${dir} engine/ops/fused_program.cpp)
glsl("new op with formulas" ok ${dir})
cuda("new op with formulas" ok ${dir})
epilogue_consumers("new act with its op's formulas" ok ok ok ${dir})

# 3. An op with an attribute that fused_program.cpp's kParams does not name.
scratch_tree(no_params "X(Frobnicate, frobnicate, frobnicate, 1, 1)")
cxx("new op, attribute not named" "elementwise op 'frobnicate'" ${dir} engine/ops/fused_program.cpp)

# 4. A second code for an existing op that kVariants does not describe.
scratch_tree(no_variant "X(ReluAgain, relu_again, relu, 1, 0)")
cxx("second code of relu, no variant" "'relu_again' shares registry op 'relu'" ${dir} engine/ops/fused_program.cpp)

# 5. The generator refuses what it cannot read (a line comment would swallow an entry).
scratch_tree(bad_text "// X(Frobnicate, frobnicate, frobnicate, 1, 0)")
expect("a line comment in the list" "not an entry" ${CMAKE_COMMAND} -DLIST=${dir}/engine/ops/elementwise_list.h
       -DGLSL=${dir}/fused_codes.glsl -DCHECK=${dir}/fused_codes_check.h -P ${SOURCE_DIR}/gpu/vulkan/fused_codes.cmake)

# 6. An epilogue act added without its op's formula (no elementwise entry of its name): every
# backend's build stops, naming the act (C++: FusedCode::Frobnicate; the shaders and CUDA: the
# formula they call).
scratch_tree(act_no_formula "" "X(Frobnicate, frobnicate)")
epilogue_consumers("new act, no formula" "Frobnicate" "frobnicate_" "frobnicate_f" ${dir})

# 7. An act that applies an entry with an attribute: the epilogue has nowhere to keep it.
scratch_tree(act_with_params "" "X(LeakyRelu, leaky_relu)")
cxx("act with an attribute" "act 'leaky_relu' must name" ${dir} engine/ops/fused_ops.cpp)

# 8. The generator refuses what it cannot read in the acts' list too.
scratch_tree(bad_act_text "" "// X(Frobnicate, frobnicate)")
expect("a line comment in the acts' list" "MLS_EPILOGUE_ACTS"
       ${CMAKE_COMMAND} -DLIST=${dir}/engine/ops/elementwise_list.h -DGLSL=${dir}/fused_codes.glsl
       -DCHECK=${dir}/fused_codes_check.h -P ${SOURCE_DIR}/gpu/vulkan/fused_codes.cmake)

if(failures GREATER 0)
  message(FATAL_ERROR "${failures} check(s) failed")
endif()
