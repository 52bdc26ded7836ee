// The AI SDK's own client against `llmchain serve`: a subclass of `AbstractChat` with
// `DefaultChatTransport`, as `useChat` runs it in a browser (React, Vue and Svelte wrap
// the same class). Run by `tests/ai_sdk_client.rs` with the `ai` package (6.x or 7.x)
// resolvable from this file's directory.
//
//   node ai_sdk_client.mjs http://127.0.0.1:PORT
//
// Every response is also read with the package's own chunk schema and
// `readUIMessageStream({terminateOnError: true})`. At a sync point the script prints
// `SYNC <name> <json>` and waits for a line on stdin (the test restarts the server or
// approves from the CLI meanwhile). The last line is `OK <json>` with what the test
// checks on its side; a failure exits 1 with the assertion.

import assert from 'node:assert/strict';
import { createInterface } from 'node:readline';
import {
  AbstractChat,
  DefaultChatTransport,
  lastAssistantMessageIsCompleteWithApprovalResponses,
  parseJsonEventStream,
  readUIMessageStream,
  uiMessageChunkSchema,
} from 'ai';

const base = process.argv[2];
const api = `${base}/api/chat`;
const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();

async function sync(name, value = {}) {
  console.log(`SYNC ${name} ${JSON.stringify(value)}`);
  const { value: line, done } = await lines.next();
  assert.ok(!done, `stdin closed at ${name}`);
  return line;
}

// Every response the transport reads, read again by the package's own parser.
const readings = [];

async function read(stream, message) {
  const chunks = parseJsonEventStream({ stream, schema: uiMessageChunkSchema }).pipeThrough(
    new TransformStream({
      transform(chunk, controller) {
        if (!chunk.success) {
          throw new Error(
            `a chunk the client's schema rejects: ${JSON.stringify(chunk.rawValue)}: ${chunk.error.message}`,
          );
        }
        controller.enqueue(chunk.value);
      },
    }),
  );
  let last;
  for await (const m of readUIMessageStream({ stream: chunks, message, terminateOnError: true })) {
    last = m;
  }
  return last;
}

// A fetch that hands the transport one branch of the body and reads the other.
function checkingFetch(chatOf) {
  return async (url, init) => {
    const response = await fetch(url, init);
    if (response.status !== 200 || !response.body) return response;
    assert.equal(response.headers.get('content-type'), 'text/event-stream');
    assert.equal(response.headers.get('x-vercel-ai-ui-message-stream'), 'v1');
    const last = chatOf()?.lastMessage;
    const message = last?.role === 'assistant' ? structuredClone(last) : undefined;
    const [mine, theirs] = response.body.tee();
    readings.push(
      read(mine, message).then(
        (m) => ({ url: String(url), ok: true, message: m }),
        (e) => ({ url: String(url), ok: false, error: String(e?.message ?? e) }),
      ),
    );
    return new Response(theirs, { status: response.status, headers: response.headers });
  };
}

class State {
  status = 'ready';
  error = undefined;
  messages;
  constructor(messages = []) {
    this.messages = messages;
  }
  pushMessage = (m) => {
    this.messages = this.messages.concat(m);
  };
  popMessage = () => {
    this.messages = this.messages.slice(0, -1);
  };
  replaceMessage = (i, m) => {
    this.messages = [...this.messages.slice(0, i), m, ...this.messages.slice(i + 1)];
  };
  snapshot = (v) => structuredClone(v);
}

