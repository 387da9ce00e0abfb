// The Vulkan compute backend: device-local buffers, compute pipelines from GLSL that glslc
// compiled to SPIR-V at build time (embedded in the binary), one in-order command stream.
//
//   mls::vulkan::init();                                   // kernels + "vulkan" in the registry
//   Result<Backend*> b = backend_registry().open("vulkan"); // the first device; "vulkan:1" the second
//   Tensor t = Tensor::empty(**b, DType::F32, {4}, AllocTag::Activation);
//
// Kernels record dispatches into the backend's current command buffer (launch returns at
// once); synchronize() submits and waits. A copy to or from the host waits for the work
// queued before it. Buffers never expose a host address (Buffer::host_ptr is null), as on
// a discrete GPU, even where the memory is mappable (lavapipe, integrated GPUs): copies use
// the mapping internally, else a staging buffer.
//
// A plan can record its whole step once and replay it (begin_capture / replay): the
// descriptors are pushed into the command buffer, so a replay needs no descriptor sets.
#pragma once

#include <vulkan/vulkan.h>

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/core/backend.h"
#include "engine/core/result.h"
#include "engine/core/tensor.h"
#include "gpu/vulkan/shaders.h"

namespace mls::vulkan {

// Registers the Vulkan kernels and "vulkan" in backend_registry() (once; the app and the
// tests call it). Opening the device happens on first use, so a machine without a Vulkan
// driver still starts; open() then says why.
void init();

// The devices the loader reports, in order ("vulkan:0" first): names and types, for
// `mlstudio devices` and the GUI. Empty with a message when there is no driver.
struct DeviceInfo {
  std::string name;
  std::string type;  // "discrete GPU", "integrated GPU", "CPU (software)", ...
  uint64_t memory_bytes = 0;
};
Result<std::vector<DeviceInfo>> list_devices();

// Warnings and errors the validation layer reported (MLS_VULKAN_VALIDATION=1 with Debian's
// vulkan-validationlayers installed); tests assert none.
int validation_message_count();

// A device buffer bound to a shader: the binding covers [offset, offset + range) of the
// VkBuffer; `element` is where the tensor starts inside it, in elements of its dtype.
struct Binding {
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceSize offset = 0, range = 0;
  uint32_t element = 0;
};

class VulkanBackend final : public Backend {
 public:
  ~VulkanBackend() override;
  static Result<std::unique_ptr<VulkanBackend>> create(int index);

  std::string_view name() const override { return name_; }
  DeviceKind kind() const override { return DeviceKind::Vulkan; }
  BufferType& default_buffer_type() override;
  void copy_to_device(Buffer& dst, size_t dst_offset, const void* src, size_t bytes) override;
  void copy_to_host(const Buffer& src, size_t src_offset, void* dst, size_t bytes) override;
  void copy_device(const Buffer& src, size_t src_offset, Buffer& dst, size_t dst_offset, size_t bytes) override;
  void launch(KernelFn fn, const KernelCall& call) override { fn(call); }
  void synchronize() override;
  size_t max_kernel_inputs() const override { return 8; }  // shaders/elementwise.comp binds 8

  // The device's name as the driver gives it ("llvmpipe (LLVM 15.0.6, 256 bits)").
  const std::string& device_name() const { return device_name_; }
  bool is_software() const { return software_; }
  // Mesa's llvmpipe (lavapipe) ends an invocation's loops after about 65535 iterations in
  // all: on a software device kernels choose launch shapes whose invocations stay below this.
  static constexpr int64_t kSoftwareLoopLimit = 60000;

  // For kernels: records one dispatch of `shader` over `tensors` (bindings 0, 1, ... in
  // order). The push constants are the tensors' element offsets (one uint32 each, in
  // binding order) followed by `params` (at most 128 bytes in all).
  void dispatch(Shader shader, std::initializer_list<const Tensor*> tensors, const void* params,
                size_t params_bytes, uint32_t groups_x, uint32_t groups_y = 1, uint32_t groups_z = 1);
  template <typename P>
  void dispatch(Shader shader, std::initializer_list<const Tensor*> tensors, const P& params, uint32_t gx,
                uint32_t gy = 1, uint32_t gz = 1) {
    dispatch(shader, tensors, &params, sizeof(P), gx, gy, gz);
  }
  // The same with the shader's specialization constants 0, 1, ... set to `constants` (32-bit
  // words): a pipeline per distinct set, made on first use and kept.
  template <typename P>
  void dispatch_specialized(Shader shader, const std::vector<uint32_t>& constants,
                            std::initializer_list<const Tensor*> tensors, const P& params, uint32_t gx) {
    record(pipeline(shader, &constants), tensors, &params, sizeof(P), gx, 1, 1);
  }
  // Groups of `local` invocations that cover n items, capped at the device's limit (the
  // shaders loop over the rest).
  uint32_t groups_for(int64_t n, uint32_t local = 256) const;
  // The element offset a shader sees for `t` (its first element's index in the bound range,
  // the push constant dispatch passes): kernels over packed narrow elements need it.
  uint32_t element_offset(const Tensor& t) const { return bind(t).element; }
  // A device buffer of at least `bytes` that lives as long as the backend, for a kernel's
  // constant tables (a fused program's code), keyed by the caller.
  const Tensor& constant_table(const std::string& key, const std::vector<uint32_t>& words);

