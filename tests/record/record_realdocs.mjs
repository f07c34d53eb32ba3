#!/usr/bin/env node
// Records sessions of a scripted "model" reading real documentation pages
// (Debian's nodejs-doc, copied to fixtures/realdocs/site) through the real
// Playwright MCP server, so that evidence and cache cost are measured on pages
// as big and as cluttered as real ones (20-350 KB snapshots), not only on the
// small shared test site. Derived from tests/site/record.mjs: the same scripted
// model, and the MCP client and request bodies of tests/site/mcp_client.mjs;
// other scenarios, and facts files.
//
// usage: node record_realdocs.mjs <install-dir> [--base URL] [--out DIR]
//                                 [--only a,b] [--chromium PATH]
//   <install-dir>  folder where `npm install @playwright/mcp@VERSION` was run
//                  (tests/mcp/node/pw-0.0.41)
//   --base         where fixtures/realdocs/site is served (default http://127.0.0.1:8441)
//   --out          output folder (default fixtures/realdocs)
//   --only         comma-separated scenario names (default: all)
//   --chromium     browser executable (default /usr/bin/chromium)
//
// For every scenario a fresh server (and so a fresh isolated browser) is
// started in an empty temporary working directory, and four files are written:
//   <scenario>.openai.json     OpenAI Chat Completions request body
//   <scenario>.anthropic.json  Anthropic Messages request body
//   <scenario>.mcp.jsonl       every JSON-RPC message, {"seq","dir","msg"}
//   facts/<scenario>.txt       one fact a line: the ones the final answer states,
//                              then the ones the follow-up asks about
// plus one summary.json (sizes, observation counts) when all scenarios ran.
// A fact is written only after it was found verbatim in a tool result, an
// answer fact also in the answer and a follow-up fact not in it (that is how
// `staleguard replay` tells them apart).

import fs from 'node:fs';
import path from 'node:path';
import {
  REPO, parseArgs, playwrightServer, recordSession, Transcript, openaiBody, anthropicBody, writeSession, bytesOf, filesIn,
  jsonText,
} from '../site/mcp_client.mjs';

// ------------------------------------------------------ the scripted "model"
const YAML_RE = /```yaml\n([\s\S]*?)\n```/g;

class Agent extends Transcript {
  constructor(client, tools, scenario) {
    super(client, scenario);
    this.tools = tools;
    const clickProps = tools.find(t => t.name === 'browser_click').inputSchema.properties || {};
    this.refKey = 'target' in clickProps ? 'target' : 'ref';
    this.snap = null;         // newest snapshot seen: {text, callId, partial}
    this.needFresh = false;   // page changed but the snapshot was not inlined
  }

  el(description, ref) { return { element: description, [this.refKey]: ref }; }

  observe(call) {
    if (call.isError) return;
    const blocks = [...call.text.matchAll(YAML_RE)].map(m => m[1]);
    if (blocks.length) {
      const text = blocks.join('\n');
      this.snap = { text, callId: call.id, partial: /<changed>|\[unchanged\]/.test(text) };
      this.needFresh = false;
    } else if (/\[Snapshot\]\(|### Snapshot|Page Snapshot/.test(call.text)) {
      this.needFresh = true;   // page state reported, snapshot only linked
    }
  }

  // The ref of the first `role "name"` in the newest snapshot; with `after`, the first one
  // below the first line that holds `after` (a page of API docs has a "History" toggle in
  // every section: a reader picks the one under the heading it is reading).
  findRef(role, name, after = null, text = this.snap && this.snap.text) {
    if (!text) return null;
    const needle = `${role} "${name}"`;
    let lines = text.split('\n');
    if (after !== null) {
      const start = lines.findIndex(l => l.includes(after));
      if (start < 0) return null;
      lines = lines.slice(start + 1);
    }
    for (const line of lines) {
      const i = line.indexOf(needle);
      if (i < 0) continue;
      const m = line.slice(i + needle.length).match(/\[ref=([^\]]+)\]/);
      if (m) return m[1];
    }
    return null;
  }

  async snapshot(text = null) { return this.do('browser_snapshot', {}, text); }

