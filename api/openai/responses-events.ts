/**
 * The Responses API's stream events of one response, made from its prediction's durable event log:
 * a pure function of the log's events in order, so the n-th event (its sequence_number) is the same
 * for every reader, live or replaying, before or after an API restart, and `starting_after`
 * resumes exactly. Text streams as deltas of one assistant message; an answer that may be function
 * calls is held back (as chat completions holds it) and ends as function_call items.
 */
import { messageItem, outputItems, type PredictionState, type ResponsePlan } from './responses-object';
import type { OutputItem, ResponseObject } from './responses-protocol';
import { mayBeToolCall } from './tools';

/** One event without its sequence number (the reader numbers them in order). */
export type ResponseEvent = { type: string } & Record<string, unknown>;

const textPart = (text: string) => ({ type: 'output_text', text, annotations: [], logprobs: [] });

export class ResponseEvents {
  private held = '';
  private holding: boolean;
  /** The message item is open: its text streams as deltas. */
  private opened = false;
  private streamed = '';

  constructor(
    private readonly predictionId: string,
    private readonly plan: ResponsePlan,
  ) {
    this.holding = plan.toolMode !== 'none';
  }

  /** A reset in the log: the output so far is void, and the answer starts again (its message opens anew). */
  restart(): void {
    this.held = '';
    this.holding = this.plan.toolMode !== 'none';
    this.opened = false;
    this.streamed = '';
  }

  private get messageId(): string {
    return `msg_${this.predictionId}`;
  }

  /** The first two events: the response as created, and as running. */
  start(created: ResponseObject, running: ResponseObject): ResponseEvent[] {
    return [
      { type: 'response.created', response: created },
      { type: 'response.in_progress', response: running },
    ];
  }

  /** The events of one output event of the prediction (none while the text is held back). */
  text(data: string): ResponseEvent[] {
    if (this.holding) {
      this.held += data;
      if (this.plan.toolMode === 'forced' || mayBeToolCall(this.held)) return [];
      this.holding = false;
      data = this.held;
    }
    return [...this.open(), this.delta(data)];
  }

  private open(): ResponseEvent[] {
    if (this.opened) return [];
    this.opened = true;
    return [
      { type: 'response.output_item.added', output_index: 0, item: messageItem(this.predictionId, '', 'in_progress') },
      { type: 'response.content_part.added', item_id: this.messageId, output_index: 0, content_index: 0, part: textPart('') },
    ];
  }

  private delta(data: string): ResponseEvent {
    this.streamed += data;
    return { type: 'response.output_text.delta', item_id: this.messageId, output_index: 0, content_index: 0, delta: data, logprobs: [] };
  }

  /** The events that end the stream of a finished prediction: the items' last events, then the response's. */
  end(prediction: PredictionState, final: ResponseObject): ResponseEvent[] {
    const events: ResponseEvent[] = [];
    if (final.status === 'completed' || final.status === 'incomplete') {
      for (const [index, item] of outputItems(prediction, this.plan).entries()) events.push(...this.finishItem(index, item));
    }
    const type = final.status === 'cancelled' ? 'response.failed' : `response.${final.status}`;
    events.push({ type, response: final });
    return events;
  }

  private finishItem(index: number, item: OutputItem): ResponseEvent[] {
    if (item.type === 'function_call') {
      return [
        { type: 'response.output_item.added', output_index: index, item: { ...item, status: 'in_progress', arguments: '' } },
        { type: 'response.function_call_arguments.delta', item_id: item.id, output_index: index, delta: item.arguments },
        {
          type: 'response.function_call_arguments.done',
          item_id: item.id,
          output_index: index,
          name: item.name,
          arguments: item.arguments,
        },
        { type: 'response.output_item.done', output_index: index, item },
      ];
    }
    const text = item.content[0]?.text ?? '';
    // Text still held back (an `auto` answer that was no call after all) goes out whole.
    const rest = text.startsWith(this.streamed) ? text.slice(this.streamed.length) : '';
    const part = { item_id: item.id, output_index: index, content_index: 0 };
    return [
      ...this.open(),
      ...(rest ? [this.delta(rest)] : []),
      { type: 'response.output_text.done', ...part, text, logprobs: [] },
      { type: 'response.content_part.done', ...part, part: textPart(text) },
      { type: 'response.output_item.done', output_index: index, item },
    ];
  }
}
