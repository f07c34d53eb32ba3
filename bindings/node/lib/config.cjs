'use strict';
// Config as a host gives it: an object of `staleguard.toml`'s keys or the path of such a
// file. Either becomes TOML text, which the core reads and checks as it reads a file, so a
// bad key or value gets the same ConfigValueError from every host.

const fs = require('node:fs');
const { ConfigValueError } = require('./errors.cjs');

/** The text of a `staleguard.toml` for `config`, or null for none. */
function configText(config) {
  if (config === undefined || config === null) return null;
  if (typeof config === 'string' || config instanceof URL) {
    try {
      return fs.readFileSync(config, 'utf8');
    } catch (error) {
      throw new ConfigValueError(`cannot read config file ${JSON.stringify(String(config))}: ${error.message}`);
    }
  }
  if (isPlainObject(config)) return toml(config, '');
  throw new TypeError(`config must be an object or a path, not ${describe(config)}`);
}

function toml(config, table) {
  const lines = [];
  const tables = [];
  for (const [key, value] of Object.entries(config)) {
    if (isPlainObject(value)) {
      tables.push(toml(value, `${table}${JSON.stringify(key)}.`));
    } else if (value !== undefined) {
      lines.push(`${JSON.stringify(key)} = ${tomlValue(key, value)}\n`);
    }
  }
  const head = table && lines.length ? `[${table.slice(0, -1)}]\n` : '';
  return head + lines.join('') + tables.join('');
}

function tomlValue(key, value) {
  switch (typeof value) {
    case 'boolean':
      return value ? 'true' : 'false';
    case 'number':
      if (Number.isInteger(value)) return String(value);
      break;
    case 'bigint':
      return String(value);
    case 'string':
      // JSON's string escapes are TOML's basic-string escapes.
      return JSON.stringify(value);
    default:
      if (Array.isArray(value)) return `[${value.map((v) => tomlValue(key, v)).join(', ')}]`;
  }
  throw new ConfigValueError(`config key ${JSON.stringify(key)}: ${describe(value)} is not a config value`);
}

function isPlainObject(value) {
  if (value === null || typeof value !== 'object') return false;
  const proto = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

function describe(value) {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'number') return `the number ${value}`;
  return typeof value === 'object' ? (value.constructor?.name ?? 'an object') : `a ${typeof value}`;
}

module.exports = { configText, describe };
