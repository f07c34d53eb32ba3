#!/usr/bin/env node
// Records sessions of a scripted "model" reading real documentation sets
// (HTML manuals from Debian packages, copied to fixtures/docsets/sites/<set>)
// through three real browser MCP servers: @playwright/mcp 0.0.41 (inline
// snapshots), @playwright/mcp 0.0.83 (action results link a snapshot file, so
// the model calls browser_snapshot) and Google's chrome-devtools-mcp 1.11.0
// (take_snapshot, uids). Data-driven: the scenarios are the JSON files in
// tests/record/docsets/<set>.json, one per documentation set. The MCP client
// and the request bodies are those of tests/site/mcp_client.mjs; the scripted
// model and the facts check follow record_realdocs.mjs (pw) and
// tests/site/record_cdmcp.mjs (cdmcp).
//
// usage: node record_docsets.mjs [--server pw-0.0.41,pw-0.0.83,cdmcp-1.11.0]
//                                [--base URL] [--out DIR] [--only set-task,...]
//                                [--sets a,b] [--chromium PATH] [--check-only]
//   --server   which servers (default all three); each is the install folder
//              tests/mcp/node/<name> (override the folder with --install-dir DIR,
//              only with a single --server)
//   --base     where fixtures/docsets/sites is served (default http://127.0.0.1:8450);
//              a set's pages are under <base>/<set>/
//   --out      output folder (default fixtures/docsets); writes
//              <out>/<server-dir>/<set>-<task>.{openai.json,anthropic.json,mcp.jsonl},
//              <out>/<server-dir>/summary.json and <out>/facts/<set>-<task>.txt
//              (server-dir: pwmcp-0.0.41, pwmcp-0.0.83, cdmcp-1.11.0)
//   --only     comma-separated <set>-<task> names (default: all); then the summary
//              goes to stdout instead of summary.json
//   --check-only  only validate the scenario files (facts vs. answers), record nothing
//
// Scenario file (tests/record/docsets/<set>.json):
//   { "set", "package", "version", "generator", "licence",
//     "tasks": [ { "name", "task", "steps": [...], "answer", "follow_up",
//                  "facts": { "answer": [...], "follow_up": [...] } } ] }
//   task/answer/follow_up may use {base} (the set's URL), {a0}, {a1}, ... (the answer
//   facts) and {f0}, ... (follow-up facts; only the follow-up text may use them).
//   steps, each with an optional "say" (the assistant's text on that turn):
//     {"navigate": "<path under the set>"}
//     {"click": "<accessible name>", "role": "link" (default), "after": "<text of a line above it>",
//      "url": "<part of the link's href>"}   (with url, a link is found by its href: 0.0.83
//      shows no name for a link whose text is split by `code`, and a table of contents may
//      hold two links of one name)
//     {"back": true, "read": false}   navigate back; "read": true makes the model look at the page
//     {"snapshot": true}              an explicit snapshot call, on every server
//   After a navigate or click, the model makes sure it has seen the new page as
//   snapshot text (0.0.41: the result inlines it; 0.0.83: browser_snapshot, since the
//   result only links a file; cdmcp: take_snapshot). After a back it looks only with
//   "read": true (it already read that page), or when a later step needs a ref there.
//
// Facts: chosen in the scenario file before recording. Every fact must be found
// verbatim in a tool result of that session (mustHaveSeen), every answer fact in the
// answer and no follow-up fact in it; otherwise the run fails and writes nothing for
// that task but <task>.FAILED.mcp.jsonl.

import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  REPO, pinnedInstall, playwrightServer, cdmcpServer, recordSession, Transcript, openaiBody, anthropicBody, writeSession,
  bytesOf, filesIn, jsonText,
} from '../site/mcp_client.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const SERVERS = ['pw-0.0.41', 'pw-0.0.83', 'cdmcp-1.11.0'];
const OUT_DIR_NAME = { 'pw-0.0.41': 'pwmcp-0.0.41', 'pw-0.0.83': 'pwmcp-0.0.83', 'cdmcp-1.11.0': 'cdmcp-1.11.0' };

