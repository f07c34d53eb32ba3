#!/usr/bin/env node
// Records real transcripts of a scripted "model" driving Chromium through
// Google's Chrome DevTools MCP server (npm `chrome-devtools-mcp`), for
// snapshot-compaction tests. Modelled on tests/site/record.mjs (the
// @playwright/mcp recorder): same site, same scenarios, same output files.
//
// This copy (staleguard tests/record/record_cdmcp_formats.mjs) adds --server-arg, to
// record the server's opt-in data formats; see "Data formats" below.
//
// usage: node record_cdmcp_formats.mjs <install-dir> [--base URL] [--out DIR] [--only a,b]
//                              [--chromium PATH] [--dead-url URL] [--server-arg FLAG]...
//   <install-dir>  folder where `PUPPETEER_SKIP_DOWNLOAD=1 npm install chrome-devtools-mcp@VERSION` was run
//   --base         where tests/site/pages is served (default http://127.0.0.1:8431)
//   --out          output folder (default ./recorded/cdmcp-<version> in the current directory)
//   --only         comma-separated scenario names (default: all)
//   --chromium     browser executable (default /usr/bin/chromium)
//   --dead-url     a URL on a closed port, for the failing navigation
//                  (default http://127.0.0.1:8439/research/search.html)
//   --server-arg   one more server flag, appended after the default ones; repeatable
//                  (e.g. --server-arg --experimentalStructuredContent)
//
// The server is started as
//   chrome-devtools-mcp --headless --isolated --executablePath <chromium>
//                       --chromeArg=--no-sandbox --no-usage-statistics --no-performance-crux
// with CHROME_DEVTOOLS_MCP_NO_USAGE_STATISTICS=1, in an empty temporary working
// directory. Every scenario gets a fresh server and so a fresh isolated browser
// (empty localStorage). Page-id routing is left at its default (on), so every
// page-scoped tool requires `pageId`; the model learns it from list_pages.
//
// Per scenario three files are written:
//   <scenario>.openai.json     OpenAI Chat Completions request body
//   <scenario>.anthropic.json  Anthropic Messages request body (same transcript)
//   <scenario>.mcp.jsonl       every JSON-RPC message, {"seq","dir","msg"}
// plus tools.json (the tools/list result) and summary.json (sizes, observation
// counts, snapshot counts, stale-uid outcomes with the exact error text); with
// --only the summary goes to summary.<a+b>.json instead.
//
// The "model" is a script. It picks uids by matching `uid=<id> role "name"` in
// the newest snapshot text it has seen (`## Latest page snapshot` sections of
// take_snapshot, wait_for, or an action called with includeSnapshot). After an
// action that can change the page (navigate_page, click, press_key, ...) whose
// result carries no snapshot, it calls take_snapshot before it picks the next
// uid, as a model would. Scenarios named *_inline pass includeSnapshot: true to
// every action that accepts it, so the action results carry the snapshot.
//
// Data formats (--server-arg). The request bodies always carry what a client that
// forwards text content gives the model: the text parts of the result, joined with
// `\n` (as above). Two flags change what the server sends:
//   --experimentalStructuredContent  the text is unchanged; the result also carries
//       `structuredContent` (the snapshot tree as JSON in `structuredContent.snapshot`).
//       When any result carries it, two more bodies are written,
//       <scenario>_structured.openai.json / .anthropic.json, whose tool contents are
//       JSON.stringify(structuredContent) (what a client that forwards structured content
//       gives the model), or the joined text when a result has no or an empty
//       structuredContent (a thrown error).
//   --experimentalDataFormat=toon    the snapshot under `## Latest page snapshot` is TOON
//       (@toon-format/toon must be installed beside chrome-devtools-mcp). The scripted
//       model decodes it with that package's decode() to find uids.

import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import {
  parseArgs, cdmcpServer, recordSession, Transcript, openaiBody, anthropicBody, writeSession, bytesOf, filesIn, jsonText,
} from '../site/mcp_client.mjs';

// ------------------------------------------------------ the scripted "model"
const SNAP_HEADING = '## Latest page snapshot';
// Actions after which the page may differ from the newest snapshot seen.
const PAGE_CHANGERS = new Set(['navigate_page', 'new_page', 'select_page', 'close_page', 'click', 'click_at',
  'press_key', 'type_text', 'hover', 'drag', 'upload_file', 'handle_dialog']);
