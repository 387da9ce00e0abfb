// cuBLAS, loaded when the first CUDA device opens rather than when mlstudio starts. Linked
// directly, libcublas and the libcublasLt it needs (about 600 MB of code) added 216 MB to the
// resident memory of every mlstudio process on a machine with CUDA installed, whether it used
// a GPU or not (`mlstudio --version`: 246 MB): each grader child, sweep worker and MPI rank.
//
//   std::string error;
//   const CublasApi* api = load_cublas(&error);  // nullptr and why, where it cannot load
//   api->create(&handle);
//   ...
//   cublas_api().sgemm_strided_batched(...);       // in a kernel, after a device opened
#pragma once

#include <cublas_v2.h>

#include <string>

namespace mls::cuda {

// The cuBLAS functions the backend calls, with the header's own signatures.
struct CublasApi {
  decltype(&cublasCreate_v2) create = nullptr;
  decltype(&cublasDestroy_v2) destroy = nullptr;
  decltype(&cublasSetStream_v2) set_stream = nullptr;
  decltype(&cublasSetWorkspace_v2) set_workspace = nullptr;
  decltype(&cublasSetMathMode) set_math_mode = nullptr;
  decltype(&cublasGetStatusString) status_string = nullptr;
  decltype(&cublasSgemmStridedBatched) sgemm_strided_batched = nullptr;
  // (The header also declares an inline C++ overload taking a cudaDataType compute type.)
  using GemmStridedBatchedEx = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t,
                                                  cublasOperation_t, int, int, int, const void*,
                                                  const void*, cudaDataType, int, long long,
                                                  const void*, cudaDataType, int, long long,
                                                  const void*, void*, cudaDataType, int, long long,
                                                  int, cublasComputeType_t, cublasGemmAlgo_t);
  GemmStridedBatchedEx gemm_strided_batched_ex = nullptr;
};

// Loads libcublas.so.<the header's major version> once (thread-safe) and finds every function
// above: from the search path (the executable's run path, LD_LIBRARY_PATH, ld.so.cache), else
// beside the CUDA runtime the process linked. nullptr and `error` set (the library or the
// function that is missing) where it cannot; a later call returns the same answer.
const CublasApi* load_cublas(std::string* error);

// The loaded functions: only after load_cublas succeeded (a CUDA device is open).
const CublasApi& cublas_api();

}  // namespace mls::cuda
