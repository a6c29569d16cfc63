// The shared conformance fixtures (tests/conformance/reads.json and
// writes.json), which the host runs too: the harness must answer every case
// as the host does.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';

import { Declaration, Event, ObjectKey, Outcome, ReconcileError, ResourceType } from '../src/index.js';
import { Harness } from '../src/testing.js';

const fixture = (file) => JSON.parse(readFileSync(new URL(`../../../tests/conformance/${file}`, import.meta.url), 'utf8'));
const fixtures = fixture('reads.json');

const type = (t) => new ResourceType(t.group, t.version, t.kind, t.plural, t.namespaced);

function declaration(d) {
  const declared = new Declaration(d.name, d.version, type(d.primary)).verbs(...(d.primaryVerbs ?? [])).selecting(d.primarySelector ?? '');
  for (const s of d.secondaries ?? []) declared.secondary({ type: type(s.type), verbs: s.verbs, labelSelector: s.labelSelector ?? '' });
  return declared;
}

/** A plugin whose reconcile makes one case's read, as plugin code does. */
const reader = (declared, c) => ({
  declare: () => declared,
  reconcile(ctx) {
    if (c.read === 'get') return { found: ctx.get(type(c.type), new ObjectKey(c.key.namespace ?? undefined, c.key.name)) !== undefined };
    const items = ctx.list(type(c.type), c.namespace ?? undefined, c.labelSelector ?? '');
    return { items: items.map((o) => (o.metadata.namespace ? `${o.metadata.namespace}/${o.metadata.name}` : o.metadata.name)) };
  },
});

test('the harness answers every conformance case as the host does', () => {
  let checked = 0;
  for (const scenario of fixtures.scenarios) {
    scenario.cases.forEach((c, i) => {
      const harness = new Harness(reader(declaration(scenario.declaration), c));
      for (const o of scenario.objects ?? []) harness.object(o);
      let got;
      try {
        got = harness.reconcile(new ObjectKey('default', 'any'));
      } catch (e) {
        assert.ok(e instanceof ReconcileError, String(e));
        if (e.message.startsWith('read denied: ')) got = { denied: e.message.slice('read denied: '.length) };
        else if (e.message.startsWith(`invalid label selector \`${c.labelSelector}\``)) got = { invalidSelector: c.labelSelector };
        else got = { error: e.message };
      }
      assert.deepEqual(got, c.expect, `scenario \`${scenario.name}\`, case #${i + 1}`);
      checked += 1;
    });
  }
  assert.ok(checked >= 20, `only ${checked} cases`);
});

/** A plugin whose reconcile returns one case's actions. */
const writer = (declared, actions) => ({
  declare: () => declared,
  reconcile() {
    const outcome = new Outcome();
    for (const a of actions) {
      if (a.apply) outcome.apply(a.apply, { owned: a.owned ?? true });
      else if (a.applyStatus) outcome.applyStatus(a.applyStatus);
      else if (a.delete) outcome.delete(type(a.delete.type), new ObjectKey(a.delete.key.namespace ?? undefined, a.delete.key.name));
      else outcome.event(new Event(a.event.reason, a.event.action, a.event.note));
    }
    return outcome;
  },
});

test('the harness refuses every write the host refuses', () => {
  let checked = 0;
  for (const scenario of fixture('writes.json').scenarios) {
    scenario.cases.forEach((c, i) => {
      const harness = new Harness(writer(declaration(scenario.declaration), c.actions)).object(scenario.primary);
      let got;
      try {
        harness.reconcile(new ObjectKey(scenario.key.namespace ?? undefined, scenario.key.name));
        got = { ok: true };
      } catch (e) {
        assert.ok(e instanceof ReconcileError, String(e));
        got = { denied: e.message };
      }
      assert.deepEqual(got, c.expect, `scenario \`${scenario.name}\`, case #${i + 1}`);
      checked += 1;
    });
  }
  assert.ok(checked >= 7, `only ${checked} cases`);
});
