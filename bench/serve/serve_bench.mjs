#!/usr/bin/env node
// A serving load generator for any OpenAI-compatible server (Flare, llama.cpp's server, vLLM):
// streaming Completions or Chat Completions requests in a closed loop at fixed concurrencies or an
// open loop at Poisson request rates, with fixed or uniformly distributed prompt and output
// lengths, token-id prompts, ignore_eos, a shared prompt prefix, and multi-turn conversations.
// It prints a table and writes JSON of throughput (requests, output and total tokens per second),
// time to first token, inter-token latency, time per output token and end-to-end latency
// percentiles, and errors by kind. Node's built-in http only, so any machine with Node runs it.
//
//   node bench/serve/serve_bench.mjs --url http://127.0.0.1:8000 --concurrency 1,16,64 \
//     --prompt-tokens 512 --output-tokens 128 --ignore-eos --token-prompts --vocab-size 128256
//
// Times: TTFT from sending the request to the first streamed text; inter-token latency (ITL) the
// gaps between streamed text events; TPOT a request's (end - first text) / (output tokens - 1);
// output tokens from the server's usage (stream_options.include_usage), else the text events.
import http from "node:http";
import https from "node:https";
import fs from "node:fs";
import { parseArgs } from "node:util";

const HELP = `usage: serve_bench.mjs --url URL [options]
  --url URL               server base URL (default http://127.0.0.1:8000)
  --model NAME            model to request (default: the first of /v1/models)
  --api completions|chat  endpoint (default completions)
  --concurrency LIST      closed loop: requests in flight, e.g. 1,16,64 (default 1)
  --rate LIST             open loop instead: Poisson arrivals per second, e.g. 2,4,8
  --requests N            requests per run (default max(32, 4 x concurrency))
  --warmup N              requests sent before each run, not measured (default 0)
  --prompt-tokens N|A-B   prompt length, fixed or uniform in [A, B] (default 128)
  --output-tokens N|A-B   max_tokens, fixed or uniform (default 64)
  --ignore-eos            ask the server not to stop at end-of-sequence (exact output lengths)
  --token-prompts         send prompts as token ids (completions only; lengths exact)
  --vocab-size N          token ids are drawn from [100, min(N, 32000) - 100) (default 32000)
  --prefix-tokens N       every prompt starts with the same N tokens (prefix sharing)
  --turns N               multi-turn: each conversation sends N requests, each prompt the whole
                          conversation so far plus a new user turn of --prompt-tokens
  --temperature T         sampling temperature (default 0)
  --seed N                prompt generator seed (default 1)
  --api-key KEY           sent as a bearer token
  --timeout S             one request's limit in seconds (default 600)
  --json PATH             write the results as JSON
  --no-progress           no progress bar`;

