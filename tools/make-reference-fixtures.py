#!/usr/bin/env python3
# Builds the reference fixtures under tests/data/models/: tiny random-weight checkpoints of every
# supported family and configuration (dense and mixture-of-experts), with Hugging Face transformers' outputs for them, and the
# demo model's reference numbers (held-out loss, near-tie margins along samples.json's greedy paths).
#
# Run on a machine with an NVIDIA GPU, PyTorch, transformers, safetensors and tokenizers:
#   python3 tools/make-reference-fixtures.py --out /tmp/fixtures
#   tar -C tests/data/models -xf /tmp/fixtures/fixtures.tar
# `--only NAME[,NAME]` builds just those fixtures (demo-heldout names the demo model's numbers) with the
# seeds they have in a full run, so the others are left as they are.
#
# Each fixture folder holds the checkpoint (config.json + safetensors, sharded for some) and
# reference.safetensors: prompt.<i> (I32 [n]), logits.<i> (F32 [n, vocab], every position),
# greedy.<i> (I32 [32], greedy continuation with a KV cache), margin.<i> (F32 [32], top-1 minus
# top-2 logit at each greedy step). The reference runs in FP32 (TF32 off, eager attention) on weights
# that are exactly representable in BF16, so a BF16-weight / FP32-activation backend can match closely.
import argparse, io, json, lzma, math, os, shutil, sys, tarfile, traceback

import torch
import transformers
from safetensors.torch import save_file

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
V5 = int(transformers.__version__.split(".")[0]) >= 5
N_GREEDY = 32
DTYPE_ARG = "dtype" if V5 else "torch_dtype"


def rope_kwargs(theta, scaling):
    """Rope settings in the config style of the installed transformers."""
    if V5:
        params = {"rope_type": "default", "rope_theta": theta}
        if scaling:
            params.update(scaling)
        return {"rope_parameters": params}
    out = {"rope_theta": theta}
    if scaling:
        out["rope_scaling"] = scaling
    return out


def gemma3_rope_kwargs(local_theta, global_theta, global_scaling):
    """Gemma 3's two rope settings, sliding layers at the local theta unscaled and full-attention layers
    at the global theta with the scaling, in the config style of the installed transformers: v5 keys
    rope_parameters by layer type, v4 has rope_local_base_freq beside rope_theta and rope_scaling."""
    if V5:
        full = {"rope_type": "default", "rope_theta": global_theta}
        if global_scaling:
            full.update(global_scaling)
        return {"rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": local_theta},
                                    "full_attention": full}}
    out = {"rope_theta": global_theta, "rope_local_base_freq": local_theta}
    if global_scaling:
        out["rope_scaling"] = global_scaling
    return out


# name -> (config class name, config kwargs, weight dtype, max shard size or None)
COMMON = dict(vocab_size=256, num_hidden_layers=2, rms_norm_eps=1e-6, hidden_act="silu",
              initializer_range=0.08, bos_token_id=None, eos_token_id=None, pad_token_id=None)
# Gemma 3 names its activation hidden_activation (GeGLU); its layer count is per fixture.
GEMMA3_COMMON = dict(vocab_size=256, rms_norm_eps=1e-6, hidden_activation="gelu_pytorch_tanh",
                     initializer_range=0.08, bos_token_id=None, eos_token_id=None, pad_token_id=None,
                     attention_bias=False, attn_logit_softcapping=None)
# Mixture-of-experts fixtures set their layer count each (dense and expert layers mix).
MOE_COMMON = {k: v for k, v in COMMON.items() if k != "num_hidden_layers"}
FAMILY_COMMON = {"Gemma3TextConfig": GEMMA3_COMMON, "Qwen3MoeConfig": MOE_COMMON, "MixtralConfig": MOE_COMMON,
                 "GptOssConfig": MOE_COMMON}
