// The official OpenAI and Anthropic Node SDKs against `m3-gateway serve` and `m3-engine serve` on
// the m3-agent test model: a tiny MiniMax-M3 trained (scripts/golden/train_m3_agent_model.py) to
// answer the conversations of tests/data/m3-agent/eval.json with memorized replies: reasoning,
// then tool calls (one call; two calls with array and nested object arguments) or text. Unlike
// the random chat-e2e weights, the engine really writes `<mm:think>` and the namespace-token
// tool-call block, so this checks the whole stack on real output: every case and thinking mode
// answers as trained, whole and streamed; reasoning streams before the tool calls; each call's
// id and name arrive before its last argument fragment, and the fragments join to its arguments;
// Anthropic streams a thinking block, then tool_use blocks of input_json_delta fragments; no
// special-token text reaches any field; a tool result sent back (the agent loop's next turn)
// gets the trained answer.
// Environment: M3_BIN_DIR (m3-engine, m3-gateway), M3_TEST_DATA (tests/data), M3_WORK_DIR.
import Anthropic from '@anthropic-ai/sdk';
import assert from 'node:assert/strict';
import {readFileSync} from 'node:fs';
import path from 'node:path';
import OpenAI from 'openai';

import {Checks, startStack} from './stack.mjs';

const data = process.env.M3_TEST_DATA;
const MODEL = 'm3-agent';
const dir = path.join(data, 'm3-agent');
const {cases} = JSON.parse(readFileSync(path.join(dir, 'eval.json'), 'utf8'));

const stack = await startStack({
  binDir: process.env.M3_BIN_DIR,
  model: path.join(dir, 'model'),
  gatewayArgs: ['--served-model-name', MODEL],
});
const openai = new OpenAI({baseURL: `${stack.baseUrl}/v1`, apiKey: 'unused', maxRetries: 0});
const anthropic = new Anthropic({baseURL: stack.baseUrl, apiKey: 'unused', maxRetries: 0});

const SPECIAL = [
  '<mm:think>', '</mm:think>', ']<]minimax[>[', '<tool_call>', '</tool_call>', '<invoke', '[e~[',
  ']~b]'
];
function noSpecialText(value) {
  const s = JSON.stringify(value);
  for (const t of SPECIAL) assert.ok(!s.includes(t), `${t} in ${s}`);
}

function find(name, mode) {
  const c = cases.find((x) => x.name === name && x.thinking_mode === mode);
  assert.ok(c, `eval.json has ${name} in thinking mode ${mode}`);
  return c;
}

// eval.json keeps the template's view of a request (tool-call arguments as objects); the API
// sends arguments as JSON text.
function chatMessages(messages) {
  return messages.map((m) => !m.tool_calls ? m : {
    ...m,
    tool_calls: m.tool_calls.map(
        (t) =>
            ({...t, function: {...t.function, arguments: JSON.stringify(t.function.arguments)}})),
  });
}

function chatRequest(c, extra = {}) {
  const body = {
    model: MODEL,
    messages: chatMessages(c.request.messages),
    max_tokens: 400,
    temperature: 0,
    ...extra,
  };
  if (c.request.tools) body.tools = c.request.tools;
  if (c.thinking_mode !== null) body.chat_template_kwargs = {thinking_mode: c.thinking_mode};
  return body;
}

function assertCalls(calls, want) {
  assert.equal(calls.length, want.length);
  calls.forEach((call, i) => {
    assert.equal(call.type, 'function');
    assert.match(call.id, /\S/);
    assert.equal(call.function.name, want[i].name);
    assert.deepEqual(JSON.parse(call.function.arguments), want[i].arguments);
  });
}

// The streamed chat completion, kept chunk by chunk.
async function streamed(body) {
  const stream = await openai.chat.completions.create(
      {...body, stream: true, stream_options: {include_usage: true}});
  const chunks = [];
  for await (const chunk of stream) {
    noSpecialText(chunk);
    chunks.push(chunk);
  }
  return chunks;
}

