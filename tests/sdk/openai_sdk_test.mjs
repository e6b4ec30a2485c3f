// The official OpenAI Node SDK (npm `openai`, unmodified) against `m3-gateway serve` and
// `m3-engine serve` on the demo model: chat streamed and not, text completions, images as data
// URIs and http URLs, a video, two images in one message, a tool-call round trip, and the bad-input
// catalog, each answered with its status and an OpenAI error body while the server stays up.
// Environment: M3_BIN_DIR (m3-engine, m3-gateway), M3_TEST_DATA (tests/data), M3_WORK_DIR.
import assert from 'node:assert/strict';
import {execFileSync} from 'node:child_process';
import {mkdtempSync, readFileSync} from 'node:fs';
import path from 'node:path';
import OpenAI from 'openai';

import {Checks, closedPort, dataUri, startStack, staticServer} from './stack.mjs';

const binDir = process.env.M3_BIN_DIR;
const data = process.env.M3_TEST_DATA;
const work = mkdtempSync(path.join(process.env.M3_WORK_DIR || '/tmp', 'sdk-'));
const demo = path.join(data, 'demo-model');
const samples = path.join(demo, 'samples');
const eval_ = JSON.parse(readFileSync(path.join(demo, 'eval.json'), 'utf8'));
const MODEL = 'm3-demo';
const API_KEY = 'sdk-test-key';
const MAX_BODY = 4 << 20;
const MAX_IMAGES = 4;

// A short H.264 clip of two sample pictures, made at test time, and a corrupt copy (cut inside
// its headers).
const clip = path.join(work, 'clip.mp4');
execFileSync('/usr/bin/ffmpeg', [
  '-loglevel',
  'error',
  '-y',
  '-framerate',
  '2',
  '-loop',
  '1',
  '-t',
  '2',
  '-i',
  path.join(samples, 'sample3.png'),
  '-vf',
  'scale=112:112,format=yuv420p',
  '-c:v',
  'libx264',
  clip,
]);
const clipBytes = readFileSync(clip);
const corruptClip = Buffer.concat([clipBytes.subarray(0, 64), Buffer.alloc(2048, 0x5a)]);
const png3 = readFileSync(path.join(samples, 'sample3.png'));

const media = await staticServer(samples, {
  '/clip.mp4': {type: 'video/mp4', body: clipBytes},
  '/not-an-image.png': {type: 'image/png', body: Buffer.from('these bytes are text, not a PNG')},
  '/corrupt.mp4': {type: 'video/mp4', body: corruptClip},
});
const deadPort = await closedPort();
const stack = await startStack({
  binDir,
  model: path.join(demo, 'model'),
  gatewayArgs: [
    '--served-model-name',
    MODEL,
    '--api-key',
    API_KEY,
    '--allow-media-host',
    media.host,
    '--allow-media-host',
    `127.0.0.1:${deadPort}`,
    '--max-body-bytes',
    String(MAX_BODY),
    '--max-images-per-request',
    String(MAX_IMAGES),
    '--fetch-connect-timeout-ms',
    '2000',
    '--fetch-timeout-ms',
    '5000',
  ],
});
const client = new OpenAI({baseURL: `${stack.baseUrl}/v1`, apiKey: API_KEY, maxRetries: 0});

const text = (t) => ({type: 'text', text: t});
const image = (url) => ({type: 'image_url', image_url: {url}});
const video = (url) => ({type: 'video_url', video_url: {url}});
const user = (...content) => [{role: 'user', content}];
const COLOUR_Q = 'What colour is the object in the picture?';
// The reference answer to sample N, leading blank lines aside.
const answer = (n) => eval_.answers[n].got.replace(/^\n+/, '');
const strip = (s) => (s ?? '').replace(/^\n+/, '');

async function chat(messages, extra = {}) {
  return client.chat.completions.create({
    model: MODEL,
    messages,
    max_tokens: 32,
    temperature: 0,
    ...extra,
  });
}

