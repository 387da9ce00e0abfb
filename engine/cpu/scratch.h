// Internal to engine/cpu: per-thread scratch buffers for kernels that pack operands (the
// f32 and bf16 GEMMs), so a warm kernel allocates nothing.
//
//   float* panel = thread_scratch<float>(kc * 64, ScratchSlot::GemmPanel);
//
// Each slot is one 64-byte aligned buffer per thread that only grows; its contents are the
// caller's until the same thread asks for the same slot again. Kernels that may run inside
// one another's calls use different slots.
#pragma once

#include <array>
#include <cstddef>
#include <cstdlib>
#include <new>

namespace mls::cpu {

enum class ScratchSlot : int {
  GemmPanel,      // gemm_simd.cpp: packed B panels, or a GEMV's sums
  GemmAux,        // gemm_simd.cpp: a gathered GEMV x, or split-K's second half of C
  GemmA,          // gemm_simd.cpp: rows of A^T packed into tiles
  Bf16A,          // lowp_kernels.cpp: packed A
  Bf16B,          // lowp_kernels.cpp: a packed B panel
  Count
};

// `count` elements of T in this thread's buffer for `slot`.
template <typename T>
T* thread_scratch(size_t count, ScratchSlot slot) {
  struct Buf {
    void* p = nullptr;
    size_t cap = 0;  // bytes
    ~Buf() { std::free(p); }
  };
  thread_local std::array<Buf, static_cast<size_t>(ScratchSlot::Count)> bufs;
  Buf& b = bufs[static_cast<size_t>(slot)];
  const size_t bytes = (count * sizeof(T) + 63) / 64 * 64;
  if (b.cap < bytes) {
    std::free(b.p);
    b.p = std::aligned_alloc(64, bytes);
    if (!b.p) throw std::bad_alloc();
    b.cap = bytes;
  }
  return static_cast<T*>(b.p);
}

}  // namespace mls::cpu
