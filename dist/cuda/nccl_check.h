#pragma once
// defines: SG_NCCL_CHECK — every NCCL call's result checked, with the call, NCCL's name for the
//          result, its last error message, the file and the line in the sg::Error.
#include <nccl.h>

namespace sg::dist::detail {
[[noreturn]] void throw_nccl_error(ncclResult_t result, const char* call, const char* file, int line);
}  // namespace sg::dist::detail

#define SG_NCCL_CHECK(call)                                                            \
  do {                                                                                 \
    const ncclResult_t sg_nccl_result = (call);                                        \
    if (sg_nccl_result != ncclSuccess)                                                 \
      ::sg::dist::detail::throw_nccl_error(sg_nccl_result, #call, __FILE__, __LINE__); \
  } while (0)