// Streams a chat completion; returns the concatenated content, reasoning, finish reason, usage
// and the chunks.
async function streamChat(messages, extra = {}) {
  const stream = await client.chat.completions.create({
    model: MODEL,
    messages,
    max_tokens: 32,
    temperature: 0,
    stream: true,
    stream_options: {include_usage: true},
    ...extra,
  });
  const out = {content: '', reasoning: '', finish: null, usage: null, chunks: [], toolCalls: []};
  for await (const chunk of stream) {
    out.chunks.push(chunk);
    assert.equal(chunk.object, 'chat.completion.chunk');
    if (chunk.usage) out.usage = chunk.usage;
    for (const c of chunk.choices) {
      out.content += c.delta?.content ?? '';
      out.reasoning += c.delta?.reasoning_content ?? '';
      if (c.delta?.tool_calls) out.toolCalls.push(...c.delta.tool_calls);
      if (c.finish_reason) out.finish = c.finish_reason;
    }
  }
  return out;
}

function checkUsage(usage) {
  assert.ok(usage, 'usage is present');
  assert.ok(usage.prompt_tokens > 0 && usage.completion_tokens > 0, JSON.stringify(usage));
  assert.equal(usage.total_tokens, usage.prompt_tokens + usage.completion_tokens);
}

// The OpenAI error object every failure carries: {error: {message, type, param, code}}.
function checkErrorBody(body, status) {
  assert.ok(body && typeof body === 'object', `an error object, got ${JSON.stringify(body)}`);
  assert.equal(typeof body.message, 'string');
  assert.ok(body.message.length > 0, 'the message names the problem');
  assert.equal(typeof body.type, 'string');
  assert.ok('param' in body && 'code' in body, `param and code keys: ${JSON.stringify(body)}`);
  if (status >= 500) assert.notEqual(body.type, 'invalid_request_error');
}

// `promise` must fail with an SDK APIError of `status` whose body is an OpenAI error; `param`
// (when given) is the field it names.
async function rejectsWith(promise, status, param) {
  await assert.rejects(promise, (e) => {
    assert.ok(e instanceof OpenAI.APIError, `an APIError, got ${e}`);
    assert.equal(e.status, status, `status ${e.status}: ${e.message}`);
    checkErrorBody(e.error, status);
    if (param !== undefined) assert.equal(e.param, param, e.message);
    return true;
  });
}

// A raw HTTP request (for bodies the SDK cannot send); returns {status, body}.
async function raw(pathname, body, headers = {}) {
  const r = await fetch(`${stack.baseUrl}${pathname}`, {
    method: 'POST',
    headers: {'content-type': 'application/json', authorization: `Bearer ${API_KEY}`, ...headers},
    body,
  });
  const textBody = await r.text();
  let parsed = null;
  try {
    parsed = JSON.parse(textBody);
  } catch {
    parsed = textBody;
  }
  return {status: r.status, body: parsed};
}

const checks = new Checks();

checks.add('models.list names the served model', async () => {
  const ids = [];
  for await (const m of client.models.list()) ids.push(m.id);
  assert.deepEqual(ids, [MODEL]);
});

checks.add('chat, text, not streamed', async () => {
  const r = await chat(user(text('Hi there')), {max_tokens: 48});
  assert.equal(r.object, 'chat.completion');
  assert.equal(r.model, MODEL);
  assert.equal(r.choices.length, 1);
  assert.equal(r.choices[0].message.role, 'assistant');
  assert.equal(strip(r.choices[0].message.content), answer(44));
  assert.equal(r.choices[0].finish_reason, 'stop');
  checkUsage(r.usage);
});

checks.add('chat, text, streamed equals not streamed', async () => {
  const whole = await chat(user(text('Who are you?')), {max_tokens: 48});
  const s = await streamChat(user(text('Who are you?')), {max_tokens: 48});
  assert.equal(s.content, whole.choices[0].message.content);
  assert.equal(strip(s.content), answer(15));
  assert.equal(s.finish, 'stop');
  assert.deepEqual(s.usage, whole.usage);
  assert.ok(s.chunks.length > 3, 'the answer arrives in several chunks');
});