function parseOptions(argv) {
  const { values } = parseArgs({
    args: argv,
    options: {
      url: { type: "string", default: "http://127.0.0.1:8000" },
      model: { type: "string" },
      api: { type: "string", default: "completions" },
      concurrency: { type: "string" },
      rate: { type: "string" },
      requests: { type: "string" },
      warmup: { type: "string", default: "0" },
      "prompt-tokens": { type: "string", default: "128" },
      "output-tokens": { type: "string", default: "64" },
      "ignore-eos": { type: "boolean", default: false },
      "token-prompts": { type: "boolean", default: false },
      "vocab-size": { type: "string", default: "32000" },
      "prefix-tokens": { type: "string", default: "0" },
      turns: { type: "string", default: "1" },
      temperature: { type: "string", default: "0" },
      seed: { type: "string", default: "1" },
      "api-key": { type: "string" },
      timeout: { type: "string", default: "600" },
      json: { type: "string" },
      "no-progress": { type: "boolean", default: false },
      help: { type: "boolean", short: "h", default: false },
    },
  });
  if (values.help) {
    console.log(HELP);
    process.exit(0);
  }
  const positiveInt = (name, text, min = 1) => {
    const n = Number(text);
    if (!Number.isInteger(n) || n < min) usage(`--${name} must be an integer >= ${min}, not '${text}'`);
    return n;
  };
  const lengths = (name, text) => {
    const m = /^(\d+)(?:-(\d+))?$/.exec(text);
    if (!m) usage(`--${name} must be N or A-B, not '${text}'`);
    const lo = Number(m[1]), hi = m[2] === undefined ? lo : Number(m[2]);
    if (lo < 1 || hi < lo) usage(`--${name}: need 1 <= A <= B`);
    return { lo, hi };
  };
  const list = (name, text, parse) => text.split(",").map((item) => parse(name, item.trim()));
  if (values.concurrency && values.rate) usage("--concurrency (closed loop) and --rate (open loop) exclude each other");
  if (!["completions", "chat"].includes(values.api)) usage("--api must be completions or chat");
  const o = {
    url: new URL(values.url),
    model: values.model,
    api: values.api,
    concurrencies: values.rate ? [] : list("concurrency", values.concurrency ?? "1", positiveInt),
    rates: values.rate
      ? list("rate", values.rate, (name, t) => {
          const r = Number(t);
          if (!(r > 0 && Number.isFinite(r))) usage(`--rate values must be positive numbers, not '${t}'`);
          return r;
        })
      : [],
    requests: values.requests === undefined ? undefined : positiveInt("requests", values.requests),
    warmup: positiveInt("warmup", values.warmup, 0),
    prompt: lengths("prompt-tokens", values["prompt-tokens"]),
    output: lengths("output-tokens", values["output-tokens"]),
    ignoreEos: values["ignore-eos"],
    tokenPrompts: values["token-prompts"],
    vocabSize: positiveInt("vocab-size", values["vocab-size"], 400),
    prefixTokens: positiveInt("prefix-tokens", values["prefix-tokens"], 0),
    turns: positiveInt("turns", values.turns),
    temperature: Number(values.temperature),
    seed: positiveInt("seed", values.seed, 0),
    apiKey: values["api-key"],
    timeoutMs: positiveInt("timeout", values.timeout) * 1000,
    json: values.json,
    progress: !values["no-progress"] && process.stderr.isTTY,
  };
  if (o.tokenPrompts && o.api !== "completions") usage("--token-prompts needs --api completions");
  if (o.tokenPrompts && o.turns > 1) usage("--turns needs text prompts (a conversation carries the model's text)");
  if (!Number.isFinite(o.temperature) || o.temperature < 0) usage("--temperature must be >= 0");
  return o;
}

function usage(message) {
  console.error(`serve_bench: ${message}\n${HELP}`);
  process.exit(2);
}

// ---- prompts: a seeded generator, token ids or words ----
function rng(seed) {
  let s = BigInt(seed) ^ 0x9e3779b97f4a7c15n;
  return () => {  // splitmix64, uniform in [0, 1)
    s = (s + 0x9e3779b97f4a7c15n) & 0xffffffffffffffffn;
    let z = s;
    z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & 0xffffffffffffffffn;
    z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & 0xffffffffffffffffn;
    z ^= z >> 31n;
    return Number(z >> 11n) / 2 ** 53;
  };
}

const WORDS = ("time year people way day man thing woman life child world school state family student group " +
  "country problem hand part place case week company system program question work government number night point " +
  "home water room mother area money story fact month lot right study book eye job word business issue side kind " +
  "head house service friend father power hour game line end member law car city community name president team").split(" ");

class PromptMaker {
  constructor(o) {
    this.o = o;
    this.random = rng(o.seed);
    const high = Math.min(o.vocabSize, 32000) - 100;
    this.token = () => 100 + Math.floor(this.random() * (high - 100));
    this.word = () => WORDS[Math.floor(this.random() * WORDS.length)];
    this.prefix = o.tokenPrompts ? Array.from({ length: o.prefixTokens }, this.token)
                                 : Array.from({ length: o.prefixTokens }, this.word).join(" ");
  }
  length(range) { return range.lo + Math.floor(this.random() * (range.hi - range.lo + 1)); }
  // A new prompt (or user turn) of about n tokens; words count as one token each.
  body(n, withPrefix) {
    const own = Math.max(1, n - (withPrefix ? this.o.prefixTokens : 0));
    if (this.o.tokenPrompts) return [...(withPrefix ? this.prefix : []), ...Array.from({ length: own }, this.token)];
    const words = Array.from({ length: own }, this.word).join(" ");
    return withPrefix && this.prefix ? `${this.prefix} ${words}` : words;
  }
}

