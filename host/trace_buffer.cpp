#include "trace_buffer.h"

#include <cstdint>
#include <utility>
#include <vector>

#include "npy.h"

namespace gdpa {

namespace {
size_t trace_words(int ctas, int roles, int slots) { return size_t(ctas) * size_t(roles) * size_t(slots) * 4; }
}  // namespace

TraceBuffer::TraceBuffer(std::string path, int ctas, int roles, int slots)
    : path_(std::move(path)), ctas_(ctas), roles_(roles), slots_(slots),
      words_(trace_words(ctas, roles, slots) * sizeof(int32_t)) {}

void* TraceBuffer::arm(CUstream stream) {
  words_.fill_u32(0u, stream);
  return words_.vptr();
}

void TraceBuffer::save(CUstream stream) const {
  GDPA_CU(cu().cuStreamSynchronize(stream));
  std::vector<int32_t> words(trace_words(ctas_, roles_, slots_));
  words_.download(words);
  save_npy(path_, words.data(), {ctas_, roles_, slots_, 4});
}

}  // namespace gdpa
