// project, inspect and checkCall of the installed package against the cargo-built CLI: the
// same core, so the same bytes, and the errors a user can catch by class.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { beforeEach, describe, test } from 'node:test';
import { createRequire } from 'node:module';

import * as staleguard from 'staleguard';
import { clearStaleguardEnv, cli, cliProject, cliStatus, FIXTURES, REPO, sessions } from './helpers.mjs';

const require = createRequire(import.meta.url);
const FOLDERS = ['pwmcp-0.0.41', 'pwmcp-0.0.83', 'cdmcp-1.11.0'];
const ORDER = fs.readFileSync(path.join(FIXTURES, 'pwmcp-0.0.41/order.openai.json'), 'utf8');

beforeEach(clearStaleguardEnv);

describe('every recorded session', () => {
  for (const folder of FOLDERS) {
    test(`${folder}: text, Buffer and object project to the CLI's bytes`, () => {
      const all = sessions(folder);
      assert.ok(all.length >= 10, `${folder} has ${all.length} sessions`);
      let changed = 0;
      for (const [name, body] of all) {
        const want = cliProject(body);
        const text = staleguard.project(body);
        assert.equal(typeof text, 'string', name);
        assert.ok(text === want, `${name}: the package's projection differs from the CLI's`);
        const bytes = staleguard.project(Buffer.from(body));
        assert.ok(Buffer.isBuffer(bytes), name);
        assert.ok(bytes.equals(Buffer.from(want)), `${name}: Buffer in, other bytes out`);
        const object = staleguard.project(JSON.parse(body));
        assert.deepEqual(object, JSON.parse(want), `${name}: object in, another object out`);
        if (want !== body) changed += 1;
      }
      // The sessions navigate: most requests hold an old page to collapse.
      assert.ok(changed * 2 > all.length, `${folder}: only ${changed} of ${all.length} changed`);
    });
  }

  test('a Uint8Array comes back as a Buffer of the same bytes', () => {
    const view = new TextEncoder().encode(ORDER);
    assert.ok(staleguard.project(view).equals(Buffer.from(cliProject(ORDER))));
  });

  test('the format can be named, and both packages agree on it', () => {
    const anthropic = fs.readFileSync(path.join(FIXTURES, 'pwmcp-0.0.41/order.anthropic.json'), 'utf8');
    assert.equal(staleguard.project(anthropic, { format: 'anthropic' }), cliProject(anthropic, 'anthropic'));
    assert.throws(() => staleguard.project(anthropic, { format: 'gemini' }), staleguard.NotARequestError);
  });
});

describe('a task with Chinese right before a URL (issue 41)', () => {
  // `打开http://...` with no space made the core panic, and the panic aborted Node.
  for (const name of ['order_zh.openai.json', 'order_zh.anthropic.json']) {
    test(`${name}: text, Buffer and object project to the CLI's bytes`, () => {
      const body = fs.readFileSync(path.join(REPO, 'fixtures/unicode', name), 'utf8');
      assert.ok(body.includes('打开http://127.0.0.1:8431/order/form.html'));
      const want = cliProject(body);
      assert.ok(want.includes('[staleguard receipt]'));
      assert.ok(staleguard.project(body) === want, `${name}: the package's projection differs from the CLI's`);
      assert.ok(staleguard.project(Buffer.from(body)).equals(Buffer.from(want)));
      assert.deepEqual(staleguard.project(JSON.parse(body)), JSON.parse(want));
      assert.ok(staleguard.inspect(body).results.length > 0);
    });
  }

  test('a panic of the core would be an InternalError, a StaleguardError', () => {
    assert.ok(new staleguard.InternalError('x') instanceof staleguard.StaleguardError);
    assert.equal(new staleguard.InternalError('x').name, 'InternalError');
    assert.equal(require('staleguard').InternalError, staleguard.InternalError);
  });
});

