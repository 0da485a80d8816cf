#!/usr/bin/env python3
# Builds the reference fixtures under tests/data/models/: tiny random-weight checkpoints of every
# supported dense family and configuration, with Hugging Face transformers' outputs for them, and the
# demo model's reference numbers (held-out loss, near-tie margins along samples.json's greedy paths).
#
# Run on a machine with an NVIDIA GPU, PyTorch, transformers, safetensors and tokenizers:
#   python3 tools/make-reference-fixtures.py --out /tmp/fixtures
#   tar -C tests/data/models -xf /tmp/fixtures/fixtures.tar
#
# Each fixture folder holds the checkpoint (config.json + safetensors, sharded for some) and
# reference.safetensors: prompt.<i> (I32 [n]), logits.<i> (F32 [n, vocab], every position),
# greedy.<i> (I32 [32], greedy continuation with a KV cache), margin.<i> (F32 [32], top-1 minus
# top-2 logit at each greedy step). The reference runs in FP32 (TF32 off, eager attention) on weights
# that are exactly representable in BF16, so a BF16-weight / FP32-activation backend can match closely.
import argparse, io, json, lzma, math, os, shutil, sys, tarfile

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


# name -> (config class name, config kwargs, weight dtype, max shard size or None)
COMMON = dict(vocab_size=256, num_hidden_layers=2, rms_norm_eps=1e-6, hidden_act="silu",
              initializer_range=0.08, bos_token_id=None, eos_token_id=None, pad_token_id=None)
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
}
PROMPT_LENGTHS = [7, 13, 21, 1]


def make_model(config_name, kwargs, seed):
    torch.manual_seed(seed)
    config = getattr(transformers, config_name)(**COMMON, **kwargs)
    config._attn_implementation = "eager"
    model = transformers.AutoModelForCausalLM.from_config(config, **{DTYPE_ARG: torch.float32})
    with torch.no_grad():  # random norm scales and biases, so that applying them is tested too
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1.0 + 0.2 * torch.randn_like(p))
            elif name.endswith(".bias"):
                p.copy_(0.1 * torch.randn_like(p))
            elif name.endswith("embed_tokens.weight"):
                p.copy_(0.5 * torch.randn_like(p))
            p.copy_(p.to(torch.bfloat16).to(torch.float32))
    return model


def load_fp32(path):
    model = transformers.AutoModelForCausalLM.from_pretrained(
        path, **{DTYPE_ARG: torch.float32}, attn_implementation="eager").to(DEVICE).eval()
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
    for extra in ("generation_config.json",):
        if os.path.exists(os.path.join(path, extra)):
            os.remove(os.path.join(path, extra))
    generator = torch.Generator().manual_seed(seed + 1000)
    vocab = COMMON["vocab_size"]
    prompts = [torch.randint(0, vocab, (n,), generator=generator).tolist() for n in PROMPT_LENGTHS]
    ref = reference(path, prompts)
    save_file(ref, os.path.join(path, "reference.safetensors"), metadata={
        "command": "python3 tools/make-reference-fixtures.py --out OUT",
        "torch": torch.__version__, "transformers": transformers.__version__, "device": DEVICE,
        "precision": "fp32 activations, eager attention, TF32 off"})
    min_margin = min(float(ref[f"margin.{i}"].min()) for i in range(len(prompts)))
    print(f"{name}: {sum(p.numel() for p in model.parameters())} params, min greedy margin {min_margin:.4f}", flush=True)


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
    args = parser.parse_args()
    root = os.path.join(args.out, "models")
    os.makedirs(root, exist_ok=True)
    print(f"torch {torch.__version__}, transformers {transformers.__version__}, device {DEVICE}", flush=True)
    for seed, (name, spec) in enumerate(FIXTURES.items()):
        try:
            build_fixture(root, name, spec, seed)
        except Exception as e:  # keep going: one family's failure should not lose the others
            print(f"{name}: FAILED {type(e).__name__}: {e}", flush=True)
            shutil.rmtree(os.path.join(root, name), ignore_errors=True)
    try:
        demo_reference(args.repo, root)
    except Exception as e:
        print(f"demo: FAILED {type(e).__name__}: {e}", flush=True)
    with tarfile.open(os.path.join(args.out, "fixtures.tar"), "w") as tar:
        tar.add(root, arcname=".")
    shutil.rmtree(root)


if __name__ == "__main__":
    main()
