// The `staleguard` command of the installed package (`npx staleguard ...`): the native
// binary of the platform package, run with the same arguments, streams and exit status.

import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { createRequire } from 'node:module';

import { cleanEnv, cliProject, cliStatus, FIXTURES } from './helpers.mjs';

const require = createRequire(import.meta.url);
const ORDER = fs.readFileSync(path.join(FIXTURES, 'pwmcp-0.0.41/order.openai.json'), 'utf8');

/** `npx staleguard ARGS` in this folder, where the package is installed. */
function npx(args, input) {
  const run = spawnSync('npx', ['--no-install', 'staleguard', ...args], {
    env: cleanEnv(),
    input,
    maxBuffer: 64 << 20,
    timeout: 60_000,
  });
  if (run.error) throw run.error;
  return { status: run.status, stdout: run.stdout.toString('utf8'), stderr: run.stderr.toString('utf8') };
}

test('the command is the platform package\'s binary, not a download', () => {
  const bin = fs.realpathSync(path.join('node_modules', '.bin', 'staleguard'));
  assert.equal(bin, fs.realpathSync(require.resolve('staleguard/package.json').replace('package.json', 'bin/staleguard.js')));
  const native = path.join(path.dirname(require.resolve('@staleguard/linux-x64-gnu/package.json')), 'staleguard');
  assert.ok(fs.statSync(native).mode & 0o111, `${native} is not executable`);
  const { version } = require('staleguard/package.json');
  const run = npx(['--version']);
  assert.equal(run.status, 0, run.stderr);
  assert.equal(run.stdout.trim(), `staleguard ${version}`);
});

test('npx staleguard demo runs the bundled recording', () => {
  const run = npx(['demo']);
  assert.equal(run.status, 0, run.stderr);
  assert.match(run.stdout, /\$ staleguard inspect long_page\.openai\.json/);
  assert.match(run.stdout, /3 collapsed/);
});

test('npx staleguard project reads standard input as the CLI does', () => {
  const run = npx(['project'], ORDER);
  assert.equal(run.status, 0, run.stderr);
  assert.ok(run.stdout === cliProject(ORDER), 'npx staleguard project differs from the cargo-built CLI');
});

test('exit statuses come through: a refusal is 3, bad input 1 with the message', () => {
  const body = JSON.parse(ORDER);
  const at = body.messages.findLastIndex((m) => (m.tool_calls ?? []).some((c) => c.function.name === 'browser_click'));
  const call = body.messages[at].tool_calls.find((c) => c.function.name === 'browser_click');
  body.messages = body.messages.slice(0, at);
  const refused = npx(['check-call', '--call', JSON.stringify(call)], JSON.stringify(body));
  assert.equal(refused.status, 3, refused.stderr);
  assert.equal(refused.stdout, cliStatus(['check-call', '--call', JSON.stringify(call)], JSON.stringify(body)).stdout);
  const bad = npx(['project'], '{"messages": [');
  assert.equal(bad.status, 2);
  assert.match(bad.stderr, /invalid JSON at line 1/);
});

test('a signal to the launcher stops the proxy it started', async () => {
  const port = await freePort();
  const launcher = spawn(
    process.execPath,
    [path.join('node_modules', '.bin', 'staleguard'), 'proxy', '--listen', `127.0.0.1:${port}`, '--upstream', 'http://127.0.0.1:9'],
    { env: cleanEnv(), stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let stderr = '';
  launcher.stderr.on('data', (chunk) => (stderr += chunk));
  try {
    await waitForPort(port);
    const children = childrenOf(launcher.pid);
    assert.equal(children.length, 1, `one child: ${children}`);
    launcher.kill('SIGTERM');
    const [code, signal] = await new Promise((resolve) => launcher.on('exit', (c, s) => resolve([c, s])));
    assert.ok(signal === 'SIGTERM' || code === 0, `launcher ended with ${code} ${signal}: ${stderr}`);
    for (let i = 0; i < 50 && fs.existsSync(`/proc/${children[0]}`); i += 1) await sleep(100);
    assert.ok(!alive(children[0]), `the proxy (pid ${children[0]}) outlived its launcher`);
  } finally {
    launcher.kill('SIGKILL');
  }
});

function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

async function waitForPort(port) {
  for (let i = 0; i < 200; i += 1) {
    const open = await new Promise((resolve) => {
      const socket = net.connect(port, '127.0.0.1', () => {
        socket.destroy();
        resolve(true);
      });
      socket.on('error', () => resolve(false));
    });
    if (open) return;
    await sleep(50);
  }
  throw new Error(`nothing listens on 127.0.0.1:${port}`);
}

/** The pids whose parent is `pid` (Linux). */
function childrenOf(pid) {
  return fs
    .readdirSync('/proc')
    .filter((name) => /^\d+$/.test(name))
    .filter((name) => {
      try {
        const stat = fs.readFileSync(`/proc/${name}/stat`, 'utf8');
        return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === pid;
      } catch {
        return false;
      }
    })
    .map(Number);
}

/** Running, not a zombie. */
function alive(pid) {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return false;
  }
}