// ---------------------------------------------------------------- arguments
function parseArgs(argv) {
  const opts = { base: 'http://127.0.0.1:8450', chromium: '/usr/bin/chromium', only: null, sets: null,
    out: path.join(REPO, 'fixtures', 'docsets'), servers: SERVERS, installDir: null, checkOnly: false };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--base') opts.base = argv[++i].replace(/\/$/, '');
    else if (a === '--out') opts.out = argv[++i];
    else if (a === '--only') opts.only = argv[++i].split(',');
    else if (a === '--sets') opts.sets = argv[++i].split(',');
    else if (a === '--server') opts.servers = argv[++i].split(',');
    else if (a === '--install-dir') opts.installDir = argv[++i];
    else if (a === '--chromium') opts.chromium = argv[++i];
    else if (a === '--check-only') opts.checkOnly = true;
    else throw new Error(`unexpected argument ${a}`);
  }
  for (const s of opts.servers) if (!SERVERS.includes(s)) throw new Error(`unknown server ${s} (one of ${SERVERS.join(', ')})`);
  if (opts.installDir && opts.servers.length !== 1) throw new Error('--install-dir needs exactly one --server');
  return opts;
}

// ------------------------------------------------------ the scripted "model"
// What both drivers share: turns, the transcript, facts.
// A tool call that fails ends the session.
class BaseAgent extends Transcript {
  constructor(client, tools, scenario) {
    super(client, scenario);
    this.tools = tools;
    this.stopOnError = true;
    this.snap = null;         // newest snapshot seen: {text, callId}
    this.needFresh = false;   // the page may differ from the newest snapshot seen
  }

  // Make sure the newest page state has been seen as snapshot text.
  async look(text = null) { if (this.needFresh || !this.snap) await this.snapshot(text); }

  // The first line below the first line holding `after` (any substring: a heading's text is
  // a heading name in one format and a text child in another) that `match` accepts.
  findLine(after, text, match) {
    if (!text) return null;
    // Chrome's accessibility tree keeps no-break spaces (`Section\u00a09.9`); Playwright's does not.
    let lines = text.replace(/\u00a0/g, ' ').split('\n');
    if (after) {
      const start = lines.findIndex(l => l.includes(after));
      if (start < 0) return null;
      lines = lines.slice(start + 1);
    }
    for (let i = 0; i < lines.length; i++) {
      const r = match(lines[i], lines, i);
      if (r) return r;
    }
    return null;
  }
}

const YAML_RE = /```yaml\n([\s\S]*?)\n```/g;

// @playwright/mcp, any version: refs `[ref=e12]`, element arg `ref` or `target`.
class PwAgent extends BaseAgent {
  constructor(client, tools, scenario) {
    super(client, tools, scenario);
    const clickProps = tools.find(t => t.name === 'browser_click').inputSchema.properties || {};
    this.refKey = 'target' in clickProps ? 'target' : 'ref';
  }

  async start() {}

