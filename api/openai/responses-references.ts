/**
 * `item_reference` inputs: an item of one of the account's stored responses, named by its id,
 * stands in for the item itself, as OpenAI resolves it. The ids Kiln gives items name their
 * response (`msg_<prediction id>`, `fc_<prediction id>_<n>`, `<kind>_<prediction id>_in<n>`), so an
 * item of any stored response can be named; an id the caller chose for an item of its own is looked
 * up in the chain the request continues.
 */
import { ApiError } from '../errors';
import type { Turn } from './responses-conversation';
import type { InputItem, OutputItem, ResolvedInputItem, StoredInputItem } from './responses-protocol';

/** An item id Kiln made, and the prediction (so the response) it names. */
const KILN_ITEM_ID = /^(?:msg|fc|fco)_([a-z2-7]{26})(?:_(?:in)?\d+)?$/;

/** The items of the account's stored response with this id, input then output (undefined: no such response). */
export type ItemsOfResponse = (responseId: string) => Promise<Array<StoredInputItem | OutputItem> | undefined>;

/** A stored item as the input item it stands for. */
function asInput(item: StoredInputItem | OutputItem): ResolvedInputItem {
  switch (item.type) {
    case 'message':
      return { type: 'message', id: item.id, status: item.status, role: item.role, content: item.content.map((p) => p.text).join('') };
    case 'function_call':
      return { type: 'function_call', id: item.id, status: item.status, call_id: item.call_id, name: item.name, arguments: item.arguments };
    default:
      return { type: 'function_call_output', id: item.id, status: item.status, call_id: item.call_id, output: item.output };
  }
}

/** The input with every item_reference replaced by the item it names; one that names none is a 400 naming its place. */
export async function resolveItemReferences(
  input: string | InputItem[],
  chain: Turn[],
  itemsOfResponse: ItemsOfResponse,
): Promise<string | ResolvedInputItem[]> {
  if (typeof input === 'string' || input.every((i) => i.type !== 'item_reference')) return input as string | ResolvedInputItem[];
  const inChain = new Map(chain.flatMap((t) => [...t.inputItems, ...t.outputItems]).map((i) => [i.id, i]));
  const responses = new Map<string, Promise<Array<StoredInputItem | OutputItem> | undefined>>();
  const find = async (id: string) => {
    const chained = inChain.get(id);
    if (chained) return chained;
    const predictionId = KILN_ITEM_ID.exec(id)?.[1];
    if (!predictionId) return undefined;
    const responseId = `resp_${predictionId}`;
    if (!responses.has(responseId)) responses.set(responseId, itemsOfResponse(responseId));
    return (await responses.get(responseId))?.find((i) => i.id === id);
  };
  return Promise.all(
    input.map(async (item, n) => {
      if (item.type !== 'item_reference') return item;
      const found = await find(item.id);
      if (!found) {
        // OpenAI's 400 naming the item's place (the create body's own `input`, not a prediction input's field).
        const field = `input.${n}.id`;
        const description = `no item '${item.id}' in this account's stored responses (an answer's items exist once its response has completed; an id of your own is looked up in the previous_response_id chain)`;
        throw new ApiError(400, 'Bad request', `${field}: ${description}`, {
          openai_param: field,
          invalid_fields: [{ type: 'invalid', field, description }],
        });
      }
      return asInput(found);
    }),
  );
}
