// posenc umbrella header: everything public.
#pragma once

#include "posenc/array.hpp"
#include "posenc/config.hpp"
#include "posenc/dtype.hpp"
#include "posenc/embedding.hpp"
#include "posenc/npy.hpp"
#include "posenc/rope.hpp"
#include "posenc/rope_config.hpp"
#include "posenc/status.hpp"
