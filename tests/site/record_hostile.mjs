#!/usr/bin/env node
// Records the hostile sessions of fixtures/hostile again, from this repository alone: it replays the
// client->server messages of a recorded session (the same tools/call sequence, the same arguments) against
// a fresh pinned MCP server driving headless Chromium over the pages of tests/site/hostile, and writes
// what the recorders of fixtures/hostile wrote:
//   <out>/<server>/<session>.mcp.jsonl      every JSON-RPC message, {"seq","dir","msg"}
//   <out>/<server>/<session>.openai.json    OpenAI Chat Completions request body
//   <out>/<server>/<session>.anthropic.json Anthropic Messages request body (the same transcript)
//   <out>/<server>/<session>.artifacts/     the files the server wrote into its working directory, if any
//                                           (Playwright MCP 0.0.83: .playwright-mcp/page-*.yml, console-*.log)
//   <out>/<server>/summary.<session>.json   sizes, observation counts, errors
// The pages are deterministic, so refs and uids come out as recorded and the replayed arguments hold.
//
// usage: node tests/site/record_hostile.mjs --server NAME --session S[,S...] [--from DIR] [--out DIR]
//                                           [--install DIR] [--chromium PATH] [--call-timeout SECONDS]
//                                           [--compare] [--rebuild]
//   --server        pwmcp-0.0.41, pwmcp-0.0.83 or cdmcp-1.11.0
//   --session       hostile_text, hostile_big, hostile_deep10k (comma-separated: one fresh server each)
//   --from          the recorded sessions: DIR/<server>/<session>.mcp.jsonl[.gz] and its two request
//                   bodies (default fixtures/hostile)
//   --out           output folder (default /tmp/hostile-recorded)
//   --install       the server's npm folder (default tests/mcp/node/pw-<version> or cdmcp-<version>,
//                   installed by `npm ci` there; scripts/test does that)
//   --chromium      browser executable (default /usr/bin/chromium)
//   --call-timeout  seconds to wait for one response (default 900: Chrome DevTools MCP takes about three
//                   minutes to navigate to the 10,000-level tree)
//   --compare       then compare every tool result, and the two bodies, with the recorded ones and say
//                   what differs (exit status 3 when anything does beyond the masked timestamps)
//   --rebuild       start no server: write the two bodies from the recorded mcp.jsonl (checks that the
//                   bodies are built as recorded; with --compare, compares them)
//
// Serve the site first, from the repository root:
//   python3 -m http.server 8461 --bind 127.0.0.1 --directory tests/site
// The recorded URLs name 127.0.0.1:8461, so the site must be served there.
//
// The servers are started as the recordings say (summary.json server_args / server_command):
//   Playwright MCP:       <bin> --headless --isolated --no-sandbox --executable-path <chromium>
//   Chrome DevTools MCP:  chrome-devtools-mcp --headless --isolated --executablePath <chromium>
//                         --chromeArg=--no-sandbox --no-usage-statistics --no-performance-crux
//                         (with CHROME_DEVTOOLS_MCP_NO_USAGE_STATISTICS=1)
// each in an empty temporary working directory, with TMPDIR set to another temporary directory (the
// isolated browser profile goes there) and a marker in its environment. Both servers start the browser in
// a process group of its own, so on the way out (also after a failure, or on SIGINT/SIGTERM) the recorder
// ends the server's process group and every process group whose members carry the marker or name that
// temporary directory: what it started, nothing else.
//
// Request bodies. The replay gives the tool results; the rest of the transcript is the scripted model's and
// is taken from the recorded OpenAI body: the system prompt, the task, the text before each tool call, the
// grouping of calls into assistant turns, their ids (call_1, call_2, ...; the Anthropic body uses the same
// ids), the final answer and the follow-up question, and the model names and max_tokens of both bodies. The
// tools are the new tools/list result without "$schema". A tool result is the text parts of the MCP result
// joined with "\n" (a non-text part becomes a line "[<type> content omitted]"; an MCP error
// "MCP error <code>: <message>"); the Anthropic tool_result carries is_error: true when the result was an
// error. Bodies are written as JSON.stringify(body, null, 2) + "\n", which writes a lone surrogate as a
// \udXXX escape, as the recorded bodies have it. The final answer is copied, not re-derived: if a replayed
// result differs from the recorded one (a server that works against a clock, see fixtures/hostile/README.md),
// the answer may no longer match it; --compare says so.

