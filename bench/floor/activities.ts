/** The floor's one activity: what kiln/echo-fixture does with sleep_ms 0, and nothing more. */
export const floorActivities = {
  async echo(text: string): Promise<string> {
    return text;
  },
};
