// The test helpers of an outcome, the same in every language's SDK:
// applied, statuses, deleted, events, requeue.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { Event, ObjectKey, Outcome, ResourceType, failure } from '../src/index.js';

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

test('a failure names where it was thrown, mapped from the bundle when a line table is there', () => {
  const error = new TypeError('x is undefined');
  error.stack = 'reconcile@plugin.js:358:15\nrun@plugin.js:20:3\n';
  assert.equal(failure(error).message, 'TypeError: x is undefined (at plugin.js:358:15)');
  globalThis.__kubewasmSourceLines = { sources: ['node_modules/@kubewasm/guest/src/index.js', 'plugin.js'], lines: [] };
  globalThis.__kubewasmSourceLines.lines[19] = [0, 300];
  globalThis.__kubewasmSourceLines.lines[357] = [1, 12];
  try {
    assert.equal(failure(error).message, 'TypeError: x is undefined (at plugin.js:12)');
    error.stack = 'run@plugin.js:20:3\n';
    assert.equal(failure(error).message, 'TypeError: x is undefined', 'the SDK frames are left out');
  } finally {
    delete globalThis.__kubewasmSourceLines;
  }
  assert.equal(failure('plain').message, 'plain');
});
