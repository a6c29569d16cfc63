import assert from 'node:assert/strict';
import { test } from 'node:test';

import { matches } from '../src/testing.js';

test('selector matching follows the API server grammar', () => {
  const labels = { app: 'web', tier: 'front' };
  for (const [selector, expected] of [
    ['', true], ['app=web', true], ['app==web', true], ['app!=web', false],
    ['tier in (front, back)', true], ['tier notin (front)', false], ['missing notin (x)', true],
    ['app', true], ['!app', false], ['!legacy', true], ['app=web,tier in (back)', false],
  ]) {
    assert.equal(matches(selector, labels), expected, selector);
  }
});

test('the harness clock is what now() returns during a call, and only then', async () => {
  const { Declaration, ObjectKey, Outcome, ResourceType, now } = await import('../src/index.js');
  const { Harness } = await import('../src/testing.js');
  const seen = [];
  const plugin = {
    declare: () => new Declaration('clock', '0.1.0', ResourceType.core('v1', 'ConfigMap', 'configmaps')),
    reconcile: () => { seen.push(now()); return new Outcome(); },
  };
  const at = new Date('2026-01-01T00:00:00Z');
  new Harness(plugin, { now: at }).reconcile(new ObjectKey('default', 'a'));
  new Harness(plugin).reconcile(new ObjectKey('default', 'a'));
  assert.equal(seen[0], at);
  assert.ok(seen[1] instanceof Date && seen[1] !== at);
});

test('mapKeys sees the previous state and a deletion (contract 0.3.0)', async () => {
  const { Declaration, ObjectKey, Outcome, ResourceType } = await import('../src/index.js');
  const { Harness } = await import('../src/testing.js');
  const configMaps = ResourceType.core('v1', 'ConfigMap', 'configmaps');
  const labelled = (owner) => ({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'c', namespace: 'ns', labels: { owner } } });
  const plugin = {
    declare: () => new Declaration('by-owner', '0.1.0', configMaps),
    reconcile: () => new Outcome(),
    mapKeys: (ctx, object) => [object, ctx.previous].filter(Boolean).map((o) => new ObjectKey('ns', o.metadata.labels.owner))
      .concat(ctx.deleted ? [new ObjectKey('ns', 'deleted')] : []),
  };
  const names = (keys) => keys.map((k) => k.name);
  const harness = new Harness(plugin);
  assert.deepEqual(names(harness.mapKeys(configMaps, labelled('a'))), ['a']);
  assert.deepEqual(names(harness.mapKeys(configMaps, labelled('b'), { previous: labelled('a') })), ['b', 'a']);
  assert.deepEqual(names(harness.mapKeys(configMaps, labelled('a'), { deleted: true })), ['a', 'deleted']);
});

test('children form a set only when asked (contract 0.3.0)', async () => {
  const { Declaration, ResourceType, Verb } = await import('../src/index.js');
  const { apps_v1 } = await import('../src/types.js');
  const d = new Declaration('sets', '0.1.0', ResourceType.core('v1', 'ConfigMap', 'configmaps'))
    .owns(apps_v1.Deployment).owns(apps_v1.Deployment, { prune: true })
    .secondary({ type: apps_v1.Deployment, prune: true });
  assert.deepEqual(d.secondaries.map((s) => s.prune), [false, true, true]);
  assert.ok(d.secondaries[2].verbs.includes(Verb.DELETE), 'a set needs delete');
});

test('a scheduled call runs on the harness with its time and no primary (contract 0.3.0)', async () => {
  const { Declaration, ObjectKey, Outcome, ResourceType, Verb } = await import('../src/index.js');
  const { Harness } = await import('../src/testing.js');
  const configMaps = ResourceType.core('v1', 'ConfigMap', 'configmaps');
  const plugin = {
    declare: () => new Declaration('report', '0.1.0', configMaps).verbs(Verb.APPLY).schedule('@hourly'),
    reconcile: () => new Outcome(),
    scheduled: (ctx) => new Outcome().apply({ apiVersion: 'v1', kind: 'ConfigMap',
      metadata: { name: 'report', namespace: 'default' }, data: { at: ctx.scheduledAt, key: ctx.key.name } }, { owned: false }),
  };
  assert.equal(plugin.declare().cron, '@hourly');
  const out = new Harness(plugin).scheduled('2026-12-03T10:00:00Z');
  assert.deepEqual(out.applied()[0].data, { at: '2026-12-03T10:00:00Z', key: '' });
  assert.ok(new ObjectKey(undefined, '') instanceof ObjectKey);
});
