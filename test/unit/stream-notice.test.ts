/** What a prediction-events notification says: whose events, and whether they are output chunks only. */
import { parseNotice } from '../../db/events';

test('a notification names the prediction; output-only ones say so', () => {
  expect(parseNotice('abc123')).toEqual({ predictionId: 'abc123', outputOnly: false });
  expect(parseNotice('abc123 output')).toEqual({ predictionId: 'abc123', outputOnly: true });
});