describe('errors', () => {
  test('bad JSON says where, with line, column and offset', () => {
    const error = assert.throws(
      () => staleguard.project('{\n  "messages": [,]}'),
      (e) => e instanceof staleguard.InvalidJSONError && e instanceof staleguard.StaleguardError,
    );
    const caught = catchError(() => staleguard.project('{\n  "messages": [,]}'));
    assert.equal(error, undefined);
    assert.deepEqual([caught.line, caught.column, caught.offset], [2, 16, 17]);
    assert.match(caught.message, /line 2, column 16/);
    assert.equal(caught.name, 'InvalidJSONError');
  });

  test('bytes that are not UTF-8 are bad JSON where the byte is', () => {
    const body = Buffer.concat([Buffer.from('{"messages": ["'), Buffer.from([0xff]), Buffer.from('"]}')]);
    for (const call of [() => staleguard.project(body), () => staleguard.inspect(body), () => staleguard.checkCall(body, {})]) {
      const caught = catchError(call);
      assert.ok(caught instanceof staleguard.InvalidJSONError, String(caught));
      assert.equal(caught.offset, 15);
    }
  });

  test('JSON that is no request, an unknown format, a bad config', () => {
    assert.throws(() => staleguard.project('[1, 2]'), staleguard.NotARequestError);
    assert.throws(() => staleguard.project({ model: 'x' }), /no `messages`.*`contents`/);
    assert.throws(() => staleguard.project(ORDER, { format: 'soap' }), staleguard.UnknownFormatError);
    assert.throws(() => staleguard.project(ORDER, { config: { max_repeats: 'many' } }), staleguard.ConfigValueError);
    assert.throws(() => staleguard.project(ORDER, { config: { no_such_key: 1 } }), /unknown key `no_such_key`/);
    assert.throws(() => staleguard.project(ORDER, { config: '/nonexistent/staleguard.toml' }), staleguard.ConfigValueError);
    assert.throws(() => staleguard.project(ORDER, { config: { max_repeats: 1.5 } }), staleguard.ConfigValueError);
  });

  test('a body of the wrong kind is a TypeError, not a StaleguardError', () => {
    for (const body of [42, null, undefined, [1], true]) {
      const caught = catchError(() => staleguard.project(body));
      assert.ok(caught instanceof TypeError && !(caught instanceof staleguard.StaleguardError), String(caught));
    }
  });

  test('an environment variable the core rejects is a ConfigValueError', () => {
    process.env.STALEGUARD_MAX_REPEATS = 'zero';
    assert.throws(() => staleguard.project(ORDER), staleguard.ConfigValueError);
  });

  test('the package works from CommonJS too, with the same classes', () => {
    const cjs = require('staleguard');
    assert.equal(cjs.project, staleguard.project);
    assert.equal(cjs.InvalidJSONError, staleguard.InvalidJSONError);
    assert.equal(cjs.project(ORDER), cliProject(ORDER));
  });
});

describe('config', () => {
  test('an object, a file and the CLI read the same config', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'staleguard-config-'));
    const file = path.join(dir, 'staleguard.toml');
    fs.writeFileSync(file, 'receipt_max_bytes = 200\nevidence_retention = "off"\n');
    const fromFile = staleguard.project(ORDER, { config: file });
    const fromObject = staleguard.project(ORDER, { config: { receipt_max_bytes: 200, evidence_retention: 'off' } });
    assert.equal(fromFile, fromObject);
    assert.equal(fromFile, cli(['project', '--config', file], ORDER).toString('utf8'));
    assert.notEqual(fromFile, staleguard.project(ORDER));
    fs.rmSync(dir, { recursive: true });
  });

  test('tables are nested objects, read as the file would be', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'staleguard-config-'));
    const file = path.join(dir, 'staleguard.toml');
    fs.writeFileSync(file, 'receipt_max_bytes = 180\n[proxy]\nlisten = "127.0.0.1:9000"\n');
    const config = { receipt_max_bytes: 180, proxy: { listen: '127.0.0.1:9000' } };
    assert.equal(staleguard.project(ORDER, { config }), cli(['project', '--config', file], ORDER).toString('utf8'));
    assert.throws(() => staleguard.project(ORDER, { config: { receipt: { max_bytes: 180 } } }), /unknown key `receipt`/);
    fs.rmSync(dir, { recursive: true });
  });
});

describe('inspect and checkCall', () => {
  test('inspect is what `staleguard inspect --json` prints', () => {
    const want = JSON.parse(cli(['inspect', '--json'], ORDER).toString('utf8'));
    assert.deepEqual(staleguard.inspect(ORDER), want);
    // An object is sent as JSON.stringify writes it: fewer bytes, the same results.
    const compact = JSON.stringify(JSON.parse(ORDER));
    assert.deepEqual(staleguard.inspect(JSON.parse(ORDER)), JSON.parse(cli(['inspect', '--json'], compact).toString('utf8')));
    const collapsed = want.results.filter((r) => r.status === 'collapsed');
    assert.ok(collapsed.length >= 3, JSON.stringify(want.results.map((r) => r.status)));
  });

  test('the stale "Place order" ref is refused, as by `staleguard check-call`', () => {
    const body = JSON.parse(ORDER);
    // The request just before the model reused the old ref (the recording's last click).
    const at = body.messages.findLastIndex((m) => (m.tool_calls ?? []).some((c) => c.function.name === 'browser_click'));
    const call = body.messages[at].tool_calls.find((c) => c.function.name === 'browser_click');
    body.messages = body.messages.slice(0, at);
    const verdict = staleguard.checkCall(body, call);
    assert.equal(verdict.allowed, false, JSON.stringify(verdict));
    // The recorded model clicked the old "Place order" on the done page: a repeat of a submission.
    assert.equal(verdict.kind, 'repeated_submission');
    assert.match(verdict.reason, /staleguard refused this call/);
    const want = cliStatus(['check-call', '--call', JSON.stringify(call)], JSON.stringify(body));
    assert.equal(want.status, 3);
    assert.equal(verdict.reason, want.stdout.trim());
    const snapshot = { id: 'c9', type: 'function', function: { name: 'browser_snapshot', arguments: '{}' } };
    assert.equal(staleguard.checkCall(body, snapshot).allowed, true);
    assert.equal(cliStatus(['check-call', '--call', JSON.stringify(snapshot)], JSON.stringify(body)).status, 0);
    assert.throws(() => staleguard.checkCall(body, { nothing: true }), staleguard.StaleguardError);
  });
});

function catchError(call) {
  try {
    call();
  } catch (error) {
    return error;
  }
  assert.fail('no error thrown');
}
