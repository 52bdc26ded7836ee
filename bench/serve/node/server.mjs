// usage: node server.mjs PORT PACE_MS DELTAS
//
// The AI SDK (ai 6) peer of the serve benchmark: POST /api/chat answers the
// UI message stream of streamText over a scripted mock model. Step 1 streams
// DELTAS text deltas then calls the `weather` tool; step 2 (after the tool
// result) streams DELTAS text deltas and stops. Each text delta is
// "<CLOCK_MONOTONIC ns> ", taken when the model emits it.
import http from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { streamText, tool, convertToModelMessages, stepCountIs } from 'ai';
import { MockLanguageModelV3 } from 'ai/test';
import { z } from 'zod';

const [port, paceMs, deltas] = process.argv.slice(2, 5).map(Number);
if (![port, paceMs, deltas].every(Number.isInteger) || paceMs < 0 || deltas < 0) {
  console.error('usage: node server.mjs PORT PACE_MS DELTAS');
  process.exit(2);
}

const usage = {
  inputTokens: { total: 1, noCache: 1, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: deltas, text: deltas, reasoning: undefined },
};
const finish = (unified) => ({ type: 'finish', finishReason: { unified, raw: undefined }, usage });

// The chunks of one step, produced lazily so each timestamp is taken at emission.
async function* step(toolResult) {
  const id = toolResult ? 't2' : 't1';
  yield { type: 'stream-start', warnings: [] };
  yield { type: 'text-start', id };
  for (let i = 0; i < deltas; i++) {
    if (paceMs > 0) await sleep(paceMs);
    yield { type: 'text-delta', id, delta: `${process.hrtime.bigint()} ` };
  }
  yield { type: 'text-end', id };
  if (toolResult) {
    yield finish('stop');
  } else {
    yield { type: 'tool-call', toolCallId: 'call-1', toolName: 'weather', input: JSON.stringify({ city: 'Tokyo' }) };
    yield finish('tool-calls');
  }
}

const model = new MockLanguageModelV3({
  doStream: async ({ prompt }) => {
    // The mock keeps every call's options; drop them so memory stays flat under load.
    model.doStreamCalls.length = 0;
    const chunks = step(prompt[prompt.length - 1].role === 'tool');
    return {
      stream: new ReadableStream({
        async pull(controller) {
          const { value, done } = await chunks.next();
          if (done) controller.close();
          else controller.enqueue(value);
        },
        async cancel() {
          await chunks.return();
        },
      }, { highWaterMark: 0 }),
    };
  },
});

const tools = {
  weather: tool({
    description: 'weather',
    inputSchema: z.object({ city: z.string() }),
    execute: async ({ city }) => ({ city, weather: 'sunny' }),
  }),
};

async function chat(req, res) {
  let body = '';
  req.setEncoding('utf8');
  for await (const c of req) body += c;
  const { messages } = JSON.parse(body);
  const result = streamText({
    model,
    tools,
    stopWhen: stepCountIs(5),
    messages: await convertToModelMessages(messages, { tools }),
  });
  const response = result.toUIMessageStreamResponse({ originalMessages: messages });
  res.writeHead(response.status, Object.fromEntries(response.headers));
  const reader = response.body.getReader();
  res.on('close', () => { if (!res.writableFinished) reader.cancel().catch(() => {}); });
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    if (!res.write(value)) await new Promise((r) => res.once('drain', r).once('close', r));
    if (res.destroyed) return;
  }
  res.end();
}

const server = http.createServer({ noDelay: true }, (req, res) => {
  if (req.method !== 'POST' || req.url.split('?')[0] !== '/api/chat') {
    res.writeHead(404).end();
    return;
  }
  chat(req, res).catch((e) => {
    if (!res.headersSent) res.writeHead(500, { 'content-type': 'text/plain' }).end(String(e));
    else res.destroy();
  });
});
server.listen(port, '127.0.0.1', () => {
  process.stdout.write(`listening http://127.0.0.1:${port}\n`);
});
