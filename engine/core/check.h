// Programmer-error assertions that stay on in release builds.
//
//   MLS_CHECK(index < size, "value index out of range");
//
// Expected failures (bad files, bad shapes, missing devices) use Result<T> instead.
#pragma once

#include <cstdio>
#include <cstdlib>

#define MLS_CHECK(cond, msg)                                                              \
  do {                                                                                    \
    if (!(cond)) {                                                                        \
      std::fprintf(stderr, "mlstudio: internal error at %s:%d: %s (%s)\n", __FILE__,      \
                   __LINE__, msg, #cond);                                                 \
      std::abort();                                                                       \
    }                                                                                     \
  } while (0)