checks.add('chat, max_tokens cuts the answer (finish_reason length)', async () => {
  const r = await chat(user(text('Hi there')), {max_tokens: 3});
  assert.equal(r.choices[0].finish_reason, 'length');
  assert.equal(r.usage.completion_tokens, 3);
});

let imagePromptTokens = 0;
checks.add('image as data URI', async () => {
  const r = await chat(user(image(dataUri('image/png', png3)), text(COLOUR_Q)));
  assert.equal(strip(r.choices[0].message.content), answer(3));
  checkUsage(r.usage);
  imagePromptTokens = r.usage.prompt_tokens;
});

checks.add('image as http URL (allowlisted local server), streamed', async () => {
  const s = await streamChat(user(image(media.url('/sample3.png')), text(COLOUR_Q)));
  assert.equal(strip(s.content), answer(3));
  assert.equal(s.usage.prompt_tokens, imagePromptTokens);
});

checks.add('two images in one message', async () => {
  const r = await chat(
      user(image(media.url('/sample3.png')), image(dataUri('image/png', png3)), text(COLOUR_Q)),
  );
  assert.equal(typeof r.choices[0].message.content, 'string');
  checkUsage(r.usage);
  assert.ok(r.usage.prompt_tokens > imagePromptTokens, 'vision tokens of both images counted');
});

checks.add('video as http URL and as data URI', async () => {
  const byUrl = await chat(user(video(media.url('/clip.mp4')), text('What do you see?')));
  checkUsage(byUrl.usage);
  assert.equal(typeof byUrl.choices[0].message.content, 'string');
  const byData =
      await streamChat(user(video(dataUri('video/mp4', clipBytes)), text('What do you see?')));
  assert.equal(byData.content, byUrl.choices[0].message.content ?? '');
  assert.equal(byData.usage.prompt_tokens, byUrl.usage.prompt_tokens);
  const textOnly = await chat(user(text('What do you see?')), {max_tokens: 1});
  assert.ok(byUrl.usage.prompt_tokens > textOnly.usage.prompt_tokens + 4, 'video tokens counted');
});

const tools = [
  {
    type: 'function',
    function: {
      name: 'paint_shape',
      description: 'Paint the shape in a colour',
      parameters: {
        type: 'object',
        properties: {colour: {type: 'string'}, shape: {type: 'string'}},
        required: ['colour'],
      },
    },
  },
];

checks.add('tool call round trip: tools + tool_choice, then role "tool" messages', async () => {
  for (const tool_choice of ['auto', 'none']) {
    const r = await chat(user(image(media.url('/sample3.png')), text('Paint it blue.')), {
      tools,
      tool_choice,
    });
    const m = r.choices[0].message;
    assert.ok(['stop', 'length', 'tool_calls'].includes(r.choices[0].finish_reason));
    if (m.tool_calls?.length) {
      for (const call of m.tool_calls) {
        assert.equal(call.type, 'function');
        assert.equal(typeof call.id, 'string');
        assert.equal(typeof call.function.arguments, 'string');
      }
    } else {
      assert.equal(typeof m.content, 'string');
    }
  }
  const s = await streamChat(user(text('Paint it blue.')), {tools, tool_choice: 'auto'});
  assert.ok(s.finish);
  const followUp = [
    {role: 'user', content: [image(media.url('/sample3.png')), text('Paint it blue.')]},
    {
      role: 'assistant',
      content: null,
      tool_calls: [
        {
          id: 'call_1',
          type: 'function',
          function: {name: 'paint_shape', arguments: '{"colour": "blue", "shape": "circle"}'},
        },
      ],
    },
    {role: 'tool', tool_call_id: 'call_1', content: '{"ok": true}'},
  ];
  const r2 = await chat(followUp, {tools});
  assert.equal(typeof r2.choices[0].message.content, 'string');
  checkUsage(r2.usage);
  const s3 = await streamChat(followUp, {tools});
  assert.equal(s3.content, r2.choices[0].message.content);
});

