// The official Anthropic Node SDK (npm `@anthropic-ai/sdk`, unmodified) against `m3-gateway
// serve` and `m3-engine serve` on the demo model, through the Messages API: messages whole and
// streamed (the SDK's stream helpers and the raw event sequence), system prompts, images by
// base64 and by URL answered as the model's reference answers, stop sequences and max_tokens,
// thinking, count_tokens, a tool round trip (tool_use and tool_result history with an image),
// both API key headers, and the bad-input catalog, each failure the SDK's typed error with an
// Anthropic error body while the server stays up.
// Environment: M3_BIN_DIR (m3-engine, m3-gateway), M3_TEST_DATA (tests/data), M3_WORK_DIR.
import Anthropic from '@anthropic-ai/sdk';
import assert from 'node:assert/strict';
import {readFileSync} from 'node:fs';
import path from 'node:path';

import {Checks, startStack, staticServer} from './stack.mjs';

const data = process.env.M3_TEST_DATA;
const demo = path.join(data, 'demo-model');
const samples = path.join(demo, 'samples');
const eval_ = JSON.parse(readFileSync(path.join(demo, 'eval.json'), 'utf8'));
const MODEL = 'm3-demo';
const API_KEY = 'anthropic-sdk-test-key';
const MAX_IMAGES = 4;

const media = await staticServer(samples, {
  '/not-an-image.png': {type: 'image/png', body: Buffer.from('these bytes are text, not a PNG')},
});
const stack = await startStack({
  binDir: process.env.M3_BIN_DIR,
  model: path.join(demo, 'model'),
  gatewayArgs: [
    '--served-model-name',
    MODEL,
    '--api-key',
    API_KEY,
    '--allow-media-host',
    media.host,
    '--max-images-per-request',
    String(MAX_IMAGES),
  ],
});
// The SDK appends /v1/messages itself; it sends the key as x-api-key.
const client = new Anthropic({baseURL: stack.baseUrl, apiKey: API_KEY, maxRetries: 0});

const strip = (s) => (s ?? '').replace(/^\n+/, '');
const user = (content) => [{role: 'user', content}];
// The prompt's length from a usage: Anthropic counts prefix-cache hits apart from input_tokens.
const promptTokens = (usage) => usage.input_tokens + (usage.cache_read_input_tokens ?? 0);
const textOf = (message) =>
    message.content.filter((b) => b.type === 'text').map((b) => b.text).join('');

function create(messages, extra = {}) {
  return client.messages.create({model: MODEL, max_tokens: 48, temperature: 0, messages, ...extra});
}

// A message as Anthropic defines it; returns it.
function checkMessage(m, {stopReasons = ['end_turn', 'max_tokens']} = {}) {
  assert.match(m.id, /^msg_[0-9a-f]{24}$/);
  assert.equal(m.type, 'message');
  assert.equal(m.role, 'assistant');
  assert.equal(m.model, MODEL);
  assert.ok(Array.isArray(m.content));
  for (const b of m.content) {
    assert.ok(['text', 'thinking', 'tool_use'].includes(b.type), JSON.stringify(b));
    if (b.type === 'text') assert.equal(typeof b.text, 'string');
    if (b.type === 'thinking') assert.equal(typeof b.thinking, 'string');
    if (b.type === 'tool_use') {
      assert.match(b.id, /^toolu_/);
      assert.equal(typeof b.name, 'string');
      assert.ok(b.input && typeof b.input === 'object' && !Array.isArray(b.input));
    }
  }
  assert.ok(stopReasons.includes(m.stop_reason), `stop_reason ${m.stop_reason}`);
  if (m.stop_reason !== 'stop_sequence') assert.equal(m.stop_sequence, null);
  assert.ok(m.usage.input_tokens > 0 && m.usage.output_tokens > 0, JSON.stringify(m.usage));
  return m;
}

// Streams with the SDK's helper: the text events joined, and the final message it assembles.
async function streamed(messages, extra = {}) {
  const stream =
      client.messages.stream({model: MODEL, max_tokens: 48, temperature: 0, messages, ...extra});
  let text = '';
  stream.on('text', (delta) => {
    text += delta;
  });
  const final = await stream.finalMessage();
  return {text, final};
}

// `promise` must fail with the SDK's `ErrorClass` of `status`, whose body is Anthropic's error
// object of `type`; `mentions` (when given) must appear in the message.
async function rejectsWith(promise, ErrorClass, status, type, mentions) {
  await assert.rejects(promise, (e) => {
    assert.ok(e instanceof ErrorClass, `${ErrorClass.name}, got ${e}`);
    assert.equal(e.status, status, e.message);
    assert.equal(e.error?.type, 'error', JSON.stringify(e.error));
    assert.equal(e.type, type, JSON.stringify(e.error));
    assert.equal(typeof e.error.error.message, 'string');
    assert.ok(e.error.error.message.length > 0);
    if (mentions) assert.ok(e.message.includes(mentions), `"${mentions}" in: ${e.message}`);
    return true;
  });
}

