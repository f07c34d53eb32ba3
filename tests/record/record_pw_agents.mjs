#!/usr/bin/env node
// Records real transcripts of a scripted "model" driving Chromium through the
// Playwright MCP server @playwright/mcp 0.0.83, in the ways coding and browsing
// agents use it beyond plain ref clicks: a click whose element description names
// one element while its ref points at another (a one-time-code login), refs
// taken from a browser_find result, targeted (`target`) and depth-limited
// (`depth`) snapshots, a CSS-selector target, a screenshot, a JavaScript alert
// (`### Modal state`), browser_handle_dialog, browser_console_messages and
// browser_tabs. Derived from tests/site/record.mjs: the same scripted model,
// and the MCP client and request bodies of tests/site/mcp_client.mjs; other
// scenarios, plus facts files.
//
// Scenarios (see fixtures/pwmcp-0.0.83-agents/README.md for what they show):
//   otp_mismatch  login/otp.html: click {element:"Verify & Sign In button",
//                 target:<ref of "Resend in 39s">} before typing the code, then
//                 type the (new) code and click the real button
//   find_target   long/catalog.html: browser_find, a click on a ref from the find
//                 result, snapshot {target}, a click on a ref outside that
//                 subtree, snapshot {depth}, a click on a CSS selector
//   page_reports  order/form.html: snapshot, screenshot, clicks, an alert raised
//                 by browser_evaluate, a click blocked by it, handle_dialog,
//                 console messages, tab list
//
// usage: node record_pw_agents.mjs <install-dir> [--base URL] [--out DIR]
//                                  [--only a,b] [--chromium PATH]
//   <install-dir>  folder where `npm install @playwright/mcp@0.0.83` was run
//                  (tests/mcp/node/pw-0.0.83)
//   --base         where tests/site/pages is served (default http://127.0.0.1:8431)
//   --out          output folder (default fixtures/pwmcp-0.0.83-agents)
//   --only         comma-separated scenario names (default: all)
//   --chromium     browser executable (default /usr/bin/chromium)
//
// Run it like this (from the repository root):
//   python3 -m http.server 8431 --bind 127.0.0.1 --directory tests/site/pages &
//   node tests/record/record_pw_agents.mjs tests/mcp/node/pw-0.0.83
//   kill %1
//
// For every scenario a fresh server (`playwright-mcp --headless --isolated
// --no-sandbox --executable-path /usr/bin/chromium`, so a fresh browser with
// empty storage) is started in an empty temporary working directory, and these
// are written:
//   <scenario>.openai.json     OpenAI Chat Completions request body
//   <scenario>.anthropic.json  Anthropic Messages request body (same transcript)
//   <scenario>.mcp.jsonl       every JSON-RPC message, {"seq","dir","msg"}
//   <scenario>.artifacts/      the files the server wrote into its working
//                              directory (.playwright-mcp/page-*.yml snapshots,
//                              page-*.png screenshots, console-*.log)
//   facts/<scenario>.txt       one fact a line: the ones the final answer states,
//                              then the ones the follow-up asks about
// plus summary.json (sizes, counts, and what each deliberate call did) when all
// scenarios ran. A fact is written only after it was found verbatim in a tool
// result, an answer fact also in the answer and a follow-up fact not in it.
//
// Tool-result text is the MCP result's text parts joined with "\n"; a non-text
// part (the screenshot's image) becomes a line `[image content omitted]`, as in
// record.mjs. Refs are taken from the newest snapshot text the model has seen
// (or, in find_target, from the browser_find result), never guessed.

