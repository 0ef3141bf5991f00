/** The custom search attributes the Temporal UI filters predictions by; infra registers them. */
import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';

export const KilnAccount = defineSearchAttributeKey('KilnAccount', SearchAttributeType.KEYWORD);
export const KilnModel = defineSearchAttributeKey('KilnModel', SearchAttributeType.KEYWORD);
export const KilnStatus = defineSearchAttributeKey('KilnStatus', SearchAttributeType.KEYWORD);

export const searchAttributeKeys = [KilnAccount, KilnModel, KilnStatus];