const TAKES_INCLUDE_SNAPSHOT = new Set(['click', 'fill', 'fill_form', 'press_key', 'hover', 'drag', 'upload_file']);

// The snapshot section of a result as sent: the lines after `## Latest page
// snapshot`, up to the next `#`/`##` heading.
function rawSnapshotOf(text) {
  const i = text.indexOf(SNAP_HEADING + '\n');
  if (i < 0) return null;
  const out = [];
  for (const line of text.slice(i + SNAP_HEADING.length + 1).split('\n')) {
    if (/^#{1,2} /.test(line)) break;
    out.push(line);
  }
  return out.join('\n').replace(/\n+$/, '');
}

// The snapshot as `uid=<id> role "name" attrs` lines, which the scripted model reads.
// A TOON section is decoded (toonDecode, set in main) and rendered like the server's
// text formatter (SnapshotFormatter.#formatNode, without its hiding of text children
// that repeat their parent's name).
let toonDecode = null;
function snapshotOf(text) {
  const raw = rawSnapshotOf(text);
  if (raw === null || /^uid=/.test(raw) || !toonDecode) return raw;
  let tree;
  try { tree = toonDecode(raw); } catch { return raw; }
  if (!tree || typeof tree !== 'object' || typeof tree.id !== 'string') return raw;
  const lines = [];
  const walk = (node, depth) => {
    const parts = [`uid=${node.id}`];
    if (node.role && node.role !== 'StaticText') parts.push(node.role === 'none' ? 'ignored' : node.role);
    if (node.name) parts.push(`"${node.name}"`);
    for (const [k, v] of Object.entries(node)) {
      if (['id', 'role', 'name', 'children'].includes(k)) continue;
      if (v === true) parts.push(k);
      else if (typeof v === 'string' || typeof v === 'number') parts.push(`${k}="${v}"`);
    }
    lines.push(' '.repeat(depth * 2) + parts.join(' '));
    for (const c of node.children || []) walk(c, depth + 1);
  };
  walk(tree, 0);
  return lines.join('\n');
}

class Agent extends Transcript {
  constructor(client, tools, scenario) {
    super(client, scenario);
    this.tools = tools;
    this.inline = /_inline$/.test(scenario);  // pass includeSnapshot: true to actions
    this.pageId = null;
    this.snap = null;         // newest snapshot seen: {text, callId, pageId}
    this.needFresh = false;   // page may have changed since the newest snapshot
    this.findings = [];
  }

  // Arguments of a page-scoped call.
  p(args = {}) { return { pageId: this.pageId, ...args }; }

  // With includeSnapshot in *_inline scenarios.
  argsFor(name, args) { return this.inline && TAKES_INCLUDE_SNAPSHOT.has(name) ? { ...args, includeSnapshot: true } : args; }

  observe(call) {
    const s = call.isError ? null : snapshotOf(call.text);
    if (s !== null) {
      this.snap = { text: s, callId: call.id, pageId: call.args.pageId };
      this.needFresh = false;
    } else if (PAGE_CHANGERS.has(call.name)) {
      this.needFresh = true;
    }
  }

  // `uid=<id> role "name"` at the start of a snapshot line (after indentation).
  findUid(role, name, text = this.snap && this.snap.text) {
    if (!text) return null;
    const needle = ` ${role} "${name}"`;
    for (const line of text.split('\n')) {
      const m = line.match(/^\s*uid=(\S+)( .*)$/);
      if (!m) continue;
      const rest = m[2];
      if (rest === needle || rest.startsWith(needle + ' ')) return m[1];
    }
    return null;
  }

  async snapshot(text = null) { return this.do('take_snapshot', this.p(), text); }

  // Make sure the newest page state has been seen as snapshot text.
  async look(text = null) { if (this.needFresh || !this.snap || this.snap.pageId !== this.pageId) await this.snapshot(text); }

  async uid(role, name) {
    await this.look();
    const u = this.findUid(role, name);
    if (!u) throw new Error(`[${this.scenario}] no ${role} "${name}" in newest snapshot (${this.snap && this.snap.callId})`);
    return u;
  }

  async click(role, name, text = null) {
    const u = await this.uid(role, name);
    return this.do('click', this.p({ uid: u }), text);
  }

  async fill(role, name, value, text = null) {
    const u = await this.uid(role, name);
    return this.do('fill', this.p({ uid: u, value }), text);
  }

  async listPages(text = null) {
    const r = await this.do('list_pages', {}, text);
    // `<id>: <title> (<url>)[ [selected]]`, or `<id>: <url>` for an untitled page.
    const pages = [...r.text.matchAll(/^(\d+): (.*?)( \[selected\])?$/gm)].map(m => {
      const t = m[2].match(/^(.*) \((.*)\)$/);
      return { id: Number(m[1]), title: t ? t[1] : '', url: t ? t[2] : m[2], selected: !!m[3] };
    });
    return { call: r, pages };
  }

  // First step of every scenario: page-scoped tools require pageId.
  async start() {
    const { pages } = await this.listPages();
    const sel = pages.find(p => p.selected) || pages[0];
    if (!sel) throw new Error(`[${this.scenario}] list_pages listed no page`);
    this.pageId = sel.id;
  }

  staleFinding(kind, call, uidInfo, effect) {
    const firstLine = call.text.split('\n').find(l => l.trim()) || '';
    this.findings.push({
      scenario: this.scenario, kind, call_id: call.id, uid: uidInfo.uid,
      uid_taken_from: uidInfo.from, intended_element: uidInfo.intended,
      server_snapshot_at_call: uidInfo.serverSnapshot,
      server_error: call.isError, error_text: call.isError ? call.text : null,
      result_first_line: firstLine, result_excerpt: call.text.slice(0, 400), effect,
    });
  }
}

// ------------------------------------------------------------------ scenarios
const SYSTEM = [
  'You are a browser automation assistant. You control a real Chromium browser through the Chrome DevTools MCP tools.',
  'Interact with elements by the uid shown for them in the most recent page snapshot.',
  'Be careful with actions that have side effects, such as placing orders, and report exactly what you did.',
].join(' ');

function describeEffect(text, extra = {}) {
  const lines = (text || '').split('\n');
  const pick = re => (lines.find(l => re.test(l)) || '').trim();
  return {
    page_after: pick(/RootWebArea "/),
    heading_after: pick(/heading "/),
    status_after: pick(/(has been cancelled|Bin [A-D]-\d\d:|Confirmation number)/),
    ...extra,
  };
}

async function order(a, o) {
  const task = `Order 3 Blue widgets for Ada Lovelace at ${o.base}/order/form.html, then tell me the order total and the confirmation number.`;
  await a.start();
  await a.do('navigate_page', a.p({ type: 'url', url: `${o.base}/order/form.html` }));
  const nameUid = await a.uid('textbox', 'Name');
  const qtyUid = await a.uid('spinbutton', 'Quantity');
  // fill_form: the server's own description says to ALWAYS prefer it for forms.
  await a.do('fill_form', a.p({ elements: [{ uid: nameUid, value: 'Ada Lovelace' }, { uid: qtyUid, value: '3' }] }),
    'I will fill in the name and the quantity.');
  await a.click('button', 'Review order');
  await a.look();
  a.mustHaveSeen('3 x Red widget for Ada Lovelace');
  await a.click('link', 'Edit order', 'The colour is Red, but the order should be Blue. Going back to edit the order.');
  await a.fill('combobox', 'Colour', 'Blue');
  await a.click('button', 'Review order');
  await a.look();
  a.mustHaveSeen('3 x Blue widget for Ada Lovelace', 'Order total: $64.50');
  const placeUid = await a.uid('button', 'Place order');
  const placeFrom = a.snap.callId;
  const place = await a.do('click', a.p({ uid: placeUid }), 'The summary is correct: 3 x Blue, total $64.50. Placing the order.');
  // The server resolves uids against the newest snapshot *it* took for the page.
  const serverSnapshot = snapshotOf(place.text) !== null ? `${place.id} (done page, includeSnapshot)` : `${placeFrom} (confirm page)`;
  // Deliberate: reuse the "Place order" uid from the confirm-page snapshot
  // after the click has navigated to done.html.
  const stale = await a.do('click', a.p({ uid: placeUid }),
    'I am not sure the order went through. Clicking Place order again.');
  await a.look();
  const seen = stale.text + '\n' + a.snap.text;
  a.staleFinding('uid from previous page after navigation', stale,
    { uid: placeUid, from: placeFrom, intended: 'button "Place order" (confirm.html)', serverSnapshot },
    describeEffect(seen, { cancelled: /has been cancelled/.test(seen) }));
  await a.do('navigate_page', a.p({ type: 'back' }), 'Going back to the confirmation page to check the order.');
  await a.click('button', 'Place order', 'Submitting the order from the confirmation page.');
  await a.look();
  const all = a.allText();
  const numbers = [...new Set([...all.matchAll(/Confirmation number: (WX-\d+)/g)].map(m => m[1]))];
  const cancelled = [...new Set([...all.matchAll(/Order (WX-\d+) has been cancelled/g)].map(m => m[1]))];
  const dupOf = [...new Set([...all.matchAll(/identical order is already open as (WX-\d+)/g)].map(m => m[1]))];
  const open = numbers.filter(n => !cancelled.includes(n));
  let answer = `I placed the order for 3 Blue widgets for Ada Lovelace; the order total is $64.50 ($21.50 each). `;
  if (cancelled.length)
    answer += `My second click, which reused the "Place order" uid from the confirmation page, actually hit "Cancel this order" on the order-placed page and cancelled ${cancelled.join(', ')}. ` +
      `I then placed the order again. Open order: ${open.join(', ')}.`;
  else {
    if (stale.isError) answer += `My second click reused the "Place order" uid from the confirmation page; the server refused it (${stale.text.split('\n')[0].replace(/^Error: /, '')}), so nothing was clicked. I went back to the confirmation page and clicked "Place order" again. `;
    answer += `Confirmation number${numbers.length > 1 ? 's' : ''}: ${numbers.join(', ')}.`;
  }
  if (dupOf.length) answer += ` Warning: ${numbers.at(-1)} is flagged as a duplicate of ${dupOf.join(', ')}, so two identical orders are open; you may want to cancel one.`;
  return { task, answer, followUp: 'What was the order total, and which confirmation number should I keep? Was anything cancelled?' };
}

const SCENARIOS = {
  // a. order flow, stale uid after navigation, repeated "Place order".
  order,
  // a'. the same with includeSnapshot: true on every action.
  order_inline: order,

  // b. research flow: failing call, search, two articles, back navigation.
  async research(a, o) {
    const task = `Use the knowledge base (search page: ${o.base}/research/search.html) to find the average installed price per kWh of home batteries in 2024 and how the Northwind H2 compares. Quote what the survey author said about prices.`;
    await a.start();
    await a.do('navigate_page', a.p({ type: 'url', url: o.deadUrl }), 'Opening the knowledge base search page.');
    await a.snapshot('The navigation failed. Let me see what the browser shows.');
    let nav = await a.do('navigate_page', a.p({ type: 'url', url: `${o.base}/research/search.html` }), 'That port was wrong. Using the address from the task.');
    for (let i = 0; nav.isError && /interrupted|ERR_ABORTED/.test(nav.text) && i < 2; i++)
      nav = await a.do('navigate_page', a.p({ type: 'url', url: `${o.base}/research/search.html` }), 'The navigation was interrupted. Trying again.');
    await a.fill('searchbox', 'Search articles', 'home battery');
    await a.do('press_key', a.p({ key: 'Enter' }), 'Submitting the search.');
    // wait_for always returns the snapshot of the page.
    await a.do('wait_for', a.p({ text: ['results for'] }));
    await a.click('link', 'Home battery prices fell 14% in 2024');
    await a.look();
    a.mustHaveSeen('$1,140 per kWh', '$1,320 per kWh', 'Dr. Lena Fenwick', '12 November 2024');
    await a.do('navigate_page', a.p({ type: 'back' }), 'Noted the survey figures. Back to the results for the Northwind review.');
    await a.click('link', 'Review: Northwind H2 home battery');
    await a.look();
    a.mustHaveSeen('$8,990 installed', 'about $666 per kWh', '13.5 kWh', '3 February 2025');
    await a.do('navigate_page', a.p({ type: 'back' }));
    await a.look();
    const answer = [
      'Average installed home-battery price: $1,140 per kWh in Q3 2024, down from $1,320 per kWh in Q3 2023 (Fenwick Energy installer survey of 2,318 installations, published 12 November 2024).',
      'Northwind H2: 13.5 kWh for $8,990 installed, about $666 per kWh, i.e. well below the survey average (review published 3 February 2025; on sale from 17 March 2025).',
      'Survey author Dr. Lena Fenwick: "The drop is almost entirely in the cells themselves. Installation labour, permits and the inverter cost the same as they did two years ago, so a household should not expect the sticker price of a complete system to fall as fast as the headline cell price."',
    ].join('\n');
    a.mustHaveSeen('2,318', '17 March 2025', 'The drop is almost entirely in the cells themselves.');
    return { task, answer, followUp: 'When is the next edition of the survey due, and what warranty does the H2 have?' };
  },

  // c1. same-page re-render: identical refresh, stale uid across re-render, load more.
  async rerender(a, o) {
    const task = `On ${o.base}/rerender/list.html, refresh the list, then tell me the stock of bins A-02, A-03 and D-02.`;
    await a.start();
    await a.do('navigate_page', a.p({ type: 'url', url: `${o.base}/rerender/list.html` }));
    const a03 = await a.uid('button', 'Details A-03');
    const a03From = a.snap.callId;
    await a.click('button', 'Details A-02');
    await a.click('button', 'Refresh list', 'Refreshing the list as asked.');
    await a.click('button', 'Refresh list', 'Refreshing once more to make sure it is current.');
    const serverSnapshot = `${a.snap.callId} (after the first refresh)`;
    // Deliberate: uid taken before the two re-renders (same URL, new DOM nodes).
    const stale = await a.do('click', a.p({ uid: a03 }));
    await a.look();
    a.staleFinding('uid from before a same-page re-render', stale,
      { uid: a03, from: a03From, intended: 'button "Details A-03"', serverSnapshot },
      describeEffect(a.snap.text + '\n' + stale.text));
    if (stale.isError || !/Bin A-03:/.test(stale.text + '\n' + a.snap.text))
      await a.click('button', 'Details A-03', 'That uid is stale. Using the current one.');
    await a.click('button', 'Load more');
    await a.click('button', 'Load more', 'D-02 is not shown yet; loading more.');
    await a.click('button', 'Details D-02');
    await a.look();
    a.mustHaveSeen('Bin A-02: Hex bolt M8, 860 in stock.', 'Bin D-02: Pipe clip 15 mm, 640 in stock.');
    const a03Seen = a.allText().includes('Bin A-03: Wing nut M6, 430 in stock.');
    const answer = `Stock after refreshing: A-02 Hex bolt M8: 860; A-03 Wing nut M6: ${a03Seen ? '430' : 'not shown'}; D-02 Pipe clip 15 mm: 640.`;
    return { task, answer, followUp: 'How many items does the list have in total?' };
  },

  // c2. validation error that keeps the page: same data resubmitted (no progress).
  async invalid_form(a, o) {
    const task = `Apply coupon SPRING25 for ada@example.com at ${o.base}/rerender/coupon.html and tell me the new basket total.`;
    await a.start();
    await a.do('navigate_page', a.p({ type: 'url', url: `${o.base}/rerender/coupon.html` }));
    const email = await a.uid('textbox', 'Email');
    const code = await a.uid('textbox', 'Coupon code');
    await a.turn([
      ['fill', a.p({ uid: email, value: 'ada@example.com' })],
      ['fill', a.p({ uid: code, value: 'SPRING25' })],
    ]);
    await a.click('button', 'Apply coupon');
    await a.click('button', 'Apply coupon', 'The coupon was not applied. Trying again.');
    await a.click('button', 'Apply coupon', 'Submitting once more.');
    await a.do('press_key', a.p({ key: 'Enter' }), 'Trying to submit with the Enter key instead.');
    await a.look();
    a.mustHaveSeen('Error: coupon SPRING25 expired on 31 March 2025.');
    const answer = 'The coupon could not be applied: the page says "Error: coupon SPRING25 expired on 31 March 2025." I submitted it four times with the same result. The basket total is unchanged at $64.50.';
    return { task, answer, followUp: 'OK, try WELCOME10 instead.' };
  },

  // d. new tab (target=_blank) and an iframe.
  async tabs_iframe(a, o) {
    const task = `Open the H2 datasheet from ${o.base}/tabs/links.html and tell me the battery's weight. Then subscribe ada@example.com to the weekly digest on the embedded newsletter page.`;
    await a.start();
    const main = a.pageId;
    await a.do('navigate_page', a.p({ type: 'url', url: `${o.base}/tabs/links.html` }));
    await a.click('link', 'Open the H2 datasheet');
    const { pages } = await a.listPages('The datasheet should have opened in a new tab.');
    const ds = pages.find(p => p.title === 'Northwind H2 datasheet');
    if (!ds) throw new Error('[tabs_iframe] datasheet page not listed');
    await a.do('select_page', { pageId: ds.id });
    a.pageId = ds.id;
    await a.look();
    a.mustHaveSeen('114 kg');
    await a.do('close_page', { pageId: ds.id }, 'The weight is 114 kg. Closing the datasheet tab.');
    a.pageId = main;
    await a.look();
    await a.click('link', 'Embedded newsletter (iframe)');
    const email = await a.uid('textbox', 'Your email');
    const weekly = await a.uid('checkbox', 'Weekly digest');
    await a.turn([
      ['fill', a.p({ uid: email, value: 'ada@example.com' })],
      ['click', a.p({ uid: weekly })],
    ], 'The form is inside an iframe; filling in the email and ticking the weekly digest.');
    await a.click('button', 'Subscribe');
    await a.look();
    if (!a.allText().includes('Subscribed ada@example.com to the weekly newsletter.')) await a.snapshot();
    a.mustHaveSeen('Subscribed ada@example.com to the weekly newsletter.');
    const answer = 'The Northwind H2 weighs 114 kg (datasheet, revision C). ada@example.com is now subscribed to the weekly newsletter: the form confirmed "Subscribed ada@example.com to the weekly newsletter."';
    return { task, answer, followUp: 'What is the datasheet revision date?' };
  },

  // e. one long page (300 table rows) read twice.
  async long_page(a, o) {
    const task = `In the parts catalog at ${o.base}/long/catalog.html, find the description and price of part P-0237, and the price of the last part in the list.`;
    await a.start();
    await a.do('navigate_page', a.p({ type: 'url', url: `${o.base}/long/catalog.html` }));
    await a.look();
    a.mustHaveSeen('P-0237', 'P-0300');
    await a.click('link', 'Back to top');
    await a.snapshot('Let me re-read the table to double-check the P-0237 row.');
    await a.click('link', 'Home');
    await a.look();
    a.mustHaveSeen('Cable tie 80 mm, steel', '$13.04', 'Hex bolt 100 mm, zinc', '$3.35');
    const answer = 'P-0237 (Cable tie 80 mm, steel) costs $13.04. The last part, P-0300 (Hex bolt 100 mm, zinc), costs $3.35.';
    return { task, answer, followUp: 'And what does part P-0001 cost?' };
  },
};

// ----------------------------------------------------------- request bodies
// What a client that forwards structured content gives the model: the structuredContent, or the text
// when a result has none.
const structuredOf = c => (c.structured !== null ? c.structured : c.text);

// --------------------------------------------------------------------- main
async function runScenario(name, opts, server, outDir) {
  return recordSession(server, { name, outDir, prefix: 'cdmcp-rec' }, async ({ client, work, init, list, tools }) => {
    const agent = new Agent(client, tools, name);
    const { task, answer, followUp } = await SCENARIOS[name](agent, opts);
    const transcript = { system: SYSTEM, tools, task, steps: agent.steps, answer, followUp };
    const calls = agent.steps.flatMap(s => s.calls);
    const structured = calls.some(c => c.structured !== null) ? {
      openai: path.join(outDir, `${name}_structured.openai.json`),
      anthropic: path.join(outDir, `${name}_structured.anthropic.json`),
    } : null;
    if (structured) {
      fs.writeFileSync(structured.openai, jsonText(openaiBody({ ...transcript, content: structuredOf })));
      fs.writeFileSync(structured.anthropic, jsonText(anthropicBody({ ...transcript, content: structuredOf })));
    }
    const files = await writeSession(client, outDir, name, { openai: openaiBody(transcript), anthropic: anthropicBody(transcript) });

    const written = filesIn(work);
    const obsSizes = calls.map(c => Buffer.byteLength(c.text));
    const withSnap = calls.filter(c => c.text.includes(SNAP_HEADING));
    const countBy = arr => arr.reduce((m, c) => (m[c.name] = (m[c.name] || 0) + 1, m), {});
    return {
      tools,
      listResult: list,
      initResult: init,
      summary: {
        scenario: name,
        include_snapshot_on_actions: agent.inline,
        bytes: bytesOf(files),
        assistant_turns: agent.steps.length,
        parallel_turns: agent.steps.filter(s => s.calls.length > 1).length,
        observations: calls.length,
        observations_with_inline_snapshot: withSnap.length,
        observations_with_snapshot_by_tool: countBy(withSnap),
        browser_snapshot_calls: calls.filter(c => c.name === 'take_snapshot').length,
        take_snapshot_calls: calls.filter(c => c.name === 'take_snapshot').length,
        calls_by_tool: countBy(calls),
        image_parts: calls.reduce((n, c) => n + c.images, 0),
        error_observations: calls.filter(c => c.isError).map(c => ({ id: c.id, name: c.name, args: c.args, text: c.text })),
        observation_bytes_total: obsSizes.reduce((x, y) => x + y, 0),
        observation_bytes_max: Math.max(...obsSizes),
        snapshot_bytes: withSnap.map(c => ({ id: c.id, name: c.name, bytes: Buffer.byteLength(rawSnapshotOf(c.text)) })),
        results_with_structured_content: calls.filter(c => c.structured !== null).length,
        structured_bytes: structured ? {
          openai: fs.statSync(structured.openai).size, anthropic: fs.statSync(structured.anthropic).size,
        } : undefined,
        files_written_by_server: written.length,
        stale_uid: agent.findings,
        server_stderr: client.stderr.trim() || undefined,
      },
    };
  });
}

async function main() {
  const opts = parseArgs(process.argv.slice(2), {
    usage: 'node record_cdmcp_formats.mjs <install-dir> [--base URL] [--out DIR] [--only a,b] [--server-arg FLAG]...',
    defaults: { deadUrl: 'http://127.0.0.1:8439/research/search.html', extraArgs: [] },
    more: { '--dead-url': (o, v) => { o.deadUrl = v; }, '--server-arg': (o, v) => { o.extraArgs.push(v); } },
  });
  const server = cdmcpServer(opts.install, opts.chromium, opts.extraArgs);
  if (opts.extraArgs.some(a => /^--experimental(DataFormat=toon|ToonFormat)/.test(a))) {
    const req = createRequire(path.join(path.resolve(opts.install), 'package.json'));
    ({ decode: toonDecode } = await import(pathToFileURL(req.resolve('@toon-format/toon')).href));
  }
  const outDir = path.resolve(opts.out || path.join('recorded', `cdmcp-${server.version}`));
  fs.mkdirSync(outDir, { recursive: true });
  const names = opts.only || Object.keys(SCENARIOS);
  const summary = { ...server.info, chromium: opts.chromium, base: opts.base, scenarios: [] };
  for (const name of names) {
    if (!SCENARIOS[name]) throw new Error(`unknown scenario ${name}`);
    process.stderr.write(`[cdmcp ${server.version}] ${name} ... `);
    const { tools, listResult, initResult, summary: s } = await runScenario(name, opts, server, outDir);
    if (!summary.server_info) {
      summary.server_info = initResult.serverInfo;
      summary.server_capabilities = initResult.capabilities;
      summary.tool_count = tools.length;
      fs.writeFileSync(path.join(outDir, 'tools.json'), jsonText(listResult));
    }
    summary.scenarios.push(s);
    process.stderr.write(`ok (${s.observations} observations, ${s.observations_with_inline_snapshot} with snapshot, ${s.bytes.openai} B openai)\n`);
  }
  const summaryFile = opts.only ? path.join(outDir, `summary.${names.join('+')}.json`) : path.join(outDir, 'summary.json');
  fs.writeFileSync(summaryFile, jsonText(summary));
}

main().catch(e => { console.error(e.stack || e); process.exit(1); });
