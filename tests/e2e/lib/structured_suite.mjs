// Structured outputs against a running `flare run` (tests/e2e/structured_outputs.sh): the openai
// SDK's chat.completions.parse and responses.parse with JSON schemas, every request field that
// carries a constraint (response_format, text.format, structured_outputs, guided_*, grammar,
// json_schema) on Chat Completions, Completions and Responses, n > 1 and streaming, each text
// validated independently (ajv, RegExp); and the 400s: unsupported keywords named with their
// path, malformed constraints, hostile schemas answered quickly.
import assert from "node:assert/strict";

import { call, check, finish, openaiClient } from "../sdk_clients.mjs";
import { makeAjv } from "./structured_validate.mjs";

const openai = openaiClient();
const ajv = makeAjv();
const model = (await openai.models.list()).data[0].id;
const messages = [{ role: "user", content: "Describe a person as JSON." }];

const person = {
  type: "object",
  properties: {
    name: { type: "string", maxLength: 12 },
    age: { type: "integer", minimum: 0, maximum: 120 },
    email: { type: "string", format: "email" },
    tags: { type: "array", items: { enum: ["a", "b", "c"] }, maxItems: 3 },
    address: { anyOf: [{ type: "null" }, { $ref: "#/$defs/address" }] },
  },
  required: ["name", "age", "email", "tags", "address"],
  additionalProperties: false,
  $defs: { address: { type: "object", properties: { city: { type: "string", maxLength: 10 } }, required: ["city"], additionalProperties: false } },
};

function assertValid(schema, value, text) {
  const validate = ajv.compile(schema);
  assert.ok(validate(value), `${text}: ${ajv.errorsText(validate.errors)}`);
}

await check("chat.completions.parse with a JSON schema (temperature 1 and 0, n = 3)", async () => {
  for (const temperature of [1, 0]) {
    const completion = await openai.chat.completions.parse({
      model, messages, temperature, max_tokens: 300, n: 3, seed: 7,
      response_format: { type: "json_schema", json_schema: { name: "person", schema: person, strict: true } },
    });
    for (const choice of completion.choices) {
      assert.equal(choice.finish_reason, "stop", choice.message.content);
      assertValid(person, choice.message.parsed, choice.message.content);
    }
  }
});

await check("responses.parse with text.format json_schema", async () => {
  const response = await openai.responses.parse({
    model, input: "A person, please.", max_output_tokens: 300, temperature: 1,
    text: { format: { type: "json_schema", name: "person", schema: person, strict: true } },
  });
  assert.equal(response.status, "completed");
  assertValid(person, response.output_parsed, response.output_text);
  assert.equal(response.text.format.type, "json_schema");
});

await check("response_format json_object, streamed", async () => {
  const stream = await openai.chat.completions.create({
    model, messages, max_tokens: 200, stream: true, response_format: { type: "json_object" },
  });
  let text = "";
  let finish;
  for await (const chunk of stream) {
    text += chunk.choices[0]?.delta?.content ?? "";
    finish = chunk.choices[0]?.finish_reason ?? finish;
  }
  assert.equal(finish, "stop", text);
  const value = JSON.parse(text);
  assert.equal(typeof value, "object");
  assert.ok(value !== null && !Array.isArray(value));
});

await check("structured_outputs regex, choice and grammar on Completions", async () => {
  const regex = "[A-Z]{2}-\\d{3}( [a-z]+)?";
  let r = await call("/v1/completions", { body: { model, prompt: "Code:", max_tokens: 40, structured_outputs: { regex } } });
  assert.equal(r.status, 200, r.text);
  assert.match(r.json.choices[0].text, new RegExp(`^(?:${regex})$`, "u"));
  r = await call("/v1/completions", { body: { model, prompt: "Pick:", max_tokens: 40, n: 4, structured_outputs: { choice: ["alpha", "beta", "gamma"] } } });
  assert.equal(r.status, 200, r.text);
  for (const c of r.json.choices) assert.ok(["alpha", "beta", "gamma"].includes(c.text), c.text);
  const grammar = 'root ::= "(" num ("+" num)* ")"\nnum ::= [1-9] [0-9]?\n';
  r = await call("/v1/completions", { body: { model, prompt: "Sum:", max_tokens: 60, grammar } });
  assert.equal(r.status, 200, r.text);
  assert.match(r.json.choices[0].text, /^\([1-9][0-9]?(\+[1-9][0-9]?)*\)$/u);
});

