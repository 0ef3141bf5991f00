/** What a prediction's workflow history says it ran where: the tests of split and placed steps read it. */
import type { Client } from '@temporalio/client';

/** The activities the prediction's workflow scheduled, as `<type> on <task queue>`, in order. */
export async function scheduledActivities(client: Client, predictionId: string): Promise<string[]> {
  const history = await client.workflow.getHandle(`prediction-${predictionId}`).fetchHistory();
  return (history.events ?? [])
    .map((e) => e.activityTaskScheduledEventAttributes)
    .filter((a) => a != null)
    .map((a) => `${a.activityType?.name} on ${a.taskQueue?.name}`);
}
