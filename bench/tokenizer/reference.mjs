// Reference encode throughput: @huggingface/transformers (tests/node/node_modules) on the same
// tokenizer directory and text file as tokenizer_bench, single thread, same output format.
//
//   node bench/tokenizer/reference.mjs TOKENIZER_DIR TEXT_FILE [PASSES]
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const require = createRequire(path.join(root, 'tests/node/package.json'));
const { AutoTokenizer, env } = await import(pathToFileURL(require.resolve('@huggingface/transformers')).href);

const [dir, file, passesArg] = process.argv.slice(2);
const passes = Math.max(2, Number(passesArg ?? 10));
const text = fs.readFileSync(file, 'utf8');
const bytes = Buffer.byteLength(text, 'utf8');
env.allowRemoteModels = false;
env.localModelPath = path.dirname(path.resolve(dir)) + path.sep;

// CPU time of the process (node runs the tokenizer on one thread): on a shared machine wall
// time mostly measures the other processes.
const cpuSeconds = () => { const u = process.cpuUsage(); return (u.user + u.system) / 1e6; };
let bestLoad = Infinity;
let tok;
for (let i = 0; i < 5; ++i) {
  const start = cpuSeconds();
  tok = await AutoTokenizer.from_pretrained(path.basename(path.resolve(dir)));
  bestLoad = Math.min(bestLoad, (cpuSeconds() - start) * 1e3);
}
const mb = bytes / 1e6;
let start = cpuSeconds();
let n = tok.encode(text, { add_special_tokens: false }).length;
const cold = cpuSeconds() - start;
start = cpuSeconds();
for (let i = 1; i < passes; ++i) n = tok.encode(text, { add_special_tokens: false }).length;
const warm = (cpuSeconds() - start) / (passes - 1);
console.log(`load ${bestLoad.toFixed(1)} ms (best of 5)`);
console.log(`input ${mb.toFixed(3)} MB, ${n} tokens`);
console.log(`encode cold ${(mb / cold).toFixed(1)} MB/s, warm ${(mb / warm).toFixed(1)} MB/s (mean of ${passes - 1} passes)`);
