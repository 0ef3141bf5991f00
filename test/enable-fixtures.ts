/**
 * jest setupFiles: the suite runs with fixtures on (infra/test.sh sets KILN_ENABLE_FIXTURES for
 * the processes it starts), so an app or activity a test builds in its own process serves them too.
 */
import { enableFixtureTasks } from '../fixtures/enable';

enableFixtureTasks();
