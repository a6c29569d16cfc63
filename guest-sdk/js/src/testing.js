// Run a plugin natively with `node --test`: fixtures stand in for the
// host's cache, and reads and writes are checked against the declaration as
// the host checks them (a write the host would refuse fails the reconcile
// with the host's exact refusal).
//
//   import { Harness } from '@kubewasm/guest/testing';
//   const outcome = new Harness(myPlugin).object(cm).reconcile(new ObjectKey('default', 'a'));

import { Context, ObjectKey, Outcome, ReconcileError, Verb, changedContext, setBackend } from './index.js';
import {
  SelectorError, isValidName, labelsError, matchesRequirements, nameError, namespaceError, parseSelector,
} from './rules.js';

/** A write the host refuses: denied by the grants, or malformed. */
class Refusal extends Error {
  constructor(message, denied = false) {
    super(message);
    this.denied = denied;
  }
}

const apiVersionOf = (t) => (t.group ? `${t.group}/${t.version}` : t.version);

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

  /** Runs the reconciler's `scheduled` for the time `at` (RFC 3339) the schedule named: no primary, an empty key. */
  scheduled(at) {
    return this.#run((ctx) => (this.reconciler.scheduled ? this.reconciler.scheduled(ctx) : new Outcome()),
      new ObjectKey(undefined, ''), undefined, at);
  }

  /**
   * Runs the reconciler's `mapKeys` for `object`, a changed object of the
   * secondary type `type` (with `{ previous }`, its state before the change,
   * or `{ deleted: true }`, `object` being its last state), reading this
   * harness's objects: the primary keys the host would queue.
   */
  mapKeys(type, object, change = {}) {
    if (!this.reconciler.mapKeys) return [];
    const backend = setBackend(this.#backend());
    try {
      return this.reconciler.mapKeys(changedContext(type, object, JSON.stringify(this.config), change), object);
    } finally {
      setBackend(backend);
    }
  }

  #run(fn, key, lastFailure, scheduledAt) {
    const previous = setBackend(this.#backend());
    let outcome;
    try {
      outcome = fn(new Context(this.declaration.primary, key, { config: JSON.stringify(this.config), lastFailure, scheduledAt }));
    } finally {
      setBackend(previous);
    }
    if (outcome instanceof Outcome) this.#checkWrites(outcome, key);
    return outcome;
  }

  // The host's write rules (`kubewasm_runtime::action::plan`), held to its answers
  // by `tests/conformance/writes.json`: every apply, status apply and
  // delete needs its verb declared on its type; its target's scope,
  // namespace and name must be valid (a namespaced object without a
  // namespace goes to the primary's), its labels too; an owned child needs
  // the primary cached and in its namespace.
  #checkWrites(outcome, key) {
    outcome.actions.forEach((action, i) => {
      try {
        if (action.kind === 'delete') {
          this.#checkTarget(this.#granted(action.type, Verb.DELETE).declared, action.key);
        } else if (action.kind === 'apply' || action.kind === 'apply-status') {
          const [declared, target] = this.#checkObject(action.object, action.kind === 'apply' ? Verb.APPLY : Verb.APPLY_STATUS, key);
          if (action.kind === 'apply' && action.owned) this.#checkOwner(declared, target, key);
        }
      } catch (refusal) {
        if (!(refusal instanceof Refusal)) throw refusal;
        throw new ReconcileError(refusal.denied
          ? `action #${i + 1} denied: plugin \`${this.declaration.name}\` ${refusal.message}`
          : `action #${i + 1} is invalid: ${refusal.message}`);
      }
    });
  }

  // What #held says of `type`, if `verb` is declared on it; else the
  // host's denial (reads and writes alike).
  #granted(type, verb) {
    const held = this.#held(type);
    const why = held === undefined ? 'the type was not declared'
      : held.verbs.includes(verb) ? undefined : 'the verb was not declared for this type';
    if (why) throw new Refusal(`may not ${verb} ${apiVersionOf(type)} ${type.kind}: ${why}`, true);
    return held;
  }

  #checkObject(object, verb, key) {
    const apiVersion = String(object?.apiVersion ?? '');
    const slash = apiVersion.lastIndexOf('/');
    const { declared } = this.#granted({ group: slash < 0 ? '' : apiVersion.slice(0, slash), version: apiVersion.slice(slash + 1), kind: String(object?.kind ?? '') }, verb);
    const meta = object?.metadata ?? {};
    if (typeof meta.name !== 'string') throw new Refusal('object lacks `metadata.name`');
    const namespace = meta.namespace ?? (declared.namespaced ? key.namespace : undefined);
    const target = { namespace: namespace ?? undefined, name: meta.name };
    this.#checkTarget(declared, target);
    const why = labelsError(object);
    if (why) throw new Refusal(why);
    return [declared, target];
  }

  #checkTarget(type, target) {
    const namespace = target.namespace ?? undefined;
    if (type.namespaced && namespace === undefined) throw new Refusal(`${apiVersionOf(type)} ${type.kind} \`${target.name}\` needs a namespace`);
    if (!type.namespaced && namespace !== undefined) {
      throw new Refusal(`${apiVersionOf(type)} ${type.kind} is cluster-scoped but \`${target.name}\` names namespace \`${namespace}\``);
    }
    const why = (namespace !== undefined && namespaceError(namespace)) || nameError(type, target.name);
    if (why) throw new Refusal(why);
  }

  #checkOwner(type, child, key) {
    const primary = this.declaration.primary;
    const shown = (k) => (k.namespace ? `${k.namespace}/${k.name}` : k.name);
    const cannot = `cannot own ${apiVersionOf(type)} ${type.kind} \`${shown(child)}\``;
    const cached = this.objects.find((o) => o.apiVersion === apiVersionOf(primary) && o.kind === primary.kind
      && o.metadata?.name === key.name && (o.metadata?.namespace ?? undefined) === (key.namespace ?? undefined));
    if (cached === undefined) throw new Refusal(`${cannot}: the primary \`${shown(key)}\` is not in the cache`);
    if (typeof cached.metadata?.uid !== 'string') throw new Refusal(`${cannot}: the primary has no uid`);
    if (primary.namespaced && (key.namespace ?? undefined) !== child.namespace) {
      throw new Refusal(`${cannot}: an owner reference cannot cross namespaces (primary \`${shown(key)}\`)`);
    }
  }

  // The host's read rules (`kubewasm_runtime::reads`), held to its answers by the
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
    let held;
    try {
      held = this.#granted(type, verb);
    } catch (refusal) {
      if (!(refusal instanceof Refusal)) throw refusal;
      throw { payload: { tag: 'denied', val: `plugin \`${this.declaration.name}\` ${refusal.message}` } };
    }
    const { declared } = held;
    const apiVersion = apiVersionOf(declared);
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
