/**
 * Fixtures only where they are enabled: the product's task table has none, and a model of the
 * echo fixture's task is refused until a process enables them. The suite's setup file enables
 * them, so each case loads the modules afresh.
 */
const base = { owner: 'me', name: 'm', visibility: 'private' };

test("the product's task types hold no fixture; enabling fixtures adds the echo fixture's", () => {
  jest.isolateModules(() => {
    const { taskNames, taskType } = jest.requireActual<typeof import('../../domain/tasks')>('../../domain/tasks');
    expect(taskNames()).toEqual(['text-generation', 'embeddings', 'remove-background']);
    expect(taskType('echo-fixture')).toBeUndefined();
    const { enableFixtureTasks } = jest.requireActual<typeof import('../../fixtures/enable')>('../../fixtures/enable');
    enableFixtureTasks();
    expect(taskNames()).toContain('echo-fixture');
    expect(taskType('echo-fixture')?.engines).toEqual(['echo-fixture']);
  });
});

test('a model of the echo fixture task is a 422 on task until fixtures are enabled', () => {
  jest.isolateModules(() => {
    const { createModelBody } = jest.requireActual<typeof import('../../api/routes/models')>('../../api/routes/models');
    const refused = createModelBody.safeParse({ ...base, task: 'echo-fixture' });
    expect(refused.success).toBe(false);
    expect(refused.error?.issues[0].path).toEqual(['task']);
    expect(createModelBody.safeParse({ ...base, task: 'text-generation' }).success).toBe(true);
    const { enableFixtureTasks } = jest.requireActual<typeof import('../../fixtures/enable')>('../../fixtures/enable');
    enableFixtureTasks();
    expect(createModelBody.safeParse({ ...base, task: 'echo-fixture' }).success).toBe(true);
  });
});
