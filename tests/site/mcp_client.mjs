// What the recorders share (tests/site/record*.mjs, tests/site/check.mjs, tests/record/record_*.mjs):
//   parseArgs        the options of a scenario recorder: <install-dir> [--base] [--out] [--only] [--chromium]
//   playwrightServer, cdmcpServer
//                    how a pinned MCP server is started from its npm folder (flags, environment)
//   McpClient        JSON-RPC over the server's stdio, one JSON message a line, every message logged
//                    ({"seq","dir","msg"}); close() ends the server and every process it started
//   recordSession    one recording: a fresh server in an empty temporary directory, initialize, tools/list
//   Transcript       the scripted model's assistant turns of tool calls (ids call_1, call_2, ...)
//   resultOf         what a client forwards to the model of one tools/call response
//   openaiBody, anthropicBody, writeSession, bytesOf, keepArtifacts, filesIn, jsonText, logText
//                    the two request bodies of a transcript, and the files of a recording

import { spawn } from 'node:child_process';
import readline from 'node:readline';
import fs from 'node:fs';
import path from 'node:path';
import os from 'node:os';
import crypto from 'node:crypto';
import { fileURLToPath } from 'node:url';

export const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

const sleep = ms => new Promise(r => setTimeout(r, ms));

// ---------------------------------------------------------------- arguments
// <install-dir> [--base URL] [--out DIR] [--only a,b] [--chromium PATH], over `defaults`; `more` maps any
// other flag to a function (opts, value) that stores its value.
export function parseArgs(argv, { usage, defaults = {}, more = {} }) {
  const opts = { base: 'http://127.0.0.1:8431', chromium: '/usr/bin/chromium', only: null, out: null, install: null,
    ...defaults };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--base') opts.base = argv[++i].replace(/\/$/, '');
    else if (a === '--out') opts.out = argv[++i];
    else if (a === '--only') opts.only = argv[++i].split(',');
    else if (a === '--chromium') opts.chromium = argv[++i];
    else if (Object.hasOwn(more, a)) more[a](opts, argv[++i]);
    else if (!opts.install) opts.install = a;
    else throw new Error(`unexpected argument ${a}`);
  }
  if (!opts.install) {
    console.error(`usage: ${usage}`);
    process.exit(2);
  }
  return opts;
}

// ------------------------------------------------------------------ servers
// A server is started as `node <script> <args>` with <env> over this process's environment; `shown` is
// the command as the recordings name it, `info` what their summary.json says of the server.

// The pinned installs of tests/mcp/node (scripts/test runs `npm ci` in each).
export const pinnedInstall = dir => path.join(REPO, 'tests', 'mcp', 'node', dir);

// @playwright/mcp: <bin> --headless --isolated --no-sandbox --executable-path <chromium>; the bin is
// `mcp-server-playwright` up to 0.0.56 and `playwright-mcp` from 0.0.83.
export function playwrightServer(install, chromium) {
  const pkgDir = path.join(path.resolve(install), 'node_modules/@playwright/mcp');
  const pkg = JSON.parse(fs.readFileSync(path.join(pkgDir, 'package.json'), 'utf8'));
  const binName = ['playwright-mcp', 'mcp-server-playwright'].find(b => pkg.bin && pkg.bin[b]);
  if (!binName) throw new Error(`no playwright-mcp binary in ${pkgDir}/package.json`);
  const args = ['--headless', '--isolated', '--no-sandbox', '--executable-path', chromium];
  const playwright = pkg.dependencies && (pkg.dependencies['playwright'] || pkg.dependencies['playwright-core']);
  return { kind: 'playwright', pkg, version: pkg.version, script: path.join(pkgDir, pkg.bin[binName]), args, env: {},
    binName, shown: [binName, ...args],
    info: { package: `@playwright/mcp@${pkg.version}`, playwright, binary: binName, server_args: args } };
}