await check("vLLM guided_json and llama.cpp json_schema on Chat Completions", async () => {
  const schema = { type: "array", items: { type: "integer", minimum: -5, maximum: 5 }, minItems: 1, maxItems: 4 };
  for (const body of [{ guided_json: schema }, { json_schema: schema }, { structured_outputs: { json: JSON.stringify(schema) } }]) {
    const r = await call("/v1/chat/completions", { body: { model, messages, max_tokens: 80, ...body } });
    assert.equal(r.status, 200, r.text);
    assertValid(schema, JSON.parse(r.json.choices[0].message.content), r.json.choices[0].message.content);
  }
});

async function expect400(path, body, param, started = Date.now()) {
  const r = await call(path, { body });
  assert.equal(r.status, 400, r.text);
  assert.equal(r.json.error.type, "invalid_request_error");
  if (param) assert.equal(r.json.error.param, param, r.text);
  assert.ok(Date.now() - started < 5000, `answered in ${Date.now() - started} ms`);
  return r.json.error;
}

await check("unsupported keywords and malformed constraints are 400s naming their path", async () => {
  const bad = { type: "object", properties: { a: { type: "string", not: { const: "x" } } } };
  let e = await expect400("/v1/chat/completions",
    { model, messages, response_format: { type: "json_schema", json_schema: { name: "x", schema: bad } } },
    "response_format.json_schema.schema/properties/a/not");
  assert.match(e.message, /not/);
  await expect400("/v1/responses", { model, input: "x", text: { format: { type: "json_schema", name: "x", schema: bad } } },
    "text.format.schema/properties/a/not");
  await expect400("/v1/completions", { model, prompt: "x", structured_outputs: { regex: "(a" } }, "structured_outputs.regex");
  await expect400("/v1/completions", { model, prompt: "x", grammar: "root ::= undefined_rule" }, "grammar");
  await expect400("/v1/chat/completions", { model, messages, response_format: { type: "yaml" } }, "response_format.type");
  await expect400("/v1/chat/completions", { model, messages, guided_regex: "a", guided_choice: ["a"] }, "guided_choice");
  await expect400("/v1/chat/completions",
    { model, messages, max_tokens: 3, response_format: { type: "json_schema", json_schema: { name: "p", schema: person } } }, "max_tokens");
});

await check("hostile constraints answer quickly: a 400, a 413, or served without blowing up", async () => {
  let deep = { type: "string" };
  for (let i = 0; i < 40; i += 1) deep = { type: "array", items: deep, minItems: 3, maxItems: 90 };
  await expect400("/v1/chat/completions", { model, messages, response_format: { type: "json_schema", json_schema: { name: "h", schema: deep } } });
  // Nested bounded repeats stay rules that refer to rules (no expansion): served, quickly and valid.
  const wide = { type: "string", pattern: "^((a{1,90}){1,90}){1,90}$" };
  const begun = Date.now();
  const served = await call("/v1/chat/completions",
    { body: { model, messages, max_tokens: 16, response_format: { type: "json_schema", json_schema: { name: "w", schema: wide } } } });
  assert.equal(served.status, 200, served.text);
  assert.match(JSON.parse(served.json.choices[0].message.content), /^a+$/);
  assert.ok(Date.now() - begun < 5000, `answered in ${Date.now() - begun} ms`);
  // A 150,000-value enum is over the request body limit before it reaches the grammar compiler.
  const huge = { enum: Array.from({ length: 150000 }, (_, i) => `value number ${i}`) };
  const started = Date.now();
  const r413 = await call("/v1/chat/completions",
    { body: { model, messages, response_format: { type: "json_schema", json_schema: { name: "h", schema: huge } } } });
  assert.equal(r413.status, 413, r413.text);
  assert.ok(Date.now() - started < 5000, `answered in ${Date.now() - started} ms`);
  const nested = await call("/v1/completions",
    { body: { model, prompt: "x", max_tokens: 16, structured_outputs: { regex: "(((x{1,1000}){1,1000}){1,1000})" } } });
  assert.equal(nested.status, 200, nested.text);
  assert.match(nested.json.choices[0].text, /^x+$/);
  const r = await call("/health", { method: "GET" });
  assert.equal(r.status, 200);
});

finish();
