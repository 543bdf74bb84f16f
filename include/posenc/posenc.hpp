// posenc: the input stage of a decoder-only transformer (token embeddings and positions).
//
// This umbrella header includes every public header (tests/layering/check_umbrella.py checks it) but
// posenc/io/json_read.hpp, which needs nlohmann/json, a private dependency; it is also the map of the
// API. Headers sit in one folder per layer, and a layer includes only layers above it in this list
// (tests/layering/check_layers.py).
#pragma once

// ---- core: errors, storage types, arrays and strided head views, threads, table storage
#include "posenc/core/array.hpp"        // Array (owning, 64-byte aligned), HeadsView (strided q/k/v views)
#include "posenc/core/checked_math.hpp" // overflow-checked sizes and offsets from files and flags
#include "posenc/core/dtype.hpp"        // DType, float16 / bfloat16 conversion (round to nearest even)
#include "posenc/core/message.hpp"      // quoting file-borne bytes inside one-line error messages
#include "posenc/core/parallel.hpp"     // ParallelRunner, the internal thread pool, SetNumThreads
#include "posenc/core/status.hpp"       // Status, Result<T>, POSENC_RETURN_IF_ERROR
#include "posenc/core/strided.hpp"      // foreign strided tensors: overlap rule, [B,H,S,D] planning
#include "posenc/core/table_alloc.hpp"  // huge-page-advised storage for large tables

// ---- math: the schemes as plain functions
#include "posenc/math/attention.hpp"    // reference attention with a bias source (demonstration, tests)
#include "posenc/math/multi_axis.hpp"   // multi-axis RoPE: section layouts, pair components (M-RoPE, 2-D vision)
#include "posenc/math/relative.hpp"     // ALiBi slopes, T5 buckets, Shaw clipping: relative biases
#include "posenc/math/rope_config.hpp"  // RopeConfig, every context-extension scaling, frequencies
#include "posenc/math/rope_pairs.hpp"  // each pair at one length: dims, frequency, regime (inspect's table)
#include "posenc/math/rope_scaling_facts.hpp"  // a scaling's parameters and seq_len dependence, as data
#include "posenc/math/rope_table.hpp"   // RopeTable: cos/sin rows built once, shared by all layers
#include "posenc/math/rope_types.hpp"   // RotaryLayout, RopeFrequencies, precisions, ComputeCosSin
#include "posenc/math/sinusoidal.hpp"   // sinusoidal absolute positions (Vaswani 2017)
#include "posenc/math/vision_positions.hpp"  // (t, h, w) M-RoPE rows from a token layout; vision patch rows

// ---- kernels: fast paths with their scalar references beside them
#include "posenc/kernels/attn_temperature.hpp"  // position-dependent query temperature (Llama 4, Ministral 3)
#include "posenc/kernels/embedding.hpp"        // token embedding lookup, learned positions, the gradient
#include "posenc/kernels/fused_rope.hpp"       // RoPE fused with the QKV split and the KV-cache write
#include "posenc/kernels/mla_cache.hpp"        // the MLA latent cache row [kvnorm(kv_c) | RoPE(k_pe)] + q_pe, one pass
#include "posenc/kernels/kv_cache.hpp"         // KV caches (contiguous, paged; f32/f16/bf16/q8_0), slots, StoreKvCache
#include "posenc/kernels/multi_axis_rope.hpp"  // multi-axis RoPE apply: positions [C, T] (fast + reference)
#include "posenc/kernels/rerotate.hpp"         // re-rotate cached keys to new positions
#include "posenc/kernels/rms_norm.hpp"         // per-head RMSNorm (QK-norm) of q and k: fast + reference
#include "posenc/kernels/rope.hpp"             // RoPE on queries and keys (ApplyRope, ApplyRopeQK, reference)
#include "posenc/kernels/rope_cos_sin.hpp"     // RoPE from the caller's cos/sin rows, torch's arithmetic bit for bit
#include "posenc/kernels/simd.hpp"             // SIMD targets: list, force, store-prefetch policy

// ---- io: bounds-checked readers of model files
#include "posenc/io/file_io.hpp"      // whole-file reads and writes: regular files only, size-bounded
#include "posenc/io/gguf.hpp"         // GGUF v2 / v3
#include "posenc/io/json_guard.hpp"   // JSON from files: nesting bound, values never printed whole
#include "posenc/io/llama2c.hpp"      // llama2.c checkpoints
#include "posenc/io/mapped_file.hpp"  // read-only memory maps
#include "posenc/io/npy.hpp"          // .npy arrays
#include "posenc/io/quant.hpp"        // ggml block types: rows dequantized on demand
#include "posenc/io/safetensors.hpp"  // safetensors files, sharded Hugging Face folders

// ---- config: a model's positional scheme from its own files
#include "posenc/config/ggml_config.hpp"        // ggml_rope_ext parameters
#include "posenc/config/gguf_config.hpp"        // GGUF metadata, llama.cpp's per-architecture pairing
#include "posenc/config/hf_config.hpp"          // Hugging Face config.json (both spellings)
#include "posenc/config/layer_schedule.hpp"     // which decoder layers apply RoPE (RoPE / NoPE schedules)
#include "posenc/config/model_families.hpp"     // the model-family registry: facts no config key states
#include "posenc/config/multi_axis_config.hpp"  // vision encoders' 2-D RoPE (qwen2vl, pixtral)
#include "posenc/config/position_scheme.hpp"    // PositionScheme: the scheme as one value
#include "posenc/config/scheme_description.hpp"  // the scheme described as inspect and the explorer show it

// ---- model: whole-model operations
#include "posenc/model/layout_convert.hpp"  // rewrite W_q / W_k for the other pair layout
#include "posenc/model/layout_detect.hpp"   // which pair layout a model was trained for
#include "posenc/model/model_file.hpp"      // OpenModel: any model file's tables and metadata
#include "posenc/model/model_scheme.hpp"    // ModelScheme: an opened model's (or config.json's) scheme
#include "posenc/model/rope_check.hpp"      // posenc check: an engine's RoPE dump against the reference
#include "posenc/model/rope_diff.hpp"       // posenc diff: two descriptions of one model compared