import fs from 'node:fs';
import path from 'node:path';
import os from 'node:os';
import zlib from 'node:zlib';
import {
  REPO, pinnedInstall, playwrightServer, cdmcpServer, startServer, resultOf, openaiBody, anthropicBody, jsonText, logText,
  filesIn,
} from './mcp_client.mjs';

const SERVERS = {
  'pwmcp-0.0.41': { start: playwrightServer, install: 'pw-0.0.41' },
  'pwmcp-0.0.83': { start: playwrightServer, install: 'pw-0.0.83' },
  'cdmcp-1.11.0': { start: cdmcpServer, install: 'cdmcp-1.11.0' },
};

// ---------------------------------------------------------------- arguments
function usage(msg) {
  if (msg) console.error(msg);
  console.error('usage: node tests/site/record_hostile.mjs --server pwmcp-0.0.41|pwmcp-0.0.83|cdmcp-1.11.0 '
    + '--session hostile_text[,hostile_big,hostile_deep10k] [--from DIR] [--out DIR] [--install DIR] '
    + '[--chromium PATH] [--call-timeout SECONDS] [--compare] [--rebuild]');
  process.exit(2);
}

function parseArgs(argv) {
  const opts = { server: null, sessions: null, from: path.join(REPO, 'fixtures/hostile'), out: '/tmp/hostile-recorded',
    install: null, chromium: '/usr/bin/chromium', callTimeout: 900, compare: false, rebuild: false };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const val = () => { if (i + 1 >= argv.length) usage(`${a} needs a value`); return argv[++i]; };
    if (a === '--server') opts.server = val();
    else if (a === '--session') opts.sessions = val().split(',').filter(Boolean);
    else if (a === '--from') opts.from = path.resolve(val());
    else if (a === '--out') opts.out = path.resolve(val());
    else if (a === '--install') opts.install = path.resolve(val());
    else if (a === '--chromium') opts.chromium = val();
    else if (a === '--call-timeout') opts.callTimeout = Number(val());
    else if (a === '--compare') opts.compare = true;
    else if (a === '--rebuild') opts.rebuild = true;
    else usage(`unexpected argument ${a}`);
  }
  if (!SERVERS[opts.server]) usage(`--server must be one of ${Object.keys(SERVERS).join(', ')}`);
  if (!opts.sessions || !opts.sessions.length) usage('--session is required');
  if (!(opts.callTimeout > 0)) usage('--call-timeout must be a positive number of seconds');
  if (!opts.install) opts.install = pinnedInstall(SERVERS[opts.server].install);
  return opts;
}

// ------------------------------------------------------------ recorded files
// A recorded file, plain or gzipped.
function readRecorded(dir, name) {
  for (const [file, gz] of [[path.join(dir, name), false], [path.join(dir, name + '.gz'), true]]) {
    if (fs.existsSync(file)) {
      const buf = fs.readFileSync(file);
      return (gz ? zlib.gunzipSync(buf) : buf).toString('utf8');
    }
  }
  throw new Error(`no ${name} or ${name}.gz in ${dir}`);
}

function readLog(text) {
  return text.split('\n').filter(l => l.trim()).map(l => JSON.parse(l));
}

// The scripted model's side of a recorded session, from its OpenAI and Anthropic bodies.
function transcriptOf(openai, anthropic) {
  const msgs = openai.messages;
  if (msgs[0].role !== 'system' || msgs[1].role !== 'user') throw new Error('recorded OpenAI body: no system and user message first');
  const steps = [];
  let i = 2;
  for (; i < msgs.length && msgs[i].role === 'assistant' && msgs[i].tool_calls; ) {
    const m = msgs[i++];
    const calls = m.tool_calls.map(c => ({ id: c.id, name: c.function.name, args: JSON.parse(c.function.arguments) }));
    for (const c of calls) {
      if (!msgs[i] || msgs[i].role !== 'tool' || msgs[i].tool_call_id !== c.id) throw new Error(`recorded OpenAI body: no tool message for ${c.id}`);
      i++;
    }
    steps.push({ text: m.content, calls });
  }
  const tail = msgs.slice(i);
  if (tail.length !== 2 || tail[0].role !== 'assistant' || tail[1].role !== 'user') throw new Error('recorded OpenAI body: no final answer and follow-up');
  if (anthropic.system !== msgs[0].content) throw new Error('recorded bodies disagree on the system prompt');
  return {
    system: msgs[0].content, task: msgs[1].content, steps, answer: tail[0].content, followUp: tail[1].content,
    openaiModel: openai.model, anthropicModel: anthropic.model, maxTokens: anthropic.max_tokens,
  };
}

