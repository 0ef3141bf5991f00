/**
 * A jest environment whose typed arrays are the host's. Native addons (onnxruntime-node) hand
 * back Float32Arrays from the host realm, and onnxruntime-common checks `instanceof
 * Float32Array` against the sandbox's own: without this, every run fails inside jest only.
 */
const { TestEnvironment } = require('jest-environment-node');

const TYPED = [
  'ArrayBuffer', 'SharedArrayBuffer', 'DataView', 'Int8Array', 'Uint8Array', 'Uint8ClampedArray', 'Int16Array',
  'Uint16Array', 'Int32Array', 'Uint32Array', 'Float32Array', 'Float64Array', 'BigInt64Array', 'BigUint64Array',
];

class NativeTypedArraysEnvironment extends TestEnvironment {
  constructor(config, context) {
    super(config, context);
    for (const name of TYPED) this.global[name] = globalThis[name];
  }
}

module.exports = NativeTypedArraysEnvironment;