// ---- one streamed request ----
function streamRequest(o, agent, path, payload) {
  return new Promise((resolve) => {
    const started = performance.now();
    const result = { ok: false, status: 0, error: null, ttftMs: null, gapsMs: [], e2eMs: null, text: "",
                     promptTokens: null, outputTokens: null, cachedTokens: null, events: 0 };
    const body = JSON.stringify(payload);
    const headers = { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(body) };
    if (o.apiKey) headers.Authorization = `Bearer ${o.apiKey}`;
    const client = o.url.protocol === "https:" ? https : http;
    const req = client.request(new URL(path, o.url), { method: "POST", headers, agent }, (res) => {
      result.status = res.statusCode;
      res.setEncoding("utf8");
      let buffer = "", last = null, done = false;
      if (res.statusCode !== 200) {
        res.on("data", (chunk) => { buffer += chunk; });
        res.on("end", () => {
          let message = buffer.slice(0, 200);
          try { message = JSON.parse(buffer).error?.message ?? message; } catch {}
          result.error = `HTTP ${res.statusCode}: ${message}`;
          result.e2eMs = performance.now() - started;
          resolve(result);
        });
        return;
      }
      res.on("data", (chunk) => {
        buffer += chunk;
        let at;
        while ((at = buffer.indexOf("\n\n")) >= 0) {
          const event = buffer.slice(0, at);
          buffer = buffer.slice(at + 2);
          for (const line of event.split("\n")) {
            if (!line.startsWith("data:")) continue;
            const data = line.slice(5).trim();
            if (data === "[DONE]") { done = true; continue; }
            let parsed;
            try { parsed = JSON.parse(data); } catch { result.error = `malformed event: ${data.slice(0, 80)}`; continue; }
            if (parsed.error) result.error = `stream error: ${parsed.error.message ?? JSON.stringify(parsed.error)}`;
            if (parsed.usage) {
              result.promptTokens = parsed.usage.prompt_tokens ?? null;
              result.outputTokens = parsed.usage.completion_tokens ?? null;
              result.cachedTokens = parsed.usage.prompt_tokens_details?.cached_tokens ?? null;
            }
            const choice = parsed.choices?.[0];
            const text = choice?.text ?? choice?.delta?.content ?? choice?.delta?.reasoning_content ?? "";
            if (text) {
              const now = performance.now();
              if (last === null) result.ttftMs = now - started;
              else result.gapsMs.push(now - last);
              last = now;
              result.text += text;
              result.events++;
            }
          }
        }
      });
      res.on("end", () => {
        result.e2eMs = performance.now() - started;
        if (!done && !result.error) result.error = "the stream ended without [DONE]";
        if (result.outputTokens === null) result.outputTokens = result.events;
        result.ok = !result.error;
        resolve(result);
      });
      res.on("error", (e) => { result.error = e.message; resolve(result); });
    });
    req.setTimeout(o.timeoutMs, () => req.destroy(new Error(`no answer within ${o.timeoutMs / 1000} s`)));
    req.on("error", (e) => {
      result.error = e.code ? `${e.code}` : e.message;
      result.e2eMs = performance.now() - started;
      resolve(result);
    });
    req.end(body);
  });
}

// One conversation (one request unless --turns): returns the results of its turns.
async function conversation(o, agent, maker, model, onResult) {
  const results = [];
  let history = o.api === "chat" ? [] : (o.tokenPrompts ? [] : "");
  for (let turn = 0; turn < o.turns; turn++) {
    const part = maker.body(maker.length(o.prompt), turn === 0);
    const maxTokens = maker.length(o.output);
    const common = { model, max_tokens: maxTokens, temperature: o.temperature, stream: true,
                     stream_options: { include_usage: true } };
    if (o.ignoreEos) common.ignore_eos = true;
    let path, payload;
    if (o.api === "chat") {
      history.push({ role: "user", content: part });
      path = "/v1/chat/completions";
      payload = { ...common, messages: history };
    } else {
      history = o.tokenPrompts ? part : (history ? `${history} ${part}` : part);
      path = "/v1/completions";
      payload = { ...common, prompt: history };
    }
    const result = await streamRequest(o, agent, path, payload);
    result.maxTokens = maxTokens;
    results.push(result);
    onResult(result);
    if (!result.ok) break;  // a conversation does not go on past a failed turn
    if (o.api === "chat") history.push({ role: "assistant", content: result.text });
    else if (!o.tokenPrompts) history += result.text;
  }
  return results;
}