checks.add('text completion, streamed and not', async () => {
  const r = await client.completions.create({
    model: MODEL,
    prompt: 'Hello',
    max_tokens: 6,
    temperature: 0,
  });
  assert.equal(r.object, 'text_completion');
  assert.equal(typeof r.choices[0].text, 'string');
  checkUsage(r.usage);
  const stream = await client.completions.create({
    model: MODEL,
    prompt: 'Hello',
    max_tokens: 6,
    temperature: 0,
    stream: true,
  });
  let joined = '';
  for await (const chunk of stream) joined += chunk.choices[0]?.text ?? '';
  assert.equal(joined, r.choices[0].text);
});

async function inFlight() {
  const r =
      await fetch(`${stack.baseUrl}/metrics`, {headers: {authorization: `Bearer ${API_KEY}`}});
  const m = (await r.text()).match(/^m3_gateway_requests_in_flight (\d+)/m);
  assert.ok(m, 'the in-flight gauge is exported');
  return Number(m[1]);
}

// Until the gateway has no request in flight (within 2 s, else `message` fails the check).
async function untilIdle(message) {
  const deadline = Date.now() + 2000;
  while ((await inFlight()) !== 0) {
    assert.ok(Date.now() < deadline, message);
    await new Promise((r) => setTimeout(r, 20));
  }
}

// A long generation (thousands of tokens: seconds on a CPU engine) must reach the client token
// by token, so its first chunk arrives while it is still running; and a client that leaves
// must end it, not let it run to max_tokens.
checks.add('streaming is incremental, and a client that leaves aborts the generation', async () => {
  // The earlier checks' requests may still be closing (the gauge counted 2 once, in CI).
  await untilIdle('the earlier requests ended');
  const stream = await client.completions.create({
    model: MODEL,
    prompt: 'Hello',
    max_tokens: 4000,
    ignore_eos: true,
    temperature: 0,
    stream: true,
  });
  // Leaving the loop aborts the request (the SDK's iterator), so the gauge is read inside it.
  let running = null;
  for await (const chunk of stream) {
    if (chunk.choices[0]?.text) {
      running = await inFlight();
      break;
    }
  }
  assert.equal(running, 1, 'the first chunk arrived while the generation ran');
  await untilIdle('the generation ended within 2 s of the client leaving');
});

// The bad-input catalog.
checks.add('malformed JSON: 400', async () => {
  const r = await raw('/v1/chat/completions', '{"model": "m3-demo", "messages": [');
  assert.equal(r.status, 400);
  checkErrorBody(r.body.error, 400);
});

checks.add('wrong types: 400 naming the field', async () => {
  await rejectsWith(
      client.chat.completions.create({model: MODEL, messages: 'hi'}), 400, 'messages');
  await rejectsWith(chat(user(text('hi')), {temperature: 'hot'}), 400, 'temperature');
  await rejectsWith(chat(user(text('hi')), {max_tokens: 'many'}), 400, 'max_tokens');
  await rejectsWith(chat([{role: 'user', content: 42}]), 400);
  const r = await raw('/v1/chat/completions', '[1, 2, 3]');
  assert.equal(r.status, 400);
  checkErrorBody(r.body.error, 400);
});

checks.add('unknown model: 404, streamed or not', async () => {
  await rejectsWith(
      client.chat.completions.create({model: 'gpt-nothing', messages: user(text('hi'))}), 404);
  await rejectsWith(
      client.chat.completions.create({
        model: 'gpt-nothing',
        messages: user(text('hi')),
        stream: true,
      }),
      404,
  );
});

checks.add('missing or wrong API key: 401', async () => {
  const anon = new OpenAI({baseURL: `${stack.baseUrl}/v1`, apiKey: 'wrong', maxRetries: 0});
  await rejectsWith(anon.chat.completions.create({model: MODEL, messages: user(text('hi'))}), 401);
  const r = await raw('/v1/chat/completions', '{}', {authorization: ''});
  assert.equal(r.status, 401);
  checkErrorBody(r.body.error, 401);
});

