// The test helpers of an outcome, the same in every language's SDK:
// applied, statuses, deleted, events, requeue.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { Event, ObjectKey, Outcome, ResourceType } from '../src/index.js';

test('the helpers show each kind of action in order', () => {
  const configMaps = new ResourceType('', 'v1', 'ConfigMap', 'configmaps', true);
  const old = new ObjectKey('default', 'old');
  const outcome = new Outcome()
    .apply({ kind: 'ConfigMap', metadata: { name: 'a' } })
    .applyStatus({ kind: 'ConfigMap', status: { ok: true } })
    .delete(configMaps, old)
    .event(new Event('Seen', 'Reconcile', 'hello'))
    .requeueAfter(30);
  assert.equal(outcome.applied()[0].metadata.name, 'a');
  assert.deepEqual(outcome.statuses()[0].status, { ok: true });
  assert.deepEqual(outcome.deleted(), [[configMaps, old]]);
  assert.deepEqual(outcome.events().map((e) => e.note), ['hello']);
  assert.equal(outcome.requeue(), 30);
  assert.equal(new Outcome().requeue(), undefined);
  assert.equal(outcome.actions.length, 4);
});