// ---- statistics ----
function percentile(sorted, q) {
  if (sorted.length === 0) return null;
  const rank = q * (sorted.length - 1);
  const lo = Math.floor(rank), hi = Math.ceil(rank);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (rank - lo);
}
function summary(values) {
  const sorted = values.filter((v) => v !== null && Number.isFinite(v)).sort((a, b) => a - b);
  if (sorted.length === 0) return null;
  const mean = sorted.reduce((a, b) => a + b, 0) / sorted.length;
  return { n: sorted.length, mean, p50: percentile(sorted, 0.5), p90: percentile(sorted, 0.9),
           p99: percentile(sorted, 0.99), max: sorted[sorted.length - 1] };
}

function report(label, mode, level, results, durationS, o) {
  const ok = results.filter((r) => r.ok);
  const errors = {};
  for (const r of results) if (!r.ok) errors[r.error] = (errors[r.error] ?? 0) + 1;
  const promptTokens = ok.reduce((a, r) => a + (r.promptTokens ?? 0), 0);
  const outputTokens = ok.reduce((a, r) => a + r.outputTokens, 0);
  const tpot = ok.filter((r) => r.outputTokens > 1 && r.ttftMs !== null)
                 .map((r) => (r.e2eMs - r.ttftMs) / (r.outputTokens - 1));
  return {
    label, mode, [mode === "closed" ? "concurrency" : "rate"]: level,
    n_requests: results.length, n_ok: ok.length, n_errors: results.length - ok.length, errors,
    n_short_outputs: o.ignoreEos ? ok.filter((r) => r.outputTokens < r.maxTokens).length : undefined,
    duration_s: durationS,
    request_throughput: ok.length / durationS,
    prompt_tokens: promptTokens, output_tokens: outputTokens,
    cached_prompt_tokens: ok.reduce((a, r) => a + (r.cachedTokens ?? 0), 0),
    output_throughput: outputTokens / durationS,
    total_throughput: (promptTokens + outputTokens) / durationS,
    ttft_ms: summary(ok.map((r) => r.ttftMs)),
    itl_ms: summary(ok.flatMap((r) => r.gapsMs)),
    tpot_ms: summary(tpot),
    e2e_ms: summary(ok.map((r) => r.e2eMs)),
  };
}

// ---- progress ----
class Progress {
  constructor(enabled, label, total) {
    Object.assign(this, { enabled, label, total, done: 0, tokens: 0, errors: 0, started: performance.now() });
    if (enabled) this.timer = setInterval(() => this.draw(), 200);
  }
  add(result) {
    this.done++;
    if (result.ok) this.tokens += result.outputTokens; else this.errors++;
  }
  draw() {
    const width = 30, filled = Math.round((width * this.done) / this.total);
    const seconds = (performance.now() - this.started) / 1000;
    process.stderr.write(`\r${this.label.padEnd(16)} [${"#".repeat(filled)}${"-".repeat(width - filled)}] ` +
      `${this.done}/${this.total}  ${(this.tokens / Math.max(seconds, 1e-9)).toFixed(0)} tok/s  ` +
      `${this.errors} errors  ${seconds.toFixed(1)}s\x1b[K`);
  }
  end() {
    if (!this.enabled) return;
    clearInterval(this.timer);
    this.draw();
    process.stderr.write("\n");
  }
}

