// `npx staleguard mcp -- <Playwright MCP>` as an MCP client starts it from its config: the
// real @playwright/mcp (pinned in tests/mcp/node/pw-0.0.41 of the repository) driving
// Debian's Chromium through the test site's order form, with the official MCP SDK as the
// client. The "Place order" ref of the confirm page, used again after the order is placed,
// is refused before it reaches the browser: the order stands.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

import { cleanEnv, REPO } from './helpers.mjs';

const CHROMIUM = '/usr/bin/chromium';
const PLAYWRIGHT = path.join(REPO, 'tests/mcp/node/pw-0.0.41/node_modules/.bin/mcp-server-playwright');
const PAGES = path.resolve(REPO, 'tests/site/pages');

let site;
let base;
let tmp;

before(async () => {
  assert.ok(fs.existsSync(CHROMIUM), `${CHROMIUM} is missing: apt-get install -y chromium (scripts/test does)`);
  assert.ok(fs.existsSync(PLAYWRIGHT), `${PLAYWRIGHT} is missing: npm ci in tests/mcp/node/pw-0.0.41 (scripts/test does)`);
  site = http.createServer((req, res) => {
    const file = path.join(PAGES, decodeURIComponent(new URL(req.url, 'http://x').pathname));
    if (!file.startsWith(PAGES) || !fs.existsSync(file) || !fs.statSync(file).isFile()) {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { 'content-type': file.endsWith('.html') ? 'text/html' : 'application/octet-stream' });
    res.end(fs.readFileSync(file));
  });
  await new Promise((resolve) => site.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${site.address().port}`;
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'staleguard-node-mcp-'));
});

after(() => {
  site?.close();
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
});

/** The page text of a tool result. */
function text(result) {
  return (result.content ?? []).filter((c) => c.type === 'text').map((c) => c.text).join('\n');
}

/** The ref of the first line with `role "name"`. */
function ref(page, role, name) {
  const line = page.split('\n').find((l) => l.includes(`${role} "${name}"`) && l.includes('[ref='));
  assert.ok(line, `no ${role} "${name}" with a ref in:\n${page}`);
  return /\[ref=([^\]]+)\]/.exec(line)[1];
}

test('npx staleguard mcp refuses the stale "Place order" of the real Playwright MCP', async () => {
  const transport = new StdioClientTransport({
    command: 'npx',
    args: ['--no-install', 'staleguard', 'mcp', '--', PLAYWRIGHT, '--headless', '--isolated', '--no-sandbox', '--executable-path', CHROMIUM],
    env: cleanEnv({ TMPDIR: tmp }),
    stderr: 'pipe',
  });
  let stderr = '';
  transport.stderr?.on('data', (chunk) => (stderr += chunk));
  const client = new Client({ name: 'staleguard-node-test', version: '1.0.0' });
  await client.connect(transport);
  try {
    const { tools } = await client.listTools();
    const names = tools.map((t) => t.name);
    assert.ok(names.includes('browser_click') && names.includes('browser_history'), names.join(', '));
    const call = async (name, args) => {
      const result = await client.callTool({ name, arguments: args });
      return { error: result.isError === true, text: text(result) };
    };

    const form = await call('browser_navigate', { url: `${base}/order/form.html` });
    assert.equal(form.error, false, form.text);
    assert.ok(processesUnder(tmp).length > 0, 'the browser runs with its profile in the test folder');
    await call('browser_type', { element: 'Name textbox', ref: ref(form.text, 'textbox', 'Name'), text: 'Ada Lovelace' });
    await call('browser_type', { element: 'Quantity spinbutton', ref: ref(form.text, 'spinbutton', 'Quantity'), text: '3' });
    const confirm = await call('browser_click', { element: 'Review order button', ref: ref(form.text, 'button', 'Review order') });
    assert.match(confirm.text, /Order total/);
    const place = ref(confirm.text, 'button', 'Place order');
    const done = await call('browser_click', { element: 'Place order button', ref: place });
    assert.equal(done.error, false, done.text);
    assert.match(done.text, /WX-1001/);

    // The model acts on the confirm page's ref again, as the recorded sessions did.
    const stale = await call('browser_click', { element: 'Place order button', ref: place });
    assert.equal(stale.error, true, `not refused: ${stale.text}`);
    assert.match(stale.text, /staleguard refused this call/);

    const now = await call('browser_snapshot', {});
    assert.match(now.text, /Confirmation number: WX-1001/);
    assert.doesNotMatch(now.text, /cancelled|WX-1002/);
  } finally {
    await client.close();
  }
  // Closing the client ends the launcher, the guard, Playwright MCP and its browser.
  let left = [];
  for (let i = 0; i < 50; i += 1) {
    left = processesUnder(tmp);
    if (left.length === 0) break;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  assert.deepEqual(left, [], 'processes outlived the MCP client');
  // One line on standard error a refusal, never page text.
  assert.match(stderr, /staleguard mcp: refused browser_click/);
});

/** Running processes whose command line names `dir` (the browser's profile is there). */
function processesUnder(dir) {
  const found = [];
  for (const pid of fs.readdirSync('/proc').filter((n) => /^\d+$/.test(n))) {
    try {
      const cmdline = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8');
      const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
      if (cmdline.includes(`${dir}/`) && stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z') found.push(`${pid} ${cmdline.replaceAll('\0', ' ').slice(0, 120)}`);
    } catch {
      // Gone meanwhile.
    }
  }
  return found;
}
