/** The suite's Temporal client, with the codec Kiln's own clients and workers use. */
import { Client, Connection } from '@temporalio/client';
import { config } from '../lib/config';
import { kilnDataConverter } from '../lib/payload-refs';
import { Storage } from '../lib/storage';

/** The codec Kiln's own clients and workers use (payloads by reference), against the suite's bucket. */
export function testDataConverter() {
  return kilnDataConverter(Storage.fromConfig(config()), config());
}

export async function testTemporal(): Promise<{ client: Client; close: () => Promise<void> }> {
  const connection = await Connection.connect({ address: process.env.TEMPORAL_ADDRESS ?? '127.0.0.1:7233' });
  const client = new Client({ connection, namespace: process.env.TEMPORAL_NAMESPACE ?? 'kiln-test', dataConverter: testDataConverter() });
  return { client, close: () => connection.close() };
}