FIXTURES = {
    "llama-gqa2-hd64-untied-sharded": ("LlamaConfig", dict(
        hidden_size=128, intermediate_size=192, num_attention_heads=2, num_key_value_heads=1, head_dim=64,
        max_position_embeddings=256, tie_word_embeddings=False, **rope_kwargs(10000.0, None)), torch.bfloat16, "120KB"),
    "llama-gqa4-hd64-tied-llama3": ("LlamaConfig", dict(
        hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=1, head_dim=64,
        max_position_embeddings=256, tie_word_embeddings=True, **rope_kwargs(10000.0, {
            "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
            "original_max_position_embeddings": 64})), torch.bfloat16, None),
    "llama-mha-hd64-linear-fp16": ("LlamaConfig", dict(
        hidden_size=128, intermediate_size=160, num_attention_heads=2, num_key_value_heads=2, head_dim=64,
        max_position_embeddings=256, tie_word_embeddings=False, attention_bias=True,
        **rope_kwargs(10000.0, {"rope_type": "linear", "factor": 4.0})), torch.float16, None),
    "llama-gqa2-hd64-dynamic-fp32": ("LlamaConfig", dict(
        hidden_size=64, intermediate_size=128, num_attention_heads=2, num_key_value_heads=1, head_dim=64,
        max_position_embeddings=16, tie_word_embeddings=True,
        **rope_kwargs(10000.0, {"rope_type": "dynamic", "factor": 2.0})), torch.float32, None),
    "llama-gqa2-hd64-yarn": ("LlamaConfig", dict(
        hidden_size=128, intermediate_size=128, num_attention_heads=2, num_key_value_heads=1, head_dim=64,
        max_position_embeddings=64, tie_word_embeddings=False,
        **rope_kwargs(10000.0, {"rope_type": "yarn", "factor": 4.0})), torch.bfloat16, None),
    "qwen3-gqa2-hd128-tied": ("Qwen3Config", dict(
        hidden_size=128, intermediate_size=192, num_attention_heads=2, num_key_value_heads=1, head_dim=128,
        max_position_embeddings=256, tie_word_embeddings=True, **rope_kwargs(1000000.0, None)), torch.bfloat16, None),
    "qwen2-gqa2-hd64-bias": ("Qwen2Config", dict(
        hidden_size=128, intermediate_size=192, num_attention_heads=2, num_key_value_heads=1,
        max_position_embeddings=256, tie_word_embeddings=False, **rope_kwargs(10000.0, None)), torch.bfloat16, None),
    "mistral-gqa2-hd64-window8": ("MistralConfig", dict(
        hidden_size=128, intermediate_size=192, num_attention_heads=2, num_key_value_heads=1, head_dim=64,
        max_position_embeddings=256, tie_word_embeddings=False, sliding_window=8,
        **rope_kwargs(10000.0, None)), torch.bfloat16, None),
    # Added last so that every fixture above keeps its seed (the enumeration index in main()).
    "gemma3-gqa2-hd64-window8": ("Gemma3TextConfig", dict(
        hidden_size=64, intermediate_size=128, num_hidden_layers=6, num_attention_heads=2, num_key_value_heads=1,
        head_dim=64, query_pre_attn_scalar=48, max_position_embeddings=256, tie_word_embeddings=True,
        sliding_window=8, layer_types=["sliding_attention"] * 5 + ["full_attention"], final_logit_softcapping=30.0,
        **gemma3_rope_kwargs(10000.0, 1000000.0, {"rope_type": "linear", "factor": 2.0})), torch.bfloat16, None),
    "gemma3-gqa2-hd256-untied-window16": ("Gemma3TextConfig", dict(
        hidden_size=128, intermediate_size=128, num_hidden_layers=3, num_attention_heads=2, num_key_value_heads=1,
        head_dim=256, query_pre_attn_scalar=256, max_position_embeddings=256, tie_word_embeddings=False,
        sliding_window=16, layer_types=["sliding_attention", "full_attention", "sliding_attention"],
        final_logit_softcapping=None, **gemma3_rope_kwargs(10000.0, 1000000.0, None)), torch.bfloat16, None),
    # Mixture of experts. Router weights are drawn wide (ROUTER_SCALE) so that the top-k choices are not
    # near-ties that a BF16 rounding could flip.
    "qwen3moe-e8-top2-dense1": ("Qwen3MoeConfig", dict(
        hidden_size=64, intermediate_size=128, moe_intermediate_size=64, num_experts=8, num_experts_per_tok=2,
        norm_topk_prob=True, decoder_sparse_step=1, mlp_only_layers=[1], num_hidden_layers=3,
        num_attention_heads=2, num_key_value_heads=1, head_dim=64, max_position_embeddings=256,
        tie_word_embeddings=False, **rope_kwargs(1000000.0, None)), torch.bfloat16, None),
    "qwen3moe-e16-top4-unnormalized-step2": ("Qwen3MoeConfig", dict(
        hidden_size=128, intermediate_size=96, moe_intermediate_size=32, num_experts=16, num_experts_per_tok=4,
        norm_topk_prob=False, decoder_sparse_step=2, mlp_only_layers=[], num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=32, max_position_embeddings=256,
        tie_word_embeddings=True, **rope_kwargs(1000000.0, None)), torch.bfloat16, None),
    "mixtral-e4-top2-window8": ("MixtralConfig", dict(
        hidden_size=64, intermediate_size=96, num_local_experts=4, num_experts_per_tok=2, num_hidden_layers=2,
        num_attention_heads=2, num_key_value_heads=1, head_dim=64, max_position_embeddings=256, sliding_window=8,
        tie_word_embeddings=False, **rope_kwargs(1000000.0, None)), torch.bfloat16, "200KB"),
    # gpt-oss: MXFP4 experts written in the Hub's layout (gpt_oss_checkpoint), gate/up weights drawn wide
    # (GPT_OSS_GATE_UP_SCALE) so that the clamps at swiglu_limit bite, a window of 8 on the even layer.
    # transformers 5.17's GptOssExperts clamps at 7.0 whatever swiglu_limit says, so the fixture keeps 7.
    "gptoss-e4-top2-mxfp4-window8": ("GptOssConfig", dict(
        hidden_size=64, intermediate_size=96, num_local_experts=4, num_experts_per_tok=2, num_hidden_layers=2,
        num_attention_heads=2, num_key_value_heads=1, head_dim=64, max_position_embeddings=256, sliding_window=8,
        layer_types=["sliding_attention", "full_attention"], swiglu_limit=7.0, attention_bias=True,
        tie_word_embeddings=False, **rope_kwargs(150000.0, {"rope_type": "yarn", "factor": 4.0, "beta_fast": 32.0,
                                                           "beta_slow": 1.0, "truncate": False,
                                                           "original_max_position_embeddings": 64})),
        torch.bfloat16, None),
}
PROMPT_LENGTHS = [7, 13, 21, 1]
ROUTER_SCALE = 0.5
GPT_OSS_GATE_UP_SCALE = 0.6
# Experts as Hub checkpoints store them, one tensor per expert and projection, by family:
# (block prefix in the checkpoint, gate name, up name, down name).
HUB_EXPERT_NAMES = {"Qwen3MoeConfig": ("mlp.", "gate_proj", "up_proj", "down_proj"),
                    "MixtralConfig": ("block_sparse_moe.", "w1", "w3", "w2")}


