import assert from 'node:assert/strict';
import { test } from 'node:test';

import { ObjectKey } from '@kubewasm/guest';
import { Harness } from '@kubewasm/guest/testing';

import { REPLICA_OF, REPLICATE_TO, replicator, targets } from './replicator.js';

const SOURCE_KEY = new ObjectKey('default', 'settings');

function source(replicateTo = 'ns-a,ns-b', data = { LOG_LEVEL: 'info' }) {
  return { apiVersion: 'v1', kind: 'ConfigMap',
    metadata: { name: 'settings', namespace: 'default', uid: 'src-uid', annotations: { [REPLICATE_TO]: replicateTo } }, data };
}

function copy(namespace, data = { LOG_LEVEL: 'info' }) {
  return { apiVersion: 'v1', kind: 'ConfigMap',
    metadata: { name: 'settings', namespace, labels: { [REPLICA_OF]: 'default.settings' } }, data };
}

test('targets are trimmed, deduplicated, valid and never the source namespace', () => {
  assert.deepEqual(targets(source(' ns-a, ns-a ,Bad_NS,default,,ns-b')), ['ns-a', 'ns-b']);
  assert.equal(targets({ metadata: {} }), undefined);
});

test('a new source is copied into every listed namespace, unowned, and keeps its finalizer', () => {
  const out = new Harness(replicator).object(source()).reconcile(SOURCE_KEY);
  assert.deepEqual(out.applied().map((c) => c.metadata.namespace), ['ns-a', 'ns-b']);
  assert.deepEqual(out.applied()[0].metadata.labels, { [REPLICA_OF]: 'default.settings' });
  assert.ok(out.actions.every((a) => a.owned === false));
  assert.equal(out.needsFinalizer, true);
});

test('an update of the source updates the copies', () => {
  const out = new Harness(replicator).object(source('ns-a', { LOG_LEVEL: 'debug' })).object(copy('ns-a')).reconcile(SOURCE_KEY);
  assert.deepEqual(out.applied().map((c) => c.data), [{ LOG_LEVEL: 'debug' }]);
});

test('copies in sync need nothing', () => {
  const out = new Harness(replicator).object(source('ns-a')).object(copy('ns-a')).reconcile(SOURCE_KEY);
  assert.deepEqual(out.actions, []);
});

test('a namespace removed from the list loses its copy', () => {
  const out = new Harness(replicator).object(source('ns-a')).object(copy('ns-a')).object(copy('ns-b')).reconcile(SOURCE_KEY);
  assert.deepEqual(out.deleted().map(([, k]) => k.namespace), ['ns-b']);
});

test('a copy edited by hand is put back when it is reconciled', () => {
  const out = new Harness(replicator).object(source('ns-a')).object(copy('ns-a', { LOG_LEVEL: 'hacked' }))
    .reconcile(new ObjectKey('ns-a', 'settings'));
  assert.deepEqual(out.applied().map((c) => c.data), [{ LOG_LEVEL: 'info' }]);
  assert.equal(out.needsFinalizer, false);
});

test('a copy with a key added by hand is recreated', () => {
  const out = new Harness(replicator).object(source('ns-a')).object(copy('ns-a', { LOG_LEVEL: 'info', EXTRA: 'x' }))
    .reconcile(new ObjectKey('ns-a', 'settings'));
  assert.deepEqual(out.deleted().map(([, k]) => `${k}`), ['ns-a/settings']);
});

test('an orphaned copy deletes itself', () => {
  const out = new Harness(replicator).object(copy('ns-a')).reconcile(new ObjectKey('ns-a', 'settings'));
  assert.deepEqual(out.deleted().map(([, k]) => `${k}`), ['ns-a/settings']);
});

test('deleting the source removes every copy', () => {
  const out = new Harness(replicator).object(source('ns-a,ns-b')).object(copy('ns-a')).object(copy('ns-b')).finalize(SOURCE_KEY);
  assert.deepEqual(out.deleted().map(([, k]) => `${k}`), ['ns-a/settings', 'ns-b/settings']);
});

test('an existing ConfigMap that is not a replica is left alone with a warning', () => {
  const foreign = { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'settings', namespace: 'ns-a' }, data: {} };
  const out = new Harness(replicator).object(source('ns-a')).object(foreign).reconcile(SOURCE_KEY);
  assert.deepEqual(out.applied(), []);
  assert.equal(out.events()[0].reason, 'TargetExists');
});

test('plain ConfigMaps need no finalizer and no action', () => {
  const plain = { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'x', namespace: 'default' } };
  const out = new Harness(replicator).object(plain).reconcile(new ObjectKey('default', 'x'));
  assert.deepEqual(out.actions, []);
  assert.equal(out.needsFinalizer, false);
});

test('copies are mapped back to their source by their label, so a copy deleted by hand is reconciled from it', () => {
  const declared = replicator.declare().secondaries;
  assert.deepEqual(declared.map((s) => [s.type.kind, s.mapping]), [['ConfigMap', { tag: 'label', val: REPLICA_OF }]]);
  // The source's reconcile after the copy went: the copy is applied again.
  const out = new Harness(replicator).object(source('ns-a')).reconcile(SOURCE_KEY);
  assert.deepEqual(out.applied().map((c) => c.metadata.namespace), ['ns-a']);
});
