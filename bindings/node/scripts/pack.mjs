#!/usr/bin/env node
// Makes the npm packages of staleguard from a cargo build: this platform's package
// (`@staleguard/<target>`: the Node-API addon and the `staleguard` binary) and the main
// package `staleguard` (the JavaScript API, types and the `staleguard` command), each
// `npm pack`ed into --out. Prints the tarballs' paths, one a line.
//
//   node bindings/node/scripts/pack.mjs --out DIR [--release] [--build]
//
// --build runs `cargo build` of the addon and the CLI first (else they must be built);
// --release takes target/release instead of target/debug.

import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const { platformTarget } = require('../lib/platform.cjs');

const here = path.dirname(fileURLToPath(import.meta.url));
const pkgDir = path.resolve(here, '..');
const repo = path.resolve(pkgDir, '../..');

const { values } = parseArgs({
  options: {
    out: { type: 'string' },
    release: { type: 'boolean', default: false },
    build: { type: 'boolean', default: false },
  },
});
if (!values.out) fail('--out DIR is required');
const out = path.resolve(values.out);
const profile = values.release ? 'release' : 'debug';

// npm's fields for each platform package: what `os`, `cpu` and `libc` install it on.
const PLATFORMS = {
  'linux-x64-gnu': { os: ['linux'], cpu: ['x64'], libc: ['glibc'], addon: 'libstaleguard_node.so' },
  'linux-arm64-gnu': { os: ['linux'], cpu: ['arm64'], libc: ['glibc'], addon: 'libstaleguard_node.so' },
  'linux-x64-musl': { os: ['linux'], cpu: ['x64'], libc: ['musl'], addon: 'libstaleguard_node.so' },
  'darwin-x64': { os: ['darwin'], cpu: ['x64'], addon: 'libstaleguard_node.dylib' },
  'darwin-arm64': { os: ['darwin'], cpu: ['arm64'], addon: 'libstaleguard_node.dylib' },
  'win32-x64-msvc': { os: ['win32'], cpu: ['x64'], addon: 'staleguard_node.dll', exe: '.exe' },
};

function fail(message) {
  process.stderr.write(`pack.mjs: ${message}\n`);
  process.exit(1);
}

function run(command, args, options = {}) {
  return execFileSync(command, args, { stdio: ['ignore', 'pipe', 'inherit'], encoding: 'utf8', ...options });
}

const target = platformTarget();
if (!target) fail(`no package for ${process.platform}-${process.arch}`);
const platform = PLATFORMS[target];
const main = JSON.parse(fs.readFileSync(path.join(pkgDir, 'package.json'), 'utf8'));
const cargoVersion = /^version = "([^"]+)"/m.exec(fs.readFileSync(path.join(repo, 'Cargo.toml'), 'utf8'))?.[1];
if (main.version !== cargoVersion) fail(`package.json has ${main.version}, Cargo.toml ${cargoVersion}`);
const platformName = `@staleguard/${target}`;
if (main.optionalDependencies?.[platformName] !== main.version) {
  fail(`package.json's optionalDependencies lack ${platformName}@${main.version}`);
}

if (values.build) {
  const release = values.release ? ['--release'] : [];
  execFileSync('cargo', ['build', '--locked', ...release, '-p', 'staleguard-node', '-p', 'staleguard-cli'], {
    cwd: repo,
    stdio: 'inherit',
  });
}

// The cargo build's target directory: CARGO_TARGET_DIR when set, as cargo reads it.
const built = path.join(path.resolve(repo, process.env.CARGO_TARGET_DIR || 'target'), profile);
const exe = `staleguard${platform.exe ?? ''}`;
const stage = path.join(out, 'stage', target);
fs.rmSync(stage, { recursive: true, force: true });
fs.mkdirSync(stage, { recursive: true });
const addon = `staleguard.${target}.node`;
for (const [from, to] of [
  [platform.addon, addon],
  [exe, exe],
]) {
  const source = path.join(built, from);
  if (!fs.existsSync(source)) fail(`${source} is missing: build it first, or pass --build`);
  fs.copyFileSync(source, path.join(stage, to));
  // A debug build carries ~150 MB of debug info a user has no use for.
  if (process.platform === 'linux') run('strip', ['--strip-debug', path.join(stage, to)]);
}
fs.chmodSync(path.join(stage, exe), 0o755);
const platformPackage = {
  name: platformName,
  version: main.version,
  description: `staleguard's native core and command for ${target}`,
  license: main.license,
  main: addon,
  files: [addon, exe],
  os: platform.os,
  cpu: platform.cpu,
  ...(platform.libc ? { libc: platform.libc } : {}),
  engines: main.engines,
};
fs.writeFileSync(path.join(stage, 'package.json'), `${JSON.stringify(platformPackage, null, 2)}\n`);

fs.mkdirSync(out, { recursive: true });
for (const dir of [stage, pkgDir]) {
  const name = run('npm', ['pack', '--silent', '--pack-destination', out], { cwd: dir }).trim().split('\n').pop();
  process.stdout.write(`${path.join(out, name)}\n`);
}