def make_model(config_name, kwargs, seed):
    torch.manual_seed(seed)
    config = getattr(transformers, config_name)(**FAMILY_COMMON.get(config_name, COMMON), **kwargs)
    config._attn_implementation = "eager"
    if is_moe(config):
        config._experts_implementation = "eager"
    model = transformers.AutoModelForCausalLM.from_config(config, **{DTYPE_ARG: torch.float32})
    # Gemma's RMSNorm scales by (1 + w), so its norm weights are drawn around 0 rather than 1.
    norm_center = 0.0 if config_name.startswith("Gemma") else 1.0
    with torch.no_grad():  # random norm scales and biases, so that applying them is tested too
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(norm_center + 0.2 * torch.randn_like(p))
            elif name.endswith(".bias"):
                p.copy_(0.1 * torch.randn_like(p))
            elif name.endswith("embed_tokens.weight"):
                p.copy_(0.5 * torch.randn_like(p))
            elif is_router(name, p, config) or name.endswith("router.weight"):
                p.copy_(ROUTER_SCALE * torch.randn_like(p))
            elif name.endswith("self_attn.sinks"):
                p.copy_(torch.randn_like(p))
            elif name.endswith("experts.gate_up_proj") and config_name == "GptOssConfig":
                p.copy_(GPT_OSS_GATE_UP_SCALE * torch.randn_like(p))
            p.copy_(p.to(torch.bfloat16).to(torch.float32))
            if name.endswith("experts.gate_up_proj") or name.endswith("experts.down_proj"):
                # MXFP4 values: what the checkpoint will hold. transformers keeps gpt-oss experts [E, in, out].
                if p.shape[1] == in_features(name, config):
                    p.copy_(mxfp4_quantize(p.transpose(1, 2))[2].transpose(1, 2))
                else:
                    p.copy_(mxfp4_quantize(p)[2])
    return model