const badImage = (url) => chat(user(image(url), text(COLOUR_Q)));
checks.add('bad URL scheme: 400', async () => {
  await rejectsWith(badImage('gopher://example.com/x.png'), 400);
  await rejectsWith(badImage('ftp://example.com/x.png'), 400);
  await rejectsWith(badImage('not a url'), 400);
});

checks.add('file:// URL: 400', async () => {
  await rejectsWith(badImage('file:///etc/passwd'), 400);
  await rejectsWith(badImage(`file://${path.join(samples, 'sample3.png')}`), 400);
});

checks.add('private address: 400 (SSRF guard)', async () => {
  await rejectsWith(badImage('http://10.0.0.1/x.png'), 400);
  await rejectsWith(badImage('http://169.254.169.254/latest/meta-data/'), 400);
  await rejectsWith(badImage('http://192.168.1.1/x.png'), 400);
  // Loopback is private too: the media server's port is allowlisted, others are not.
  await rejectsWith(badImage(`http://127.0.0.1:${stack.enginePort}/x.png`), 400);
});

// The client's URL cannot be fetched: a 400 naming the item, as OpenAI answers.
checks.add('unreachable host: 400', async () => {
  await rejectsWith(
      badImage(`http://127.0.0.1:${deadPort}/x.png`), 400, 'messages[0].content[0].image_url.url');
});

checks.add('non-image bytes: 415', async () => {
  await rejectsWith(badImage(dataUri('image/png', 'these bytes are text, not a PNG')), 415);
  await rejectsWith(badImage(media.url('/not-an-image.png')), 415);
  await rejectsWith(badImage(media.url('/missing.png')), 400);
});

checks.add('corrupt video: 4xx', async () => {
  for (const url of [dataUri('video/mp4', corruptClip), media.url('/corrupt.mp4')]) {
    await assert.rejects(chat(user(video(url), text('What do you see?'))), (e) => {
      assert.ok(e instanceof OpenAI.APIError, String(e));
      assert.ok([400, 415, 422].includes(e.status), `status ${e.status}: ${e.message}`);
      checkErrorBody(e.error, e.status);
      return true;
    });
  }
});

checks.add('oversize body: 413', async () => {
  const big = JSON.stringify({
    model: MODEL,
    messages: user(text('x'.repeat(MAX_BODY + 1024))),
  });
  const r = await raw('/v1/chat/completions', big);
  assert.equal(r.status, 413);
  checkErrorBody(r.body.error, 413);
  await rejectsWith(chat(user(text('y'.repeat(MAX_BODY + 1024)))), 413);
});

checks.add('too many images: 413', async () => {
  const parts = [];
  for (let i = 0; i <= MAX_IMAGES; i++) parts.push(image(media.url('/sample3.png')));
  await rejectsWith(chat(user(...parts, text(COLOUR_Q))), 413);
});

checks.add('n over the bound of 16: 400', async () => {
  await rejectsWith(chat(user(text('hi')), {n: 17}), 400, 'n');
});

checks.add('n = 2: two choices with their indices', async () => {
  const r = await chat(user(text('hi')), {n: 2, max_tokens: 4});
  if (r.choices.length !== 2 || r.choices[0].index !== 0 || r.choices[1].index !== 1) {
    throw new Error('n = 2 gave ' + JSON.stringify(r.choices));
  }
});

checks.add('negative max_tokens: 400', async () => {
  await rejectsWith(chat(user(text('hi')), {max_tokens: -1}), 400, 'max_tokens');
  await rejectsWith(
      chat(user(text('hi')), {max_completion_tokens: -5}), 400, 'max_completion_tokens');
});

checks.add('the server stays up: a final request succeeds', async () => {
  assert.ok(stack.alive(), 'the gateway is still running');
  const health = await fetch(`${stack.baseUrl}/health`);
  assert.equal(health.status, 200);
  const r = await chat(user(image(dataUri('image/png', png3)), text(COLOUR_Q)));
  assert.equal(strip(r.choices[0].message.content), answer(3));
});

await checks.run(stack);
