// Shared by the package's tests: the repository they were copied from, its recorded
// sessions, and the cargo-built CLI they compare the installed package with.
//
// The tests run from a fresh folder where the packed package is installed as a user would
// (scripts/test-node), so `import 'staleguard'` is the installed package, not the sources.

import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

function required(name) {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set: run the tests with scripts/test-node`);
  return value;
}

/** The staleguard checkout the package was packed from. */
export const REPO = required('STALEGUARD_REPO');
/** The recorded sessions (fixtures/). */
export const FIXTURES = path.resolve(REPO, 'fixtures');

/** The cargo-built CLI of the same checkout (STALEGUARD_BIN, else target/debug). */
export function cliBinary() {
  const bin = process.env.STALEGUARD_BIN ?? path.join(REPO, 'target/debug/staleguard');
  if (!fs.existsSync(bin)) throw new Error(`no staleguard binary at ${bin}: cargo build -p staleguard-cli`);
  return bin;
}

/** The environment without STALEGUARD_* and BROWSER_HISTORY_* variables. */
export function cleanEnv(extra = {}) {
  const env = Object.fromEntries(
    Object.entries(process.env).filter(([k]) => !k.startsWith('STALEGUARD_') && !k.startsWith('BROWSER_HISTORY')),
  );
  return { ...env, ...extra };
}

/** Runs the CLI in an empty folder (no ./staleguard.toml): its standard output as a Buffer. */
export function cli(args, input) {
  const cwd = fs.mkdtempSync(path.join(os.tmpdir(), 'staleguard-node-cli-'));
  try {
    return execFileSync(cliBinary(), args, { cwd, env: cleanEnv(), input, maxBuffer: 64 << 20 });
  } finally {
    fs.rmSync(cwd, { recursive: true, force: true });
  }
}

/** `staleguard project --format FORMAT` of `body` (text) by the CLI, as text. */
export function cliProject(body, format = 'auto') {
  return cli(['project', '--format', format], body).toString('utf8');
}

/** Every recorded OpenAI and Anthropic session of a fixture folder: [name, text]. */
export function sessions(folder = 'pwmcp-0.0.41') {
  const dir = path.join(FIXTURES, folder);
  return fs
    .readdirSync(dir)
    .filter((name) => name.endsWith('.openai.json') || name.endsWith('.anthropic.json'))
    .sort()
    .map((name) => [name, fs.readFileSync(path.join(dir, name), 'utf8')]);
}

/** Removes STALEGUARD_* and BROWSER_HISTORY_* from this process's environment. */
export function clearStaleguardEnv() {
  for (const key of Object.keys(process.env)) {
    if (key.startsWith('STALEGUARD_') || key.startsWith('BROWSER_HISTORY')) delete process.env[key];
  }
}

/** Runs the CLI as `cli` does, whatever its exit status: {status, stdout}. */
export function cliStatus(args, input) {
  const cwd = fs.mkdtempSync(path.join(os.tmpdir(), 'staleguard-node-cli-'));
  try {
    const run = spawnSync(cliBinary(), args, { cwd, env: cleanEnv(), input, maxBuffer: 64 << 20 });
    if (run.error) throw run.error;
    return { status: run.status, stdout: run.stdout.toString('utf8') };
  } finally {
    fs.rmSync(cwd, { recursive: true, force: true });
  }
}
