// Internal to the library: an enum's names as one table that serves both directions, ToString and the
// Parse* functions, so a name is written once. A value may have several names (a spelling another
// format uses, an old name): ToString gives the first one listed, Parse accepts each.
//
//   constexpr EnumName<RopePairing> kPairingNames[] = {{RopePairing::kHalf, "half"}, {RopePairing::kHalf, "neox"}};
//   std::string_view ToString(RopePairing p) { return NameOf(p, kPairingNames); }
//   bool ParseRopePairing(std::string_view s, RopePairing* out) { return ValueOf(s, kPairingNames, out); }
#pragma once

#include <cstddef>
#include <string_view>

namespace posenc::detail {

template <typename E>
struct EnumName {
  E value;
  std::string_view name;
};

// The first name of `v` in `names`, or `otherwise` for a value the table lacks.
template <typename E, size_t N>
constexpr std::string_view NameOf(E v, const EnumName<E> (&names)[N], std::string_view otherwise = "unknown") {
  for (const EnumName<E>& n : names)
    if (n.value == v) return n.name;
  return otherwise;
}

// The value named `s` into *out; false (and *out untouched) for a name the table lacks.
template <typename E, size_t N>
constexpr bool ValueOf(std::string_view s, const EnumName<E> (&names)[N], E* out) {
  for (const EnumName<E>& n : names) {
    if (n.name == s) {
      *out = n.value;
      return true;
    }
  }
  return false;
}

}  // namespace posenc::detail
