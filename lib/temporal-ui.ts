/** Links into the Temporal UI, where operators read a workflow's history. */

export interface TemporalUi {
  url: string;
  namespace: string;
}

/** A workflow in the UI (its latest run). */
export function temporalUiUrl(ui: TemporalUi, workflowId: string): string {
  return `${ui.url.replace(/\/$/, '')}/namespaces/${encodeURIComponent(ui.namespace)}/workflows/${encodeURIComponent(workflowId)}`;
}