// Joins a chat stream into a message and checks its order: all reasoning before the first tool
// call, and each call's first delta (index, id, name) in an earlier chunk than its last argument
// fragment, i.e. the call was announced while its tokens were still being written.
function joinChat(chunks) {
  const out = {reasoning: '', content: '', calls: [], finish: null, usage: null};
  let firstCallChunk = null;
  chunks.forEach((chunk, n) => {
    if (chunk.usage) out.usage = chunk.usage;
    for (const c of chunk.choices) {
      const d = c.delta ?? {};
      if (d.reasoning_content) {
        assert.equal(firstCallChunk, null, 'reasoning after a tool call');
        out.reasoning += d.reasoning_content;
      }
      out.content += d.content ?? '';
      for (const t of d.tool_calls ?? []) {
        if (firstCallChunk === null) firstCallChunk = n;
        let call = out.calls[t.index];
        if (!call) {
          assert.equal(t.index, out.calls.length, 'tool-call indexes in order');
          assert.match(t.id ?? '', /\S/, 'the first delta of a call carries its id');
          assert.equal(t.type, 'function');
          assert.match(t.function?.name ?? '', /\S/, 'the first delta of a call carries its name');
          call = {
            id: t.id,
            type: 'function',
            function: {name: t.function.name, arguments: ''},
            first: n,
            last: n,
            fragments: 0
          };
          out.calls[t.index] = call;
        } else {
          assert.equal(t.id ?? call.id, call.id);
          assert.equal(t.function?.name ?? call.function.name, call.function.name);
        }
        if (t.function?.arguments) {
          call.function.arguments += t.function.arguments;
          call.last = n;
          call.fragments++;
        }
      }
      if (c.finish_reason) out.finish = c.finish_reason;
    }
  });
  for (const call of out.calls) {
    assert.ok(call.fragments >= 2, `arguments streamed in ${call.fragments} fragment(s)`);
    assert.ok(call.first < call.last, 'the call was announced before its last fragment');
  }
  return out;
}

const checks = new Checks();

for (const c of cases) {
  const label = `${c.name}, thinking mode ${c.thinking_mode ?? '(unset)'}`;
  const want = c.expected;
  const finish = want.tool_calls ? 'tool_calls' : 'stop';
  checks.add(`chat completion: ${label} answers as trained, whole and streamed`, async () => {
    const whole = await openai.chat.completions.create(chatRequest(c));
    noSpecialText(whole);
    const m = whole.choices[0].message;
    assert.equal(whole.choices[0].finish_reason, finish);
    assert.equal(m.reasoning_content ?? null, want.reasoning_content);
    assert.equal(m.content ?? null, want.content);
    if (want.tool_calls)
      assertCalls(m.tool_calls, want.tool_calls);
    else
      assert.equal((m.tool_calls ?? []).length, 0);
    assert.equal(whole.usage.prompt_tokens, c.prompt_ids.length);
    assert.equal(whole.usage.completion_tokens, c.reply_ids.length);

    const s = joinChat(await streamed(chatRequest(c)));
    assert.equal(s.finish, finish);
    assert.equal(s.reasoning, want.reasoning_content ?? '');
    assert.equal(s.content, want.content ?? '');
    if (want.tool_calls) {
      assertCalls(s.calls, want.tool_calls);
    } else {
      assert.equal(s.calls.length, 0);
    }
    // Prefix-cache hits differ between the two requests; the token counts do not.
    assert.equal(s.usage.prompt_tokens, whole.usage.prompt_tokens);
    assert.equal(s.usage.completion_tokens, whole.usage.completion_tokens);
  });
}

