"""Ministral 3's query temperature (rope_parameters.llama_4_scaling_beta): every layer rotates q and k and
then scales q by 1 + beta * ln(1 + floor(p / original_max_position_embeddings)), as
modeling_ministral3.py's get_llama_4_attn_scale does; the scale is computed here in torch float32."""
import numpy as np
import torch

import posenc

MINISTRAL3 = {"model_type": "mistral3", "text_config": {
    "model_type": "ministral3", "head_dim": 128, "hidden_size": 3072, "max_position_embeddings": 262144,
    "num_attention_heads": 4, "num_hidden_layers": 3, "num_key_value_heads": 2,
    "rope_parameters": {"beta_fast": 32.0, "beta_slow": 1.0, "factor": 16.0, "llama_4_scaling_beta": 0.1,
                        "mscale": 1.0, "mscale_all_dim": 1.0, "original_max_position_embeddings": 16384,
                        "rope_theta": 1000000.0, "rope_type": "yarn"}}}


def test_every_layer_rotates_then_scales_queries():
    rope = posenc.Rope(MINISTRAL3)
    t = rope.scheme.attn_temperature
    assert (t["tuning"], t["offset"], t["every_layer"], t["floor_scale"], t["attn_scale"]) == (True, 0, True, 16384.0, 0.1)
    positions = np.array([0, 16383, 16384, 40000, 100000], dtype=np.int64)
    g = torch.Generator().manual_seed(7)
    q0 = torch.randn(1, 4, 5, 128, generator=g)
    k0 = torch.randn(1, 2, 5, 128, generator=g)
    # What Hugging Face's attention does: RoPE, then q * scale (scale in float32, cast to q's dtype).
    qr, kr = q0.clone(), k0.clone()
    rope.apply_qk(qr, kr, positions, order="bhsd")
    scale = 1 + 0.1 * torch.log(1 + torch.floor(torch.from_numpy(positions) / 16384))
    want_q = qr * scale[None, None, :, None].to(qr.dtype)
    assert scale[0] == 1 and scale[1] == 1 and scale[2] > 1  # offset 0: the first step is at p = 16384
    np.testing.assert_array_equal(rope.scheme.attn_temperature_scales(positions), scale.numpy())
    for layer in range(3):
        q, k = q0.clone(), k0.clone()
        rope.apply_layer(q, k, positions, layer, order="bhsd")
        torch.testing.assert_close(q, want_q, rtol=0, atol=0)
        torch.testing.assert_close(k, kr, rtol=0, atol=0)
