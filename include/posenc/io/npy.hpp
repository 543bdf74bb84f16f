// NumPy .npy files: read and write.
//
// Format (numpy.lib.format): magic "\x93NUMPY", major and minor version bytes, a header length
// (uint16 little-endian in 1.0; uint32 in 2.0 and 3.0), then an ASCII (1.0, 2.0) or UTF-8 (3.0)
// Python dict literal {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } padded with
// spaces and a newline, then the raw C-order data. posenc reads little-endian (or byte-order free)
// float16/32/64, int8/32/64, uint8 and bool-free C-order arrays; anything else is a clear error.
// bfloat16 has no numpy descr: posenc writes it as '<u2' only when asked (WriteNpyRaw16).
#pragma once

#include <span>
#include <string>

#include "posenc/core/array.hpp"
#include "posenc/core/status.hpp"

namespace posenc {

// Reads `path`. Errors name the file and the fault: kNotFound (cannot open), kDataLoss (bad magic,
// truncated header or data, malformed dict), kUnimplemented (big-endian, Fortran order, object or
// unsupported dtype, unknown version).
Result<Array> ReadNpy(const std::string& path);
// Parses an in-memory .npy image; `name` is used in messages.
Result<Array> ParseNpy(std::span<const std::byte> bytes, const std::string& name);
// Writes `a` as format 1.0 (2.0 if the header needs it). bfloat16 is refused (numpy has no such type).
Status WriteNpy(const std::string& path, const Array& a);
// The bytes WriteNpy would write.
Result<std::string> SerializeNpy(const Array& a);

}  // namespace posenc