// Counted in tokens: the stream's logprobs say which tokens each chunk carries, and the token
// that completes a call's `</invoke>` is its last. Each call's first delta must come earlier.
checks.add('chat completion: each tool call is announced before its last token', async () => {
  for (const c of [find('weather', 'enabled'), find('picnic', 'enabled')]) {
    const stream =
        await openai.chat.completions.create({...chatRequest(c), stream: true, logprobs: true});
    const tokens = [];
    const announcedAt = [];
    for await (const chunk of stream) {
      for (const ch of chunk.choices) {
        noSpecialText(ch.delta ?? {});
        for (const t of ch.logprobs?.content ?? []) tokens.push(t.token);
        for (const t of ch.delta?.tool_calls ?? []) announcedAt[t.index] ??= tokens.length;
      }
    }
    assert.equal(tokens.length, c.reply_ids.length);
    const ends = [];
    let text = '';
    tokens.forEach((t, i) => {
      const before = text.split('</invoke>').length;
      text += t;
      if (text.split('</invoke>').length > before) ends.push(i + 1);
    });
    assert.equal(ends.length, c.expected.tool_calls.length);
    assert.equal(announcedAt.length, ends.length);
    announcedAt.forEach(
        (n, i) => assert.ok(
            n < ends[i],
            `${c.name} call ${i}: announced after ${n} tokens, its last token is token ${
                ends[i]}`));
  }
});

checks.add(
    'chat completion: the streamed tool call and its result make the next turn', async () => {
      const first = find('weather', 'enabled');
      const s = joinChat(await streamed(chatRequest(first)));
      const next = find('weather_result', 'enabled');
      const tool = next.request.messages.at(-1);
      const messages = [
        ...first.request.messages,
        {
          role: 'assistant',
          content: null,
          reasoning_content: s.reasoning,
          tool_calls: s.calls.map((t) => ({id: t.id, type: 'function', function: t.function})),
        },
        {role: 'tool', tool_call_id: s.calls[0].id, content: tool.content},
      ];
      const r = await openai.chat.completions.create({...chatRequest(next), messages});
      noSpecialText(r);
      assert.equal(r.usage.prompt_tokens, next.prompt_ids.length);
      assert.equal(r.choices[0].message.reasoning_content, next.expected.reasoning_content);
      assert.equal(r.choices[0].message.content, next.expected.content);
      assert.equal(r.choices[0].finish_reason, 'stop');
    });

// The Anthropic form of an eval.json request's tools.
const anthropicTools = (tools) => tools.map((t) => ({
                                              name: t.function.name,
                                              description: t.function.description,
                                              input_schema: t.function.parameters,
                                            }));

function anthropicParams(c, thinking) {
  const p = {
    model: MODEL,
    messages: [{role: 'user', content: c.request.messages[0].content}],
    max_tokens: 1100,
    temperature: 0,
    thinking,
  };
  if (c.request.tools) p.tools = anthropicTools(c.request.tools);
  return p;
}

// The blocks a trained reply becomes.
function wantBlocks(want) {
  const blocks = [];
  if (want.reasoning_content) blocks.push({type: 'thinking', thinking: want.reasoning_content});
  if (want.content) blocks.push({type: 'text', text: want.content});
  for (const call of want.tool_calls ?? []) {
    blocks.push({type: 'tool_use', name: call.name, input: call.arguments});
  }
  return blocks;
}

function comparable(message) {
  return message.content.map((b) => {
    if (b.type === 'thinking') return {type: 'thinking', thinking: b.thinking};
    if (b.type === 'tool_use') return {type: 'tool_use', name: b.name, input: b.input};
    return {type: b.type, text: b.text};
  });
}