  observe(call) {
    if (call.isError) return;
    const blocks = [...call.text.matchAll(YAML_RE)].map(m => m[1]);
    if (blocks.length) {
      const text = blocks.join('\n');
      this.snap = { text, callId: call.id };
      this.needFresh = false;
    } else if (/\[Snapshot\]\(|### Snapshot|Page Snapshot|### Page\b/.test(call.text)) {
      this.needFresh = true;   // page state reported, snapshot only linked
    }
  }

  async snapshot(text = null) { return this.do('browser_snapshot', {}, text); }

  // `role "name" ... [ref=X]`; for a link given with `url`, the first link whose `/url:`
  // child holds it, named or not (0.0.83 names no link whose text is split by `code`, and a
  // table of contents can name two links alike: one to the page, one to its own entry).
  findRef(role, name, after, url) {
    const needle = `${role} "${name}"`;
    return this.findLine(after, this.snap && this.snap.text, (line, lines, i) => {
      if (url && role === 'link') {
        const m = line.match(/^(\s*)- link\b.*?\[ref=([^\]]+)\]/);
        const next = lines[i + 1] || '';
        return m && next.startsWith(m[1] + '  - /url: ') && next.includes(url) ? m[2] : null;
      }
      const k = line.indexOf(needle);
      if (k < 0) return null;
      const m = line.slice(k + needle.length).match(/^[^"]*?\[ref=([^\]]+)\]/);
      return m ? m[1] : null;
    });
  }

  async navigate(url, text) { return this.do('browser_navigate', { url }, text); }
  async back(text) { const r = await this.do('browser_navigate_back', {}, text); this.needFresh = this.needFresh || !/```yaml/.test(r.text); return r; }

  async click(role, name, after, url, text) {
    await this.look();
    const r = this.findRef(role, name, after, url);
    if (!r) throw new Error(`[${this.scenario}] no ${role} "${name}"${after ? ` after ${after}` : ''} in newest snapshot (${this.snap && this.snap.callId})`);
    return this.do('browser_click', { element: `${name} ${role}`, [this.refKey]: r }, text);
  }
}

// chrome-devtools-mcp: `## Latest page snapshot` / `uid=N_M role "name"` lines, pageId routing.
const SNAP_HEADING = '## Latest page snapshot';
const CD_PAGE_CHANGERS = new Set(['navigate_page', 'new_page', 'select_page', 'close_page', 'click', 'press_key']);

// The snapshot runs from its heading to the end of the result (the server puts it last).
// Not cut at the next `#` line: a page's code block can hold lines such as `# comment`.
function cdSnapshotOf(text) {
  const i = text.indexOf(SNAP_HEADING + '\n');
  if (i < 0) return null;
  return text.slice(i + SNAP_HEADING.length + 1).replace(/\n+$/, '');
}

class CdAgent extends BaseAgent {
  constructor(client, tools, scenario) {
    super(client, tools, scenario);
    this.pageId = null;
  }

  p(args = {}) { return { pageId: this.pageId, ...args }; }

  // Page-scoped tools require pageId: the model starts with list_pages.
  async start() {
    const r = await this.do('list_pages', {});
    const m = r.text.match(/^(\d+): .*\[selected\]$/m) || r.text.match(/^(\d+): /m);
    if (!m) throw new Error(`[${this.scenario}] list_pages listed no page`);
    this.pageId = Number(m[1]);
  }

  observe(call) {
    const s = call.isError ? null : cdSnapshotOf(call.text);
    if (s !== null) {
      this.snap = { text: s, callId: call.id };
      this.needFresh = false;
    } else if (CD_PAGE_CHANGERS.has(call.name)) {
      this.needFresh = true;
    }
  }

  async snapshot(text = null) { return this.do('take_snapshot', this.p(), text); }

  // `uid=X role "name"`; for a link given with `url`, the first link whose url="..." holds it.
  findUid(role, name, after, url) {
    const needle = ` ${role} "${name}"`;
    return this.findLine(after, this.snap && this.snap.text, line => {
      const m = line.match(/^\s*uid=(\S+)( .*)$/);
      if (!m) return null;
      if (url && role === 'link') {
        const u = m[2].startsWith(' link ') && m[2].match(/ url="([^"]*)"$/);
        return u && u[1].includes(url) ? m[1] : null;
      }
      return m[2] === needle || m[2].startsWith(needle + ' ') ? m[1] : null;
    });
  }

  async navigate(url, text) { return this.do('navigate_page', this.p({ type: 'url', url }), text); }
  async back(text) { return this.do('navigate_page', this.p({ type: 'back' }), text); }

  async click(role, name, after, url, text) {
    await this.look();
    const u = this.findUid(role, name, after, url);
    if (!u) throw new Error(`[${this.scenario}] no ${role} "${name}"${after ? ` after ${after}` : ''} in newest snapshot (${this.snap && this.snap.callId})`);
    return this.do('click', this.p({ uid: u }), text);
  }
}

// ------------------------------------------------------------------ scenarios
const SYSTEM = {
  pw: [
    'You are a browser automation assistant. You control a real Chromium browser through the Playwright MCP tools.',
    'Interact with elements by the ref shown for them in the most recent page snapshot.',
    'Answer from what the pages say, and quote them exactly.',
  ].join(' '),
  cdmcp: [
    'You are a browser automation assistant. You control a real Chromium browser through the Chrome DevTools MCP tools.',
    'Interact with elements by the uid shown for them in the most recent page snapshot.',
    'Answer from what the pages say, and quote them exactly.',
  ].join(' '),
};

function fill(template, base, facts, allowFollowUp) {
  return template.replace(/\{(base|a\d+|f\d+)\}/g, (_, k) => {
    if (k === 'base') return base;
    const list = k[0] === 'a' ? facts.answer : facts.follow_up;
    if (k[0] === 'f' && !allowFollowUp) throw new Error(`{${k}} used outside the follow-up`);
    const v = list[Number(k.slice(1))];
    if (v === undefined) throw new Error(`no fact {${k}}`);
    return v;
  });
}

function loadSets(opts) {
  const dir = path.join(HERE, 'docsets');
  const files = fs.readdirSync(dir).filter(f => f.endsWith('.json')).sort();
  const sets = files.map(f => JSON.parse(fs.readFileSync(path.join(dir, f), 'utf8')));
  const scenarios = [];
  for (const s of sets) {
    if (opts.sets && !opts.sets.includes(s.set)) continue;
    for (const t of s.tasks) {
      const name = `${s.set}-${t.name}`;
      if (opts.only && !opts.only.includes(name)) continue;
      scenarios.push({ name, set: s, task: t });
    }
  }
  if (opts.only) for (const n of opts.only) if (!scenarios.some(s => s.name === n)) throw new Error(`unknown scenario ${n}`);
  return scenarios;
}

// The static checks of a scenario: everything but "seen in a tool result".
function checkScenarioText(name, t, base) {
  const facts = t.facts;
  if (!facts || !facts.answer || !facts.follow_up) throw new Error(`[${name}] facts.answer and facts.follow_up are required`);
  if (facts.answer.length < 1 || facts.follow_up.length < 1) throw new Error(`[${name}] needs answer and follow-up facts`);
  const answer = fill(t.answer, base, facts, false);
  const task = fill(t.task, base, facts, false);
  const followUp = fill(t.follow_up, base, facts, false);
  for (const f of [...facts.answer, ...facts.follow_up]) if (!f.trim() || f.includes('\n')) throw new Error(`[${name}] bad fact: ${JSON.stringify(f)}`);
  for (const f of facts.answer) if (!answer.includes(f)) throw new Error(`[${name}] answer fact not in the answer: ${f}`);
  for (const f of facts.follow_up) if (answer.includes(f)) throw new Error(`[${name}] follow-up fact already in the answer: ${f}`);
  for (const f of facts.follow_up) if (followUp.includes(f)) throw new Error(`[${name}] follow-up question gives its own fact away: ${f}`);
  return { task, answer, followUp };
}

async function runSteps(agent, t, base) {
  await agent.start();
  for (const st of t.steps) {
    const say = st.say || null;
    if (st.navigate !== undefined) {
      await agent.navigate(`${base}/${st.navigate}`, say);
      if (st.read !== false) await agent.look();
    } else if (st.click !== undefined) {
      await agent.click(st.role || 'link', st.click, st.after || null, st.url || null, say);
      if (st.read !== false) await agent.look();
    } else if (st.back) {
      await agent.back(say);
      if (st.read) await agent.look();
    } else if (st.snapshot) {
      await agent.snapshot(say);
    } else throw new Error(`[${agent.scenario}] unknown step ${JSON.stringify(st)}`);
    if (st.sees) agent.mustHaveSeen(...st.sees);
  }
}

// ------------------------------------------------------------------ servers
function serverSpec(server, opts) {
  const install = opts.installDir || pinnedInstall(server);
  if (server.startsWith('pw-')) return { ...playwrightServer(install, opts.chromium), kind: 'pw', Agent: PwAgent };
  return { ...cdmcpServer(install, opts.chromium), kind: 'cdmcp', Agent: CdAgent };
}

async function runScenario(sc, spec, opts, outDir, factsDir) {
  const { name, set, task: t } = sc;
  const base = `${opts.base}/${set.set}`;
  const { task, answer, followUp } = checkScenarioText(name, t, base);
  return recordSession(spec, { name, outDir, prefix: 'docsets', timeoutMs: 120000 }, async ({ client, work, tools }) => {
    const agent = new spec.Agent(client, tools, name);
    await runSteps(agent, t, base);
    agent.mustHaveSeen(...t.facts.answer, ...t.facts.follow_up);

    fs.writeFileSync(path.join(factsDir, `${name}.txt`), [...t.facts.answer, ...t.facts.follow_up].join('\n') + '\n');
    const transcript = { system: SYSTEM[spec.kind], tools, task, steps: agent.steps, answer, followUp };
    const files = await writeSession(client, outDir, name, { openai: openaiBody(transcript), anthropic: anthropicBody(transcript) });
    fs.rmSync(path.join(outDir, `${name}.FAILED.mcp.jsonl`), { force: true });
    // 0.0.83 writes the snapshot files its results link (.playwright-mcp/page-*.yml);
    // they are not kept: every fact the model uses comes from an inline browser_snapshot.
    const written = filesIn(work);

    const calls = agent.steps.flatMap(s => s.calls);
    const obsSizes = calls.map(c => Buffer.byteLength(c.text));
    const hasSnap = c => spec.kind === 'pw' ? c.text.includes('```yaml') : c.text.includes(SNAP_HEADING);
    const snapName = spec.kind === 'pw' ? 'browser_snapshot' : 'take_snapshot';
    return {
      scenario: name,
      bytes: bytesOf(files),
      assistant_turns: agent.steps.length,
      observations: calls.length,
      observations_with_inline_snapshot: calls.filter(hasSnap).length,
      browser_snapshot_calls: calls.filter(c => c.name === snapName).length,
      calls: calls.map(c => c.name),
      error_observations: calls.filter(c => c.isError).map(c => ({ id: c.id, name: c.name })),
      observation_bytes: obsSizes,
      observation_bytes_total: obsSizes.reduce((x, y) => x + y, 0),
      observation_bytes_max: Math.max(...obsSizes),
      facts: { answer: t.facts.answer.length, follow_up: t.facts.follow_up.length },
      files_written_by_server: written.length,
      server_stderr: spec.kind === 'pw' ? (client.stderr.trim() || undefined) : undefined,
    };
  });
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  const scenarios = loadSets(opts);
  for (const sc of scenarios) checkScenarioText(sc.name, sc.task, `${opts.base}/${sc.set.set}`);
  if (opts.checkOnly) { console.error(`${scenarios.length} scenarios ok`); return; }
  const factsDir = path.join(path.resolve(opts.out), 'facts');
  fs.mkdirSync(factsDir, { recursive: true });
  let failed = 0;
  for (const server of opts.servers) {
    const spec = serverSpec(server, opts);
    const outDir = path.join(path.resolve(opts.out), OUT_DIR_NAME[server]);
    fs.mkdirSync(outDir, { recursive: true });
    const summary = { ...spec.info, chromium: opts.chromium, base: opts.base, scenarios: [] };
    for (const sc of scenarios) {
      process.stderr.write(`[${server}] ${sc.name} ... `);
      try {
        const s = await runScenario(sc, spec, opts, outDir, factsDir);
        summary.scenarios.push(s);
        process.stderr.write(`ok (${s.observations} observations, max ${(s.observation_bytes_max / 1024).toFixed(0)} KB, ${s.bytes.openai} B openai)\n`);
      } catch (e) {
        failed++;
        process.stderr.write(`FAILED\n${e.message}\n`);
      }
    }
    if (!opts.only && !opts.sets && !failed) fs.writeFileSync(path.join(outDir, 'summary.json'), jsonText(summary));
    else process.stdout.write(jsonText(summary));
  }
  if (failed) { console.error(`${failed} scenario run(s) failed`); process.exit(1); }
}

main().catch(e => { console.error(e.stack || e); process.exit(1); });