def is_router(name, p, config):
    """A mixture-of-experts router weight [n_experts, hidden] (named mlp.gate / block_sparse_moe.gate)."""
    n_experts = getattr(config, "num_experts", None) or getattr(config, "num_local_experts", None)
    return (n_experts and name.endswith("gate.weight") and ".experts." not in name and p.dim() == 2
            and p.shape[0] == n_experts)


def to_hub_expert_layout(path, config_name, config):
    """Rewrites the saved checkpoint with experts as Hub checkpoints hold them (one tensor per expert and
    projection under the family's names). transformers 5 keeps experts fused as [E, 2I, H] gate_up_proj and
    [E, H, I] down_proj and may save them that way; it reads either layout back."""
    import glob
    from safetensors.torch import load_file
    block, gate_name, up_name, down_name = HUB_EXPERT_NAMES[config_name]
    inter = getattr(config, "moe_intermediate_size", None) or config.intermediate_size
    files = sorted(glob.glob(os.path.join(path, "*.safetensors")))
    index = os.path.join(path, "model.safetensors.index.json")
    weight_map = {}
    for f in files:
        tensors, out = load_file(f), {}
        for name, t in tensors.items():
            layer = name.split(".experts.")[0] + "." if ".experts." in name else None
            if layer is not None:  # the family's block name, whatever transformers calls it
                layer = layer.rsplit(".", 2)[0] + "." + block
            if name.endswith(".experts.gate_up_proj"):
                if t.shape[1] != 2 * inter:
                    t = t.transpose(1, 2)
                for e in range(t.shape[0]):
                    out[f"{layer}experts.{e}.{gate_name}.weight"] = t[e, :inter].contiguous()
                    out[f"{layer}experts.{e}.{up_name}.weight"] = t[e, inter:].contiguous()
            elif name.endswith(".experts.down_proj"):
                if t.shape[2] != inter:
                    t = t.transpose(1, 2)
                for e in range(t.shape[0]):
                    out[f"{layer}experts.{e}.{down_name}.weight"] = t[e].contiguous()
            elif is_router(name, t, config) and not name.startswith("lm_head"):
                out[name.rsplit(".", 3)[0] + "." + block + "gate.weight"] = t
            else:
                out[name] = t
        save_file(out, f, metadata={"format": "pt"})
        weight_map.update({k: os.path.basename(f) for k in out})
    if os.path.exists(index):
        data = json.load(open(index))
        data["weight_map"] = dict(sorted(weight_map.items()))
        json.dump(data, open(index, "w"), indent=2)
    return sorted(weight_map)


def is_moe(config_or_path):
    cfg = json.load(open(os.path.join(config_or_path, "config.json"))) if isinstance(config_or_path, str) \
        else config_or_path.to_dict()
    return bool(cfg.get("num_experts") or cfg.get("num_local_experts"))


E2M1 = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0])


