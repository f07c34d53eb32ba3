// What the recorders share: the MCP client that talks JSON-RPC to a server over its stdio.

import { spawn } from 'node:child_process';
import readline from 'node:readline';

export class McpClient {
  constructor(bin, args, cwd) {
    this.log = [];
    this.seq = 0;
    this.nextId = 0;
    this.waiters = new Map();
    this.stderr = '';
    // Own process group, so that close() can also end the browser it started.
    this.proc = spawn(bin, args, { cwd, stdio: ['pipe', 'pipe', 'pipe'], detached: true });
    this.exited = new Promise(resolve => this.proc.on('exit', (code, sig) => resolve({ code, sig })));
    this.proc.stderr.on('data', d => { this.stderr += d; });
    readline.createInterface({ input: this.proc.stdout }).on('line', line => this.onLine(line));
  }

  record(dir, line) {
    let msg;
    try { msg = JSON.parse(line); } catch { this.log.push({ seq: ++this.seq, dir, raw: line }); return null; }
    this.log.push({ seq: ++this.seq, dir, msg });
    return msg;
  }

  write(msg) {
    const line = JSON.stringify(msg);
    this.record('client->server', line);
    this.proc.stdin.write(line + '\n');
  }

  onLine(line) {
    const msg = this.record('server->client', line);
    if (!msg) return;
    if (msg.id !== undefined && msg.method === undefined && this.waiters.has(msg.id)) {
      this.waiters.get(msg.id)(msg);
      this.waiters.delete(msg.id);
    } else if (msg.id !== undefined && msg.method !== undefined) {
      // A server->client request; this client offers no capabilities.
      this.write({ jsonrpc: '2.0', id: msg.id, error: { code: -32601, message: 'Method not found' } });
    }
  }

  request(method, params, timeoutMs = 90000) {
    const id = ++this.nextId;
    this.write({ jsonrpc: '2.0', id, method, params });
    return new Promise((resolve, reject) => {
      const t = setTimeout(() => reject(new Error(`timeout waiting for ${method} #${id}\n${this.stderr}`)), timeoutMs);
      this.waiters.set(id, m => { clearTimeout(t); resolve(m); });
    });
  }

  notify(method, params) {
    this.write(params === undefined ? { jsonrpc: '2.0', method } : { jsonrpc: '2.0', method, params });
  }

  async close() {
    this.proc.stdin.end();
    const done = await Promise.race([this.exited, sleep(8000).then(() => null)]);
    const pgid = this.proc.pid;
    if (!done) {
      try { process.kill(-pgid, 'SIGTERM'); } catch {}
      const d2 = await Promise.race([this.exited, sleep(4000).then(() => null)]);
      if (!d2) { try { process.kill(-pgid, 'SIGKILL'); } catch {} }
    }
    // Anything left in the group (a browser that outlived the server)?
    try { process.kill(-pgid, 0); process.kill(-pgid, 'SIGKILL'); } catch {}
  }
}

const sleep = ms => new Promise(r => setTimeout(r, ms));