const png = (n) => readFileSync(path.join(samples, `sample${n}.png`));
const base64Image = (bytes, type = 'image/png') =>
    ({type: 'image', source: {type: 'base64', media_type: type, data: bytes.toString('base64')}});
const urlImage = (url) => ({type: 'image', source: {type: 'url', url}});
// eval.json's question n with its picture given as `image`.
function question(n, image) {
  const ref = eval_.answers[n];
  const text = ref.question[0].content.find((p) => p.type === 'text').text;
  return {ref, messages: user([image, {type: 'text', text}])};
}

const tools = [{
  name: 'paint_shape',
  description: 'Paints the shape in a colour.',
  input_schema: {
    type: 'object',
    properties: {colour: {type: 'string'}, shape: {type: 'string'}},
    required: ['colour'],
  },
}];

const checks = new Checks();

checks.add('messages.create: text, with a system prompt', async () => {
  const system = 'You describe pictures of shapes. '.repeat(8);
  const m = checkMessage(await create(user('Hello'), {system}));
  assert.ok(textOf(m).length > 0);
  // The system prompt reaches the template: the prompt is longer with it, as text blocks too.
  const bare = await create(user('Hello'));
  assert.ok(promptTokens(m.usage) > promptTokens(bare.usage) + 20);
  const blocks = await create(user('Hello'), {system: [{type: 'text', text: system}]});
  assert.equal(promptTokens(blocks.usage), promptTokens(m.usage));
});

checks.add(
    'messages.stream: the helper\'s text and final message equal the whole answer', async () => {
      const whole = await create(user('Hello'));
      const {text, final} = await streamed(user('Hello'));
      checkMessage(final);
      assert.equal(text, textOf(whole));
      assert.deepEqual(final.content, whole.content);
      assert.equal(final.stop_reason, whole.stop_reason);
      assert.deepEqual(final.usage.output_tokens, whole.usage.output_tokens);
      assert.deepEqual(final.usage.input_tokens, whole.usage.input_tokens);
    });

checks.add('stream: true gives Anthropic\'s event sequence', async () => {
  const params = {model: MODEL, max_tokens: 16, temperature: 0, messages: user('Hello')};
  const stream = await client.messages.create({...params, stream: true});
  const types = [];
  for await (const event of stream) types.push(event.type);
  assert.equal(types[0], 'message_start');
  assert.deepEqual(types.slice(-2), ['message_delta', 'message_stop']);
  const blocks = types.filter((t) => t.startsWith('content_block'));
  assert.equal(blocks[0], 'content_block_start');
  assert.equal(blocks.at(-1), 'content_block_stop');
  assert.ok(blocks.includes('content_block_delta'));
  // On the wire (the SDK drops pings): named events, a ping after message_start.
  const r = await fetch(`${stack.baseUrl}/v1/messages`, {
    method: 'POST',
    headers: {'content-type': 'application/json', 'x-api-key': API_KEY},
    body: JSON.stringify({...params, stream: true}),
  });
  assert.equal(r.status, 200);
  assert.match(r.headers.get('content-type'), /^text\/event-stream/);
  const events = (await r.text()).trim().split('\n\n').map((e) => {
    const [name, payload] = e.split('\n');
    assert.match(name, /^event: /);
    assert.match(payload, /^data: /);
    const data = JSON.parse(payload.slice(6));
    assert.equal(data.type, name.slice(7));
    return data.type;
  });
  assert.deepEqual(events.slice(0, 2), ['message_start', 'ping']);
  // The same sequence (deltas per engine step vary in number).
  const squash = (ts) => ts.filter((t, i) => t !== 'ping' && t !== ts[i - 1]);
  assert.deepEqual(squash(events), squash(types));
});

checks.add('max_tokens cuts the answer (stop_reason max_tokens)', async () => {
  for (const stream of [false, true]) {
    const m = stream ? (await streamed(user('Hello'), {max_tokens: 3})).final :
                       await create(user('Hello'), {max_tokens: 3});
    checkMessage(m, {stopReasons: ['max_tokens']});
    assert.equal(m.usage.output_tokens, 3);
  }
});

checks.add('stop_sequences end the answer (stop_reason stop_sequence)', async () => {
  const full = textOf(await create(user('Hello')));
  const words = full.trim().split(/\s+/);
  assert.ok(words.length >= 3, full);
  const stop = ` ${words[2]}`;
  for (const stream of [false, true]) {
    const m = stream ? (await streamed(user('Hello'), {stop_sequences: [stop]})).final :
                       await create(user('Hello'), {stop_sequences: [stop]});
    checkMessage(m, {stopReasons: ['stop_sequence']});
    assert.equal(m.stop_sequence, stop);
    assert.equal(textOf(m), full.slice(0, full.indexOf(stop)));
  }
});