import fs from 'node:fs';
import path from 'node:path';
import {
  REPO, parseArgs, playwrightServer, recordSession, Transcript, openaiBody, anthropicBody, writeSession, bytesOf, keepArtifacts,
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
    const snapProps = tools.find(t => t.name === 'browser_snapshot').inputSchema.properties || {};
    if (!('target' in snapProps) || !('depth' in snapProps)) throw new Error('browser_snapshot has no target/depth arguments');
    this.snap = null;         // newest snapshot seen: {text, callId, partial}
    this.needFresh = false;   // page changed but the snapshot was not inlined
    this.findings = [];
  }

  el(description, ref) { return { element: description, [this.refKey]: ref }; }

  observe(call) {
    if (call.isError) return;
    const blocks = [...call.text.matchAll(YAML_RE)].map(m => m[1]);
    if (blocks.length) {
      const text = blocks.join('\n');
      // A snapshot limited by `target` or `depth` shows only part of the page.
      const limited = call.name === 'browser_snapshot' && (call.args.target !== undefined || call.args.depth !== undefined);
      this.snap = { text, callId: call.id, partial: limited };
      this.needFresh = false;
    } else if (/\[Snapshot\]\(|### Snapshot|Page Snapshot/.test(call.text)) {
      this.needFresh = true;   // page state reported, snapshot only linked
    }
  }

  // The ref of the first `role "name"` line in `text` (default: the newest snapshot).
  findRef(role, name, text = this.snap && this.snap.text) {
    if (!text) return null;
    const needle = `${role} "${name}"`;
    for (const line of text.split('\n')) {
      const i = line.indexOf(needle);
      if (i < 0) continue;
      const m = line.slice(i + needle.length).match(/\[ref=([^\]]+)\]/);
      if (m) return m[1];
    }
    return null;
  }

  // The ref of a node shown as `- role [ref=X]: text` (text content, no accessible name).
  findTextRef(content, text = this.snap && this.snap.text) {
    if (!text) return null;
    for (const line of text.split('\n')) {
      const m = line.match(/\[ref=([^\]]+)\]: (.*)$/);
      if (m && m[2] === content) return m[1];
    }
    return null;
  }

  // The ref of the row that holds `cell "name"` in `text` (the row line precedes its cells).
  findRowOf(cellName, text) {
    let row = null;
    for (const line of text.split('\n')) {
      const r = line.match(/^\s*- row \[ref=([^\]]+)\]/);
      if (r) row = r[1];
      if (line.includes(`cell "${cellName}"`)) return row;
    }
    return null;
  }

  async snapshot(text = null, args = {}) { return this.do('browser_snapshot', args, text); }

  // Make sure the newest page state has been seen as snapshot text.
  async look(text = null) { if (this.needFresh) await this.snapshot(text); }

  async ref(role, name) {
    await this.look();
    let r = this.findRef(role, name);
    if (!r && this.snap && this.snap.partial) { await this.snapshot(); r = this.findRef(role, name); }
    if (!r) throw new Error(`[${this.scenario}] no ${role} "${name}" in newest snapshot (${this.snap && this.snap.callId})`);
    return r;
  }


  // What a call did, as far as the server reports it.
  static ranCode(text) {
    const m = text.match(/### Ran Playwright code\n```js\n([\s\S]*?)\n```/);
    return m ? m[1].trim() : null;
  }

  finding(kind, call, extra = {}) {
    this.findings.push({
      kind, call_id: call.id, tool: call.name, args: call.args,
      server_error: call.isError, ran_code: Agent.ranCode(call.text),
      result_excerpt: call.text.slice(0, 400), ...extra,
    });
  }
}

// ------------------------------------------------------------------ scenarios
const SYSTEM = [
  'You are a browser automation assistant. You control a real Chromium browser through the Playwright MCP tools.',
  'Interact with elements by the ref shown for them in the most recent page snapshot or search result.',
  'Be careful with actions that have side effects, and report exactly what you did.',
].join(' ');

