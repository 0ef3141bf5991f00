/** What an engine node's activities are made with: its clients, engines and hooks. */
import type { Db } from '../db/client';
import type { ImageEngine, ModelFiles, TextEngine } from '../engines';
import type { EchoFixtureEngine } from '../fixtures/echo-engine';
import type { FetchInputDeps } from '../lib/fetch-input';
import type { UrlSigner } from '../lib/signing';
import type { Storage } from '../lib/storage';
import type { InflightLedger } from './inflight-ledger';
import type { NodeHooks } from './node-hooks';

export interface EngineDeps {
  db: Db;
  cache: ModelFiles;
  llama: TextEngine;
  node: NodeHooks;
  /** Where webhook delivery workflows run. */
  controlQueue: string;
  /** Where batch inputs are read and their results written. */
  storage?: Storage;
  /** Present only where fixtures are enabled (tests, benchmarks). */
  echoFixture?: EchoFixtureEngine;
  /** ONNX Runtime, with what its tasks need: inputs to fetch and output files to store. */
  onnx?: { engine: ImageEngine; storage: Storage; signer: UrlSigner; fetch: FetchInputDeps };
  /** How long a stream's chunks are gathered into one write (OutputStream's own default if unset). */
  streamBatchMs?: number;
  /** The predictions running here, for the restarted process to report lost (absent: the heartbeat timeout finds them). */
  inflight?: InflightLedger;
}