for (const [kind, image] of [
         ['base64', () => base64Image(png(3))],
         ['url', () => urlImage(media.url('/sample3.png'))]]) {
  checks.add(`image by ${kind}: the model's reference answer, whole and streamed`, async () => {
    const {ref, messages} = question(3, image());
    const m = checkMessage(await create(messages));
    assert.equal(strip(textOf(m)), strip(ref.got));
    const {text, final} = await streamed(messages);
    assert.equal(strip(text), strip(ref.got));
    assert.deepEqual(final.content, m.content);
  });
}

checks.add('count_tokens: the prompt a create would take, images included', async () => {
  const messages = user('Hello');
  const counted = await client.messages.countTokens({model: MODEL, messages, system: 'Be brief.'});
  assert.deepEqual(Object.keys(counted), ['input_tokens']);
  const m = await create(messages, {system: 'Be brief.'});
  assert.equal(counted.input_tokens, promptTokens(m.usage));
  const {messages: withImage} = question(3, base64Image(png(3)));
  const imageCount = await client.messages.countTokens({model: MODEL, messages: withImage});
  const imageMessage = await create(withImage);
  assert.equal(imageCount.input_tokens, promptTokens(imageMessage.usage));
  assert.ok(imageCount.input_tokens > counted.input_tokens + 4, 'the image counts its tokens');
  await rejectsWith(
      client.messages.countTokens({model: 'claude-3-opus', messages}), Anthropic.NotFoundError, 404,
      'not_found_error', 'claude-3-opus');
});

checks.add('thinking enabled and disabled: valid messages', async () => {
  for (const thinking of [{type: 'enabled', budget_tokens: 1024}, {type: 'disabled'}]) {
    const m = await create(user('Hello'), {thinking, max_tokens: 2048, temperature: 1});
    checkMessage(m);
    const {final} = await streamed(user('Hello'), {thinking, max_tokens: 2048, temperature: 1});
    checkMessage(final);
  }
});

checks.add(
    'tool round trip: tools and tool_choice, then tool_use / tool_result history', async () => {
      for (const tool_choice of [{type: 'auto'}, {type: 'none'}, undefined]) {
        const m = await create(user('Paint it blue.'), {tools, tool_choice});
        checkMessage(m, {stopReasons: ['end_turn', 'max_tokens', 'tool_use']});
        if (m.stop_reason === 'tool_use') {
          assert.ok(m.content.some((b) => b.type === 'tool_use'));
        }
      }
      const history = [
        {role: 'user', content: 'Paint the shape blue.'},
        {
          role: 'assistant',
          content: [
            {type: 'text', text: 'Painting it.'},
            {
              type: 'tool_use',
              id: 'toolu_01',
              name: 'paint_shape',
              input: {colour: 'blue', shape: 'circle'},
            },
          ],
        },
        {
          role: 'user',
          content: [
            {
              type: 'tool_result',
              tool_use_id: 'toolu_01',
              content: [{type: 'text', text: 'Done:'}, base64Image(png(5))],
            },
            {type: 'text', text: 'What colour is the object in the picture?'},
          ],
        },
      ];
      const m = checkMessage(
          await create(history, {tools}), {stopReasons: ['end_turn', 'max_tokens', 'tool_use']});
      const {final} = await streamed(history, {tools});
      assert.deepEqual(final.content, m.content);
      // The tool result's image is part of the prompt.
      const counted = await client.messages.countTokens({model: MODEL, messages: history, tools});
      assert.equal(counted.input_tokens, promptTokens(m.usage));
      const noImage = structuredClone(history);
      noImage[2].content[0].content = 'Done.';
      const less = await client.messages.countTokens({model: MODEL, messages: noImage, tools});
      assert.ok(less.input_tokens + 4 < counted.input_tokens);
    });

checks.add('Authorization: Bearer works as well as x-api-key', async () => {
  const bearer =
      new Anthropic({baseURL: stack.baseUrl, authToken: API_KEY, apiKey: null, maxRetries: 0});
  checkMessage(
      await bearer.messages.create({model: MODEL, max_tokens: 8, messages: user('Hello')}));
});

