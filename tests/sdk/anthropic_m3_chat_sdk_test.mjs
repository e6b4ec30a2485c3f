// The official Anthropic Node SDK against `m3-gateway serve` on the m3-chat test model (the real
// MiniMax-M3 template and special tokens) in front of `m3-engine serve` on chat-e2e/model, with
// --default-chat-template-kwargs. The random model's words cannot be steered, so each Messages
// request is checked against the same conversation sent as a chat completion to the same server
// at temperature 0: the thinking blocks are its reasoning_content, the text its content, the
// tool_use blocks its tool calls, the stop reason its finish reason, whole and streamed, for each
// thinking setting (thinking enabled / disabled / absent = the server's default), with an agent's
// history (thinking and tool_use sent back, tool results); no special-token text anywhere.
// Environment: M3_BIN_DIR (m3-engine, m3-gateway), M3_TEST_DATA (tests/data), M3_WORK_DIR.
import Anthropic from '@anthropic-ai/sdk';
import assert from 'node:assert/strict';
import path from 'node:path';
import OpenAI from 'openai';

import {Checks, startStack} from './stack.mjs';

const data = process.env.M3_TEST_DATA;
const MODEL = 'm3-chat';

const stack = await startStack({
  binDir: process.env.M3_BIN_DIR,
  model: path.join(data, 'chat-e2e', 'model'),
  gatewayModel: path.join(data, 'm3-chat', 'model'),
  gatewayArgs: [
    '--served-model-name',
    MODEL,
    '--default-chat-template-kwargs',
    '{"thinking_mode": "enabled"}',
  ],
});
const anthropic = new Anthropic({baseURL: stack.baseUrl, apiKey: 'unused', maxRetries: 0});
const openai = new OpenAI({baseURL: `${stack.baseUrl}/v1`, apiKey: 'unused', maxRetries: 0});

const SPECIAL = ['<mm:think>', '</mm:think>', ']<]minimax[>[', '[e~[', ']~b]'];
function noSpecialText(value) {
  const s = JSON.stringify(value);
  for (const t of SPECIAL) assert.ok(!s.includes(t), `${t} in ${s}`);
}

const schema = {
  type: 'object',
  properties: {city: {type: 'string'}, days: {type: 'integer'}},
  required: ['city'],
};
const SYSTEM = 'You answer about the weather.';

// One agent conversation in both APIs' words.
const anthropicHistory = [
  {role: 'user', content: 'What is the weather in Paris?'},
  {
    role: 'assistant',
    content: [
      {type: 'thinking', thinking: 'I should ask the tool.', signature: ''},
      {type: 'tool_use', id: 'toolu_1', name: 'get_weather', input: {city: 'Paris', days: 2}},
    ],
  },
  {
    role: 'user',
    content: [
      {type: 'tool_result', tool_use_id: 'toolu_1', content: '{"sky": "sunny"}'},
      {type: 'text', text: 'And tomorrow?'},
    ],
  },
];
const openaiHistory = [
  {role: 'system', content: SYSTEM},
  {role: 'user', content: 'What is the weather in Paris?'},
  {
    role: 'assistant',
    content: '',
    reasoning_content: 'I should ask the tool.',
    tool_calls: [{
      id: 'toolu_1',
      type: 'function',
      function: {name: 'get_weather', arguments: '{"city": "Paris", "days": 2}'},
    }],
  },
  {role: 'tool', tool_call_id: 'toolu_1', content: '{"sky": "sunny"}'},
  {role: 'user', content: [{type: 'text', text: 'And tomorrow?'}]},
];

const STOP = {
  stop: 'end_turn',
  length: 'max_tokens',
  tool_calls: 'tool_use'
};

// The Anthropic message the chat completion `c` corresponds to (ids aside).
function expectedFrom(c) {
  const m = c.choices[0].message;
  const blocks = [];
  if (m.reasoning_content) blocks.push({type: 'thinking', thinking: m.reasoning_content});
  if ((m.content ?? '').trim()) blocks.push({type: 'text', text: m.content});
  for (const call of m.tool_calls ?? []) {
    blocks.push(
        {type: 'tool_use', name: call.function.name, input: JSON.parse(call.function.arguments)});
  }
  return {blocks, stop: STOP[c.choices[0].finish_reason], usage: c.usage};
}

// A message's blocks without what differs by design (ids, empty signatures).
function comparable(message) {
  return message.content.map((b) => {
    if (b.type === 'thinking') return {type: 'thinking', thinking: b.thinking};
    if (b.type === 'tool_use') return {type: 'tool_use', name: b.name, input: b.input};
    return {type: b.type, text: b.text};
  });
}

const checks = new Checks();

for (const thinking of [undefined, {type: 'enabled', budget_tokens: 1024}, {type: 'disabled'}]) {
  const label = thinking ? `thinking ${thinking.type}` : 'thinking absent (server default)';
  checks.add(`${label}: messages equal the chat completion, whole and streamed`, async () => {
    const params = {
      model: MODEL,
      system: SYSTEM,
      messages: anthropicHistory,
      tools: [{name: 'get_weather', input_schema: schema}],
      max_tokens: 1100,
      temperature: 0,
    };
    if (thinking) params.thinking = thinking;
    const chat = {
      model: MODEL,
      messages: openaiHistory,
      tools: [{type: 'function', function: {name: 'get_weather', parameters: schema}}],
      max_tokens: 1100,
      temperature: 0,
    };
    if (thinking) chat.chat_template_kwargs = {thinking_mode: thinking.type};
    const want = expectedFrom(await openai.chat.completions.create(chat));

    const whole = await anthropic.messages.create(params);
    noSpecialText(whole);
    assert.deepEqual(comparable(whole), want.blocks);
    assert.equal(whole.stop_reason, want.stop);
    assert.equal(
        whole.usage.input_tokens + (whole.usage.cache_read_input_tokens ?? 0),
        want.usage.prompt_tokens);
    assert.equal(whole.usage.output_tokens, want.usage.completion_tokens);

    const stream = anthropic.messages.stream(params);
    const events = [];
    stream.on('streamEvent', (e) => {
      noSpecialText(e);
      events.push(e.type);
    });
    const final = await stream.finalMessage();
    assert.deepEqual(comparable(final), want.blocks);
    assert.equal(final.stop_reason, want.stop);
    assert.equal(events[0], 'message_start');
    assert.equal(events.at(-1), 'message_stop');
  });
}

checks.add('the thinking setting reaches the template', async () => {
  // enabled opens the reasoning in the prompt, disabled closes it: the prompts differ by it,
  // and the absent setting is the server's default (enabled).
  const count = async (thinking) => (await anthropic.messages.countTokens({
                                      model: MODEL,
                                      messages: anthropicHistory,
                                      ...(thinking ? {thinking} : {}),
                                    })).input_tokens;
  const enabled = await count({type: 'enabled', budget_tokens: 1024});
  const disabled = await count({type: 'disabled'});
  assert.equal(await count(undefined), enabled);
  const tokenize = async (mode) => {
    const r = await fetch(`${stack.baseUrl}/tokenize`, {
      method: 'POST',
      headers: {'content-type': 'application/json'},
      body: JSON.stringify({
        model: MODEL,
        messages: openaiHistory.slice(1),
        chat_template_kwargs: {thinking_mode: mode},
      }),
    });
    return (await r.json()).count;
  };
  assert.equal(enabled, await tokenize('enabled'));
  assert.equal(disabled, await tokenize('disabled'));
  assert.ok(stack.alive());
});

await checks.run(stack);