// chrome-devtools-mcp: --headless --isolated --executablePath <chromium> --chromeArg=--no-sandbox
// --no-usage-statistics --no-performance-crux [extraArgs], with CHROME_DEVTOOLS_MCP_NO_USAGE_STATISTICS=1.
export function cdmcpServer(install, chromium, extraArgs = []) {
  const pkgDir = path.join(path.resolve(install), 'node_modules/chrome-devtools-mcp');
  const pkg = JSON.parse(fs.readFileSync(path.join(pkgDir, 'package.json'), 'utf8'));
  const script = path.join(pkgDir, pkg.bin['chrome-devtools-mcp']);
  if (!fs.existsSync(script)) throw new Error(`no chrome-devtools-mcp entry point at ${script}`);
  const args = ['--headless', '--isolated', '--executablePath', chromium, '--chromeArg=--no-sandbox',
    '--no-usage-statistics', '--no-performance-crux', ...extraArgs];
  const env = { CHROME_DEVTOOLS_MCP_NO_USAGE_STATISTICS: '1' };
  const shown = ['chrome-devtools-mcp', ...args];
  return { kind: 'cdmcp', pkg, version: pkg.version, script, args, env, binName: 'chrome-devtools-mcp', shown,
    info: { package: `chrome-devtools-mcp@${pkg.version}`, server_command: shown, server_env: env } };
}

// Starts a server in `cwd`. Options: tmp (its TMPDIR), timeoutMs (how long a request waits, default 90 s).
export function startServer(spec, cwd, options = {}) {
  return new McpClient(process.execPath, [spec.script, ...spec.args], { cwd, env: spec.env, ...options });
}

// ---------------------------------------------------------------- processes
// Both servers start the browser in a process group of its own, so ending the server's group is not
// enough. Every server gets a random marker in its environment, which the browser inherits; on the way
// out (close(), or the exit of this process, also on SIGINT/SIGTERM) every process group with a member
// that carries the marker, or names the server's TMPDIR, is killed: what this process started, nothing else.
const MARK_VAR = 'STALEGUARD_RECORDER';
const live = new Set();   // clients whose processes are to be ended on the way out

const pgidOf = pid => Number(fs.readFileSync(`/proc/${pid}/stat`, 'latin1').replace(/^.*\) /s, '').split(' ')[2]);
const OWN_PGID = pgidOf('self');

function procsMarked(mark, dir) {
  const out = [];
  for (const pid of fs.readdirSync('/proc').filter(p => /^\d+$/.test(p)).map(Number)) {
    if (pid === process.pid) continue;
    try {
      const env = fs.readFileSync(`/proc/${pid}/environ`, 'latin1');
      const cmd = fs.readFileSync(`/proc/${pid}/cmdline`, 'latin1');
      if (env.split('\0').includes(`${MARK_VAR}=${mark}`) || (dir && cmd.includes(dir))) out.push({ pid, pgid: pgidOf(pid) });
    } catch { /* gone, or not ours to read */ }
  }
  return out;
}

function killMarked(mark, dir) {
  for (let round = 0; round < 5; round++) {
    const procs = procsMarked(mark, dir);
    if (!procs.length) return;
    const groups = new Set(procs.map(p => p.pgid).filter(g => g > 1 && g !== process.pid && g !== OWN_PGID));
    for (const g of groups) { try { process.kill(-g, 'SIGKILL'); } catch { } }
    for (const p of procs) { try { process.kill(p.pid, 'SIGKILL'); } catch { } }
    const until = Date.now() + 300;
    while (Date.now() < until) { /* let them go */ }
  }
}

function killLive() { for (const c of [...live]) c.killAll(); }
process.on('SIGINT', () => process.exit(130));
process.on('SIGTERM', () => process.exit(143));
process.on('exit', killLive);