def mxfp4_quantize(w):
    """[..., rows, k] float -> (blocks uint8 [..., rows, k/32, 16], scales uint8 [..., rows, k/32], dequantized):
    per 32 values along k one E8M0 exponent (the smallest putting the block's largest magnitude within 6), each
    value the nearest E2M1 value, element 2j in the low nibble (the OCP MX layout gpt-oss stores)."""
    *lead, k = w.shape
    blocks = w.float().reshape(*lead, k // 32, 32)
    amax = blocks.abs().amax(-1, keepdim=True).clamp_min(2.0 ** -126)
    exponent = torch.ceil(torch.log2(amax / 6.0)).clamp(-127, 127)
    scaled = blocks / torch.exp2(exponent)
    nibbles = (scaled[..., None] - E2M1.to(w.device)).abs().argmin(-1).to(torch.uint8)  # [..., k/32, 32]
    dequantized = (E2M1.to(w.device)[nibbles.long()] * torch.exp2(exponent)).reshape(*lead, k)
    packed = (nibbles[..., 0::2] | (nibbles[..., 1::2] << 4)).to(torch.uint8)  # [..., k/32, 16]
    return packed, (exponent[..., 0] + 127).to(torch.uint8), dequantized


def in_features(name, config):
    """The input width of an expert stack: hidden for gate_up, intermediate for down."""
    return config.hidden_size if name.endswith("gate_up_proj") else config.intermediate_size


def gpt_oss_checkpoint(path, model):
    """Rewrites a saved gpt-oss model into the Hub's layout: every layer's experts MXFP4 (gate_up_proj_blocks
    [E, 2I, H/32, 16] and _scales [E, 2I, H/32] with gate and up rows interleaved as transformers keeps them,
    down_proj_blocks [E, H, I/32, 16]), biases BF16, and quant_method mxfp4 in config.json."""
    from safetensors.torch import load_file
    f = os.path.join(path, "model.safetensors")
    tensors, out = load_file(f), {}
    for name, t in tensors.items():
        if name.endswith("experts.gate_up_proj") or name.endswith("experts.down_proj"):
            rows_major = t.float().transpose(1, 2) if t.shape[1] == in_features(name, model.config) else t.float()
            blocks, scales, _ = mxfp4_quantize(rows_major)  # [E, out, in]: a row per output
            out[name + "_blocks"] = blocks.contiguous()
            out[name + "_scales"] = scales.contiguous()
        else:
            out[name] = t
    save_file(out, f, metadata={"format": "pt"})
    cfg_path = os.path.join(path, "config.json")
    cfg = json.load(open(cfg_path))
    cfg["quantization_config"] = {"quant_method": "mxfp4", "modules_to_not_convert": [
        "model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"]}
    json.dump(cfg, open(cfg_path, "w"), indent=2)


def load_fp32(path):
    # Experts run as transformers' eager per-expert loop: its batched and grouped kernels round differently.
    extra = {"experts_implementation": "eager"} if is_moe(path) else {}
    model = transformers.AutoModelForCausalLM.from_pretrained(
        path, **{DTYPE_ARG: torch.float32}, attn_implementation="eager", **extra).to(DEVICE).eval()
    return model


@torch.no_grad()
def reference(path, prompts):
    out = {}
    for i, prompt in enumerate(prompts):
        model = load_fp32(path)  # fresh per prompt: dynamic rope keeps state between calls
        ids = torch.tensor([prompt], device=DEVICE)
        out[f"prompt.{i}"] = torch.tensor(prompt, dtype=torch.int32)
        out[f"logits.{i}"] = model(ids).logits[0].float().cpu()
        model = load_fp32(path)
        result = model(ids, use_cache=True)
        cache, logits, greedy, margin = result.past_key_values, result.logits[0, -1], [], []
        for _ in range(N_GREEDY):
            top = torch.topk(logits.float(), 2)
            token = int(top.indices[0])
            greedy.append(token)
            margin.append(float(top.values[0] - top.values[1]))
            result = model(torch.tensor([[token]], device=DEVICE), past_key_values=cache, use_cache=True)
            cache, logits = result.past_key_values, result.logits[0, -1]
        out[f"greedy.{i}"] = torch.tensor(greedy, dtype=torch.int32)
        out[f"margin.{i}"] = torch.tensor(margin, dtype=torch.float32)
    return out


def build_fixture(root, name, spec, seed):
    config_name, kwargs, dtype, shard = spec
    path = os.path.join(root, name)
    model = make_model(config_name, kwargs, seed)
    model.to(dtype).save_pretrained(path, safe_serialization=True, **({"max_shard_size": shard} if shard else {}))
    reference_path = path
    if config_name == "GptOssConfig":
        # The reference runs on transformers' own BF16 copy of the MXFP4 values (its MXFP4 loader needs
        # kernels this machine may lack); the fixture keeps the Hub's MXFP4 layout.
        reference_path = path + ".bf16"
        shutil.rmtree(reference_path, ignore_errors=True)
        shutil.copytree(path, reference_path)
        gpt_oss_checkpoint(path, model)
    for extra in ("generation_config.json",):
        if os.path.exists(os.path.join(path, extra)):
            os.remove(os.path.join(path, extra))
    generator = torch.Generator().manual_seed(seed + 1000)
    vocab = COMMON["vocab_size"]
    prompts = [torch.randint(0, vocab, (n,), generator=generator).tolist() for n in PROMPT_LENGTHS]
    if config_name in HUB_EXPERT_NAMES:
        names = to_hub_expert_layout(path, config_name, model.config)
        print(f"{name}: checkpoint tensors " + ", ".join(n for n in names if "layers.0." in n), flush=True)
        # The rewritten checkpoint must load back as the model it was saved from, parameter for parameter
        # (logits would not do: the bf16 round trip above rounded the in-memory model's rope buffers).
        saved = {k: v.float().cpu() for k, v in model.state_dict().items()}
        loaded = {k: v.float().cpu() for k, v in load_fp32(path).state_dict().items()}
        if saved.keys() != loaded.keys() or any(not torch.equal(saved[k], loaded[k]) for k in saved):
            raise RuntimeError("the Hub-layout checkpoint loads as another model")
        print(f"{name}: the Hub-layout checkpoint loads back parameter for parameter", flush=True)
    ref = reference(reference_path, prompts)
    if reference_path != path:
        shutil.rmtree(reference_path)
    save_file(ref, os.path.join(path, "reference.safetensors"), metadata={
        "command": "python3 tools/make-reference-fixtures.py --out OUT",
        "torch": torch.__version__, "transformers": transformers.__version__, "device": DEVICE,
        "precision": "fp32 activations, eager attention, TF32 off"})
    min_margin = min(float(ref[f"margin.{i}"].min()) for i in range(len(prompts)))
    print(f"{name}: {sum(p.numel() for p in model.parameters())} params, min greedy margin {min_margin:.4f}", flush=True)
    if config_name == "Gemma3TextConfig":
        try:  # a report only: the fixture is transformers' output whatever this finds
            check_gemma3(path, name, prompts, ref)
        except Exception as e:
            print(f"{name}: independent check FAILED to run: {type(e).__name__}: {e}", flush=True)
            traceback.print_exc()


@torch.no_grad()
def gemma3_logits(path, ids):
    """Gemma 3 written out from config.json and the saved weights alone, as a runtime reads them: FP32,
    full causal attention on the given ids (no cache). For check_gemma3 to compare with transformers."""
    from safetensors.torch import load_file
    cfg = json.load(open(os.path.join(path, "config.json")))
    w = {k: v.float().to(DEVICE) for k, v in load_file(os.path.join(path, "model.safetensors")).items()}
    pre = next(k for k in w if k.endswith("embed_tokens.weight"))[:-len("embed_tokens.weight")]
    hidden, n_heads, n_kv, hd = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    eps = cfg["rms_norm_eps"]

    def norm(x, name):  # (1 + w) RMSNorm over the last dim
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * (1.0 + w[name])

    def rope_of(layer_type):
        if "rope_parameters" in cfg:  # v5: keyed by layer type
            return cfg["rope_parameters"][layer_type]
        if layer_type == "sliding_attention":
            return {"rope_type": "default", "rope_theta": cfg["rope_local_base_freq"]}
        return {"rope_type": "default", "rope_theta": cfg["rope_theta"], **(cfg.get("rope_scaling") or {})}

    def rotate(t):
        return torch.cat([-t[..., hd // 2:], t[..., :hd // 2]], -1)

    n = len(ids)
    pos = torch.arange(n, device=DEVICE, dtype=torch.float32)
    q_idx, k_idx = pos[:, None], pos[None, :]
    x = w[pre + "embed_tokens.weight"][torch.tensor(ids, device=DEVICE)] * hidden ** 0.5  # HF: an FP32 buffer
    for i, layer_type in enumerate(cfg["layer_types"]):
        p = f"{pre}layers.{i}."
        h = norm(x, p + "input_layernorm.weight")
        q = norm((h @ w[p + "self_attn.q_proj.weight"].T).view(n, n_heads, hd), p + "self_attn.q_norm.weight")
        k = norm((h @ w[p + "self_attn.k_proj.weight"].T).view(n, n_kv, hd), p + "self_attn.k_norm.weight")
        v = (h @ w[p + "self_attn.v_proj.weight"].T).view(n, n_kv, hd)
        rope = rope_of(layer_type)
        inv_freq = 1.0 / (rope["rope_theta"] ** (torch.arange(0, hd, 2, device=DEVICE, dtype=torch.float32) / hd))
        if rope["rope_type"] == "linear":
            inv_freq = inv_freq / rope["factor"]
        elif rope["rope_type"] != "default":
            raise ValueError(f"rope_type {rope['rope_type']} is not written out here")
        angles = torch.cat([pos[:, None] * inv_freq[None, :]] * 2, -1)[:, None, :]  # [n, 1, hd]
        q = q * angles.cos() + rotate(q) * angles.sin()
        k = k * angles.cos() + rotate(k) * angles.sin()
        k, v = k.repeat_interleave(n_heads // n_kv, 1), v.repeat_interleave(n_heads // n_kv, 1)
        scores = torch.einsum("qhd,khd->hqk", q, k) * cfg["query_pre_attn_scalar"] ** -0.5
        allowed = k_idx <= q_idx
        if layer_type == "sliding_attention":
            allowed = allowed & (k_idx > q_idx - cfg["sliding_window"])  # the last sliding_window positions
        scores = scores.masked_fill(~allowed, float("-inf")).softmax(-1)
        attn = torch.einsum("hqk,khd->qhd", scores, v).reshape(n, n_heads * hd)
        x = x + norm(attn @ w[p + "self_attn.o_proj.weight"].T, p + "post_attention_layernorm.weight")
        h = norm(x, p + "pre_feedforward_layernorm.weight")
        gate = torch.nn.functional.gelu(h @ w[p + "mlp.gate_proj.weight"].T, approximate="tanh")
        mlp = (gate * (h @ w[p + "mlp.up_proj.weight"].T)) @ w[p + "mlp.down_proj.weight"].T
        x = x + norm(mlp, p + "post_feedforward_layernorm.weight")
    logits = norm(x, pre + "norm.weight") @ w.get("lm_head.weight", w[pre + "embed_tokens.weight"]).T
    cap = cfg.get("final_logit_softcapping")
    return torch.tanh(logits / cap) * cap if cap else logits


def check_gemma3(path, name, prompts, ref):
    """Prints what transformers wrote into config.json for Gemma 3, how far gemma3_logits is from its
    logits, and whether a no-cache forward over prompt + greedy picks the greedy tokens (which checks
    transformers' sliding-window KV cache against plain masking)."""
    cfg = json.load(open(os.path.join(path, "config.json")))
    keys = ("layer_types", "sliding_window", "rope_parameters", "rope_theta", "rope_local_base_freq", "rope_scaling",
            "sliding_window_pattern", "query_pre_attn_scalar", "final_logit_softcapping", "attn_logit_softcapping")
    print(f"{name}: config.json " + json.dumps({k: cfg[k] for k in keys if k in cfg}), flush=True)
    worst, agree, total = 0.0, 0, 0
    for i, prompt in enumerate(prompts):
        mine = gemma3_logits(path, prompt).cpu()
        worst = max(worst, float((mine - ref[f"logits.{i}"]).abs().max()))
        greedy = ref[f"greedy.{i}"].tolist()
        full = gemma3_logits(path, prompt + greedy[:-1]).cpu()[len(prompt) - 1:]
        agree += sum(int(a == b) for a, b in zip(full.argmax(-1).tolist(), greedy))
        total += len(greedy)
    print(f"{name}: independent forward max |logit diff| {worst:.3e}; its argmax follows the cached greedy "
          f"path at {agree}/{total} steps", flush=True)


@torch.no_grad()
def mean_loss(model, ids):
    losses = []
    for begin in range(0, len(ids) - 1, 2048):
        window = torch.tensor([ids[begin:begin + 2049]], device=DEVICE)
        logits = model(window[:, :-1]).logits[0].float()
        losses.append(torch.nn.functional.cross_entropy(logits, window[0, 1:], reduction="none"))
    return torch.cat(losses).mean()


@torch.no_grad()
def pick_heldout_file(tok, work):
    """Rebuilds the demo model's held-out split (train_demo_model.py: the first 200 accepted files of the
    shuffled site-packages list) and returns one held-out file of 6-16 KB whose loss is closest to the
    median loss of those candidates: a typical held-out file, not a chosen one."""
    import glob, random, sysconfig
    site = sysconfig.get_paths()["purelib"]
    files = sorted(glob.glob(os.path.join(site, "**", "*.py"), recursive=True))
    random.Random(0).shuffle(files)
    docs, total, n_files = [], 0, 0
    for f in files:
        try:
            s = open(f, encoding="utf-8").read()
        except Exception:
            continue
        if len(s) < 200 or len(s) > 200_000 or "\x00" in s:
            continue
        n_files += 1; total += len(s)
        if len(docs) < 200:
            docs.append((f, s))
        if total > 200_000_000:
            break
    print(f"corpus rebuilt: {n_files} files, {total / 1e6:.0f} MB from {site} (train_log.txt: 13345 files, 200 MB)")
    model = transformers.AutoModelForCausalLM.from_pretrained(work, **{DTYPE_ARG: torch.bfloat16}).to(DEVICE).eval()
    scored = [(float(mean_loss(model, tok.encode(s).ids)), f, s) for f, s in docs if 6000 <= len(s) <= 16000]
    median = sorted(x[0] for x in scored)[len(scored) // 2]
    print(f"{len(scored)} held-out candidates of 6-16 KB, median loss {median:.4f}")
    loss, f, s = min(scored, key=lambda x: abs(x[0] - median))
    return os.path.relpath(f, site), s


@torch.no_grad()
def demo_reference(repo, root):
    """The demo model: held-out ids and loss, and near-tie margins along samples.json's greedy paths."""
    src = os.path.join(repo, "assets", "demo-model")
    work = "/tmp/demo-model"
    os.makedirs(work, exist_ok=True)
    for f in os.listdir(src):
        full = os.path.join(src, f)
        if f.endswith(".xz"):
            with lzma.open(full) as fin, open(os.path.join(work, f[:-3]), "wb") as fout:
                shutil.copyfileobj(fin, fout)
        elif os.path.isfile(full):
            shutil.copy(full, work)
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(os.path.join(work, "tokenizer.json"))
    path, text = pick_heldout_file(tok, work)
    os.makedirs(os.path.join(root, "demo-heldout"), exist_ok=True)
    with open(os.path.join(root, "demo-heldout", "heldout.py"), "w", encoding="utf-8") as f:
        f.write(text)
    ids = tok.encode(text).ids
    out = {"heldout.ids": torch.tensor(ids, dtype=torch.int32)}
    for label, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
        model = transformers.AutoModelForCausalLM.from_pretrained(work, **{DTYPE_ARG: dtype}).to(DEVICE).eval()
        loss = mean_loss(model, ids)
        out[f"heldout.loss.{label}"] = torch.tensor([float(loss)])
        print(f"demo held-out {path} ({len(ids)} tokens, {label}): mean loss {float(loss):.4f}", flush=True)
    samples = json.load(open(os.path.join(work, "samples.json")))["samples"]
    for i, s in enumerate(samples):  # bf16 model from above: the samples were made in bf16
        full = torch.tensor([s["prompt_ids"] + s["greedy_ids"]], device=DEVICE)
        logp = torch.log_softmax(model(full).logits[0].float(), -1)[len(s["prompt_ids"]) - 1:-1]
        top = torch.topk(logp, 5)
        out[f"sample.{i}.top5_ids"] = top.indices.to(torch.int32).cpu()
        out[f"sample.{i}.top5_logprobs"] = top.values.cpu()
    save_file(out, os.path.join(root, "demo-heldout", "reference.safetensors"), metadata={
        "command": "python3 tools/make-reference-fixtures.py --out OUT",
        "torch": torch.__version__, "transformers": transformers.__version__,
        "text": path})


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--repo", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    parser.add_argument("--only", metavar="NAME[,NAME]",
                        help="build only these fixtures (demo-heldout: the demo model's numbers); the tar then "
                             "holds only them, so extracting it leaves the other fixtures as they are")
    args = parser.parse_args()
    known = list(FIXTURES) + ["demo-heldout"]
    only = set(known) if args.only is None else {n.strip() for n in args.only.split(",") if n.strip()}
    unknown = sorted(only - set(known))
    if unknown or not only:
        parser.error(f"--only: unknown fixture {', '.join(unknown) or '(none named)'}; known: {', '.join(known)}")
    root = os.path.join(args.out, "models")
    os.makedirs(root, exist_ok=True)
    print(f"torch {torch.__version__}, transformers {transformers.__version__}, device {DEVICE}", flush=True)
    failed = []
    for seed, (name, spec) in enumerate(FIXTURES.items()):  # seeds from the full list, whatever --only says
        if name not in only:
            continue
        try:
            build_fixture(root, name, spec, seed)
        except Exception as e:  # keep going: one family's failure should not lose the others
            print(f"{name}: FAILED {type(e).__name__}: {e}", flush=True)
            traceback.print_exc()
            failed.append(name)
            shutil.rmtree(os.path.join(root, name), ignore_errors=True)
    if "demo-heldout" in only:
        try:
            demo_reference(args.repo, root)
        except Exception as e:
            print(f"demo: FAILED {type(e).__name__}: {e}", flush=True)
            traceback.print_exc()
            failed.append("demo-heldout")
    with tarfile.open(os.path.join(args.out, "fixtures.tar"), "w") as tar:
        tar.add(root, arcname=".")
    shutil.rmtree(root)
    if failed:
        print(f"FAILED: {', '.join(failed)} (not in the tar)", flush=True)
        sys.exit(1)

if __name__ == "__main__":
    main()