const SCENARIOS = {
  // The one-time-code login of a real failed session: the model means "Verify &
  // Sign In" (disabled until 6 digits are typed) but passes the ref of the
  // clickable "Resend in 39s" beside it, which sends a new code and voids the old.
  async otp_mismatch(a, o) {
    const task = `Sign me in at ${o.base}/login/otp.html. The one-time code from my email is 246810. ` +
      `(If the site sends another code, my newest email has 135790.)`;
    await a.do('browser_navigate', { url: `${o.base}/login/otp.html` });
    await a.look();
    const verifyRef = a.findRef('button', 'Verify & Sign In');
    const resendRef = a.findTextRef('Resend in 39s');
    const textbox = a.findRef('textbox', 'One-time code');
    if (!verifyRef || !resendRef || !textbox) throw new Error('[otp_mismatch] otp page refs not found');
    const firstSnap = a.snap.callId;
    // Deliberate: the description names the verify button, the ref is the resend element's.
    const wrong = await a.do('browser_click', a.el('Verify & Sign In button', resendRef),
      'Clicking Verify & Sign In.');
    await a.snapshot('Checking whether that signed me in.');
    const resent = /A new code was sent\. The previous code no longer works\./.test(a.snap.text);
    a.finding('element description names one element, ref points at another', wrong, {
      ref: resendRef, ref_taken_from: firstSnap,
      intended_element: `button "Verify & Sign In" [ref=${verifyRef}] (disabled)`,
      ref_element: `generic [ref=${resendRef}]: Resend in 39s`,
      code_resent: resent,
      status_after: (a.snap.text.match(/- status[^\n]*/) || [''])[0].trim(),
    });
    const code = resent ? '135790' : '246810';
    await a.do('browser_type', { ...a.el('One-time code textbox', textbox), text: code },
      resent ? 'That click sent a new code, which voids 246810. Typing the newer code 135790.' : 'Typing the code.');
    await a.snapshot('Checking that Verify & Sign In is enabled now.');
    const verify = await a.ref('button', 'Verify & Sign In');
    if (/button "Verify & Sign In" \[disabled\]/.test(a.snap.text)) throw new Error('[otp_mismatch] verify still disabled');
    await a.do('browser_click', a.el('Verify & Sign In button', verify), 'The button is enabled now. Clicking Verify & Sign In.');
    await a.look();
    const facts = {
      answer: ['A new code was sent. The previous code no longer works.', 'Welcome back. Your last sign-in was on 3 November 2026 from Lisbon.'],
      followUp: ['a***@example.org'],
    };
    a.mustHaveSeen(...facts.answer, ...facts.followUp, 'Signed in');
    const answer = [
      'You are signed in, but not on the first try. My first click was meant for "Verify & Sign In" (still disabled, as no code was typed), but the ref I used was that of "Resend in 39s" beside it, so it requested a new code instead.',
      `The page then said: "${facts.answer[0]}" So 246810 no longer works; I typed 135790 from your newest email and clicked Verify & Sign In.`,
      `The "Signed in" page says: "${facts.answer[1]}"`,
    ].join(' ');
    return { task, answer, followUp: 'Which email address were the codes sent to?', facts };
  },

  // browser_find, refs from its result, targeted and depth-limited snapshots,
  // a ref outside the targeted subtree, a CSS selector as target.
  async find_target(a, o) {
    const task = `In the parts catalog at ${o.base}/long/catalog.html, find every "Hex bolt 100 mm" part and its price. ` +
      `Then go back to the top of the catalog and open the shop's home page from the catalog's Home link.`;
    await a.do('browser_navigate', { url: `${o.base}/long/catalog.html` });
    const find = await a.do('browser_find', { text: 'Hex bolt 100 mm' },
      'The catalog is long; searching it instead of reading the whole snapshot.');
    a.mustHaveSeen('Hex bolt 100 mm, black', 'Hex bolt 100 mm, stainless', 'Hex bolt 100 mm, zinc');
    const topRef = a.findRef('link', 'Back to top', find.text);
    const rowRef = a.findRowOf('Hex bolt 100 mm, stainless', find.text);
    if (!topRef || !rowRef) throw new Error('[find_target] Back to top link / P-0168 row not in the find result');
    const c1 = await a.do('browser_click', a.el('Back to top link', topRef),
      'Found three: P-0036, P-0168 and P-0300. The last match shows the "Back to top" link; clicking it.');
    a.finding('click on a ref taken from a browser_find result', c1, { ref: topRef, ref_taken_from: find.id });
    const targeted = await a.snapshot('Double-checking the P-0168 row before answering.', { target: rowRef });
    // Deliberate: a ref from the find result (outside the targeted row), right after the targeted snapshot.
    const outside = await a.do('browser_click', a.el('Back to top link', topRef),
      'Confirmed: P-0168 costs $14.51. Making sure the page is back at the top.');
    a.finding('ref outside the subtree of the preceding targeted snapshot', outside, {
      ref: topRef, ref_taken_from: find.id, targeted_snapshot: targeted.id, snapshot_target: rowRef,
    });
    const shallow = await a.snapshot(outside.isError ? 'That ref was rejected. Taking a shallow snapshot of the page outline.' : 'Taking a shallow snapshot of the page outline.', { depth: 2 });
    const topRef2 = a.findRef('link', 'Back to top');
    if (!topRef2) throw new Error('[find_target] no Back to top link in the depth-limited snapshot');
    const again = await a.do('browser_click', a.el('Back to top link', topRef2), 'Clicking Back to top with the ref from that snapshot.');
    a.finding('ref from a depth-limited snapshot, outside the earlier targeted subtree', again, {
      ref: topRef2, ref_taken_from: shallow.id,
    });
    const css = await a.do('browser_click', a.el('Home link', 'a:has-text("Home")'), 'Now opening the home page through the Home link.');
    a.finding('CSS selector as target', css, { selector: 'a:has-text("Home")' });
    await a.look();
    a.mustHaveSeen('Fixture shop');
    const facts = {
      answer: ['P-0036', 'Hex bolt 100 mm, black', '$1.67', 'P-0168', 'Hex bolt 100 mm, stainless', '$14.51', 'P-0300', 'Hex bolt 100 mm, zinc', '$3.35'],
      followUp: ['300 parts. Prices exclude tax.'],
    };
    const answer = 'The catalog has three "Hex bolt 100 mm" parts: P-0036 (Hex bolt 100 mm, black) $1.67, P-0168 (Hex bolt 100 mm, stainless) $14.51, and P-0300 (Hex bolt 100 mm, zinc) $3.35. ' +
      'I went back to the top of the catalog (one of my clicks was rejected because its ref had been invalidated by a snapshot of a single row; the retry worked) and opened the home page, "Fixture shop".';
    return { task, answer, followUp: 'How many parts are in the catalog, and do these prices include tax?', facts };
  },

  // Screenshot, a JavaScript alert (modal state), a click it blocks,
  // handle_dialog, console messages, tab list; older refs stay valid throughout.
  async page_reports(a, o) {
    const task = `Before we use the order form at ${o.base}/order/form.html, check it: take a screenshot, make sure the Name and Quantity fields respond to clicks, ` +
      `check that page scripts run and can show an alert, and report the console messages and the open tabs.`;
    await a.do('browser_navigate', { url: `${o.base}/order/form.html` });
    await a.look();
    const snapId = a.snap.callId;
    const name = a.findRef('textbox', 'Name');
    const qty = a.findRef('spinbutton', 'Quantity');
    if (!name || !qty) throw new Error('[page_reports] form refs not found');
    await a.do('browser_take_screenshot', { type: 'png', scale: 'css' }, 'Taking the screenshot.');
    const c1 = await a.do('browser_click', a.el('Name textbox', name), 'Checking that the Name field takes focus.');
    a.finding('click by a ref from the earlier snapshot', c1, { ref: name, ref_taken_from: snapId });
    const ev = await a.do('browser_evaluate', {
      function: '() => { console.log("form check: " + document.forms.length + " form"); console.warn("quantity max is " + document.getElementById("qty").max); setTimeout(() => alert("hi"), 100); return document.title; }',
    }, 'Checking that page scripts run, log to the console and can show an alert.');
    a.finding('browser_evaluate that opens an alert via setTimeout', ev, { modal_state_in_result: /### Modal state/.test(ev.text), snapshot_section_in_result: /### Snapshot/.test(ev.text) });
    // A model that does not read the modal state goes on with the next check.
    const blocked = await a.do('browser_click', a.el('Quantity spinbutton', qty), 'Now the Quantity field.');
    a.finding('click while a dialog is open', blocked, { ref: qty, ref_taken_from: snapId, modal_state_in_result: /### Modal state/.test(blocked.text) });
    const hd = await a.do('browser_handle_dialog', { accept: true }, 'An alert "hi" is open and blocks the page. Accepting it.');
    a.finding('browser_handle_dialog accept', hd);
    const c2 = await a.do('browser_click', a.el('Quantity spinbutton', qty), 'Trying the Quantity field again.');
    a.finding('click by an older ref after the dialog', c2, { ref: qty, ref_taken_from: snapId });
    const cons = await a.do('browser_console_messages', { level: 'info' }, 'Reading the console messages.');
    const tabs = await a.do('browser_tabs', { action: 'list' }, 'Listing the open tabs.');
    const c3 = await a.do('browser_click', a.el('Name textbox', name), 'Putting the cursor back into the Name field so you can start typing.');
    a.finding('click by an older ref at the end', c3, { ref: name, ref_taken_from: snapId });
    if (!/### Modal state/.test(ev.text + blocked.text)) throw new Error('[page_reports] no modal state was reported');
    if (c1.isError || c2.isError || c3.isError || hd.isError || cons.isError || tabs.isError) throw new Error('[page_reports] an expected-good call failed');
    const facts = {
      answer: ['Order a widget', 'form check: 1 form', 'quantity max is 20', 'Total messages: 2 (Errors: 0, Warnings: 1)', `${o.base}/order/form.html`],
      followUp: ['Blue $21.50'],
    };
    const answer = [
      'The order form works. I took a screenshot of the viewport. The Name and Quantity fields respond to clicks.',
      'Page scripts run: my test script read the title "Order a widget", wrote two console messages and opened an alert "hi", which I accepted (while it was open, a click on Quantity was refused; it worked afterwards).',
      'Console: Total messages: 2 (Errors: 0, Warnings: 1) - [LOG] form check: 1 form, [WARNING] quantity max is 20. Both come from my test script; the page itself logged nothing.',
      `Open tabs: one, "Order a widget" (${o.base}/order/form.html).`,
    ].join(' ');
    return { task, answer, followUp: 'What does a Blue widget cost on this form?', facts };
  },
};

// --------------------------------------------------------------------- main
// Where `staleguard replay` looks for a fact (crates/staleguard-cli/src/replay/facts.rs):
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
  return recordSession(server, { name, outDir, prefix: 'pwmcp-agents' }, async ({ client, work, tools }) => {
    const agent = new Agent(client, tools, name);
    const { task, answer, followUp, facts } = await SCENARIOS[name](agent, opts);
    checkFacts(name, agent, answer, facts);

    fs.writeFileSync(path.join(outDir, 'facts', `${name}.txt`), [...facts.answer, ...facts.followUp].join('\n') + '\n');
    const transcript = { system: SYSTEM, tools, task, steps: agent.steps, answer, followUp };
    const files = await writeSession(client, outDir, name, { openai: openaiBody(transcript), anthropic: anthropicBody(transcript) });

    // Files the server wrote (file-linked snapshots, screenshots, console logs).
    const written = keepArtifacts(work, path.join(outDir, `${name}.artifacts`));

    const calls = agent.steps.flatMap(s => s.calls);
    const obsSizes = calls.map(c => Buffer.byteLength(c.text));
    return {
      scenario: name,
      bytes: bytesOf(files),
      assistant_turns: agent.steps.length,
      parallel_turns: agent.steps.filter(s => s.calls.length > 1).length,
      observations: calls.length,
      observations_with_inline_snapshot: calls.filter(c => c.text.includes('```yaml')).length,
      browser_snapshot_calls: calls.filter(c => c.name === 'browser_snapshot').length,
      error_observations: calls.filter(c => c.isError).map(c => ({ id: c.id, name: c.name, first_line: c.text.split('\n').find(l => l && !l.startsWith('#')) })),
      observation_bytes_total: obsSizes.reduce((x, y) => x + y, 0),
      observation_bytes_max: Math.max(...obsSizes),
      artifacts_written: written,
      facts: { answer: facts.answer.length, follow_up: facts.followUp.length },
      findings: agent.findings,
      server_stderr: client.stderr.trim() || undefined,
    };
  });
}

async function main() {
  const opts = parseArgs(process.argv.slice(2), {
    usage: 'node record_pw_agents.mjs <install-dir> [--base URL] [--out DIR] [--only a,b]',
    defaults: { base: 'http://127.0.0.1:8431', out: path.join(REPO, 'fixtures', 'pwmcp-0.0.83-agents') },
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
