// bool_constant.h — a compile-time bool as a value. The sm90 kernels pass it to one generic lambda
// to instantiate a step body in two straight-line forms (a branch inside a wgmma batch makes ptxas
// fence or serialize the GEMMs, so the choice is made before the batch, at compile time). NVRTC has
// no <type_traits>, hence this instead of std::integral_constant.
#pragma once

namespace gdpa {

template <bool B>
struct BoolConstant {
  static constexpr bool value = B;
};

}  // namespace gdpa
