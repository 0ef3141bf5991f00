/**
 * Jest's node environment runs each test file in its own V8 context, with its own typed-array
 * constructors, and shares only Buffer, ArrayBuffer and Uint8Array with Node. A native addon
 * such as onnxruntime-node hands back typed arrays made in Node's own context, which
 * onnxruntime-common then rejects with `instanceof` ("A float32 tensor's data must be type of
 * Float32Array"). This environment shares the rest of the typed arrays the same way. Outside
 * Jest there is one context and nothing to fix. It starts each file with fresh connections too.
 */
const FreshConnectionsEnvironment = require('./fresh-connections-environment');

const SHARED = [
  'Int8Array',
  'Uint8ClampedArray',
  'Int16Array',
  'Uint16Array',
  'Int32Array',
  'Uint32Array',
  'Float32Array',
  'Float64Array',
  'BigInt64Array',
  'BigUint64Array',
  'DataView',
];

class NativeTypedArraysEnvironment extends FreshConnectionsEnvironment {
  constructor(config, context) {
    super(config, context);
    for (const name of SHARED) this.global[name] = globalThis[name];
  }
}

module.exports = NativeTypedArraysEnvironment;
