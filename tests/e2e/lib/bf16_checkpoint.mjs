// What the e2e tests' tiny random-weight checkpoints are written with: BF16 tensors drawn from a
// seeded generator (the same bytes on every run) and a plain safetensors writer.
import fs from "node:fs";

// tensor(name, shape, std, center = 0): a BF16 tensor of `shape` with values center + std * N(0, 1),
// from mulberry32 uniforms and Box-Muller normals seeded with `seed`.
export function bf16Tensors(seed) {
  let state = seed;
  const uniform = () => {
    state = (state + 0x6d2b79f5) | 0;
    let t = Math.imul(state ^ (state >>> 15), 1 | state);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const normal = () => Math.sqrt(-2 * Math.log(1 - uniform())) * Math.cos(2 * Math.PI * uniform());
  const f32 = new Float32Array(1), u32 = new Uint32Array(f32.buffer);
  const bf16Bits = (x) => {  // round to nearest even
    f32[0] = x;
    const bits = u32[0];
    return ((bits + 0x7fff + ((bits >>> 16) & 1)) >>> 16) & 0xffff;
  };
  return (name, shape, std, center = 0) => {
    const n = shape.reduce((a, b) => a * b, 1);
    const bytes = Buffer.alloc(2 * n);
    for (let i = 0; i < n; ++i) bytes.writeUInt16LE(bf16Bits(center + std * normal()), 2 * i);
    return { name, dtype: "BF16", shape, bytes };
  };
}

// One safetensors file of `list` ({name, dtype, shape, bytes}), header padded to 8 bytes.
export function writeSafetensors(file, list) {
  const header = { __metadata__: { format: "pt" } };
  let offset = 0;
  for (const t of list) {
    header[t.name] = { dtype: t.dtype, shape: t.shape, data_offsets: [offset, offset + t.bytes.length] };
    offset += t.bytes.length;
  }
  let json = Buffer.from(JSON.stringify(header), "utf8");
  json = Buffer.concat([json, Buffer.alloc((8 - (json.length % 8)) % 8, 0x20)]);
  const length = Buffer.alloc(8);
  length.writeBigUInt64LE(BigInt(json.length));
  fs.writeFileSync(file, Buffer.concat([length, json, ...list.map((t) => t.bytes)]));
}