  // Make sure the newest page state has been seen as snapshot text.
  async look(text = null) { if (this.needFresh) await this.snapshot(text); }

  async ref(role, name, after = null) {
    await this.look();
    let r = this.findRef(role, name, after);
    if (!r && this.snap && this.snap.partial) { await this.snapshot(); r = this.findRef(role, name, after); }
    if (!r) throw new Error(`[${this.scenario}] no ${role} "${name}"${after ? ` after ${after}` : ''} in newest snapshot (${this.snap && this.snap.callId})`);
    return r;
  }

  async click(role, name, text = null, after = null) {
    const r = await this.ref(role, name, after);
    return this.do('browser_click', this.el(`${name} ${role}`, r), text);
  }

}


// ------------------------------------------------------------------ scenarios
const SYSTEM = [
  'You are a browser automation assistant. You control a real Chromium browser through the Playwright MCP tools.',
  'Interact with elements by the ref shown for them in the most recent page snapshot.',
  'Answer from what the pages say, and quote them exactly.',
].join(' ');

// Each scenario reads 2-3 real API pages and returns the task, the final answer, a follow-up
// about another fact of a page read earlier, and the facts: `answer` ones the final answer
// quotes verbatim, `followUp` ones the follow-up asks about. Every fact is a single text node
// of a snapshot (a paragraph, or the text between two inline `code` pieces), as a model
// would quote it.
const SCENARIOS = {
  // index -> os (TOC jump on the same page) -> process (cross-module link) -> back.
  async node_os(a, o) {
    const task = `Using the Node.js API documentation at ${o.base}/index.html: since which version does os.availableParallelism() exist and what does it return? Which values can process.platform report, and can it be 'android'?`;
    await a.do('browser_navigate', { url: `${o.base}/index.html` });
    await a.click('link', 'OS', 'The os module page should have it.');
    await a.click('link', 'os.availableParallelism()', 'Jumping to os.availableParallelism() from the table of contents.');
    const facts = {
      answer: [
        'Added in: v18.14.0',
        'Returns an estimate of the default amount of parallelism a program should use. Always returns a value greater than zero.',
        'Currently possible values are:',
        'may also be returned if the Node.js is built on the Android operating system. However, Android support in Node.js',
      ],
      followUp: ['property returns a string identifying the operating system platform for which the Node.js binary was compiled.'],
    };
    a.mustHaveSeen(facts.answer[0], facts.answer[1]);
    await a.click('link', 'process.platform', 'os.platform() says its value is the same as process.platform; following that link for the list of values.', 'heading "os.platform() #"');
    a.mustHaveSeen(facts.answer[2], facts.answer[3], ...facts.followUp);
    await a.do('browser_navigate_back', {}, 'Back to the os page.');
    const answer = [
      `os.availableParallelism() first appeared in Node.js 18.14.0 (the page says "${facts.answer[0]}") and returns an integer: "${facts.answer[1]}"`,
      `process.platform: "${facts.answer[2]}" 'aix', 'darwin', 'freebsd', 'linux', 'openbsd', 'sunos' and 'win32'.`,
      `'android' is possible too: it "${facts.answer[3]}" is experimental.`,
    ].join('\n');
    return { task, answer, followUp: 'What exactly does the process page say process.platform identifies?', facts };
  },

  // url (open a History toggle) -> querystring (cross-module link) -> back.
  async node_url(a, o) {
    const task = `In the Node.js URL documentation at ${o.base}/url.html: what does the legacy url.parse() put in the query property with parseQueryString true, and with false? What changed in url.parse() in v11.14.0? How many keys does querystring.parse() parse by default?`;
    await a.do('browser_navigate', { url: `${o.base}/url.html` });
    const parse = 'heading "url.parse(urlString[, parseQueryString[, slashesDenoteHost]]) #"';
    await a.click('generic', 'History', 'Opening the History of url.parse() for the version changes.', parse);
    const facts = {
      answer: [
        'property will always be set to an object returned by the',
        'property on the returned URL object will be an unparsed, undecoded string.',
        'The pathname property on the returned URL object is now / when there is no path and the protocol scheme is ws: or wss:.',
        'Specifies the maximum number of keys to parse. Specify',
      ],
      followUp: ['The substring used to delimit key and value pairs in the query string.'],
    };
    a.mustHaveSeen(facts.answer[0], facts.answer[1], facts.answer[2]);
    await a.click('link', 'querystring', 'The query object comes from the querystring module; checking its parse() options.', parse);
    a.mustHaveSeen(facts.answer[3], ...facts.followUp);
    await a.do('browser_navigate_back', {}, 'Back to url.parse().');
    const answer = [
      `With parseQueryString true, the query "${facts.answer[0]}" querystring module's parse() method; with false (the default) the query "${facts.answer[1]}"`,
      `History of url.parse(): v11.14.0 - "${facts.answer[2]}"`,
      `querystring.parse() maxKeys: "${facts.answer[3]}" 0 to remove the limit; the default is 1000.`,
    ].join('\n');
    return { task, answer, followUp: 'And what does the sep argument of querystring.parse() mean?', facts };
  },

  // events -> process 'warning' event (cross-module link) -> back.
  async node_events(a, o) {
    const task = `Using the Node.js events documentation at ${o.base}/events.html: how many listeners can be registered for a single event by default, what happens when more are added, and what is the name of the warning? When does process emit its 'warning' event, and what does the warning's message hold?`;
    await a.do('browser_navigate', { url: `${o.base}/events.html` });
    const facts = {
      answer: [
        'listeners can be registered for any single event. This limit can be changed for individual',
        'MaxListenersExceededWarning',
        'event is emitted whenever Node.js emits a process warning.',
        'A system-provided description of the warning.',
      ],
      followUp: ['The name of the warning.'],
    };
    a.mustHaveSeen(facts.answer[0], facts.answer[1]);
    await a.click('link', "process.on('warning')", "The warning can be inspected with process.on('warning'); following that link.");
    a.mustHaveSeen(facts.answer[2], facts.answer[3], ...facts.followUp);
    await a.do('browser_navigate_back', {}, 'Back to the events page.');
    const answer = [
      `By default at most 10 (events.defaultMaxListeners): "${facts.answer[0]}" EventEmitter instances with emitter.setMaxListeners(n).`,
      `It is not a hard limit: more listeners are added, but a "possible EventEmitter memory leak" warning is printed, named '${facts.answer[1]}'.`,
      `process: the 'warning' "${facts.answer[2]}" Its listener gets an Error whose message is "${facts.answer[3]}"`,
    ].join('\n');
    return { task, answer, followUp: "And the warning's name property, what is it?", facts };
  },

  // one 350 KB page read twice: open a History toggle.
  async node_buffer(a, o) {
    const task = `From the Node.js Buffer documentation at ${o.base}/buffer.html: what does Buffer.alloc() fill a new Buffer with when fill is undefined, in which version was Buffer.alloc() added and what did v8.9.3 change in it, and how large can a single Buffer be on a 64-bit machine?`;
    await a.do('browser_navigate', { url: `${o.base}/buffer.html` });
    const alloc = 'heading "Static method: Buffer.alloc(size[, fill[, encoding]]) #"';
    await a.click('generic', 'History', 'Opening the History of Buffer.alloc() to see when it was added.', alloc);
    const facts = {
      answer: [
        'will be zero-filled.',
        'Added in: v5.10.0',
        'Specifying an invalid string for fill now results in a zero-filled buffer.',
        'On 64-bit architectures, this value currently is 2',
        '(about 4 GiB).',
      ],
      followUp: ['This is the size (in bytes) of pre-allocated internal', '8192'],
    };
    a.mustHaveSeen(...facts.answer, ...facts.followUp);
    const answer = [
      `If fill is undefined, the Buffer "${facts.answer[0]}"`,
      `Buffer.alloc() history: "${facts.answer[1]}"; v8.9.3: "${facts.answer[2]}"`,
      `Largest single Buffer (buffer.constants.MAX_LENGTH): "${facts.answer[3]}"^32 "${facts.answer[4]}"`,
    ].join('\n');
    return { task, answer, followUp: 'What is the default Buffer.poolSize?', facts };
  },
};

