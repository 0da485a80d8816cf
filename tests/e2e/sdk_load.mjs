// Bounded load test: N short streaming chat completions through the openai SDK, at most
// IN_FLIGHT at once (default N: all concurrent). Reports requests, errors, generated tokens,
// tokens/s and latency percentiles; exits 1 on any error.
// Usage: FLARE_URL=... FLARE_API_KEY=... node tests/e2e/sdk_load.mjs [N] [MAX_TOKENS] [IN_FLIGHT]
import { openaiClient } from "./sdk_clients.mjs";

const nRequests = Number(process.argv[2] ?? 200);
const maxTokens = Number(process.argv[3] ?? 8);
const inFlight = Math.min(nRequests, Number(process.argv[4] ?? nRequests));
const client = openaiClient();
const model = (await client.models.list()).data[0].id;

async function one(index) {
  const started = performance.now();
  const stream = await client.chat.completions.create({
    model,
    messages: [{ role: "user", content: `def function_${index}(x):` }],
    max_tokens: maxTokens,
    stream: true,
    stream_options: { include_usage: true },
  });
  let nTokens = 0;
  let firstTokenMs;
  let finished = false;
  for await (const chunk of stream) {
    if (chunk.choices.some((c) => c.delta?.content) && firstTokenMs === undefined) firstTokenMs = performance.now() - started;
    if (chunk.choices.some((c) => c.finish_reason)) finished = true;
    if (chunk.usage) nTokens = chunk.usage.completion_tokens;
  }
  if (!finished) throw new Error("stream ended without a finish_reason");
  if (nTokens < 1 || nTokens > maxTokens) throw new Error(`completion_tokens ${nTokens} outside 1..${maxTokens}`);
  return { nTokens, latencyMs: performance.now() - started, firstTokenMs: firstTokenMs ?? NaN };
}

const started = performance.now();
const results = new Array(nRequests);
let next = 0;
async function worker() {
  while (next < nRequests) {
    const index = next++;
    try {
      results[index] = { status: "fulfilled", value: await one(index) };
    } catch (error) {
      results[index] = { status: "rejected", reason: error };
    }
  }
}
await Promise.all(Array.from({ length: inFlight }, worker));
const elapsedS = (performance.now() - started) / 1000;
const ok = results.filter((r) => r.status === "fulfilled").map((r) => r.value);
const errors = results.filter((r) => r.status === "rejected").map((r) => String(r.reason?.message ?? r.reason));
const nTokens = ok.reduce((sum, r) => sum + r.nTokens, 0);
const percentile = (values, p) => {
  const sorted = values.filter((v) => !Number.isNaN(v)).sort((a, b) => a - b);
  return sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] : NaN;
};
const latencies = ok.map((r) => r.latencyMs);
const ttfts = ok.map((r) => r.firstTokenMs);
console.log(
  `load: ${nRequests} streaming requests, ${inFlight} in flight (max_tokens ${maxTokens}): ${ok.length} ok, ${errors.length} errors, ` +
    `${nTokens} tokens in ${elapsedS.toFixed(2)} s = ${(nTokens / elapsedS).toFixed(1)} tokens/s, ` +
    `latency p50 ${percentile(latencies, 50).toFixed(0)} ms p99 ${percentile(latencies, 99).toFixed(0)} ms, ` +
    `first token p50 ${percentile(ttfts, 50).toFixed(0)} ms p99 ${percentile(ttfts, 99).toFixed(0)} ms`,
);
if (errors.length > 0) {
  const counts = new Map();
  for (const e of errors) counts.set(e, (counts.get(e) ?? 0) + 1);
  for (const [message, count] of counts) console.log(`  ${count} x ${message}`);
  process.exit(1);
}
