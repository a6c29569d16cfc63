// Run a plugin natively with `node --test`: fixtures stand in for the
// host's cache, and reads and writes are checked against the declaration as
// the host checks them (a write the host would refuse fails the reconcile
// with the host's exact refusal).
//
//   import { Harness } from '@kubewasm/guest/testing';
//   const outcome = new Harness(myPlugin).object(cm).reconcile(new ObjectKey('default', 'a'));

import { Context, Outcome, ReconcileError, Verb, changedContext, setBackend } from './index.js';
import { SelectorError, isValidName, matchesRequirements, parseSelector } from './rules.js';

/** Objects and a configuration to run a reconciler against. */
export class Harness {
  /** `now` (a `Date`) is what `now()` returns during the calls, as the host's clock for a call. */
  constructor(reconciler, { config = {}, now = undefined } = {}) {
    this.reconciler = reconciler;
    this.declaration = reconciler.declare();
    this.config = config;
    this.now = now;
    this.objects = [];
    this.logs = [];
  }

  object(object) {
    this.objects.push(object);
    return this;
  }

  reconcile(key, { lastFailure } = {}) {
    return this.#run((ctx) => this.reconciler.reconcile(ctx), key, lastFailure);
  }

  finalize(key) {
    return this.#run((ctx) => (this.reconciler.finalize ? this.reconciler.finalize(ctx) : new Outcome()), key);
  }

  /**
   * Runs the reconciler's `mapKeys` for `object`, a changed object of the
   * secondary type `type`, reading this harness's objects: the primary keys
   * the host would queue.
   */
  mapKeys(type, object) {
    if (!this.reconciler.mapKeys) return [];
    const previous = setBackend(this.#backend());
    try {
      return this.reconciler.mapKeys(changedContext(type, object, JSON.stringify(this.config)), object);
    } finally {
      setBackend(previous);
    }
  }

  #run(fn, key, lastFailure) {
    const previous = setBackend(this.#backend());
    let outcome;
    try {
      outcome = fn(new Context(this.declaration.primary, key, { config: JSON.stringify(this.config), lastFailure }));
    } finally {
      setBackend(previous);
    }
    if (outcome instanceof Outcome) this.#checkWrites(outcome);
    return outcome;
  }

  // The host's write rules (`kubewasm::action::plan`), held to its answers
  // by `tests/conformance/writes.json`: every apply, status apply and
  // delete needs its verb declared on its type.
  #checkWrites(outcome) {
    outcome.actions.forEach((action, i) => {
      let verb;
      let type;
      if (action.kind === 'delete') {
        verb = Verb.DELETE;
        type = action.type;
      } else if (action.kind === 'apply' || action.kind === 'apply-status') {
        const apiVersion = String(action.object?.apiVersion ?? '');
        const slash = apiVersion.lastIndexOf('/');
        verb = action.kind === 'apply' ? Verb.APPLY : Verb.APPLY_STATUS;
        type = { group: slash < 0 ? '' : apiVersion.slice(0, slash), version: apiVersion.slice(slash + 1), kind: String(action.object?.kind ?? '') };
      } else {
        return;
      }
      const held = this.#held(type);
      const why = held === undefined ? 'the type was not declared'
        : held.verbs.includes(verb) ? undefined : 'the verb was not declared for this type';
      if (why) {
        const apiVersion = type.group ? `${type.group}/${type.version}` : type.version;
        throw new ReconcileError(`action #${i + 1} denied: plugin \`${this.declaration.name}\` may not ${verb} ${apiVersion} ${type.kind}: ${why}`);
      }
    });
  }

  // The host's read rules (`kubewasm::reads`), held to its answers by the
  // shared conformance fixtures: types match by group, version and kind;
  // a secondary's declared selector restricts its reads; a name no object
  // can have finds nothing.
  #held(type) {
    const d = this.declaration;
    const same = (t) => t.group === type.group && t.version === type.version && t.kind === type.kind;
    if (same(d.primary)) return { declared: d.primary, verbs: [Verb.GET, Verb.LIST, Verb.WATCH, ...d.primaryVerbs], selector: d.primarySelector };
    const s = d.secondaries.find((x) => same(x.type));
    return s && { declared: s.type, verbs: s.verbs, selector: s.labelSelector ?? '' };
  }

  #visible(type, verb) {
    const held = this.#held(type);
    const why = held === undefined ? 'the type was not declared'
      : held.verbs.includes(verb) ? undefined : 'the verb was not declared for this type';
    if (why) {
      const apiVersion = type.group ? `${type.group}/${type.version}` : type.version;
      throw { payload: { tag: 'denied', val: `plugin \`${this.declaration.name}\` may not ${verb} ${apiVersion} ${type.kind}: ${why}` } };
    }
    const { declared } = held;
    const apiVersion = declared.group ? `${declared.group}/${declared.version}` : declared.version;
    const requirements = parseSelector(held.selector);
    return {
      declared,
      objects: this.objects.filter((o) => o.apiVersion === apiVersion && o.kind === declared.kind && matchesRequirements(requirements, o)),
    };
  }

  #backend() {
    const invalidSelector = (e) => {
      if (e instanceof SelectorError) throw { payload: { tag: 'invalid-selector', val: e.message } };
      throw e;
    };
    return {
      now: () => this.now,
      cache: {
        get: (type, key) => {
          const { declared, objects } = this.#visible(type, Verb.GET);
          if (!isValidName(declared, key.name)) return undefined;
          const found = objects.find((o) => o.metadata?.name === key.name && (o.metadata?.namespace ?? undefined) === (key.namespace ?? undefined));
          return found === undefined ? undefined : JSON.stringify(found);
        },
        list: (type, namespace, selector) => {
          let requirements;
          try {
            requirements = parseSelector(selector);
          } catch (e) {
            invalidSelector(e);
          }
          const keyOf = (o) => [o.metadata.namespace ?? '', o.metadata.name];
          return this.#visible(type, Verb.LIST).objects
            .filter((o) => namespace === undefined || namespace === null || o.metadata?.namespace === namespace)
            .filter((o) => matchesRequirements(requirements, o))
            .sort((a, b) => {
              const [x, y] = [keyOf(a), keyOf(b)];
              return x[0] < y[0] ? -1 : x[0] > y[0] ? 1 : x[1] < y[1] ? -1 : x[1] > y[1] ? 1 : 0;
            })
            .map((o) => JSON.stringify(o));
        },
      },
      log: {
        log: (level, message, fields) => this.logs.push({ level, message, fields: Object.fromEntries(fields) }),
      },
    };
  }
}

/** Whether `labels` satisfy `selector`, in the API server's grammar (`k=v`, `k==v`, `k!=v`, `k in (a,b)`, `k notin (a,b)`, `k`, `!k`); throws SelectorError for a selector the host refuses. */
export function matches(selector, labels) {
  return matchesRequirements(parseSelector(selector), { metadata: { labels } });
}
