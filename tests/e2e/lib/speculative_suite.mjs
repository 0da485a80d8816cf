// Speculative decoding through the HTTP APIs: the same requests against servers of one package with
// speculation (learned drafts; history drafts) and without it (--mtp-draft-tokens 0) must answer
// the same text and logprobs, streamed or not, with stop strings, max_tokens and n > 1 seeded
// sampling; /metrics of the speculative servers must count accepted drafts.
//   node speculative_suite.mjs PLAIN_URL SPECULATIVE_URL [SPECULATIVE_URL...]
import fs from "node:fs";

const [plainUrl, ...speculativeUrls] = process.argv.slice(2);
const samples = JSON.parse(fs.readFileSync(new URL("../../../assets/demo-model/samples.json", import.meta.url)));

async function post(url, path, body) {
  const response = await fetch(url + path, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  const text = await response.text();
  if (!response.ok) throw new Error(`${path} ${response.status}: ${text}`);
  return body.stream ? text : JSON.parse(text);
}

// The text and token logprobs of each choice (streams are joined chunk by chunk).
function choices(answer, streamed) {
  if (!streamed) {
    return answer.choices.map((c) => ({
      text: c.text ?? c.message?.content,
      finish: c.finish_reason,
      logprobs: c.logprobs?.token_logprobs ?? c.logprobs?.content?.map((t) => t.logprob) ?? null,
    }));
  }
  const out = [];
  for (const line of answer.split("\n")) {
    if (!line.startsWith("data: ") || line === "data: [DONE]") continue;
    const chunk = JSON.parse(line.slice(6));
    for (const c of chunk.choices ?? []) {
      out[c.index] ??= { text: "", finish: null, logprobs: null };
      out[c.index].text += c.text ?? c.delta?.content ?? "";
      if (c.finish_reason) out[c.index].finish = c.finish_reason;
    }
  }
  return out;
}

function same(a, b, what) {
  if (a.length !== b.length) throw new Error(`${what}: ${a.length} choices against ${b.length}`);
  for (let i = 0; i < a.length; ++i) {
    if (a[i].text !== b[i].text || a[i].finish !== b[i].finish) {
      throw new Error(`${what}, choice ${i}: ${JSON.stringify(a[i])} against ${JSON.stringify(b[i])}`);
    }
    if (a[i].logprobs && b[i].logprobs) {
      if (a[i].logprobs.length !== b[i].logprobs.length) throw new Error(`${what}: logprob counts differ`);
      a[i].logprobs.forEach((lp, j) => {
        if (Math.abs(lp - b[i].logprobs[j]) > 1e-3) throw new Error(`${what}: logprob ${j} ${lp} against ${b[i].logprobs[j]}`);
      });
    }
  }
}

const prompts = samples.samples.map((s) => s.prompt);
const requests = [];
for (const [i, prompt] of prompts.entries()) {
  requests.push(["/v1/completions", { model: "demo", prompt, max_tokens: 48, temperature: 0, logprobs: 1 }, `greedy ${i}`]);
}
requests.push(["/v1/completions", { model: "demo", prompt: prompts[0], max_tokens: 40, temperature: 0, stream: true }, "streamed"]);
requests.push(["/v1/completions", { model: "demo", prompt: prompts[1], max_tokens: 64, temperature: 0, stop: ["return", ":\n"] }, "stop strings"]);
requests.push(["/v1/completions", { model: "demo", prompt: prompts[2], max_tokens: 7, temperature: 0 }, "max_tokens mid-round"]);
requests.push(["/v1/completions", { model: "demo", prompt: prompts[3], max_tokens: 40, temperature: 0.8, top_p: 0.95, seed: 11, n: 2 }, "seeded n=2"]);
requests.push(["/v1/chat/completions", { model: "demo", messages: [{ role: "user", content: prompts[4] }], max_tokens: 32, temperature: 0, logprobs: true }, "chat"]);

const want = await Promise.all(requests.map(([path, body]) => post(plainUrl, path, body)));
for (const url of speculativeUrls) {
  // Concurrently, so verify rows share steps with other rows.
  const got = await Promise.all(requests.map(([path, body]) => post(url, path, body)));
  requests.forEach(([, body, what], i) => same(choices(got[i], body.stream), choices(want[i], body.stream), `${url} ${what}`));
  const metrics = await (await fetch(url + "/metrics")).text();
  const value = (name) => Number((metrics.match(new RegExp(`^${name}\\{[^}]*\\} (\\S+)$`, "m")) ?? [])[1]);
  const accepted = value("flare_spec_decode_accepted_tokens_total");
  const length = value("flare_spec_decode_mean_accepted_length");
  if (!(accepted > 0) || !(length > 1.2)) throw new Error(`${url}: ${accepted} drafts accepted, mean accepted length ${length}`);
  console.log(`${url}: identical answers; ${accepted} drafts accepted, ${length.toFixed(2)} tokens per verify round`);
}
const plainMetrics = await (await fetch(plainUrl + "/metrics")).text();
if (!/^flare_spec_decode_verify_rounds_total\{[^}]*\} 0$/m.test(plainMetrics)) throw new Error("the plain server verified drafts");
console.log("PASS");
