// jagged_window.h — the window of the jagged 4-D tensor maps (host/tensor_map.h), one formula for
// the host that builds a map and the kernel that addresses it: the two must agree exactly, or
// every load lands on the wrong rows. At least the longest sequence, so that the first row of
// every sequence has a non-negative coordinate; at least 1, because a map dimension cannot be 0.
#pragma once
#include "../common/portability.h"

namespace gdpa::sm90 {

GDPA_HD constexpr int jagged_window(int max_len) { return max_len > 0 ? max_len : 1; }

// Bytes of the zero buffer a kernel copies from in place of a TMA box that lies wholly past its
// sequence's end (jagged_load.cuh says why): one 64-column panel of up to 128 rows.
constexpr int kJaggedZeroBytes = 128 * 128;

}  // namespace gdpa::sm90
