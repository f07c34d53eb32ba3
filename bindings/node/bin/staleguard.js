#!/usr/bin/env node
'use strict';
// `npx staleguard ...`: runs the native `staleguard` binary of this platform's package with
// the same arguments, standard streams and exit status, so it can stand as an MCP server's
// command (`npx staleguard mcp -- npx @playwright/mcp@latest`) or run the proxy.

const { spawn } = require('node:child_process');
const path = require('node:path');
const { platformPackage, TARGETS } = require('../lib/platform.cjs');

function binary() {
  if (process.env.STALEGUARD_BINARY) return process.env.STALEGUARD_BINARY;
  const name = platformPackage();
  const file = process.platform === 'win32' ? 'staleguard.exe' : 'staleguard';
  try {
    return path.join(path.dirname(require.resolve(`${name}/package.json`)), file);
  } catch (error) {
    process.stderr.write(
      `staleguard: no native binary for ${process.platform}-${process.arch} (${name ?? 'not a built target'}): ` +
        `${error.message}\nBuilt for: ${TARGETS.join(', ')}. Reinstall without --no-optional, ` +
        `or set STALEGUARD_BINARY to a staleguard binary (cargo install staleguard-cli).\n`,
    );
    process.exit(1);
  }
}

const child = spawn(binary(), process.argv.slice(2), { stdio: 'inherit', windowsHide: true });
// The child shares our terminal and process group, but a parent that signals only us (an
// MCP client stopping its server) must stop the child too.
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
  process.on(signal, () => child.kill(signal));
}
child.on('error', (error) => {
  process.stderr.write(`staleguard: cannot start ${child.spawnfile}: ${error.message}\n`);
  process.exit(1);
});
child.on('exit', (code, signal) => {
  if (signal) {
    process.removeAllListeners(signal);
    process.kill(process.pid, signal);
  }
  process.exit(code ?? 1);
});
