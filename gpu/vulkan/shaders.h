// The compute shaders of the Vulkan backend: gpu/vulkan/shaders/NAME.comp, compiled by glslc
// at build time into SPIR-V words that are embedded in the binary. The build generates the
// list (shader_list.inc), so adding a shader is adding its file.
//
//   const ShaderCode& c = shader_code(Shader::add_f32);   // c.words, c.count, c.name
#pragma once

#include <cstddef>
#include <cstdint>

namespace mls::vulkan {

enum class Shader : uint16_t {
#define MLS_SHADER(name) name,
#include "gpu/vulkan/shader_list.inc"
#undef MLS_SHADER
  Count
};

struct ShaderCode {
  const char* name;
  const uint32_t* words;
  size_t count;
};

const ShaderCode& shader_code(Shader s);

}  // namespace mls::vulkan