  // Recording a sequence of launches once and replaying it: between begin_capture() and
  // end_capture() launches record into a command buffer of their own, which replay() submits
  // again (the buffers and offsets it binds must stay the same). Returns an id.
  int begin_capture() override;
  void end_capture() override;
  void replay(int capture) override;
  void release_capture(int capture) override;
  // Dispatches recorded so far (tests check a replayed step records none).
  uint64_t dispatch_count() const { return dispatches_; }
  uint64_t submit_count() const { return submits_; }

  // Memory held by the buffer cache for reuse (freed blocks of the same size class).
  size_t cached_bytes() const;
  void release_cached();

  // Internals the buffer type uses.
  struct Block {
    VkBuffer buffer = VK_NULL_HANDLE;
    VkDeviceMemory memory = VK_NULL_HANDLE;
    void* mapped = nullptr;  // host-visible memory stays mapped
    size_t size = 0;         // the size class
  };
  Block acquire_block(size_t bytes);
  void release_block(Block b);

 private:
  VulkanBackend() = default;
  Binding bind(const Tensor& t) const;
  VkCommandBuffer recording();  // the command buffer launches record into
  void submit_and_wait(VkCommandBuffer cb);
  void staged_copy(const Block& staging, VkBuffer dst, size_t dst_offset, VkBuffer src, size_t src_offset,
                   size_t bytes);
  struct Pipeline {
    VkDescriptorSetLayout set_layout = VK_NULL_HANDLE;
    VkPipelineLayout layout = VK_NULL_HANDLE;
    VkPipeline pipeline = VK_NULL_HANDLE;
    uint32_t bindings = 0;
  };
  // The shader's pipeline, or with specialization constants one of its specialised ones.
  const Pipeline& pipeline(Shader s, const std::vector<uint32_t>* constants = nullptr);
  const Pipeline& layouts(Shader s);  // the set and pipeline layouts, no pipeline yet
  VkPipeline make_pipeline(Shader s, const Pipeline& layouts, const std::vector<uint32_t>* constants);
  void record(const Pipeline& p, std::initializer_list<const Tensor*> tensors, const void* params, size_t params_bytes,
              uint32_t gx, uint32_t gy, uint32_t gz);
  std::unordered_map<std::string, Pipeline> specialised_;
  Block staging(size_t bytes);
  // Writes host bytes into a block now, outside the stream (a table made during a capture).
  void upload_now(const Block& b, size_t offset, const void* src, size_t bytes);

  std::string name_ = "vulkan";
  std::string device_name_;
  bool software_ = false;
  VkInstance instance_ = VK_NULL_HANDLE;
  VkDebugUtilsMessengerEXT messenger_ = VK_NULL_HANDLE;
  VkPhysicalDevice physical_ = VK_NULL_HANDLE;
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  uint32_t queue_family_ = 0;
  VkCommandPool pool_ = VK_NULL_HANDLE;
  VkCommandBuffer cb_ = VK_NULL_HANDLE;  // the stream's current command buffer
  bool cb_open_ = false;
  VkFence fence_ = VK_NULL_HANDLE;
  PFN_vkCmdPushDescriptorSetKHR push_descriptors_ = nullptr;
  VkPhysicalDeviceMemoryProperties mem_props_{};
  VkPhysicalDeviceLimits limits_{};
  uint32_t host_visible_type_ = UINT32_MAX;  // device-local and mappable, where there is one
  uint32_t device_type_ = UINT32_MAX;        // device-local
  uint32_t staging_type_ = UINT32_MAX;       // host-visible, coherent
  std::vector<Pipeline> pipelines_;
  std::unique_ptr<BufferType> buffer_type_;
  mutable std::mutex cache_mu_;
  std::unordered_map<size_t, std::vector<Block>> cache_;  // free blocks by size class
  size_t cached_bytes_ = 0;
  Block staging_{};
  std::unordered_map<std::string, Tensor> tables_;
  struct Capture {
    VkCommandBuffer cb = VK_NULL_HANDLE;
  };
  std::vector<Capture> captures_;
  int capturing_ = -1;
  uint64_t dispatches_ = 0, submits_ = 0;
  bool pending_ = false;  // the current command buffer holds unsubmitted work
};

}  // namespace mls::vulkan
