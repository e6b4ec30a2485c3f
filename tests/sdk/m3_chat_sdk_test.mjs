// The official OpenAI Node SDK against `m3-gateway serve` on the m3-chat test model (the real
// MiniMax-M3 template; `<mm:think>`, `</mm:think>` and the tool namespace token are special
// tokens of its tokenizer, chat-e2e's with the same ids) in front of `m3-engine serve` on
// chat-e2e/model, with --default-chat-template-kwargs. The random model's words cannot be
// steered (tests/openai/m3_chat_stream_test.cpp drives the parsers with scripted output), so
// this checks what the SDK sees of the protocol: each thinking mode reaches the template (its
// marker ends the prompt), the answers are well formed and streamed equal to whole, reasoning
// stays out of content, no special-token text reaches any field, an agent's history (reasoning
// and tool calls sent back) is accepted, and bad kwargs are 400s naming the field.
// Environment: M3_BIN_DIR (m3-engine, m3-gateway), M3_TEST_DATA (tests/data), M3_WORK_DIR.
import assert from 'node:assert/strict';
import path from 'node:path';
import OpenAI from 'openai';

import {Checks, startStack} from './stack.mjs';

const binDir = process.env.M3_BIN_DIR;
const data = process.env.M3_TEST_DATA;
const MODEL = 'm3-chat';

const stack = await startStack({
  binDir,
  model: path.join(data, 'chat-e2e', 'model'),
  gatewayModel: path.join(data, 'm3-chat', 'model'),
  gatewayArgs: [
    '--served-model-name',
    MODEL,
    '--default-chat-template-kwargs',
    '{"thinking_mode": "enabled"}',
  ],
});
const client = new OpenAI({baseURL: `${stack.baseUrl}/v1`, apiKey: 'unused', maxRetries: 0});

const SPECIAL = ['<mm:think>', '</mm:think>', ']<]minimax[>[', '[e~[', ']~b]'];
function noSpecialText(value) {
  const s = JSON.stringify(value);
  for (const t of SPECIAL) assert.ok(!s.includes(t), `${t} in ${s}`);
}

const tools = [{
  type: 'function',
  function: {
    name: 'get_weather',
    parameters: {
      type: 'object',
      properties: {city: {type: 'string'}, days: {type: 'integer'}},
      required: ['city'],
    },
  },
}];

// An agent's conversation: its earlier turn's reasoning and tool call are sent back.
const history = [
  {role: 'user', content: 'What is the weather in Paris?'},
  {
    role: 'assistant',
    content: null,
    reasoning_content: 'I should ask the tool.',
    tool_calls: [{
      id: 'call_1',
      type: 'function',
      function: {name: 'get_weather', arguments: '{"city": "Paris", "days": 2}'},
    }],
  },
  {role: 'tool', tool_call_id: 'call_1', content: '{"sky": "sunny"}'},
  {role: 'assistant', content: 'It is sunny.', reasoning: 'The tool answered.'},
  {role: 'user', content: 'And tomorrow?'},
];

function request(mode, extra = {}) {
  const body = {model: MODEL, messages: history, tools, max_tokens: 12, temperature: 0, ...extra};
  if (mode !== undefined) body.chat_template_kwargs = {thinking_mode: mode};
  return body;
}

async function lastPromptToken(mode) {
  const body = {model: MODEL, messages: history, tools, return_token_strs: true};
  if (mode !== undefined) body.chat_template_kwargs = {thinking_mode: mode};
  const r = await fetch(`${stack.baseUrl}/tokenize`, {
    method: 'POST',
    headers: {'content-type': 'application/json'},
    body: JSON.stringify(body),
  });
  assert.equal(r.status, 200);
  const j = await r.json();
  return j.token_strs[j.token_strs.length - 1];
}

async function streamed(body) {
  const stream = await client.chat.completions.create(
      {...body, stream: true, stream_options: {include_usage: true}});
  const out = {content: '', reasoning: '', finish: null, usage: null, toolCalls: []};
  for await (const chunk of stream) {
    noSpecialText(chunk);
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

const checks = new Checks();

checks.add('the server default thinking mode applies; a request overrides it', async () => {
  assert.equal(await lastPromptToken(undefined), '<mm:think>');
  assert.equal(await lastPromptToken('enabled'), '<mm:think>');
  assert.equal(await lastPromptToken('disabled'), '</mm:think>');
  assert.notEqual(await lastPromptToken('adaptive'), '<mm:think>');
});

for (const mode of [undefined, 'enabled', 'disabled', 'adaptive']) {
  checks.add(`thinking mode ${mode ?? '(server default)'}: well formed, streamed = whole`,
             async () => {
               const whole = await client.chat.completions.create(request(mode, {logprobs: true}));
               noSpecialText(whole.choices[0].message);
               const m = whole.choices[0].message;
               const finish = whole.choices[0].finish_reason;
               assert.ok(['stop', 'length', 'tool_calls'].includes(finish), finish);
               assert.equal(finish === 'tool_calls', (m.tool_calls ?? []).length > 0);
               // What the model wrote, special tokens included (each token's own text).
               const raw = whole.choices[0].logprobs.content.map((t) => t.token).join('');
               assert.ok(raw.length > 0);
               const content = m.content ?? '';
               const reasoning = m.reasoning_content ?? '';
               if ((mode ?? 'enabled') === 'enabled') {
                 // The prompt opened the reasoning: it all is reasoning until the model closes it.
                 if (!raw.includes('</mm:think>')) {
                   assert.equal(content, '');
                   assert.ok(reasoning.length > 0);
                 }
               } else if (!raw.includes('<mm:think>')) {
                 assert.equal(reasoning, '');
                 assert.ok(content.length > 0);
               }
               const s = await streamed(request(mode));
               assert.equal(s.content, content);
               assert.equal(s.reasoning, reasoning);
               assert.equal(s.finish, finish);
               assert.equal(s.usage.prompt_tokens, whole.usage.prompt_tokens);
             });
}

checks.add('bad chat_template_kwargs and reasoning fields: 400 naming the field', async () => {
  const rejects = (body, param, code) =>
      assert.rejects(client.chat.completions.create(body), (e) => {
        assert.ok(e instanceof OpenAI.APIError, `an APIError, got ${e}`);
        assert.equal(e.status, 400, e.message);
        assert.equal(e.param, param, e.message);
        assert.equal(e.code, code, e.message);
        assert.ok(e.message.includes(param), e.message);
        return true;
      });
  await rejects(request('sometimes'), 'chat_template_kwargs.thinking_mode', 'invalid_value');
  await rejects({...request(undefined), chat_template_kwargs: {thinking_mode: false}},
                'chat_template_kwargs.thinking_mode', 'invalid_type');
  const bad = structuredClone(history);
  bad[3].reasoning_content = {text: 'x'};
  await rejects({...request(undefined), messages: bad}, 'messages[3].reasoning_content',
                'invalid_type');
  assert.ok(stack.alive());
});

await checks.run(stack);