// A raw Messages stream joined into blocks, checking each block's deltas are of its kind and a
// tool_use block starts (id, name, empty input) before its last input_json_delta fragment.
async function anthropicStream(params) {
  const stream = await anthropic.messages.create({...params, stream: true});
  const events = [];
  for await (const e of stream) {
    noSpecialText(e);
    events.push(e);
  }
  assert.equal(events[0].type, 'message_start');
  assert.equal(events.at(-1).type, 'message_stop');
  const blocks = [];
  let stop = null;
  events.forEach((e, n) => {
    if (e.type === 'content_block_start') {
      assert.equal(e.index, blocks.length);
      const b = {...e.content_block, start: n, fragments: 0, last: n, json: ''};
      if (b.type === 'tool_use') {
        assert.match(b.id, /\S/);
        assert.match(b.name, /\S/);
        assert.deepEqual(b.input, {});
      }
      blocks.push(b);
    } else if (e.type === 'content_block_delta') {
      const b = blocks[e.index];
      const kind = {thinking: 'thinking_delta', text: 'text_delta', tool_use: 'input_json_delta'};
      if (e.delta.type !== 'signature_delta') assert.equal(e.delta.type, kind[b.type]);
      if (e.delta.type === 'thinking_delta') b.thinking += e.delta.thinking;
      if (e.delta.type === 'text_delta') b.text += e.delta.text;
      if (e.delta.type === 'input_json_delta') {
        b.json += e.delta.partial_json;
        b.fragments++;
        b.last = n;
      }
    } else if (e.type === 'message_delta') {
      stop = e.delta.stop_reason;
    }
  });
  for (const b of blocks.filter((x) => x.type === 'tool_use')) {
    assert.ok(b.fragments >= 2, `input streamed in ${b.fragments} fragment(s)`);
    assert.ok(b.start < b.last);
    b.input = JSON.parse(b.json);
  }
  return {content: blocks, stop_reason: stop};
}

for (const [name, thinking, mode] of [
         ['weather', {type: 'enabled', budget_tokens: 1024}, 'enabled'],
         ['picnic', {type: 'enabled', budget_tokens: 1024}, 'enabled'],
         ['picnic', {type: 'disabled'}, 'disabled'],
         ['capital', {type: 'enabled', budget_tokens: 1024}, 'enabled'],
]) {
  const c = find(name, mode);
  const stopReason = c.expected.tool_calls ? 'tool_use' : 'end_turn';
  checks.add(`messages: ${name}, thinking ${thinking.type}, whole and streamed`, async () => {
    const whole = await anthropic.messages.create(anthropicParams(c, thinking));
    noSpecialText(whole);
    assert.deepEqual(comparable(whole), wantBlocks(c.expected));
    assert.equal(whole.stop_reason, stopReason);
    assert.equal(whole.usage.output_tokens, c.reply_ids.length);

    const s = await anthropicStream(anthropicParams(c, thinking));
    assert.deepEqual(comparable(s), wantBlocks(c.expected));
    assert.equal(s.stop_reason, stopReason);
  });
}

checks.add('messages: the streamed tool_use and its tool_result make the next turn', async () => {
  const first = find('weather', 'enabled');
  const thinking = {type: 'enabled', budget_tokens: 1024};
  const s = await anthropicStream(anthropicParams(first, thinking));
  const use = s.content.find((b) => b.type === 'tool_use');
  const next = find('weather_result', 'enabled');
  const params = {
    ...anthropicParams(first, thinking),
    messages: [
      {role: 'user', content: first.request.messages[0].content},
      {
        role: 'assistant',
        content: s.content.map(
            (b) => b.type === 'thinking' ?
                {type: 'thinking', thinking: b.thinking, signature: b.signature} :
                {type: 'tool_use', id: b.id, name: b.name, input: b.input}),
      },
      {
        role: 'user',
        content: [{
          type: 'tool_result',
          tool_use_id: use.id,
          content: next.request.messages.at(-1).content,
        }],
      },
    ],
  };
  const r = await anthropic.messages.create(params);
  noSpecialText(r);
  assert.equal(
      r.usage.input_tokens + (r.usage.cache_read_input_tokens ?? 0), next.prompt_ids.length);
  assert.deepEqual(comparable(r), wantBlocks(next.expected));
  assert.equal(r.stop_reason, 'end_turn');
  assert.ok(stack.alive());
});

await checks.run(stack);
