/**
 * The engine's object-storage credentials: it reads weights, input files and batch inputs, and
 * writes output files and batch parts; it reads and writes Temporal payloads stored by reference
 * (payloads/sha256/, lib/payload-refs.ts: a large input arrives that way, a large output leaves
 * that way; puts are create-only and reads check the sha256, so a rewrite could not pass as another
 * payload). KV snapshots (engines/llama/kv-object-tier.ts) live under kv/: there, and only there,
 * it reads, writes, deletes (the tier's LRU eviction) and lists (a lookup lists one prefix's
 * folder). Nothing else: no listing or deleting outside kv/, no writing weights.
 *
 * Locally (MinIO) setup asks the store's STS endpoint for a session under the root credentials,
 * narrowed by ENGINE_POLICY as an inline session policy (AssumeRole's `Policy`); the engine gets
 * only the session. In production the same policy is an IAM role of the engine hosts (instance
 * profile or workload identity), or an access key of a user that has only this policy; setup then
 * takes KILN_ENGINE_S3_ACCESS_KEY_ID / KILN_ENGINE_S3_SECRET_ACCESS_KEY as they are.
 */
import { AssumeRoleCommand, STSClient } from '@aws-sdk/client-sts';
import type { Config } from '../lib/config';

/** How long a local engine session lasts: npm start hands out a new one at every start. */
const SESSION_SECONDS = 30 * 24 * 3600;

export function enginePolicy(bucket: string) {
  const arn = (key: string) => `arn:aws:s3:::${bucket}/${key}`;
  return {
    Version: '2012-10-17',
    Statement: [
      {
        Sid: 'ReadWeightsInputsBatchesAndPayloads',
        Effect: 'Allow',
        Action: ['s3:GetObject'],
        Resource: [arn('blobs/*'), arn('files/*'), arn('batches/*'), arn('payloads/sha256/*')],
      },
      {
        Sid: 'WriteOutputs',
        Effect: 'Allow',
        Action: ['s3:PutObject', 's3:AbortMultipartUpload'],
        Resource: [arn('files/*'), arn('batches/*/parts/*'), arn('payloads/sha256/*')],
      },
      {
        Sid: 'KvSnapshots',
        Effect: 'Allow',
        Action: ['s3:GetObject', 's3:PutObject', 's3:DeleteObject', 's3:AbortMultipartUpload'],
        Resource: [arn('kv/*')],
      },
      {
        Sid: 'ListKvSnapshots',
        Effect: 'Allow',
        Action: ['s3:ListBucket'],
        Resource: [`arn:aws:s3:::${bucket}`],
        Condition: { StringLike: { 's3:prefix': ['kv/*'] } },
      },
    ],
  };
}

export interface EngineS3Credentials {
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken?: string;
  expiration?: Date;
}

export async function engineS3Credentials(c: Config, env: NodeJS.ProcessEnv = process.env): Promise<EngineS3Credentials> {
  if (env.KILN_ENGINE_S3_ACCESS_KEY_ID && env.KILN_ENGINE_S3_SECRET_ACCESS_KEY) {
    return { accessKeyId: env.KILN_ENGINE_S3_ACCESS_KEY_ID, secretAccessKey: env.KILN_ENGINE_S3_SECRET_ACCESS_KEY };
  }
  const sts = new STSClient({
    endpoint: c.S3_ENDPOINT,
    region: c.S3_REGION,
    credentials: { accessKeyId: c.S3_ACCESS_KEY_ID, secretAccessKey: c.S3_SECRET_ACCESS_KEY },
  });
  try {
    const { Credentials: session } = await sts.send(
      new AssumeRoleCommand({
        // MinIO ignores the role: the session is the caller's rights narrowed by the policy.
        RoleArn: 'arn:aws:iam::000000000000:role/kiln-engine',
        RoleSessionName: `kiln-engine-${c.KILN_NODE_ID}`.slice(0, 64),
        DurationSeconds: SESSION_SECONDS,
        Policy: JSON.stringify(enginePolicy(c.S3_BUCKET)),
      }),
    );
    if (!session?.AccessKeyId || !session.SecretAccessKey) throw new Error('the STS answer holds no credentials');
    return {
      accessKeyId: session.AccessKeyId,
      secretAccessKey: session.SecretAccessKey,
      sessionToken: session.SessionToken,
      expiration: session.Expiration,
    };
  } finally {
    sts.destroy();
  }
}
