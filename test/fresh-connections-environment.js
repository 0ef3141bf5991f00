/**
 * Each test file starts with no idle HTTP connection, and none stays idle for long. Node's fetch
 * keeps idle keep-alive connections in one pool per process, and jest runs a lane's files one
 * after another in one process. The API closes a connection idle for 5 s (Node's keepAliveTimeout);
 * the client gives one up after 4 s (the server's hint less 1 s), by a timer of its event loop. On a
 * busy machine that loop can be held past the server's close (loading the next file's modules
 * takes seconds), and a request then goes out on a connection the server is closing: "other side
 * closed". A fresh pool for each file (Node's own Agent class) that gives idle connections up after
 * 1 s leaves no connection of one file to the next, and 4 s of margin within a file.
 */
const { TestEnvironment } = require('jest-environment-node');

/** Where Node's fetch (its bundled undici) keeps the process's dispatcher. */
const GLOBAL_DISPATCHER = Symbol.for('undici.globalDispatcher.1');

class FreshConnectionsEnvironment extends TestEnvironment {
  async setup() {
    await super.setup();
    const previous = globalThis[GLOBAL_DISPATCHER];
    if (previous === undefined) return;
    globalThis[GLOBAL_DISPATCHER] = new previous.constructor({ keepAliveTimeout: 1_000, keepAliveMaxTimeout: 1_000 });
    // Lets the last file's requests still in flight end; the idle connections close now.
    previous.close().catch(() => undefined);
  }
}

module.exports = FreshConnectionsEnvironment;
