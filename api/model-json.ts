/** Models and versions in Replicate's JSON shapes; a version carries its task's JSON schemas. */
import { z } from 'zod';
import type { Model, ModelVersion } from '../db/models';
import { DEFAULT_RETRY_POLICY } from '../domain/contracts';
import { taskType } from '../domain/tasks';

export function versionSchemas(task: string) {
  const t = taskType(task);
  if (!t) return {};
  return {
    Input: z.toJSONSchema(t.input, { io: 'input', unrepresentable: 'any' }),
    Output: z.toJSONSchema(t.output, { io: 'output', unrepresentable: 'any' }),
  };
}

export function versionJson(v: ModelVersion) {
  return {
    id: v.id,
    created_at: v.createdAt.toISOString(),
    cog_version: null,
    task: v.task,
    engine: v.engine,
    files: v.files,
    memory_bytes: v.memoryBytes,
    settings: v.settings,
    /** The policy failed attempts follow: Kiln's default unless the version set one. */
    retry: v.retry ?? DEFAULT_RETRY_POLICY,
    openapi_schema: { components: { schemas: versionSchemas(v.task) } },
  };
}

export function modelJson(m: Model, baseUrl: string, latest?: ModelVersion) {
  return {
    url: `${baseUrl}/v1/models/${m.owner}/${m.name}`,
    owner: m.owner,
    name: m.name,
    description: m.description,
    visibility: m.visibility,
    task: m.task,
    github_url: null,
    paper_url: null,
    license_url: m.licenseUrl,
    /** Kiln's addition to Replicate's shape: the license by name. */
    license: m.license,
    cover_image_url: null,
    default_example: null,
    created_at: m.createdAt.toISOString(),
    latest_version: latest ? versionJson(latest) : null,
  };
}