// --------------------------------------------------------------------- main
// Where `staleguard replay` looks for a fact (see crates/staleguard-cli/src/replay/facts.rs):
// one the final answer holds must be in the request that produced the answer, any other in
// the request with the follow-up. So an answer fact must be in the answer, a follow-up fact
// must not, and both must be in a tool result.
function checkFacts(name, agent, answer, facts) {
  agent.mustHaveSeen(...facts.answer, ...facts.followUp);
  for (const f of facts.answer) if (!answer.includes(f)) throw new Error(`[${name}] answer fact not in the answer: ${f}`);
  for (const f of facts.followUp) if (answer.includes(f)) throw new Error(`[${name}] follow-up fact already in the answer: ${f}`);
  for (const f of [...facts.answer, ...facts.followUp]) if (!f.trim() || f.includes('\n')) throw new Error(`[${name}] bad fact: ${JSON.stringify(f)}`);
}

async function runScenario(name, opts, server, outDir) {
  return recordSession(server, { name, outDir, prefix: 'pwmcp-realdocs' }, async ({ client, work, tools }) => {
    const agent = new Agent(client, tools, name);
    const { task, answer, followUp, facts } = await SCENARIOS[name](agent, opts);
    checkFacts(name, agent, answer, facts);

    fs.writeFileSync(path.join(outDir, 'facts', `${name}.txt`), [...facts.answer, ...facts.followUp].join('\n') + '\n');
    const transcript = { system: SYSTEM, tools, task, steps: agent.steps, answer, followUp };
    const files = await writeSession(client, outDir, name, { openai: openaiBody(transcript), anthropic: anthropicBody(transcript) });
    const written = filesIn(work);
    if (written.length) throw new Error(`[${name}] the server wrote files this recorder does not keep: ${written.join(', ')}`);

    const calls = agent.steps.flatMap(s => s.calls);
    const obsSizes = calls.map(c => Buffer.byteLength(c.text));
    return {
      scenario: name,
      bytes: bytesOf(files),
      assistant_turns: agent.steps.length,
      observations: calls.length,
      observations_with_inline_snapshot: calls.filter(c => c.text.includes('```yaml')).length,
      browser_snapshot_calls: calls.filter(c => c.name === 'browser_snapshot').length,
      error_observations: calls.filter(c => c.isError).map(c => ({ id: c.id, name: c.name })),
      observation_bytes: obsSizes,
      observation_bytes_total: obsSizes.reduce((x, y) => x + y, 0),
      observation_bytes_max: Math.max(...obsSizes),
      facts: { answer: facts.answer.length, follow_up: facts.followUp.length },
      server_stderr: client.stderr.trim() || undefined,
    };
  });
}

async function main() {
  const opts = parseArgs(process.argv.slice(2), {
    usage: 'node record_realdocs.mjs <install-dir> [--base URL] [--out DIR] [--only a,b]',
    defaults: { base: 'http://127.0.0.1:8441', out: path.join(REPO, 'fixtures', 'realdocs') },
  });
  const server = playwrightServer(opts.install, opts.chromium);
  const outDir = path.resolve(opts.out);
  fs.mkdirSync(path.join(outDir, 'facts'), { recursive: true });
  const names = opts.only || Object.keys(SCENARIOS);
  const summary = { ...server.info, base: opts.base, scenarios: [] };
  for (const name of names) {
    if (!SCENARIOS[name]) throw new Error(`unknown scenario ${name}`);
    process.stderr.write(`[${server.version}] ${name} ... `);
    const s = await runScenario(name, opts, server, outDir);
    summary.scenarios.push(s);
    process.stderr.write(`ok (${s.observations} observations, ${s.bytes.openai} B openai)\n`);
  }
  if (!opts.only) fs.writeFileSync(path.join(outDir, 'summary.json'), jsonText(summary));
  else process.stdout.write(jsonText(summary));
}

main().catch(e => { console.error(e.stack || e); process.exit(1); });
