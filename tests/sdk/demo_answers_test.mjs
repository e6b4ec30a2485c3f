// The demo model answers right through the real stack: for each samples/sampleN.png of
// tests/data/demo-model, the OpenAI SDK asks the question eval.json's answers[N] asked (its
// parts in the same order, the picture as a data URI and as an http URL from a local server),
// streamed and not, and the content (leading blank lines aside) must equal the reference's `got`
// with empty reasoning. Also the text-only greetings of eval.json.
// Environment: M3_BIN_DIR (m3-engine, m3-gateway), M3_TEST_DATA (tests/data).
import assert from 'node:assert/strict';
import {readdirSync, readFileSync} from 'node:fs';
import path from 'node:path';
import OpenAI from 'openai';

import {Checks, dataUri, startStack, staticServer} from './stack.mjs';

const demo = path.join(process.env.M3_TEST_DATA, 'demo-model');
const samples = path.join(demo, 'samples');
const eval_ = JSON.parse(readFileSync(path.join(demo, 'eval.json'), 'utf8'));
const media = await staticServer(samples);
// The default served name: the model directory's name.
const stack = await startStack({
  binDir: process.env.M3_BIN_DIR,
  model: path.join(demo, 'model'),
  gatewayArgs: ['--allow-media-host', media.host],
});
const client = new OpenAI({baseURL: `${stack.baseUrl}/v1`, apiKey: 'unused', maxRetries: 0});
const strip = (s) => (s ?? '').replace(/^\n+/, '');

// eval.json's question with each {"type": "image"} part given `url`.
function messagesFor(question, url) {
  return question.map(
      (m) => ({
        role: m.role,
        content: typeof m.content === 'string' ?
            m.content :
            m.content.map((p) => (p.type === 'image' ? {type: 'image_url', image_url: {url}} : p)),
      }));
}

async function ask(messages, stream) {
  const req = {model: 'model', messages, temperature: 0, max_tokens: 48};
  if (!stream) {
    const r = await client.chat.completions.create(req);
    const m = r.choices[0].message;
    return {
      content: m.content,
      reasoning: m.reasoning_content ?? '',
      finish: r.choices[0].finish_reason
    };
  }
  const s = await client.chat.completions.create({...req, stream: true});
  const out = {content: '', reasoning: '', finish: null};
  for await (const chunk of s) {
    for (const c of chunk.choices) {
      out.content += c.delta?.content ?? '';
      out.reasoning += c.delta?.reasoning_content ?? '';
      if (c.finish_reason) out.finish = c.finish_reason;
    }
  }
  return out;
}

const checks = new Checks();
const pictures = readdirSync(samples).filter((f) => /^sample\d+\.png$/.test(f)).sort();
assert.equal(pictures.length, 8, 'eight sample pictures');

checks.add('the model is listed under its directory name', async () => {
  const list = await client.models.list();
  assert.deepEqual(list.data.map((m) => m.id), ['model']);
});

for (const file of pictures) {
  const n = Number(file.match(/\d+/)[0]);
  const ref = eval_.answers[n];
  const question = ref.question[0].content.find((p) => p.type === 'text').text;
  const bytes = readFileSync(path.join(samples, file));
  for (const [kind, url] of [
           ['data URI', dataUri('image/png', bytes)], ['http URL', media.url(`/${file}`)]]) {
    for (const stream of [false, true]) {
      checks.add(
          `${file} "${question}" (${kind}, ${stream ? 'streamed' : 'not streamed'})`, async () => {
            const a = await ask(messagesFor(ref.question, url), stream);
            assert.equal(strip(a.content), strip(ref.got));
            assert.equal(a.reasoning, '', 'no reasoning');
            assert.equal(a.finish, 'stop');
          });
    }
  }
}

for (const n of [15, 44]) {
  const ref = eval_.answers[n];
  checks.add(`text only: "${ref.question[0].content}"`, async () => {
    for (const stream of [false, true]) {
      const a = await ask(messagesFor(ref.question, null), stream);
      assert.equal(strip(a.content), strip(ref.got));
    }
  });
}

await checks.run(stack);
