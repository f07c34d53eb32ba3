#!/usr/bin/env node
// Times `project` from Node on a ~1 MB request against JSON.stringify(JSON.parse(body)) of
// the same body, side by side in one run (ratios, not seconds: the machines are noisy).
//
// The request is the recorded long_page session (pwmcp-0.0.41, 198 KB) played six times in
// one conversation (tool call IDs made unique), so every browser page but the newest
// collapses: the same request as bindings/python/bench.py.
//
//   scripts/bench-node          # packs a release build, installs it, runs this
//   node bench.mjs              # where `staleguard` is installed

import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';

import { project } from 'staleguard';

const REPO = process.env.STALEGUARD_REPO ?? path.resolve(import.meta.dirname ?? '.', '../..');
const FIXTURE = path.resolve(REPO, 'fixtures/pwmcp-0.0.41/long_page.openai.json');
const RUNS = 25;

function megabyteRequest() {
  const session = JSON.parse(fs.readFileSync(FIXTURE, 'utf8'));
  const [first, ...rest] = session.messages;
  const messages = [first];
  for (let round = 0; round < 6; round += 1) {
    messages.push(...JSON.parse(JSON.stringify(rest).replaceAll('"call_', `"r${round}_call_`)));
  }
  return JSON.stringify({ ...session, messages });
}

/** Median and best of RUNS runs of each row, the rows interleaved run by run. */
function measure(rows) {
  const times = rows.map(() => []);
  for (let run = 0; run < RUNS; run += 1) {
    rows.forEach(([, fn], i) => {
      const start = performance.now();
      fn();
      times[i].push(performance.now() - start);
    });
  }
  return times.map((t) => {
    t.sort((a, b) => a - b);
    return { best: t[0], median: t[Math.floor(t.length / 2)] };
  });
}

const body = megabyteRequest();
const bytes = Buffer.from(body);
const object = JSON.parse(body);
assert.notEqual(project(body), body, 'the request has pages to collapse');
const rows = [
  ['JSON.stringify(JSON.parse(text))', () => JSON.stringify(JSON.parse(body))],
  ['project(text)', () => project(body)],
  ['project(Buffer)', () => project(bytes)],
  ['project(object)', () => project(object)],
];
// Warm up: the first call loads the config and the JIT compiles the JSON paths.
measure(rows);
const results = measure(rows);
console.log(`request: ${(bytes.length / 1e6).toFixed(2)} MB, Node ${process.version}, ${RUNS} interleaved runs`);
const baseline = results[0].median;
rows.forEach(([name], i) => {
  const { best, median } = results[i];
  console.log(
    `${name.padEnd(34)} best ${best.toFixed(2).padStart(7)} ms  median ${median.toFixed(2).padStart(7)} ms  x${(median / baseline).toFixed(2)}`,
  );
});
