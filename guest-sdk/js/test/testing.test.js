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
