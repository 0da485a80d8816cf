// Writes an FP8 copy of a single-file BF16 checkpoint and a BF16 checkpoint of exactly the values
// the FP8 one encodes: every *_proj.weight matrix quantized to F8_E4M3 with one power-of-two scale
// per block (so dequantizing is exact in BF16), the rest copied (a Qwen3-MoE fixture's experts are
// *_proj.weight matrices too). Layouts: "fp8-block" (quant_method fp8, 32 x 48 blocks, `_scale_inv`),
// "fp8-block32" (the same with 32 x 32 blocks, which the CUDA backend's FP8 experts take) and
// "ct-channel" (compressed-tensors, one scale per output channel, `_scale`, with input scales beside).
//   node fp8_checkpoint.mjs SOURCE_DIR FP8_DIR BF16_DIR LAYOUT
import fs from "node:fs";
import path from "node:path";

const [src, fp8Dir, bf16Dir, layout] = process.argv.slice(2);
if (!["fp8-block", "fp8-block32", "ct-channel"].includes(layout)) throw new Error(`unknown layout ${layout}`);
const block = layout === "fp8-block32" ? [32, 32] : [32, 48];

function readSafetensors(file) {
  const bytes = fs.readFileSync(file);
  const n = Number(bytes.readBigUInt64LE(0));
  const header = JSON.parse(bytes.subarray(8, 8 + n).toString("utf8"));
  const data = bytes.subarray(8 + n);
  const tensors = [];
  for (const [name, info] of Object.entries(header)) {
    if (name === "__metadata__") continue;
    const [a, b] = info.data_offsets;
    tensors.push({ name, dtype: info.dtype, shape: info.shape, bytes: Buffer.from(data.subarray(a, b)) });
  }
  return tensors;
}

function writeSafetensors(file, tensors) {
  const header = {};
  let offset = 0;
  for (const t of tensors) {
    header[t.name] = { dtype: t.dtype, shape: t.shape, data_offsets: [offset, offset + t.bytes.length] };
    offset += t.bytes.length;
  }
  let json = Buffer.from(JSON.stringify(header), "utf8");
  json = Buffer.concat([json, Buffer.alloc((8 - (json.length % 8)) % 8, 0x20)]);
  const length = Buffer.alloc(8);
  length.writeBigUInt64LE(BigInt(json.length));
  fs.writeFileSync(file, Buffer.concat([length, json, ...tensors.map((t) => t.bytes)]));
}

const f32 = new Float32Array(1), u32 = new Uint32Array(f32.buffer);
const bf16ToF32 = (bits) => ((u32[0] = bits << 16), f32[0]);
const f32ToBf16Exact = (x) => {
  f32[0] = x;
  if ((u32[0] & 0xffff) !== 0) throw new Error(`${x} is not a BF16 value`);
  return u32[0] >>> 16;
};

// The non-negative E4M3 (fn) magnitudes by code, 0x00..0x7e (0x7f is NaN).
const e4m3 = [];
for (let code = 0; code < 0x7f; ++code) {
  const e = (code >> 3) & 0xf, m = code & 7;
  e4m3.push(e === 0 ? m * 2 ** -9 : (8 + m) * 2 ** (e - 10));
}
function quantize(x) {  // nearest magnitude, ties to the even code
  const a = Math.abs(x);
  let best = 0;
  for (let code = 1; code < e4m3.length; ++code) {
    const d = Math.abs(e4m3[code] - a), bd = Math.abs(e4m3[best] - a);
    if (d < bd || (d === bd && code % 2 === 0)) best = code;
  }
  return (x < 0 && best !== 0 ? 0x80 : 0) | best;
}
const dequantize = (code) => (code & 0x80 ? -1 : 1) * e4m3[code & 0x7f];

const compressed = layout === "ct-channel";
const fp8 = [], bf16 = [];
for (const t of readSafetensors(path.join(src, "model.safetensors"))) {
  if (!t.name.endsWith("_proj.weight") || t.dtype !== "BF16" || t.shape.length !== 2) {
    fp8.push(t);
    bf16.push(t);
    continue;
  }
  const [rows, cols] = t.shape;
  const [blockRows, blockCols] = compressed ? [1, cols] : block;
  const scaleRows = Math.ceil(rows / blockRows), scaleCols = Math.ceil(cols / blockCols);
  const values = new Float32Array(rows * cols);
  for (let i = 0; i < values.length; ++i) values[i] = bf16ToF32(t.bytes.readUInt16LE(2 * i));
  const codes = Buffer.alloc(rows * cols), plain = Buffer.alloc(2 * rows * cols);
  const scales = Buffer.alloc(4 * scaleRows * scaleCols);
  for (let br = 0; br < scaleRows; ++br) {
    for (let bc = 0; bc < scaleCols; ++bc) {
      const r1 = Math.min(rows, (br + 1) * blockRows), c1 = Math.min(cols, (bc + 1) * blockCols);
      let maxAbs = 0;
      for (let r = br * blockRows; r < r1; ++r) {
        for (let c = bc * blockCols; c < c1; ++c) maxAbs = Math.max(maxAbs, Math.abs(values[r * cols + c]));
      }
      const scale = maxAbs > 0 ? 2 ** Math.ceil(Math.log2(maxAbs / 448)) : 1;
      scales.writeFloatLE(scale, 4 * (br * scaleCols + bc));
      for (let r = br * blockRows; r < r1; ++r) {
        for (let c = bc * blockCols; c < c1; ++c) {
          const code = quantize(values[r * cols + c] / scale);
          codes[r * cols + c] = code;
          plain.writeUInt16LE(f32ToBf16Exact(dequantize(code) * scale), 2 * (r * cols + c));
        }
      }
    }
  }
  fp8.push({ name: t.name, dtype: "F8_E4M3", shape: t.shape, bytes: codes });
  fp8.push({ name: t.name + (compressed ? "_scale" : "_scale_inv"), dtype: "F32",
             shape: compressed ? [rows, 1] : [scaleRows, scaleCols], bytes: scales });
  if (compressed) {
    const inputScale = Buffer.alloc(4);
    inputScale.writeFloatLE(0.0625);
    fp8.push({ name: t.name.replace(/weight$/, "input_scale"), dtype: "F32", shape: [1], bytes: inputScale });
  }
  bf16.push({ name: t.name, dtype: "BF16", shape: t.shape, bytes: plain });
}

const config = JSON.parse(fs.readFileSync(path.join(src, "config.json"), "utf8"));
const quantized = structuredClone(config);
quantized.quantization_config = compressed
  ? { quant_method: "compressed-tensors", format: "float-quantized", quantization_status: "compressed",
      ignore: ["lm_head"],
      config_groups: { group_0: { targets: ["Linear"],
                                  weights: { num_bits: 8, type: "float", strategy: "channel", symmetric: true,
                                             dynamic: false, group_size: null } } } }
  : { quant_method: "fp8", fmt: "e4m3", activation_scheme: "dynamic", weight_block_size: block };
for (const [dir, tensors, cfg] of [[fp8Dir, fp8, quantized], [bf16Dir, bf16, config]]) {
  fs.mkdirSync(dir, { recursive: true });
  writeSafetensors(path.join(dir, "model.safetensors"), tensors);
  fs.writeFileSync(path.join(dir, "config.json"), JSON.stringify(cfg, null, 2));
}
