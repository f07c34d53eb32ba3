'use strict';
// Which of the platform packages fits this machine: npm's layout for native code, one
// package per platform, each an optional dependency of `staleguard` with `os`, `cpu` and
// `libc` set so npm installs only the one that fits.

/** The platform packages the package names (only linux-x64-gnu is built and tested here). */
const TARGETS = [
  'linux-x64-gnu',
  'linux-arm64-gnu',
  'linux-x64-musl',
  'darwin-x64',
  'darwin-arm64',
  'win32-x64-msvc',
];

function isMusl() {
  // glibc reports its version in the process report; musl does not.
  const report = process.report?.getReport?.();
  return !report?.header?.glibcVersionRuntime;
}

/** The name of this machine's platform, as in TARGETS, or null. */
function platformTarget() {
  const { platform, arch } = process;
  let target = `${platform}-${arch}`;
  if (platform === 'linux') target += isMusl() ? '-musl' : '-gnu';
  if (platform === 'win32') target += '-msvc';
  return TARGETS.includes(target) ? target : null;
}

/** The package holding this platform's addon and binary, or null. */
function platformPackage() {
  const target = platformTarget();
  return target && `@staleguard/${target}`;
}

module.exports = { TARGETS, platformTarget, platformPackage };