// ---- runs ----
async function closedLoop(o, agent, maker, model, concurrency, n, onResult) {
  const results = [];
  let started = 0;
  const worker = async () => {
    while (started < n) {
      started += o.turns;
      results.push(...(await conversation(o, agent, maker, model, onResult)));
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  return results;
}

async function openLoop(o, agent, maker, model, rate, n, onResult) {
  const pending = [];
  const arrivals = rng(o.seed + 7);
  const t0 = performance.now();
  let at = 0;
  for (let sent = 0; sent < n; sent += o.turns) {
    at += -Math.log(1 - arrivals()) / rate * 1000;  // exponential gaps: a Poisson process
    const wait = t0 + at - performance.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    pending.push(conversation(o, agent, maker, model, onResult));
  }
  return (await Promise.all(pending)).flat();
}

async function firstModel(o, agent) {
  return new Promise((resolve, reject) => {
    const headers = o.apiKey ? { Authorization: `Bearer ${o.apiKey}` } : {};
    const client = o.url.protocol === "https:" ? https : http;
    client.get(new URL("/v1/models", o.url), { headers, agent }, (res) => {
      let body = "";
      res.on("data", (c) => { body += c; });
      res.on("end", () => {
        try { resolve(JSON.parse(body).data[0].id); } catch { reject(new Error(`/v1/models answered ${res.statusCode}: ${body.slice(0, 200)}`)); }
      });
    }).on("error", reject);
  });
}

const fmt = (x, digits = 1) => (x === null || x === undefined ? "-" : x.toFixed(digits));

function printTable(runs) {
  const header = ["run", "requests", "errors", "seconds", "req/s", "out tok/s", "total tok/s", "TTFT p50", "TTFT p99",
                  "ITL p50", "ITL p99", "TPOT p50", "E2E p50", "E2E p99"];
  const rows = runs.map((r) => [r.label, String(r.n_requests), String(r.n_errors), fmt(r.duration_s, 2),
    fmt(r.request_throughput, 2), fmt(r.output_throughput), fmt(r.total_throughput), fmt(r.ttft_ms?.p50),
    fmt(r.ttft_ms?.p99), fmt(r.itl_ms?.p50, 2), fmt(r.itl_ms?.p99, 2), fmt(r.tpot_ms?.p50, 2), fmt(r.e2e_ms?.p50),
    fmt(r.e2e_ms?.p99)]);
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((row) => row[i].length)));
  const line = (cells) => cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join("  ");
  console.log(line(header));
  for (const row of rows) console.log(line(row));
  console.log("(latencies in ms; ITL: gaps between streamed tokens; TPOT: per request, after the first token)");
  for (const r of runs) for (const [error, count] of Object.entries(r.errors)) console.log(`${r.label}: ${count} x ${error}`);
}

async function main() {
  const o = parseOptions(process.argv.slice(2));
  const agent = new (o.url.protocol === "https:" ? https : http).Agent({ keepAlive: true, maxSockets: Infinity });
  const model = o.model ?? (await firstModel(o, agent));
  const maker = new PromptMaker(o);
  const levels = o.rates.length ? o.rates.map((r) => ["open", r]) : o.concurrencies.map((c) => ["closed", c]);
  const runs = [];
  for (const [mode, level] of levels) {
    const n = o.requests ?? Math.max(32, 4 * (mode === "closed" ? level : Math.ceil(level)));
    const label = mode === "closed" ? `concurrency ${level}` : `rate ${level}/s`;
    if (o.warmup > 0) await closedLoop(o, agent, maker, model, Math.min(o.warmup, mode === "closed" ? level : o.warmup), o.warmup, () => {});
    const progress = new Progress(o.progress, label, n);
    const t0 = performance.now();
    const results = mode === "closed"
      ? await closedLoop(o, agent, maker, model, level, n, (r) => progress.add(r))
      : await openLoop(o, agent, maker, model, level, n, (r) => progress.add(r));
    const seconds = (performance.now() - t0) / 1000;
    progress.end();
    runs.push(report(label, mode, level, results, seconds, o));
    if (!o.progress) console.error(`${label}: ${results.length} requests in ${seconds.toFixed(2)} s`);
  }
  agent.destroy();
  printTable(runs);
  const out = {
    url: o.url.href, model, api: o.api, date: new Date().toISOString(),
    settings: { prompt_tokens: o.prompt, output_tokens: o.output, ignore_eos: o.ignoreEos, token_prompts: o.tokenPrompts,
                prefix_tokens: o.prefixTokens, turns: o.turns, temperature: o.temperature, seed: o.seed,
                warmup: o.warmup },
    runs,
  };
  if (o.json) fs.writeFileSync(o.json, JSON.stringify(out, null, 2) + "\n");
  // Exit 1 when no request of some run succeeded: nothing was measured.
  process.exit(runs.some((r) => r.n_ok === 0) ? 1 : 0);
}

main().catch((e) => {
  console.error(`serve_bench: ${e.message}`);
  process.exit(1);
});