// The demo model never learnt tool calls: the grammar writes the call; enums bound the values.
checks.add('tool_choice any: the answer is a call whose input follows the tool\'s schema', async () => {
  const colours = ['red', 'green', 'blue'];
  const enumTools = [{
    name: 'paint_shape',
    description: 'Paints the shape in a colour.',
    input_schema: {
      type: 'object',
      properties: {colour: {type: 'string', enum: colours}},
      required: ['colour'],
    },
  }];
  const m = checkMessage(
      await create(user('Paint it.'), {
        tools: enumTools,
        tool_choice: {type: 'any', disable_parallel_tool_use: true},
        max_tokens: 256,
      }),
      {stopReasons: ['tool_use']});
  const calls = m.content.filter((b) => b.type === 'tool_use');
  assert.equal(calls.length, 1);
  assert.equal(calls[0].name, 'paint_shape');
  assert.ok(colours.includes(calls[0].input.colour));
});

checks.add('bad input: the SDK\'s typed errors with Anthropic error bodies', async () => {
  const wrongKey = new Anthropic({baseURL: stack.baseUrl, apiKey: 'wrong', maxRetries: 0});
  await rejectsWith(
      wrongKey.messages.create({model: MODEL, max_tokens: 8, messages: user('x')}),
      Anthropic.AuthenticationError, 401, 'authentication_error');
  await rejectsWith(
      wrongKey.messages.countTokens({model: MODEL, messages: user('x')}),
      Anthropic.AuthenticationError, 401, 'authentication_error');
  await rejectsWith(
      create(user('x'), {model: 'claude-unknown'}), Anthropic.NotFoundError, 404, 'not_found_error',
      'claude-unknown');
  await rejectsWith(
      create(user('x'), {max_tokens: undefined}), Anthropic.BadRequestError, 400,
      'invalid_request_error', 'max_tokens');
  await rejectsWith(
      create(user('x'), {temperature: 3}), Anthropic.BadRequestError, 400, 'invalid_request_error',
      'temperature');
  await rejectsWith(
      create([]), Anthropic.BadRequestError, 400, 'invalid_request_error', 'messages');
  await rejectsWith(
      create([{role: 'system', content: 'x'}]), Anthropic.BadRequestError, 400,
      'invalid_request_error', 'messages[0].role');
  await rejectsWith(
      create(user([{type: 'document', source: {type: 'text', data: 'x'}}])),
      Anthropic.BadRequestError, 400, 'invalid_request_error', 'messages[0].content[0].type');
  await rejectsWith(
      create(user([base64Image(png(3), 'image/bmp')])), Anthropic.BadRequestError, 400,
      'invalid_request_error', 'messages[0].content[0].source.media_type');
  await rejectsWith(
      create(user('x'), {tools, tool_choice: {type: 'tool', name: 'nope'}}),
      Anthropic.UnprocessableEntityError, 422, 'invalid_request_error', 'nope');
  await rejectsWith(
      create(user('x'), {thinking: {type: 'enabled', budget_tokens: 10}}),
      Anthropic.BadRequestError, 400, 'invalid_request_error', 'thinking.budget_tokens');
  // Media the server cannot use, named by their field.
  await rejectsWith(
      create(user([base64Image(Buffer.from('not a picture at all'))])), Anthropic.APIError, 415,
      'invalid_request_error', 'messages[0].content[0].source.data');
  await rejectsWith(
      create(user([urlImage(media.url('/not-an-image.png'))])), Anthropic.APIError, 415,
      'invalid_request_error', 'messages[0].content[0].source.url');
  await rejectsWith(
      create(user([urlImage('http://169.254.169.254/latest/meta-data')])),
      Anthropic.BadRequestError, 400, 'invalid_request_error', 'messages[0].content[0].source.url');
  const many = Array.from({length: MAX_IMAGES + 1}, () => base64Image(png(3)));
  await rejectsWith(create(user(many)), Anthropic.ContentTooLargeError, 413, 'request_too_large');
  // Streamed requests fail the same way, before any event.
  const stream =
      client.messages.stream({model: MODEL, max_tokens: 8, messages: user('x'), temperature: -1});
  await rejectsWith(
      stream.finalMessage(), Anthropic.BadRequestError, 400, 'invalid_request_error',
      'temperature');
  // Raw requests the SDK would not send.
  for (const [body, status, type] of [
           ['{not json', 400, 'invalid_request_error'], ['[]', 400, 'invalid_request_error']]) {
    const r = await fetch(`${stack.baseUrl}/v1/messages`, {
      method: 'POST',
      headers: {'content-type': 'application/json', 'x-api-key': API_KEY},
      body,
    });
    assert.equal(r.status, status);
    const e = await r.json();
    assert.equal(e.type, 'error');
    assert.equal(e.error.type, type);
  }
  const r = await fetch(`${stack.baseUrl}/v1/messages`, {headers: {'x-api-key': API_KEY}});
  assert.equal(r.status, 405);
  assert.equal((await r.json()).error.type, 'invalid_request_error');
  assert.ok(stack.alive(), 'the gateway is still up');
  checkMessage(await create(user('Hello')));
});

await checks.run(stack);
