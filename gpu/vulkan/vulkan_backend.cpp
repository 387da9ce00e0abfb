#include "gpu/vulkan/vulkan_backend.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <new>

#include "engine/core/backend_registry.h"
#include "engine/core/op.h"
#include "gpu/vulkan/vulkan_kernels.h"

namespace mls::vulkan {

namespace {

std::string vk_result_name(VkResult r) {
  switch (r) {
    case VK_SUCCESS: return "VK_SUCCESS";
    case VK_ERROR_OUT_OF_HOST_MEMORY: return "VK_ERROR_OUT_OF_HOST_MEMORY";
    case VK_ERROR_OUT_OF_DEVICE_MEMORY: return "VK_ERROR_OUT_OF_DEVICE_MEMORY";
    case VK_ERROR_INITIALIZATION_FAILED: return "VK_ERROR_INITIALIZATION_FAILED";
    case VK_ERROR_DEVICE_LOST: return "VK_ERROR_DEVICE_LOST";
    case VK_ERROR_LAYER_NOT_PRESENT: return "VK_ERROR_LAYER_NOT_PRESENT";
    case VK_ERROR_EXTENSION_NOT_PRESENT: return "VK_ERROR_EXTENSION_NOT_PRESENT";
    case VK_ERROR_FEATURE_NOT_PRESENT: return "VK_ERROR_FEATURE_NOT_PRESENT";
    case VK_ERROR_INCOMPATIBLE_DRIVER: return "VK_ERROR_INCOMPATIBLE_DRIVER (no Vulkan driver found)";
    default: return "VkResult " + std::to_string(static_cast<int>(r));
  }
}

// Vulkan calls after the device is open fail only on lost devices or exhausted memory:
// an allocation failure becomes std::bad_alloc (the plan reports its size), others abort.
void check(VkResult r, const char* what) {
  if (r == VK_SUCCESS) return;
  if (r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY) throw std::bad_alloc();
  std::fprintf(stderr, "mlstudio: vulkan: %s failed: %s\n", what, vk_result_name(r).c_str());
  std::abort();
}

// Validation layers (Debian's vulkan-validationlayers) when MLS_VULKAN_VALIDATION=1 and
// the layer is installed; every message is printed and counted (tests assert none).
bool validation_requested() {
  const char* v = std::getenv("MLS_VULKAN_VALIDATION");
  return v && *v && std::strcmp(v, "0") != 0;
}

bool has_layer(const char* name) {
  uint32_t n = 0;
  vkEnumerateInstanceLayerProperties(&n, nullptr);
  std::vector<VkLayerProperties> layers(n);
  vkEnumerateInstanceLayerProperties(&n, layers.data());
  for (const auto& l : layers)
    if (std::strcmp(l.layerName, name) == 0) return true;
  return false;
}

std::atomic<int> g_validation_messages{0};

VKAPI_ATTR VkBool32 VKAPI_CALL on_validation(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                            VkDebugUtilsMessageTypeFlagsEXT,
                                            const VkDebugUtilsMessengerCallbackDataEXT* data, void*) {
  if (severity >= VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT) {
    g_validation_messages.fetch_add(1);
    std::fprintf(stderr, "mlstudio: vulkan validation: %s\n", data->pMessage);
  }
  return VK_FALSE;
}

Result<VkInstance> make_instance(bool validation) {
  VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
  app.pApplicationName = "mlstudio";
  app.pEngineName = "mlstudio";
  app.apiVersion = VK_API_VERSION_1_2;
  std::vector<const char*> layers, extensions;
  if (validation) {
    layers.push_back("VK_LAYER_KHRONOS_validation");
    extensions.push_back(VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
  }
  VkInstanceCreateInfo ci{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
  ci.pApplicationInfo = &app;
  ci.enabledLayerCount = static_cast<uint32_t>(layers.size());
  ci.ppEnabledLayerNames = layers.data();
  ci.enabledExtensionCount = static_cast<uint32_t>(extensions.size());
  ci.ppEnabledExtensionNames = extensions.data();
  VkInstance inst = VK_NULL_HANDLE;
  VkResult r = vkCreateInstance(&ci, nullptr, &inst);
  if (r != VK_SUCCESS)
    return make_error("cannot start Vulkan: " + vk_result_name(r) +
                      " (install a driver: mesa-vulkan-drivers gives the lavapipe CPU device)");
  return inst;
}

std::string device_type_name(VkPhysicalDeviceType t) {
  switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return "discrete GPU";
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return "integrated GPU";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return "virtual GPU";
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return "CPU (software)";
    default: return "other";
  }
}

// Physical devices that have a compute queue and push descriptors, GPUs before software
// devices, in the loader's order otherwise: "vulkan:0" is the best one.
std::vector<VkPhysicalDevice> usable_devices(VkInstance inst) {
  uint32_t n = 0;
  vkEnumeratePhysicalDevices(inst, &n, nullptr);
  std::vector<VkPhysicalDevice> all(n);
  vkEnumeratePhysicalDevices(inst, &n, all.data());
  std::vector<VkPhysicalDevice> out;
  for (VkPhysicalDevice d : all) {
    uint32_t ne = 0;
    vkEnumerateDeviceExtensionProperties(d, nullptr, &ne, nullptr);
    std::vector<VkExtensionProperties> ext(ne);
    vkEnumerateDeviceExtensionProperties(d, nullptr, &ne, ext.data());
    bool push = false;
    for (const auto& e : ext) push = push || std::strcmp(e.extensionName, VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME) == 0;
    uint32_t nq = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(d, &nq, nullptr);
    std::vector<VkQueueFamilyProperties> qs(nq);
    vkGetPhysicalDeviceQueueFamilyProperties(d, &nq, qs.data());
    bool compute = false;
    for (const auto& q : qs) compute = compute || (q.queueFlags & VK_QUEUE_COMPUTE_BIT);
    if (push && compute) out.push_back(d);
  }
  std::stable_sort(out.begin(), out.end(), [](VkPhysicalDevice a, VkPhysicalDevice b) {
    VkPhysicalDeviceProperties pa, pb;
    vkGetPhysicalDeviceProperties(a, &pa);
    vkGetPhysicalDeviceProperties(b, &pb);
    return (pa.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU) < (pb.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU);
  });
  return out;
}

// The size class of an allocation: 256-byte steps up to 4 KiB, then four steps per power
// of two, so a freed block serves the next request of about its size (at most 25 % over).
size_t size_class(size_t bytes) {
  bytes = std::max<size_t>(bytes, 1);
  if (bytes <= 4096) return (bytes + 255) / 256 * 256;
  size_t p = 4096;
  while (p * 2 < bytes) p *= 2;
  const size_t step = p / 4;
  return (bytes + step - 1) / step * step;
}

constexpr size_t kMaxCachedBytes = size_t{512} << 20;

class VulkanBuffer final : public Buffer {
 public:
  VulkanBuffer(VulkanBackend& b, size_t bytes, AllocTag tag) : Buffer(b, bytes, tag), block_(b.acquire_block(bytes)) {
    b.memory().on_alloc(tag, bytes);
  }
  ~VulkanBuffer() override {
    auto& b = static_cast<VulkanBackend&>(backend());
    b.memory().on_free(tag(), size());
    b.release_block(block_);
  }
  void* host_ptr() const override { return nullptr; }
  void* native_handle() const override { return reinterpret_cast<void*>(block_.buffer); }
  const VulkanBackend::Block& block() const { return block_; }

 private:
  VulkanBackend::Block block_;
};

const VulkanBackend::Block& block_of(const Buffer& b) { return static_cast<const VulkanBuffer&>(b).block(); }

class VulkanBufferType final : public BufferType {
 public:
  VulkanBufferType(VulkanBackend& b, size_t alignment) : backend_(b), alignment_(alignment) {}
  std::string_view name() const override { return "vulkan-device"; }
  size_t alignment() const override { return alignment_; }
  bool host_accessible() const override { return false; }
  std::unique_ptr<Buffer> allocate(size_t bytes, AllocTag tag) override {
    return std::make_unique<VulkanBuffer>(backend_, bytes, tag);
  }

 private:
  VulkanBackend& backend_;
  size_t alignment_;
};

// Where a shader's bindings are declared: the highest Binding decoration + 1, read from the
// SPIR-V itself (OpDecorate = 71, Decoration Binding = 33).
uint32_t count_bindings(const ShaderCode& code) {
  uint32_t n = 0;
  for (size_t i = 5; i < code.count;) {
    const uint32_t word = code.words[i];
    const uint32_t len = word >> 16, op = word & 0xffff;
    if (len == 0) break;
    if (op == 71 && len >= 4 && code.words[i + 2] == 33) n = std::max(n, code.words[i + 3] + 1);
    i += len;
  }
  return n;
}

}  // namespace

int validation_message_count() { return g_validation_messages.load(); }

Result<std::vector<DeviceInfo>> list_devices() {
  auto inst = make_instance(false);
  if (!inst) return inst.error();
  std::vector<DeviceInfo> out;
  for (VkPhysicalDevice d : usable_devices(*inst)) {
    VkPhysicalDeviceProperties p;
    vkGetPhysicalDeviceProperties(d, &p);
    VkPhysicalDeviceMemoryProperties m;
    vkGetPhysicalDeviceMemoryProperties(d, &m);
    uint64_t bytes = 0;
    for (uint32_t h = 0; h < m.memoryHeapCount; ++h)
      if (m.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) bytes = std::max<uint64_t>(bytes, m.memoryHeaps[h].size);
    out.push_back({p.deviceName, device_type_name(p.deviceType), bytes});
  }
  vkDestroyInstance(*inst, nullptr);
  return out;
}

Result<std::unique_ptr<VulkanBackend>> VulkanBackend::create(int index) {
  std::unique_ptr<VulkanBackend> b(new VulkanBackend());
  const bool validation = validation_requested() && has_layer("VK_LAYER_KHRONOS_validation");
  if (validation_requested() && !validation)
    std::fprintf(stderr, "mlstudio: MLS_VULKAN_VALIDATION is set but the validation layer is not installed "
                         "(apt-get install vulkan-validationlayers)\n");
  auto inst = make_instance(validation);
  if (!inst) return inst.error();
  b->instance_ = *inst;
  if (validation) {
    auto create_messenger = reinterpret_cast<PFN_vkCreateDebugUtilsMessengerEXT>(
        vkGetInstanceProcAddr(b->instance_, "vkCreateDebugUtilsMessengerEXT"));
    VkDebugUtilsMessengerCreateInfoEXT mi{VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT};
    mi.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
    mi.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                     VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
    mi.pfnUserCallback = on_validation;
    if (create_messenger) create_messenger(b->instance_, &mi, nullptr, &b->messenger_);
  }
  const auto devices = usable_devices(b->instance_);
  if (devices.empty())
    return make_error("no Vulkan device with compute and push descriptors (install mesa-vulkan-drivers for the "
                      "lavapipe CPU device, or a GPU driver)");
  if (index < 0 || static_cast<size_t>(index) >= devices.size())
    return make_error("there " + std::string(devices.size() == 1 ? "is 1 Vulkan device" : "are " + std::to_string(devices.size()) + " Vulkan devices") +
                      " (vulkan:0" + (devices.size() > 1 ? " to vulkan:" + std::to_string(devices.size() - 1) : "") + ")");
  b->physical_ = devices[static_cast<size_t>(index)];
  VkPhysicalDeviceProperties props;
  vkGetPhysicalDeviceProperties(b->physical_, &props);
  b->device_name_ = props.deviceName;
  b->software_ = props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
  b->limits_ = props.limits;
  if (index > 0) b->name_ = "vulkan:" + std::to_string(index);

  uint32_t nq = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(b->physical_, &nq, nullptr);
  std::vector<VkQueueFamilyProperties> qs(nq);
  vkGetPhysicalDeviceQueueFamilyProperties(b->physical_, &nq, qs.data());
  b->queue_family_ = UINT32_MAX;
  for (uint32_t i = 0; i < nq; ++i)  // a compute-only queue first (async compute), else any compute queue
    if ((qs[i].queueFlags & VK_QUEUE_COMPUTE_BIT) && b->queue_family_ == UINT32_MAX) b->queue_family_ = i;

  VkPhysicalDeviceFeatures supported{};
  vkGetPhysicalDeviceFeatures(b->physical_, &supported);
  VkPhysicalDeviceFeatures features{};
  features.shaderInt64 = supported.shaderInt64;
  const float priority = 1.0f;
  VkDeviceQueueCreateInfo qi{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
  qi.queueFamilyIndex = b->queue_family_;
  qi.queueCount = 1;
  qi.pQueuePriorities = &priority;
  const char* ext[] = {VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME};
  VkDeviceCreateInfo di{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
  di.queueCreateInfoCount = 1;
  di.pQueueCreateInfos = &qi;
  di.enabledExtensionCount = 1;
  di.ppEnabledExtensionNames = ext;
  di.pEnabledFeatures = &features;
  if (VkResult r = vkCreateDevice(b->physical_, &di, nullptr, &b->device_); r != VK_SUCCESS)
    return make_error("cannot open Vulkan device '" + b->device_name_ + "': " + vk_result_name(r));
  vkGetDeviceQueue(b->device_, b->queue_family_, 0, &b->queue_);
  b->push_descriptors_ =
      reinterpret_cast<PFN_vkCmdPushDescriptorSetKHR>(vkGetDeviceProcAddr(b->device_, "vkCmdPushDescriptorSetKHR"));
  if (!b->push_descriptors_) return make_error("Vulkan device '" + b->device_name_ + "' lacks vkCmdPushDescriptorSetKHR");

  vkGetPhysicalDeviceMemoryProperties(b->physical_, &b->mem_props_);
  for (uint32_t i = 0; i < b->mem_props_.memoryTypeCount; ++i) {
    const VkMemoryPropertyFlags f = b->mem_props_.memoryTypes[i].propertyFlags;
    const bool local = f & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;
    const bool visible = (f & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT) && (f & VK_MEMORY_PROPERTY_HOST_COHERENT_BIT);
    if (local && b->device_type_ == UINT32_MAX) b->device_type_ = i;
    if (local && visible && b->host_visible_type_ == UINT32_MAX) b->host_visible_type_ = i;
    if (visible && b->staging_type_ == UINT32_MAX) b->staging_type_ = i;
  }
  // On a discrete GPU a small mappable device-local window (ReBAR off) is not where tensors
  // go: only software and integrated devices, whose memory is the host's, map every buffer.
  if (props.deviceType == VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU) b->host_visible_type_ = UINT32_MAX;
  if (b->host_visible_type_ != UINT32_MAX) b->device_type_ = b->host_visible_type_;
  if (b->device_type_ == UINT32_MAX || b->staging_type_ == UINT32_MAX)
    return make_error("Vulkan device '" + b->device_name_ + "' has no usable memory types");

  VkCommandPoolCreateInfo pi{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  pi.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pi.queueFamilyIndex = b->queue_family_;
  check(vkCreateCommandPool(b->device_, &pi, nullptr, &b->pool_), "vkCreateCommandPool");
  VkCommandBufferAllocateInfo ai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  ai.commandPool = b->pool_;
  ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  ai.commandBufferCount = 1;
  check(vkAllocateCommandBuffers(b->device_, &ai, &b->cb_), "vkAllocateCommandBuffers");
  VkFenceCreateInfo fi{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  check(vkCreateFence(b->device_, &fi, nullptr, &b->fence_), "vkCreateFence");
  b->pipelines_.resize(static_cast<size_t>(Shader::Count));
  // Plans place tensors at multiples of this: the storage-buffer offset alignment, at least
  // 64 bytes (a bound range then starts at a tensor's first byte).
  const size_t align = std::max<size_t>(64, props.limits.minStorageBufferOffsetAlignment);
  b->buffer_type_ = std::make_unique<VulkanBufferType>(*b, align);
  return b;
}

VulkanBackend::~VulkanBackend() {
  auto destroy_instance = [&] {
    if (messenger_) {
      auto destroy = reinterpret_cast<PFN_vkDestroyDebugUtilsMessengerEXT>(
          vkGetInstanceProcAddr(instance_, "vkDestroyDebugUtilsMessengerEXT"));
      if (destroy) destroy(instance_, messenger_, nullptr);
    }
    if (instance_) vkDestroyInstance(instance_, nullptr);
  };
  if (device_ == VK_NULL_HANDLE) {  // a device that failed to open
    destroy_instance();
    return;
  }
  vkDeviceWaitIdle(device_);
  tables_.clear();
  release_cached();
  auto free_block = [&](Block& blk) {
    if (blk.buffer == VK_NULL_HANDLE) return;
    vkDestroyBuffer(device_, blk.buffer, nullptr);
    vkFreeMemory(device_, blk.memory, nullptr);
    blk = {};
  };
  free_block(staging_);
  for (auto& [key, p] : specialised_) vkDestroyPipeline(device_, p.pipeline, nullptr);
  for (Pipeline& p : pipelines_) {
    if (p.pipeline) vkDestroyPipeline(device_, p.pipeline, nullptr);
    if (p.layout) vkDestroyPipelineLayout(device_, p.layout, nullptr);
    if (p.set_layout) vkDestroyDescriptorSetLayout(device_, p.set_layout, nullptr);
  }
  vkDestroyFence(device_, fence_, nullptr);
  vkDestroyCommandPool(device_, pool_, nullptr);
  vkDestroyDevice(device_, nullptr);
  destroy_instance();
}

BufferType& VulkanBackend::default_buffer_type() { return *buffer_type_; }

VulkanBackend::Block VulkanBackend::acquire_block(size_t bytes) {
  const size_t cls = size_class(bytes);
  {
    std::lock_guard lock(cache_mu_);
    auto it = cache_.find(cls);
    if (it != cache_.end() && !it->second.empty()) {
      Block b = it->second.back();
      it->second.pop_back();
      cached_bytes_ -= cls;
      return b;
    }
  }
  Block b;
  b.size = cls;
  VkBufferCreateInfo bi{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  bi.size = cls;
  bi.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  bi.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  check(vkCreateBuffer(device_, &bi, nullptr, &b.buffer), "vkCreateBuffer");
  VkMemoryRequirements req;
  vkGetBufferMemoryRequirements(device_, b.buffer, &req);
  uint32_t type = device_type_;
  if (!(req.memoryTypeBits & (1u << type))) {
    for (type = 0; type < mem_props_.memoryTypeCount; ++type)
      if ((req.memoryTypeBits & (1u << type)) &&
          (mem_props_.memoryTypes[type].propertyFlags & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT))
        break;
  }
  VkMemoryAllocateInfo ai{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
  ai.allocationSize = req.size;
  ai.memoryTypeIndex = type;
  VkResult r = vkAllocateMemory(device_, &ai, nullptr, &b.memory);
  if (r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY) {
    release_cached();  // what the cache holds may be enough
    r = vkAllocateMemory(device_, &ai, nullptr, &b.memory);
  }
  if (r != VK_SUCCESS) vkDestroyBuffer(device_, b.buffer, nullptr);
  check(r, "vkAllocateMemory");
  check(vkBindBufferMemory(device_, b.buffer, b.memory, 0), "vkBindBufferMemory");
  const VkMemoryPropertyFlags f = mem_props_.memoryTypes[type].propertyFlags;
  if ((f & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT) && (f & VK_MEMORY_PROPERTY_HOST_COHERENT_BIT))
    check(vkMapMemory(device_, b.memory, 0, VK_WHOLE_SIZE, 0, &b.mapped), "vkMapMemory");
  return b;
}

void VulkanBackend::release_block(Block b) {
  // Work queued before the release may still use the block: the next acquire of it would
  // record after that work in the same stream, so in-order execution keeps it safe, except
  // for a host copy into it, which synchronises first.
  std::lock_guard lock(cache_mu_);
  if (cached_bytes_ + b.size <= kMaxCachedBytes) {
    cache_[b.size].push_back(b);
    cached_bytes_ += b.size;
    return;
  }
  if (pending_) {  // the block may be in use by unsubmitted work: keep it anyway
    cache_[b.size].push_back(b);
    cached_bytes_ += b.size;
    return;
  }
  vkDestroyBuffer(device_, b.buffer, nullptr);
  vkFreeMemory(device_, b.memory, nullptr);
}

size_t VulkanBackend::cached_bytes() const {
  std::lock_guard lock(cache_mu_);
  return cached_bytes_;
}

void VulkanBackend::release_cached() {
  synchronize();
  std::lock_guard lock(cache_mu_);
  for (auto& [cls, blocks] : cache_)
    for (Block& b : blocks) {
      vkDestroyBuffer(device_, b.buffer, nullptr);
      vkFreeMemory(device_, b.memory, nullptr);
    }
  cache_.clear();
  cached_bytes_ = 0;
}

VulkanBackend::Block VulkanBackend::staging(size_t bytes) {
  if (staging_.size >= bytes) return staging_;
  if (staging_.buffer) {
    vkDestroyBuffer(device_, staging_.buffer, nullptr);
    vkFreeMemory(device_, staging_.memory, nullptr);
  }
  Block b;
  b.size = std::max<size_t>(bytes, size_t{1} << 20);
  VkBufferCreateInfo bi{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  bi.size = b.size;
  bi.usage = VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  check(vkCreateBuffer(device_, &bi, nullptr, &b.buffer), "vkCreateBuffer (staging)");
  VkMemoryRequirements req;
  vkGetBufferMemoryRequirements(device_, b.buffer, &req);
  VkMemoryAllocateInfo ai{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
  ai.allocationSize = req.size;
  ai.memoryTypeIndex = staging_type_;
  check(vkAllocateMemory(device_, &ai, nullptr, &b.memory), "vkAllocateMemory (staging)");
  check(vkBindBufferMemory(device_, b.buffer, b.memory, 0), "vkBindBufferMemory (staging)");
  check(vkMapMemory(device_, b.memory, 0, VK_WHOLE_SIZE, 0, &b.mapped), "vkMapMemory (staging)");
  staging_ = b;
  return b;
}

void VulkanBackend::upload_now(const Block& b, size_t offset, const void* src, size_t bytes) {
  if (b.mapped) {
    std::memcpy(static_cast<char*>(b.mapped) + offset, src, bytes);
    return;
  }
  Block s = staging(bytes);
  std::memcpy(s.mapped, src, bytes);
  VkCommandBuffer cb = VK_NULL_HANDLE;
  VkCommandBufferAllocateInfo ai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  ai.commandPool = pool_;
  ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  ai.commandBufferCount = 1;
  check(vkAllocateCommandBuffers(device_, &ai, &cb), "vkAllocateCommandBuffers");
  VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  check(vkBeginCommandBuffer(cb, &bi), "vkBeginCommandBuffer");
  VkBufferCopy region{0, offset, bytes};
  vkCmdCopyBuffer(cb, s.buffer, b.buffer, 1, &region);
  check(vkEndCommandBuffer(cb), "vkEndCommandBuffer");
  submit_and_wait(cb);
  vkFreeCommandBuffers(device_, pool_, 1, &cb);
}

VkCommandBuffer VulkanBackend::recording() {
  if (capturing_ >= 0) return captures_[static_cast<size_t>(capturing_)].cb;
  if (!cb_open_) {
    VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
    check(vkBeginCommandBuffer(cb_, &bi), "vkBeginCommandBuffer");
    cb_open_ = true;
  }
  pending_ = true;
  return cb_;
}

void VulkanBackend::submit_and_wait(VkCommandBuffer cb) {
  VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO};
  si.commandBufferCount = 1;
  si.pCommandBuffers = &cb;
  check(vkQueueSubmit(queue_, 1, &si, fence_), "vkQueueSubmit");
  check(vkWaitForFences(device_, 1, &fence_, VK_TRUE, UINT64_MAX), "vkWaitForFences");
  check(vkResetFences(device_, 1, &fence_), "vkResetFences");
  ++submits_;
}

void VulkanBackend::synchronize() {
  MLS_CHECK(capturing_ < 0, "VulkanBackend::synchronize inside a capture");
  if (!cb_open_) return;
  check(vkEndCommandBuffer(cb_), "vkEndCommandBuffer");
  cb_open_ = false;
  submit_and_wait(cb_);
  check(vkResetCommandBuffer(cb_, 0), "vkResetCommandBuffer");
  pending_ = false;
}

namespace {
// Every command waits for the writes of the ones before it (a stream's in-order semantics).
void full_barrier(VkCommandBuffer cb) {
  VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT |
                     VK_ACCESS_TRANSFER_WRITE_BIT;
  vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                       VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &mb, 0, nullptr, 0,
                       nullptr);
}
}  // namespace

void VulkanBackend::copy_to_device(Buffer& dst, size_t dst_offset, const void* src, size_t bytes) {
  MLS_CHECK(dst_offset + bytes <= dst.size(), "copy_to_device out of range");
  MLS_CHECK(capturing_ < 0, "copy_to_device inside a capture");
  if (bytes == 0) return;
  synchronize();  // queued kernels may still read what this overwrites
  const Block& b = block_of(dst);
  if (b.mapped) {
    std::memcpy(static_cast<char*>(b.mapped) + dst_offset, src, bytes);
    return;
  }
  Block s = staging(bytes);
  std::memcpy(s.mapped, src, bytes);
  staged_copy(s, b.buffer, dst_offset, s.buffer, 0, bytes);
}

void VulkanBackend::copy_to_host(const Buffer& src, size_t src_offset, void* dst, size_t bytes) {
  MLS_CHECK(src_offset + bytes <= src.size(), "copy_to_host out of range");
  MLS_CHECK(capturing_ < 0, "copy_to_host inside a capture");
  if (bytes == 0) return;
  synchronize();
  const Block& b = block_of(src);
  if (b.mapped) {
    std::memcpy(dst, static_cast<const char*>(b.mapped) + src_offset, bytes);
    return;
  }
  Block s = staging(bytes);
  staged_copy(s, s.buffer, 0, b.buffer, src_offset, bytes);
  std::memcpy(dst, s.mapped, bytes);
}

void VulkanBackend::staged_copy(const Block&, VkBuffer dst, size_t dst_offset, VkBuffer src, size_t src_offset,
                                size_t bytes) {
  VkCommandBuffer cb = recording();
  VkBufferCopy region{src_offset, dst_offset, bytes};
  vkCmdCopyBuffer(cb, src, dst, 1, &region);
  synchronize();
}

void VulkanBackend::copy_device(const Buffer& src, size_t src_offset, Buffer& dst, size_t dst_offset, size_t bytes) {
  MLS_CHECK(src_offset + bytes <= src.size() && dst_offset + bytes <= dst.size(), "copy_device out of range");
  if (bytes == 0) return;
  VkCommandBuffer cb = recording();
  VkBufferCopy region{src_offset, dst_offset, bytes};
  vkCmdCopyBuffer(cb, block_of(src).buffer, block_of(dst).buffer, 1, &region);
  full_barrier(cb);
}

const VulkanBackend::Pipeline& VulkanBackend::layouts(Shader s) {
  Pipeline& p = pipelines_[static_cast<size_t>(s)];
  if (p.layout) return p;
  const ShaderCode& code = shader_code(s);
  p.bindings = count_bindings(code);
  std::vector<VkDescriptorSetLayoutBinding> binds(p.bindings);
  for (uint32_t i = 0; i < p.bindings; ++i) {
    binds[i].binding = i;
    binds[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    binds[i].descriptorCount = 1;
    binds[i].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
  }
  VkDescriptorSetLayoutCreateInfo li{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
  li.flags = VK_DESCRIPTOR_SET_LAYOUT_CREATE_PUSH_DESCRIPTOR_BIT_KHR;
  li.bindingCount = p.bindings;
  li.pBindings = binds.data();
  check(vkCreateDescriptorSetLayout(device_, &li, nullptr, &p.set_layout), "vkCreateDescriptorSetLayout");
  VkPushConstantRange pcr{VK_SHADER_STAGE_COMPUTE_BIT, 0, 128};
  VkPipelineLayoutCreateInfo pli{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
  pli.setLayoutCount = 1;
  pli.pSetLayouts = &p.set_layout;
  pli.pushConstantRangeCount = 1;
  pli.pPushConstantRanges = &pcr;
  check(vkCreatePipelineLayout(device_, &pli, nullptr, &p.layout), "vkCreatePipelineLayout");
  return p;
}

VkPipeline VulkanBackend::make_pipeline(Shader s, const Pipeline& lay, const std::vector<uint32_t>* constants) {
  const ShaderCode& code = shader_code(s);
  VkShaderModuleCreateInfo mi{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
  mi.codeSize = code.count * 4;
  mi.pCode = code.words;
  VkShaderModule module = VK_NULL_HANDLE;
  check(vkCreateShaderModule(device_, &mi, nullptr, &module), "vkCreateShaderModule");
  std::vector<VkSpecializationMapEntry> entries;
  VkSpecializationInfo spec{};
  if (constants) {
    for (uint32_t i = 0; i < constants->size(); ++i) entries.push_back({i, i * 4, 4});
    spec.mapEntryCount = static_cast<uint32_t>(entries.size());
    spec.pMapEntries = entries.data();
    spec.dataSize = constants->size() * 4;
    spec.pData = constants->data();
  }
  VkComputePipelineCreateInfo ci{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
  ci.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
  ci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  ci.stage.module = module;
  ci.stage.pName = "main";
  ci.stage.pSpecializationInfo = constants ? &spec : nullptr;
  ci.layout = lay.layout;
  VkPipeline pipe = VK_NULL_HANDLE;
  check(vkCreateComputePipelines(device_, VK_NULL_HANDLE, 1, &ci, nullptr, &pipe), code.name);
  vkDestroyShaderModule(device_, module, nullptr);
  return pipe;
}

const VulkanBackend::Pipeline& VulkanBackend::pipeline(Shader s, const std::vector<uint32_t>* constants) {
  const Pipeline& lay = layouts(s);
  if (!constants) {
    Pipeline& p = pipelines_[static_cast<size_t>(s)];
    if (!p.pipeline) p.pipeline = make_pipeline(s, lay, nullptr);
    return p;
  }
  std::string key(reinterpret_cast<const char*>(&s), sizeof s);
  key.append(reinterpret_cast<const char*>(constants->data()), constants->size() * 4);
  auto it = specialised_.find(key);
  if (it != specialised_.end()) return it->second;
  Pipeline p = lay;
  p.pipeline = make_pipeline(s, lay, constants);
  return specialised_.emplace(std::move(key), p).first->second;
}

Binding VulkanBackend::bind(const Tensor& t) const {
  const Block& b = block_of(*t.buffer());
  const size_t esize = dtype_size(t.dtype());
  const size_t align = std::max<size_t>(limits_.minStorageBufferOffsetAlignment, 4);
  Binding out;
  out.buffer = b.buffer;
  out.offset = t.byte_offset() / align * align;
  MLS_CHECK((t.byte_offset() - out.offset) % esize == 0, "vulkan: a tensor at an offset that is not a multiple of its element size");
  out.element = static_cast<uint32_t>((t.byte_offset() - out.offset) / esize);
  out.range = std::min<VkDeviceSize>(b.size - out.offset, limits_.maxStorageBufferRange / 4 * 4);
  // The tensor's last element must be inside the bound range (shaders index from `element`).
  MLS_CHECK(t.byte_offset() - out.offset + t.nbytes() <= out.range,
            "vulkan: a tensor larger than the device's storage-buffer range");
  return out;
}

void VulkanBackend::dispatch(Shader shader, std::initializer_list<const Tensor*> tensors, const void* params,
                             size_t params_bytes, uint32_t gx, uint32_t gy, uint32_t gz) {
  record(pipeline(shader), tensors, params, params_bytes, gx, gy, gz);
}

void VulkanBackend::record(const Pipeline& p, std::initializer_list<const Tensor*> tensors, const void* params,
                           size_t params_bytes, uint32_t gx, uint32_t gy, uint32_t gz) {
  if (gx == 0 || gy == 0 || gz == 0) return;
  MLS_CHECK(tensors.size() == p.bindings, "vulkan: a dispatch binds another number of buffers than its shader declares");
  uint32_t pc[32] = {};
  const size_t n = tensors.size();
  MLS_CHECK(n * 4 + params_bytes <= sizeof pc, "vulkan: push constants over 128 bytes");
  VkDescriptorBufferInfo infos[16];
  VkWriteDescriptorSet writes[16];
  MLS_CHECK(n <= 16, "vulkan: more than 16 bindings");
  size_t i = 0;
  for (const Tensor* t : tensors) {
    Binding b = bind(*t);
    pc[i] = b.element;
    infos[i] = {b.buffer, b.offset, b.range};
    writes[i] = VkWriteDescriptorSet{VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
    writes[i].dstBinding = static_cast<uint32_t>(i);
    writes[i].descriptorCount = 1;
    writes[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    writes[i].pBufferInfo = &infos[i];
    ++i;
  }
  if (params_bytes) std::memcpy(pc + n, params, params_bytes);
  VkCommandBuffer cb = recording();
  vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, p.pipeline);
  push_descriptors_(cb, VK_PIPELINE_BIND_POINT_COMPUTE, p.layout, 0, static_cast<uint32_t>(n), writes);
  const uint32_t pc_bytes = static_cast<uint32_t>((n * 4 + params_bytes + 3) / 4 * 4);
  if (pc_bytes) vkCmdPushConstants(cb, p.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, pc_bytes, pc);
  vkCmdDispatch(cb, gx, gy, gz);
  full_barrier(cb);
  ++dispatches_;
}

uint32_t VulkanBackend::groups_for(int64_t n, uint32_t local) const {
  if (n <= 0) return 0;
  const int64_t g = (n + local - 1) / local;
  return static_cast<uint32_t>(std::min<int64_t>(g, std::min<uint32_t>(limits_.maxComputeWorkGroupCount[0], 65535)));
}

const Tensor& VulkanBackend::constant_table(const std::string& key, const std::vector<uint32_t>& words) {
  auto it = tables_.find(key);
  if (it != tables_.end()) return it->second;
  Tensor t = Tensor::empty(*this, DType::I32, {static_cast<int64_t>(std::max<size_t>(words.size(), 1))}, AllocTag::Other);
  // A block from the cache may still be read by queued work: copy_to_device waits for it.
  // While capturing nothing is queued (begin_capture synchronised), so the words go in at once.
  if (!words.empty()) {
    if (capturing_ >= 0)
      upload_now(block_of(*t.buffer()), t.byte_offset(), words.data(), words.size() * 4);
    else
      copy_to_device(*t.buffer(), t.byte_offset(), words.data(), words.size() * 4);
  }
  return tables_.emplace(key, std::move(t)).first->second;
}

int VulkanBackend::begin_capture() {
  MLS_CHECK(capturing_ < 0, "VulkanBackend: nested capture");
  synchronize();
  Capture c;
  VkCommandBufferAllocateInfo ai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  ai.commandPool = pool_;
  ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  ai.commandBufferCount = 1;
  check(vkAllocateCommandBuffers(device_, &ai, &c.cb), "vkAllocateCommandBuffers");
  VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  check(vkBeginCommandBuffer(c.cb, &bi), "vkBeginCommandBuffer");
  int id = -1;
  for (size_t i = 0; i < captures_.size(); ++i)
    if (captures_[i].cb == VK_NULL_HANDLE) id = static_cast<int>(i);
  if (id < 0) {
    id = static_cast<int>(captures_.size());
    captures_.push_back(c);
  } else {
    captures_[static_cast<size_t>(id)] = c;
  }
  capturing_ = id;
  return id;
}

void VulkanBackend::end_capture() {
  MLS_CHECK(capturing_ >= 0, "VulkanBackend::end_capture without begin_capture");
  check(vkEndCommandBuffer(captures_[static_cast<size_t>(capturing_)].cb), "vkEndCommandBuffer");
  capturing_ = -1;
}

void VulkanBackend::replay(int capture) {
  MLS_CHECK(capture >= 0 && static_cast<size_t>(capture) < captures_.size() &&
                captures_[static_cast<size_t>(capture)].cb != VK_NULL_HANDLE,
            "VulkanBackend::replay of an unknown capture");
  synchronize();  // work queued before the replay runs first
  submit_and_wait(captures_[static_cast<size_t>(capture)].cb);
}

void VulkanBackend::release_capture(int capture) {
  if (capture < 0 || static_cast<size_t>(capture) >= captures_.size()) return;
  Capture& c = captures_[static_cast<size_t>(capture)];
  if (c.cb == VK_NULL_HANDLE) return;
  vkFreeCommandBuffers(device_, pool_, 1, &c.cb);
  c.cb = VK_NULL_HANDLE;
}

void init() {
  static std::once_flag once;
  std::call_once(once, [] {
    engine_init();
    register_kernels(op_registry());
    backend_registry().add({"vulkan", DeviceKind::Vulkan, open_once([](int index) -> Result<std::unique_ptr<Backend>> {
                              auto b = VulkanBackend::create(index);
                              if (!b) return b.error();
                              return std::unique_ptr<Backend>(std::move(*b));
                            })});
  });
}

}  // namespace mls::vulkan