// --------------------------------------------------------------- MCP client
export class McpClient {
  constructor(cmd, args, { cwd, env = {}, tmp = null, timeoutMs = 90000 } = {}) {
    this.log = [];
    this.seq = 0;
    this.nextId = 0;
    this.waiters = new Map();
    this.stderr = '';
    this.tmp = tmp;
    this.timeoutMs = timeoutMs;
    this.mark = crypto.randomBytes(8).toString('hex');
    // Own process group, so that close() can also end the browser it started.
    this.proc = spawn(cmd, args, {
      cwd, stdio: ['pipe', 'pipe', 'pipe'], detached: true,
      env: { ...process.env, ...env, ...(tmp ? { TMPDIR: tmp } : {}), [MARK_VAR]: this.mark },
    });
    live.add(this);
    this.exited = new Promise(resolve => this.proc.on('exit', (code, sig) => resolve({ code, sig })));
    this.proc.on('error', e => { this.stderr += `spawn failed: ${e.message}\n`; });
    this.proc.stdin.on('error', () => { });
    this.proc.stderr.on('data', d => { this.stderr += d; });
    readline.createInterface({ input: this.proc.stdout }).on('line', line => this.onLine(line));
  }

  record(dir, line) {
    let msg;
    try { msg = JSON.parse(line); } catch { this.log.push({ seq: ++this.seq, dir, raw: line }); return null; }
    this.log.push({ seq: ++this.seq, dir, msg });
    return msg;
  }

  write(msg) {
    const line = JSON.stringify(msg);
    this.record('client->server', line);
    this.proc.stdin.write(line + '\n');
  }

  onLine(line) {
    const msg = this.record('server->client', line);
    if (!msg) return;
    if (msg.id !== undefined && msg.method === undefined && this.waiters.has(msg.id)) {
      this.waiters.get(msg.id)(msg);
      this.waiters.delete(msg.id);
    } else if (msg.id !== undefined && msg.method !== undefined) {
      // A server->client request (e.g. roots/list); this client offers no capabilities.
      this.write({ jsonrpc: '2.0', id: msg.id, error: { code: -32601, message: 'Method not found' } });
    }
  }

  // A request with the next id (1, 2, ...); resolves to the response.
  request(method, params, timeoutMs = this.timeoutMs) {
    return this.send({ jsonrpc: '2.0', id: ++this.nextId, method, params }, timeoutMs);
  }

  notify(method, params) {
    this.write(params === undefined ? { jsonrpc: '2.0', method } : { jsonrpc: '2.0', method, params });
  }

  // Sends a message as it is (a recorded one keeps its id) and, if it has an id, waits for the response.
  send(msg, timeoutMs = this.timeoutMs) {
    this.write(msg);
    if (msg.id === undefined) return Promise.resolve(null);
    return new Promise((resolve, reject) => {
      const t = setTimeout(() => reject(new Error(`no response to ${msg.method} #${msg.id} in ${timeoutMs / 1000} s\n${this.stderr}`)), timeoutMs);
      this.exited.then(({ code, sig }) => {
        clearTimeout(t);
        reject(new Error(`server exited (${code ?? sig}) before answering ${msg.method} #${msg.id}\n${this.stderr}`));
      });
      this.waiters.set(msg.id, m => { clearTimeout(t); resolve(m); });
    });
  }

  // initialize, notifications/initialized and tools/list, as every recording starts.
  async handshake() {
    const init = await this.request('initialize', {
      protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'fixture-recorder', version: '1.0.0' },
    });
    if (init.error) throw new Error(`initialize failed: ${JSON.stringify(init.error)}`);
    this.notify('notifications/initialized');
    const list = await this.request('tools/list', {});
    return { init: init.result, list: list.result, tools: list.result.tools };
  }

  // Closes the server's stdin and waits for it to exit (8 s, then SIGTERM and 4 s more), then kills
  // whatever it left behind. Safe to call twice.
  async close() {
    if (!live.has(this)) return;
    this.proc.stdin.end();
    const done = await Promise.race([this.exited, sleep(8000).then(() => null)]);
    if (!done) {
      try { process.kill(-this.proc.pid, 'SIGTERM'); } catch { }
      await Promise.race([this.exited, sleep(4000)]);
    }
    this.killAll();
    await Promise.race([this.exited, sleep(2000)]);
  }

  // Synchronous: also used on the way out of a failed or interrupted run.
  killAll() {
    try { process.kill(-this.proc.pid, 'SIGKILL'); } catch { }
    killMarked(this.mark, this.tmp);
    live.delete(this);
  }
}

