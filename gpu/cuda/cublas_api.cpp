// cuBLAS loaded on first use (cublas_api.h).
#include "gpu/cuda/cublas_api.h"

#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>

namespace mls::cuda {

namespace {

// The library's own function has the type the table holds (a compile error where it does not).
[[maybe_unused]] constexpr CublasApi::GemmStridedBatchedEx kExSignature =
    &cublasGemmStridedBatchedEx;

const std::string kSoname = "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR);

struct Loaded {
  CublasApi api;
  bool ok = false;
  std::string error;
};

// The folder of the CUDA runtime this process linked ("" if it cannot be told).
std::string runtime_folder() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&cudaGetDeviceCount), &info) == 0 || !info.dli_fname)
    return {};
  const std::string path = info.dli_fname;
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? std::string() : path.substr(0, slash + 1);
}

template <typename Fn>
bool find(void* lib, const char* name, Fn* fn, std::string* error) {
  *fn = reinterpret_cast<Fn>(dlsym(lib, name));
  if (!*fn)
    *error = kSoname + " has no " + name + " (a cuBLAS older than the headers built against?)";
  return *fn != nullptr;
}

Loaded load() {
  Loaded l;
  void* lib = dlopen(kSoname.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const std::string first = dlerror();
    const std::string beside = runtime_folder();
    if (!beside.empty()) lib = dlopen((beside + kSoname).c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      l.error = "cannot load cuBLAS: " + first;
      return l;
    }
  }
  CublasApi& a = l.api;
  l.ok = find(lib, "cublasCreate_v2", &a.create, &l.error) &&
         find(lib, "cublasDestroy_v2", &a.destroy, &l.error) &&
         find(lib, "cublasSetStream_v2", &a.set_stream, &l.error) &&
         find(lib, "cublasSetWorkspace_v2", &a.set_workspace, &l.error) &&
         find(lib, "cublasSetMathMode", &a.set_math_mode, &l.error) &&
         find(lib, "cublasGetStatusString", &a.status_string, &l.error) &&
         find(lib, "cublasSgemmStridedBatched", &a.sgemm_strided_batched, &l.error) &&
         find(lib, "cublasGemmStridedBatchedEx", &a.gemm_strided_batched_ex, &l.error);
  // The library stays loaded for the process's life: handles and kernels may outlive any owner.
  return l;
}

const Loaded& loaded() {
  static const Loaded l = load();
  return l;
}

}  // namespace

const CublasApi* load_cublas(std::string* error) {
  const Loaded& l = loaded();
  if (!l.ok) {
    if (error) *error = l.error;
    return nullptr;
  }
  return &l.api;
}

const CublasApi& cublas_api() {
  const Loaded& l = loaded();
  if (!l.ok) {
    std::fprintf(stderr, "mlstudio: cuda: cuBLAS used before it loaded: %s\n", l.error.c_str());
    std::abort();
  }
  return l.api;
}

}  // namespace mls::cuda