class Chat extends AbstractChat {
  finished = [];
  errors = [];
  constructor(id, messages = []) {
    let self;
    super({
      id,
      state: new State(messages),
      transport: new DefaultChatTransport({ api, fetch: checkingFetch(() => self) }),
      sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses,
      onFinish: (o) => {
        this.finished.push(o);
        this.waiter?.();
      },
      onError: (e) => this.errors.push(String(e?.message ?? e)),
    });
    self = this;
  }
  // Resolves at the next `onFinish` (the automatic resend after an approval runs after
  // `addToolApprovalResponse` has returned).
  nextFinish(timeoutMs = 30000) {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no onFinish in ${timeoutMs} ms`)), timeoutMs);
      this.waiter = () => {
        clearTimeout(timer);
        this.waiter = undefined;
        resolve();
      };
    });
  }
  text(message = this.lastMessage) {
    return message.parts.filter((p) => p.type === 'text').map((p) => p.text).join('');
  }
  tool(name, message = this.lastMessage) {
    return message.parts.find((p) => p.type === `tool-${name}`);
  }
}

async function reload(id) {
  const r = await fetch(`${base}/api/chats/${id}`);
  assert.equal(r.status, 200);
  return (await r.json()).messages;
}

async function approve(chat, name, approved, reason) {
  const part = chat.tool(name);
  assert.equal(part?.state, 'approval-requested', JSON.stringify(chat.lastMessage));
  const finished = chat.nextFinish();
  await chat.addToolApprovalResponse({ id: part.approval.id, approved, reason });
  await finished;
  assert.equal(chat.status, 'ready', chat.errors.join('; '));
}

const report = {};

// 1. A text chat, streamed and stored.
{
  const chat = new Chat('text-1');
  await chat.sendMessage({ text: 'Say hello.' });
  assert.equal(chat.status, 'ready', chat.errors.join('; '));
  assert.equal(chat.messages.length, 2);
  assert.equal(chat.text(), 'Hello from llmchain.');
  const stored = await reload('text-1');
  assert.equal(stored.length, 2);
  assert.equal(stored[1].parts.filter((p) => p.type === 'text').map((p) => p.text).join(''), 'Hello from llmchain.');
}

// 2. A call that needs approval, approved: the automatic resend runs it once.
{
  const chat = new Chat('approve-1');
  await chat.sendMessage({ text: 'Write hello to approved.txt.' });
  const part = chat.tool('write_file');
  assert.equal(part.state, 'approval-requested');
  assert.deepEqual(part.input, { path: 'approved.txt', content: 'hello' });
  // The rule that asked rides beside the call as a data part the client keeps.
  const ruled = chat.lastMessage.parts.find((p) => p.type === 'data-policy');
  assert.deepEqual(ruled?.data, { toolCallId: part.toolCallId, rule: 'writes-ask', effect: 'ask', reason: 'A person checks writes.' }, JSON.stringify(chat.lastMessage));
  await approve(chat, 'write_file', true);
  assert.equal(chat.messages.length, 2, 'the answer goes on in the same assistant message');
  assert.equal(chat.tool('write_file').state, 'output-available');
  assert.equal(chat.text().endsWith('Wrote approved.txt.'), true, chat.text());
}

// 3. A denial: the call never runs, the model hears the reason.
{
  const chat = new Chat('deny-1');
  await chat.sendMessage({ text: 'Write no to denied.txt.' });
  await approve(chat, 'write_file', false, 'not today');
  assert.equal(chat.tool('write_file').state, 'output-denied');
  assert.equal(chat.text().endsWith('Understood, not written.'), true, chat.text());
  const stored = await reload('deny-1');
  const part = stored[1].parts.find((p) => p.type === 'tool-write_file');
  assert.equal(part.state, 'output-denied');
  assert.equal(part.approval.reason, 'not today');
  assert.equal(stored[1].parts.find((p) => p.type === 'data-policy')?.data.rule, 'writes-ask');
}

// 4. Regenerate drops the last answer and answers again.
{
  const chat = new Chat('regen-1');
  await chat.sendMessage({ text: 'Tell a joke.' });
  assert.equal(chat.text(), 'Joke one.');
  await chat.regenerate();
  assert.equal(chat.status, 'ready', chat.errors.join('; '));
  assert.equal(chat.messages.length, 2);
  assert.equal(chat.text(), 'Joke two.');
  const stored = await reload('regen-1');
  assert.equal(stored.length, 2);
  assert.equal(stored[1].parts.filter((p) => p.type === 'text').map((p) => p.text).join(''), 'Joke two.');
}

// 5. The server is killed and restarted between the approval request and the answer:
// nothing is in flight (204 to resume), a reload shows the request, and the approval is
// taken from the store.
{
  const chat = new Chat('restart-1');
  await chat.sendMessage({ text: 'Write to restart.txt.' });
  assert.equal(chat.tool('write_file').state, 'approval-requested');
  await sync('restart');
  await chat.resumeStream();
  assert.equal(chat.status, 'ready');
  const reloaded = new Chat('restart-1', await reload('restart-1'));
  assert.equal(reloaded.tool('write_file').state, 'approval-requested');
  assert.equal(reloaded.tool('write_file').approval.id, chat.tool('write_file').approval.id);
  await approve(reloaded, 'write_file', true);
  assert.equal(reloaded.tool('write_file').state, 'output-available');
  assert.equal(reloaded.text().endsWith('Wrote it after the restart.'), true, reloaded.text());
}

// 6. Resume: a client that stops reading does not stop the answer; another one resumes
// it (the message from its start, then live) and a reload shows it whole.
{
  const first = new Chat('slow-1');
  const sent = first.sendMessage({ text: 'A long answer, please.' });
  const deadline = Date.now() + 20000;
  while (!(first.lastMessage?.role === 'assistant' && first.text().length > 0)) {
    assert.ok(Date.now() < deadline, 'no text streamed');
    await new Promise((r) => setTimeout(r, 20));
  }
  await first.stop();
  await sent;
  const second = new Chat('slow-1', [first.messages[0]]);
  await second.resumeStream();
  assert.equal(second.status, 'ready', second.errors.join('; '));
  const whole = 'One. Two. Three. Four. Five. Six. Seven. Eight.';
  assert.equal(second.text(), whole);
  const stored = await reload('slow-1');
  assert.equal(stored[1].parts.filter((p) => p.type === 'text').map((p) => p.text).join(''), whole);
  const after = new Chat('slow-1', stored);
  await after.resumeStream();
  assert.equal(after.messages.length, 2, 'nothing in flight: 204, nothing added');
}

// 7. An approval answered from the command line (`llmchain reviews approve`) is honoured:
// the server goes on with the chat, and a reload shows the result.
{
  const chat = new Chat('cli-1');
  await chat.sendMessage({ text: 'Write to cli.txt.' });
  const part = chat.tool('write_file');
  assert.equal(part.state, 'approval-requested');
  await sync('approve-from-cli', { approvalId: part.approval.id });
  const deadline = Date.now() + 30000;
  let stored;
  for (;;) {
    stored = await reload('cli-1');
    const p = stored[1].parts.find((x) => x.type === 'tool-write_file');
    if (p.state === 'output-available' && stored[1].parts.some((x) => x.type === 'text')) break;
    assert.ok(Date.now() < deadline, `not answered: ${JSON.stringify(stored)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  const text = stored[1].parts.filter((p) => p.type === 'text').map((p) => p.text).join('');
  assert.equal(text.endsWith('Approved from the CLI.'), true, text);
  // A client asking again with its stale copy is answered from the store: the call is
  // not pending any more, and approving it again is the same answer, not an error.
  const stale = new Chat('cli-1', chat.messages);
  await approve(stale, 'write_file', true);
  assert.equal(stale.tool('write_file').state, 'output-available');
}

// 8. A stream error: the model's provider refuses; the client gets an error chunk.
{
  const chat = new Chat('error-1');
  await chat.sendMessage({ text: 'This will fail.' });
  assert.equal(chat.status, 'error');
  assert.match(chat.error?.message ?? '', /model is overloaded on purpose/);
}

// Every response read without error, but the one the client stopped itself (6) and the
// provider's refusal (8).
const results = await Promise.all(readings);
const failed = results.filter((r) => !r.ok).map((r) => r.error);
assert.equal(failed.length, 2, JSON.stringify(failed));
assert.match(failed[0], /aborted/);
assert.match(failed[1], /model is overloaded on purpose/);
report.responses = results.length;
console.log(`OK ${JSON.stringify(report)}`);
process.exit(0);
