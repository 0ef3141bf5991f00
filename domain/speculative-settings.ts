/** How a version predicts tokens (its manifest's `settings.speculative`, as the API stored it). */
export type SpeculativeSettings =
  | {
      type: 'draft';
      /** The draft model, `owner/name`, and the version of it that was resolved at push. */
      model: string;
      version: string;
      /** Most tokens drafted ahead at a time. */
      maxDraftTokens?: number;
      /** Tokens the target waits for before it checks a draft (0: check whatever is drafted by then). */
      minDraftTokens?: number;
      /** The draft stops at a token it is less sure of than this (0: never). */
      minConfidence?: number;
    }
  | { type: 'input_lookup'; maxDraftTokens?: number };