// ---------------------------------------------------------------- recording
// One recording: a fresh server (and so a fresh isolated browser) in an empty temporary working directory
// <tmpdir>/<prefix>-<name>-XXXXXX, initialized, its tools listed. `record` gets {client, work, init, list,
// tools}, records, and returns what recordSession returns. On a failure the log so far is written to
// <outDir>/<name>.FAILED.mcp.jsonl. The working directory is removed afterwards.
export async function recordSession(spec, { name, outDir, prefix, timeoutMs }, record) {
  const work = fs.mkdtempSync(path.join(os.tmpdir(), `${prefix}-${name}-`));
  const client = startServer(spec, work, timeoutMs ? { timeoutMs } : {});
  try {
    return await record({ client, work, ...await client.handshake() });
  } catch (e) {
    await client.close();
    fs.writeFileSync(path.join(outDir, `${name}.FAILED.mcp.jsonl`), logText(client.log));
    throw e;
  } finally {
    fs.rmSync(work, { recursive: true, force: true });
  }
}

// The scripted model's side of a session: assistant turns, each of one or more tool calls with ids
// call_1, call_2, ... across the session. A subclass reads every result in observe(call) and may change
// the arguments a call is sent with in argsFor(name, args); with stopOnError set, a result that is an
// error ends the session.
export class Transcript {
  constructor(client, scenario) {
    this.client = client;
    this.scenario = scenario;
    this.steps = [];          // {text, calls: [{id, name, args, text, isError, images, structured}]}
    this.callCount = 0;
    this.stopOnError = false;
  }

  argsFor(name, args) { return args; }

  observe(call) { }

  // One assistant turn. calls: [[name, args], ...] (more than one = parallel tool calls).
  async turn(calls, text = null) {
    const step = { text, calls: [] };
    this.steps.push(step);
    for (const [name, rawArgs] of calls) {
      const args = this.argsFor(name, rawArgs);
      const id = `call_${++this.callCount}`;
      const resp = await this.client.request('tools/call', { name, arguments: args });
      const call = { id, name, args, ...resultOf(resp) };
      step.calls.push(call);
      this.observe(call);
      if (this.stopOnError && call.isError) throw new Error(`[${this.scenario}] ${name} ${JSON.stringify(args)} failed: ${call.text.slice(0, 400)}`);
    }
    return step.calls.length === 1 ? step.calls[0] : step.calls;
  }

  do(name, args, text = null) { return this.turn([[name, args]], text); }

  // All observation text so far (for checking facts the final answer uses).
  allText() { return this.steps.flatMap(s => s.calls.map(c => c.text)).join('\n'); }

  mustHaveSeen(...facts) {
    const all = this.allText();
    for (const f of facts) if (!all.includes(f)) throw new Error(`[${this.scenario}] fact not observed: ${f}`);
  }
}

// What a client forwards to the model of one tools/call response: the text parts joined with "\n", then a
// line "[<type> content omitted]" for each other part; "MCP error <code>: <message>" for an MCP error. Also
// how many parts are images, and the structuredContent as JSON (null when there is none or it is empty).
export function resultOf(resp) {
  if (resp.error) return { text: `MCP error ${resp.error.code}: ${resp.error.message}`, isError: true, images: 0, structured: null };
  const parts = resp.result.content || [];
  let text = parts.filter(p => p.type === 'text').map(p => p.text).join('\n');
  const other = parts.filter(p => p.type !== 'text');
  if (other.length) text += (text ? '\n' : '') + other.map(p => `[${p.type} content omitted]`).join('\n');
  const sc = resp.result.structuredContent;
  return {
    text, isError: resp.result.isError === true, images: other.filter(p => p.type === 'image').length,
    structured: sc && typeof sc === 'object' && Object.keys(sc).length ? JSON.stringify(sc) : null,
  };
}

// ----------------------------------------------------------- request bodies
export function cleanSchema(s) {
  const { $schema, ...rest } = s || { type: 'object', properties: {} };
  return rest;
}