// Temporary directories to remove on the way out (mcp_client.mjs ends the processes first).
const tempDirs = new Set();

function cleanup() {
  for (const d of tempDirs) fs.rmSync(d, { recursive: true, force: true });
  tempDirs.clear();
}
function cleanupAndExit(code) {
  cleanup();
  process.exit(code);
}
process.on('exit', cleanup);

// ------------------------------------------------------------------- replay
async function replay(opts, recordedLog) {
  const server = SERVERS[opts.server].start(opts.install, opts.chromium);
  if (`${opts.server.split('-')[0]}-${server.version}` !== opts.server) throw new Error(`${opts.install} holds version ${server.version}, not ${opts.server}`);
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'hostile-rec-work-'));
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'hostile-rec-tmp-'));
  tempDirs.add(work).add(tmp);
  // TMPDIR: the isolated browser profile goes there, and the processes that name it are ended with the server.
  const client = startServer(server, work, { tmp, timeoutMs: opts.callTimeout * 1000 });
  const responses = new Map();   // request id -> response
  try {
    for (const e of recordedLog) {
      if (e.dir !== 'client->server' || !e.msg) continue;
      const m = e.msg;
      // Answers to server requests are the client's own business, not part of the script.
      if (m.method === undefined) continue;
      const t0 = Date.now();
      const resp = await client.send(m);
      if (resp) responses.set(m.id, resp);
      if (m.method === 'tools/call') {
        const took = ((Date.now() - t0) / 1000).toFixed(1);
        process.stderr.write(`  #${m.id} ${m.params.name} ${took} s${resp.result && resp.result.isError ? ' (error)' : ''}${resp.error ? ' (MCP error)' : ''}\n`);
      }
    }
    await client.close();
    const artifacts = filesIn(work);
    return { log: client.log, responses, work, artifacts, stderr: client.stderr, shown: server.shown };
  } catch (e) {
    await client.close();
    fs.rmSync(work, { recursive: true, force: true });
    e.partialLog = client.log;
    throw e;
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

// ------------------------------------------------------------ request bodies
// The transcript's steps with the results of this run: the i-th tools/call of the log is call i.
function stepsWithResults(tr, log) {
  const byId = new Map();
  const calls = [];
  for (const e of log) {
    if (!e.msg) continue;
    if (e.dir === 'client->server' && e.msg.method === 'tools/call') calls.push(e.msg);
    else if (e.dir === 'server->client' && e.msg.method === undefined && e.msg.id !== undefined) byId.set(e.msg.id, e.msg);
  }
  const flat = tr.steps.flatMap(s => s.calls);
  if (flat.length !== calls.length) throw new Error(`the bodies name ${flat.length} tool calls, the log ${calls.length}`);
  let k = 0;
  return tr.steps.map(s => ({
    text: s.text,
    calls: s.calls.map(c => {
      const req = calls[k++];
      if (req.params.name !== c.name || JSON.stringify(req.params.arguments) !== JSON.stringify(c.args))
        throw new Error(`${c.id}: the body calls ${c.name} ${JSON.stringify(c.args)}, the log ${req.params.name} ${JSON.stringify(req.params.arguments)}`);
      const resp = byId.get(req.id);
      if (!resp) throw new Error(`${c.id}: no response to tools/call #${req.id} in the log`);
      return { ...c, ...resultOf(resp) };
    }),
  }));
}

function toolsOf(log) {
  const req = log.find(e => e.dir === 'client->server' && e.msg && e.msg.method === 'tools/list');
  const resp = req && log.find(e => e.dir === 'server->client' && e.msg && e.msg.id === req.msg.id && e.msg.method === undefined);
  if (!resp || !resp.msg.result) throw new Error('no tools/list result in the log');
  return resp.msg.result.tools;
}

// The bodies as recorded: the scripted model's side from the recorded bodies, the results of this run.
const openaiBodyOf = (tr, tools, steps) => openaiBody({ ...tr, tools, steps, model: tr.openaiModel });
const anthropicBodyOf = (tr, tools, steps) => anthropicBody({ ...tr, tools, steps, model: tr.anthropicModel, maxTokens: tr.maxTokens });

// ------------------------------------------------------------------ compare
// What depends on the time of the run: Playwright MCP 0.0.83 names the files it writes by the time.
const MASKS = [
  [/\.playwright-mcp\/(page|console)-\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d-\d{3}Z\.(yml|log)/g, '.playwright-mcp/$1-<time>.$2'],
];
const mask = s => MASKS.reduce((t, [re, to]) => t.replace(re, to), s);

function firstDiff(a, b) {
  let i = 0;
  while (i < a.length && i < b.length && a[i] === b[i]) i++;
  const show = s => JSON.stringify(s.slice(Math.max(0, i - 60), i + 100));
  return `at char ${i} of ${a.length}/${b.length}:\n      recorded ${show(a)}\n      new      ${show(b)}`;
}

function compareSession(name, tr, oldLog, newLog, bodies, logs, artifacts) {
  const oldSteps = stepsWithResults(tr, oldLog).flatMap(s => s.calls);
  const newSteps = stepsWithResults(tr, newLog).flatMap(s => s.calls);
  const report = { equal: 0, masked: 0, differ: [] };
  for (let i = 0; i < oldSteps.length; i++) {
    const o = oldSteps[i], n = newSteps[i];
    if (o.text === n.text && o.isError === n.isError) report.equal++;
    else if (mask(o.text) === mask(n.text) && o.isError === n.isError) report.masked++;
    else report.differ.push(`${o.id} ${o.name}${o.isError !== n.isError ? ` (isError ${o.isError} -> ${n.isError})` : ''} ${firstDiff(mask(o.text), mask(n.text))}`);
  }
  const bodyNotes = [];
  for (const [fmt, recorded, fresh] of bodies) {
    if (recorded === fresh) bodyNotes.push(`${fmt} body: byte-equal`);
    else if (mask(recorded) === mask(fresh)) bodyNotes.push(`${fmt} body: equal but for the masked timestamps`);
    else bodyNotes.push(`${fmt} body: DIFFERS ${firstDiff(mask(recorded), mask(fresh))}`);
  }
  if (logs) {
    const [recorded, fresh] = logs;
    if (recorded === fresh) bodyNotes.push('mcp.jsonl: byte-equal');
    else if (mask(recorded) === mask(fresh)) bodyNotes.push('mcp.jsonl: equal but for the masked timestamps');
    else bodyNotes.push(`mcp.jsonl: DIFFERS ${firstDiff(mask(recorded), mask(fresh))}`);
  }
  if (artifacts) {
    const [recorded, fresh] = artifacts;
    const same = recorded.length === fresh.length && recorded.every((r, i) => r.kind === fresh[i].kind && r.text === fresh[i].text);
    if (!recorded.length && !fresh.length) { /* none either time */ }
    else if (same) bodyNotes.push(`artifacts: ${fresh.length} files, equal but for the timestamps in their names`);
    else bodyNotes.push(`artifacts: DIFFER (recorded ${recorded.map(a => a.kind).join(' ')}; new ${fresh.map(a => a.kind).join(' ')})`
      + recorded.map((r, i) => (fresh[i] && r.kind === fresh[i].kind && r.text !== fresh[i].text ? `\n      ${r.name} ${firstDiff(r.text, fresh[i].text)}` : '')).join(''));
  }
  const toolsSame = JSON.stringify(toolsOf(oldLog)) === JSON.stringify(toolsOf(newLog));
  const lines = [`[${name}] ${oldSteps.length} tool results: ${report.equal} equal, ${report.masked} equal but for the masked timestamps, ${report.differ.length} differ; tools/list ${toolsSame ? 'equal' : 'DIFFERS'}`];
  for (const d of report.differ) lines.push(`    ${d}`);
  for (const b of bodyNotes) lines.push(`    ${b}`);
  const ok = !report.differ.length && toolsSame && bodyNotes.every(b => !/DIFFERS?\b/.test(b));
  return { ok, text: lines.join('\n') };
}

// The files under an artifacts folder in the order they were written (their names hold the time),
// gunzipped where the fixtures keep them gzipped.
function readArtifacts(dir) {
  if (!fs.existsSync(dir)) return [];
  return fs.readdirSync(dir, { recursive: true }).filter(f => fs.statSync(path.join(dir, f)).isFile()).sort().map(f => {
    const buf = fs.readFileSync(path.join(dir, f));
    const name = f.replace(/\.gz$/, '');
    return { name, kind: mask(name), text: (f.endsWith('.gz') ? zlib.gunzipSync(buf) : buf).toString('utf8') };
  });
}

// --------------------------------------------------------------------- main

async function runSession(opts, session, outDir) {
  const fromDir = path.join(opts.from, opts.server);
  const oldLog = readLog(readRecorded(fromDir, `${session}.mcp.jsonl`));
  const oldOpenai = readRecorded(fromDir, `${session}.openai.json`);
  const oldAnthropic = readRecorded(fromDir, `${session}.anthropic.json`);
  const tr = transcriptOf(JSON.parse(oldOpenai), JSON.parse(oldAnthropic));

  let log, artifacts = [], work = null, stderr = '', shown = null;
  if (opts.rebuild) log = oldLog;
  else {
    let r;
    try {
      r = await replay(opts, oldLog);
    } catch (e) {
      if (e.partialLog) fs.writeFileSync(path.join(outDir, `${session}.FAILED.mcp.jsonl`), logText(e.partialLog));
      throw e;
    }
    ({ log, artifacts, work, stderr, shown } = r);
  }
  const files = {
    mcp: path.join(outDir, `${session}.mcp.jsonl`),
    openai: path.join(outDir, `${session}.openai.json`),
    anthropic: path.join(outDir, `${session}.anthropic.json`),
  };
  try {
    const steps = stepsWithResults(tr, log);
    const tools = toolsOf(log);
    const oa = jsonText(openaiBodyOf(tr, tools, steps));
    const an = jsonText(anthropicBodyOf(tr, tools, steps));
    fs.writeFileSync(files.openai, oa);
    fs.writeFileSync(files.anthropic, an);
    if (!opts.rebuild) {
      fs.writeFileSync(files.mcp, logText(log));
      const dest = path.join(outDir, `${session}.artifacts`);
      fs.rmSync(dest, { recursive: true, force: true });
      if (artifacts.length) fs.cpSync(work, dest, { recursive: true });
      const calls = steps.flatMap(s => s.calls);
      const sizes = calls.map(c => Buffer.byteLength(c.text));
      fs.writeFileSync(path.join(outDir, `summary.${session}.json`), jsonText({
        server: opts.server,
        server_command: shown,
        chromium: opts.chromium,
        replayed_from: path.relative(REPO, fromDir) || fromDir,
        session,
        bytes: { openai: Buffer.byteLength(oa), anthropic: Buffer.byteLength(an), mcp_jsonl: fs.statSync(files.mcp).size },
        observations: calls.length,
        error_observations: calls.filter(c => c.isError).map(c => ({ id: c.id, name: c.name, first_line: c.text.split('\n').find(l => l && !l.startsWith('#')) })),
        observation_bytes_total: sizes.reduce((x, y) => x + y, 0),
        observation_bytes_max: Math.max(0, ...sizes),
        artifacts_written: artifacts,
        server_stderr: stderr.trim() || undefined,
      }));
    }
    if (!opts.compare) return true;
    const res = opts.rebuild
      ? compareSession(session, tr, oldLog, log, [['openai', oldOpenai, oa], ['anthropic', oldAnthropic, an]])
      : compareSession(session, tr, oldLog, log, [['openai', oldOpenai, oa], ['anthropic', oldAnthropic, an]],
        [readRecorded(fromDir, `${session}.mcp.jsonl`), fs.readFileSync(files.mcp, 'utf8')],
        [readArtifacts(path.join(fromDir, `${session}.artifacts`)), readArtifacts(path.join(outDir, `${session}.artifacts`))]);
    console.log(res.text);
    return res.ok;
  } finally {
    if (work) fs.rmSync(work, { recursive: true, force: true });
  }
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  if (!opts.rebuild && !fs.existsSync(opts.chromium)) throw new Error(`no browser at ${opts.chromium}`);
  const outDir = path.join(opts.out, opts.server);
  fs.mkdirSync(outDir, { recursive: true });
  let ok = true;
  for (const session of opts.sessions) {
    process.stderr.write(`[${opts.server}] ${session}${opts.rebuild ? ' (bodies from the recorded log)' : ''}\n`);
    ok = (await runSession(opts, session, outDir)) && ok;
  }
  return ok;
}

main().then(ok => cleanupAndExit(ok ? 0 : 3), e => { console.error(e.stack || e); cleanupAndExit(1); });
