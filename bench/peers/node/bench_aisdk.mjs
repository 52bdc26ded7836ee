// The Vercel AI SDK on the peer workloads, on its real path: `@ai-sdk/openai`'s chat
// model `doStream` with a custom `fetch` that returns the workload bytes as a
// ReadableStream of 64 KiB chunks (SSE parsing, zod chunk validation, the tool-call
// tracker). C times `doGenerate` up to the moment it calls `fetch` (message conversion
// plus `JSON.stringify` of the body). One workload per process (run.sh applies the
// 60 s limit): node bench_aisdk.mjs <data_dir> <workload>. Prints one JSON line.
// D: `streamText` with `createOpenAI({ baseURL })` (Node's own fetch, undici) against the
// local d-server, until `result.toolCalls` resolves: node bench_aisdk.mjs <data_dir> D <base_url>.
import { readFileSync } from "node:fs";
import { createOpenAI } from "@ai-sdk/openai";
import { jsonSchema, streamText, tool } from "ai";

const CHUNK = 64 * 1024;
const [dataDir, workload] = process.argv.slice(2);
const expect = JSON.parse(readFileSync(`${dataDir}/expect.json`, "utf8"));

function replayFetch(body) {
  return async () =>
    new Response(
      new ReadableStream({
        start(controller) {
          for (let i = 0; i < body.length; i += CHUNK) controller.enqueue(body.subarray(i, i + CHUNK));
          controller.close();
        },
      }),
      { status: 200, headers: { "content-type": "text/event-stream" } },
    );
}

async function timeit(f, budgetMs = 2000, maxIters = 20) {
  const samples = [];
  const start = performance.now();
  while (samples.length < maxIters && (samples.length === 0 || performance.now() - start < budgetMs)) {
    const t = performance.now();
    await f();
    samples.push((performance.now() - t) / 1000);
  }
  samples.sort((a, b) => a - b);
  return [samples[Math.floor(samples.length / 2)], samples.length];
}

async function decode(model, want) {
  const { stream } = await model.doStream({
    prompt: [{ role: "user", content: [{ type: "text", text: "go" }] }],
  });
  const lens = [];
  const reader = stream.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    if (value.type === "tool-call") lens.push(JSON.stringify(JSON.parse(value.input)).length);
    if (value.type === "error") throw new Error(String(value.error));
  }
  if (JSON.stringify(lens) !== JSON.stringify(want)) throw new Error(`AI SDK assembled different calls: ${lens.slice(0, 3)}`);
}

function prompt(c) {
  const p = [{ role: "system", content: c.system }];
  for (const r of c.rounds) {
    p.push({ role: "user", content: [{ type: "text", text: r.user }] });
    p.push({
      role: "assistant",
      content: r.calls.map((k) => ({ type: "tool-call", toolCallId: k.id, toolName: k.name, input: k.arguments })),
    });
    p.push({
      role: "tool",
      content: r.results.map((x) => ({
        type: "tool-result",
        toolCallId: x.id,
        toolName: x.name,
        output: { type: "text", value: x.content },
      })),
    });
  }
  return p;
}

class Sent extends Error {}

async function workloadD(baseURL, want) {
  const model = createOpenAI({ apiKey: "sk-bench", baseURL }).chat("gpt-4o-2024-08-06");
  const tools = {
    write_file: tool({
      description: "Writes a file",
      inputSchema: jsonSchema({
        type: "object",
        properties: { content: { type: "string" } },
        required: ["content"],
      }),
    }),
  };
  const once = async () => {
    const result = streamText({ model, prompt: "Write the lookup table module.", tools, maxRetries: 0 });
    const [calls, text] = await Promise.all([result.toolCalls, result.text]);
    const lens = calls.map((c) => JSON.stringify(c.input).length);
    if (JSON.stringify(lens) !== JSON.stringify(want.arguments)) throw new Error(`AI SDK assembled different calls: ${lens}`);
    if (text.length !== want.text) throw new Error(`AI SDK assembled a different text: ${text.length}`);
  };
  const wall = [];
  const cpu = [];
  const start = performance.now();
  while (wall.length < 20 && (wall.length === 0 || performance.now() - start < 2000)) {
    const t = performance.now();
    const c = process.cpuUsage();
    await once();
    const d = process.cpuUsage(c);
    cpu.push((d.user + d.system) / 1e6);
    wall.push((performance.now() - t) / 1000);
  }
  wall.sort((a, b) => a - b);
  cpu.sort((a, b) => a - b);
  const mid = Math.floor(wall.length / 2);
  return { seconds: wall[mid], cpu_seconds: cpu[mid], iters: wall.length };
}

async function main() {
  let result;
  if (workload === "D") {
    const r = await workloadD(process.argv[4], expect.D);
    console.log(JSON.stringify({ impl: "aisdk", workload, ...r }));
    return;
  }
  if (workload === "C") {
    const c = JSON.parse(readFileSync(`${dataDir}/C.json`, "utf8"));
    const p = prompt(c);
    let n = 0;
    const model = createOpenAI({
      apiKey: "sk-bench",
      baseURL: "http://127.0.0.1:9/v1",
      fetch: async (_url, init) => {
        n = JSON.parse(init.body).messages.length;
        throw new Sent();
      },
    }).chat("gpt-bench");
    const encode = async () => {
      try {
        await model.doGenerate({ prompt: p });
      } catch (e) {
        if (!(e instanceof Sent) && !(e?.cause instanceof Sent)) throw e;
      }
    };
    await encode();
    if (n < 2000) throw new Error(`encoded ${n} messages`);
    result = await timeit(encode);
  } else {
    const body = new Uint8Array(readFileSync(`${dataDir}/${workload}.sse`));
    const want = expect[workload];
    const model = createOpenAI({ apiKey: "sk-bench", baseURL: "http://127.0.0.1:9/v1", fetch: replayFetch(body) }).chat("gpt-bench");
    const big = body.length > 10 * 1024 * 1024;
    result = await timeit(() => decode(model, want), 2000, big ? 3 : 20);
  }
  console.log(JSON.stringify({ impl: "aisdk", workload, seconds: result[0], iters: result[1] }));
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
