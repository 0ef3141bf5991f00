/** Links into the Temporal UI, where operators read a workflow's history. */

/** The dev server's UI, where `npm start` runs it: what a link assumes when KILN_TEMPORAL_UI_URL is unset. */
export const DEFAULT_TEMPORAL_UI_URL = 'http://127.0.0.1:8233';

export interface TemporalUi {
  url: string;
  namespace: string;
}

/** A workflow in the UI (its latest run). */
export function temporalUiUrl(ui: TemporalUi, workflowId: string): string {
  return `${ui.url.replace(/\/$/, '')}/namespaces/${encodeURIComponent(ui.namespace)}/workflows/${encodeURIComponent(workflowId)}`;
}
