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
