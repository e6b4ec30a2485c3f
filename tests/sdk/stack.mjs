// The serving stack the SDK tests drive, as real processes on loopback: `m3-engine serve` and
// `m3-gateway serve` on free ports (each prints the port it bound), a static HTTP server for
// media URLs inside this process, and a small sequential check runner. Every process started
// here is killed when the tests end, however they end.
import {spawn} from 'node:child_process';
import {readFileSync} from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';

const children = new Set();

function killAll() {
  for (const child of children) {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  }
}
process.on('exit', killAll);
for (const sig of ['SIGINT', 'SIGTERM']) {
  process.on(sig, () => {
    killAll();
    process.exit(1);
  });
}

// Starts `program args`, resolves with the first match of `pattern` in its stdout; rejects when
// the process exits first or `timeoutMs` passes. The process's output is kept for failure logs.
function startProcess(name, program, args, pattern, timeoutMs) {
  const child = spawn(program, args, {stdio: ['ignore', 'pipe', 'pipe']});
  children.add(child);
  child.log = '';
  const keep = (chunk) => {
    child.log += chunk.toString();
    if (child.log.length > 200000) child.log = child.log.slice(-100000);
  };
  child.stderr.on('data', keep);
  return new Promise((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => {
      reject(new Error(`${name} did not start in ${timeoutMs} ms:\n${child.log}${out}`));
    }, timeoutMs);
    child.stdout.on('data', (chunk) => {
      keep(chunk);
      out += chunk.toString();
      const m = out.match(pattern);
      if (m) {
        clearTimeout(timer);
        resolve({child, match: m});
      }
    });
    child.on('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`${name} exited (${code ?? signal}) before it was ready:\n${child.log}`));
    });
  });
}

async function waitReady(baseUrl, timeoutMs) {
  const deadline = Date.now() + timeoutMs;
  let last = '';
  while (Date.now() < deadline) {
    try {
      const r = await fetch(`${baseUrl}/ready`);
      if (r.status === 200) return;
      last = `status ${r.status}: ${await r.text()}`;
    } catch (e) {
      last = String(e);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`the gateway was not ready in ${timeoutMs} ms (${last})`);
}

// A port nothing listens on: bound, then closed again.
export async function closedPort() {
  const server = net.createServer();
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  const {port} = server.address();
  await new Promise((r) => server.close(r));
  return port;
}

// Serves `routes` (path -> {type, body}) and the files of `dir` on 127.0.0.1, any free port.
export async function staticServer(dir, routes = {}) {
  const server = http.createServer((req, res) => {
    const url = new URL(req.url, 'http://x');
    const route = routes[url.pathname];
    if (route) {
      res.writeHead(200, {'content-type': route.type, 'content-length': route.body.length});
      res.end(route.body);
      return;
    }
    const file = path.join(dir, path.normalize(url.pathname).replace(/^(\.\.[/\\])+/, ''));
    try {
      const body = readFileSync(file);
      const type = file.endsWith('.png') ? 'image/png' : 'application/octet-stream';
      res.writeHead(200, {'content-type': type, 'content-length': body.length});
      res.end(body);
    } catch {
      res.writeHead(404, {'content-type': 'text/plain'});
      res.end('not found');
    }
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  const {port} = server.address();
  return {port, host: `127.0.0.1:${port}`, url: (p) => `http://127.0.0.1:${port}${p}`, server};
}

// Starts an engine on `model` and a gateway in front of it (on `gatewayModel`, default the same
// directory: another one must hold the same model with other tokenizer or template files).
// `gatewayArgs` are appended to `m3-gateway serve`; returns {baseUrl, gateway, engine, stop()}.
export async function startStack(
    {binDir, model, gatewayModel = model, gatewayArgs = [], engineArgs = []}) {
  const engine = await startProcess(
      'm3-engine serve',
      path.join(binDir, 'm3-engine'),
      ['serve', '--model', model, '--host', '127.0.0.1', '--port', '0', ...engineArgs],
      /listening on port (\d+)/,
      120000,
  );
  const enginePort = Number(engine.match[1]);
  const gateway = await startProcess(
      'm3-gateway serve',
      path.join(binDir, 'm3-gateway'),
      [
        'serve',
        '--model',
        gatewayModel,
        '--host',
        '127.0.0.1',
        '--port',
        '0',
        '--engine',
        `127.0.0.1:${enginePort}`,
        ...gatewayArgs,
      ],
      /http=[^\s:]+:(\d+)/,
      60000,
  );
  const baseUrl = `http://127.0.0.1:${gateway.match[1]}`;
  await waitReady(baseUrl, 60000);
  return {
    baseUrl,
    enginePort,
    gateway: gateway.child,
    engine: engine.child,
    alive() { return gateway.child.exitCode === null && gateway.child.signalCode === null; },
    logs() {
      return `--- m3-gateway log ---\n${gateway.child.log}\n--- m3-engine log ---\n${
          engine.child.log}`;
    },
  };
}

// Runs named async checks one after another and reports each; the process exits non-zero when
// any failed (with the servers' logs), zero when all passed.
export class Checks {
  constructor() { this.cases = []; }
  add(name, fn) { this.cases.push({name, fn}); }
  async run(stack) {
    let failed = 0;
    for (const {name, fn} of this.cases) {
      const t0 = Date.now();
      try {
        await fn();
        console.log(`ok   ${name} (${Date.now() - t0} ms)`);
      } catch (e) {
        failed++;
        console.log(`FAIL ${name}\n     ${(e && e.stack) || e}`);
      }
    }
    console.log(`${this.cases.length - failed}/${this.cases.length} checks passed`);
    if (failed && stack) console.log(stack.logs().slice(-20000));
    killAll();
    process.exit(failed ? 1 : 0);
  }
}

export function dataUri(type, bytes) {
  return `data:${type};base64,${Buffer.from(bytes).toString('base64')}`;
}