// The OpenAI Chat Completions body of a transcript: system, task, the steps, the final answer and the
// follow-up question. content(call) is what a tool message carries (default: the result text).
export function openaiBody({ system, tools, task, steps, answer, followUp, model = 'gpt-4.1', content = c => c.text }) {
  const messages = [{ role: 'system', content: system }, { role: 'user', content: task }];
  for (const s of steps) {
    messages.push({
      role: 'assistant',
      content: s.text,
      tool_calls: s.calls.map(c => ({ id: c.id, type: 'function', function: { name: c.name, arguments: JSON.stringify(c.args) } })),
    });
    for (const c of s.calls) messages.push({ role: 'tool', tool_call_id: c.id, content: content(c) });
  }
  messages.push({ role: 'assistant', content: answer });
  messages.push({ role: 'user', content: followUp });
  return {
    model,
    messages,
    tools: tools.map(t => ({ type: 'function', function: { name: t.name, description: t.description, parameters: cleanSchema(t.inputSchema) } })),
  };
}

// The Anthropic Messages body of the same transcript.
export function anthropicBody({ system, tools, task, steps, answer, followUp, model = 'claude-sonnet-4-5', maxTokens = 4096,
  content = c => c.text }) {
  const messages = [{ role: 'user', content: task }];
  for (const s of steps) {
    const parts = [];
    if (s.text) parts.push({ type: 'text', text: s.text });
    for (const c of s.calls) parts.push({ type: 'tool_use', id: c.id, name: c.name, input: c.args });
    messages.push({ role: 'assistant', content: parts });
    messages.push({
      role: 'user',
      content: s.calls.map(c => ({ type: 'tool_result', tool_use_id: c.id, content: content(c), ...(c.isError ? { is_error: true } : {}) })),
    });
  }
  messages.push({ role: 'assistant', content: answer });
  messages.push({ role: 'user', content: followUp });
  return {
    model,
    max_tokens: maxTokens,
    system,
    messages,
    tools: tools.map(t => ({ name: t.name, description: t.description, input_schema: cleanSchema(t.inputSchema) })),
  };
}

// ------------------------------------------------------------------- output
// As the recordings are written: JSON with two-space indent and a final newline; a log one entry a line.
export const jsonText = v => JSON.stringify(v, null, 2) + '\n';
export const logText = log => log.map(e => JSON.stringify(e)).join('\n') + '\n';

// Writes <name>.openai.json and <name>.anthropic.json, ends the server, then writes <name>.mcp.jsonl.
// Returns the three paths.
export async function writeSession(client, outDir, name, { openai, anthropic }) {
  const files = {
    openai: path.join(outDir, `${name}.openai.json`),
    anthropic: path.join(outDir, `${name}.anthropic.json`),
    mcp: path.join(outDir, `${name}.mcp.jsonl`),
  };
  fs.writeFileSync(files.openai, jsonText(openai));
  fs.writeFileSync(files.anthropic, jsonText(anthropic));
  await client.close();
  fs.writeFileSync(files.mcp, logText(client.log));
  return files;
}

// The summaries' `bytes` of the three files writeSession wrote.
export function bytesOf(files) {
  return { openai: fs.statSync(files.openai).size, anthropic: fs.statSync(files.anthropic).size, mcp_jsonl: fs.statSync(files.mcp).size };
}

// The files below `dir`, as paths relative to it, sorted.
export function filesIn(dir) {
  return fs.readdirSync(dir, { recursive: true }).filter(f => fs.statSync(path.join(dir, f)).isFile()).sort();
}

// Copies what the server wrote into its working directory (file-linked snapshots, screenshots, console
// logs) to `dest`, which it first empties; nothing when it wrote nothing. Returns the files, sorted.
export function keepArtifacts(work, dest) {
  fs.rmSync(dest, { recursive: true, force: true });
  const written = filesIn(work);
  if (written.length) { fs.cpSync(work, dest, { recursive: true }); fs.chmodSync(dest, 0o755); }
  return written;
}
