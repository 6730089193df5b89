// sass_tools.h — disassembling a cubin in tests (cuobjdump from the CUDA toolkit, or the one that
// `make test` installs from PyPI when the toolkit has none).
#pragma once
#include <string>
#include <vector>

namespace gdpa {

// SASS text of the cubin, or "" when no cuobjdump can be found.
std::string disassemble(const std::vector<char>& cubin);
// Occurrences of `needle` in `text`.
int count_of(const std::string& text, const std::string& needle);

}  // namespace gdpa
