// Shared setup for the SDK end-to-end scripts: loads the pinned npm clients from
// tests/node/node_modules (unchanged), reads the server address and API key from the
// environment (FLARE_URL, FLARE_API_KEY), and provides a tiny check runner that records
// failures and keeps going so one run reports every broken case.
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const modules = join(dirname(fileURLToPath(import.meta.url)), "..", "node", "node_modules");
export const { default: OpenAI } = await import(join(modules, "openai", "index.mjs"));
export const { default: Anthropic } = await import(join(modules, "@anthropic-ai", "sdk", "index.mjs"));

export const baseUrl = process.env.FLARE_URL ?? "http://127.0.0.1:8000";
export const apiKey = process.env.FLARE_API_KEY ?? "";

export function openaiClient(key = apiKey) {
  return new OpenAI({ apiKey: key || "unused", baseURL: `${baseUrl}/v1`, maxRetries: 0, timeout: 120_000 });
}

export function anthropicClient(key = apiKey) {
  return new Anthropic({ apiKey: key || "unused", baseURL: baseUrl, maxRetries: 0, timeout: 120_000 });
}

// fetch with the bearer key; `body` objects are sent as JSON, strings as they are.
export async function call(path, { method = "POST", body, headers = {}, key = apiKey } = {}) {
  const allHeaders = { ...headers };
  if (key) allHeaders.authorization = `Bearer ${key}`;
  if (body !== undefined) allHeaders["content-type"] = "application/json";
  const response = await fetch(`${baseUrl}${path}`, {
    method,
    headers: allHeaders,
    body: body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body),
  });
  const text = await response.text();
  let json;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: response.status, text, json, headers: response.headers };
}

const failures = [];
let nPassed = 0;

// Runs one named check; an exception (assert or SDK error) records a failure.
export async function check(name, fn) {
  const started = Date.now();
  try {
    await fn();
    nPassed += 1;
    console.log(`ok   ${name} (${Date.now() - started} ms)`);
  } catch (error) {
    failures.push(name);
    console.log(`FAIL ${name}: ${error?.stack ?? error}`);
  }
}

export function finish() {
  console.log(`${nPassed} passed, ${failures.length} failed`);
  if (failures.length > 0) {
    console.log(`failed: ${failures.join(", ")}`);
    process.exit(1);
  }
}
