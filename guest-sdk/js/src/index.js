// Write kubewasm controller plugins in JavaScript.
//
// A plugin is an object with `declare` and `reconcile` (and optionally
// `finalize` and `mapKeys`). The component's entry module hands it, with
// the host's imports, to `exportPlugin`:
//
//   import * as cache from 'kubewasm:controller/cache@0.3.0';
//   import * as log from 'kubewasm:controller/log@0.3.0';
//   import { exportPlugin } from '@kubewasm/guest';
//   import { myPlugin } from './my-plugin.js';
//   export const plugin = exportPlugin(myPlugin, { cache, log });
//
// Objects are plain JSON values. Reads go to the host's caches and are
// limited to the declared types; writes are desired actions the host checks
// and performs. Test natively with `@kubewasm/guest/testing` and `node --test`.

/** Verbs, spelled as in the WIT. */
export const Verb = Object.freeze({
  GET: 'get',
  LIST: 'list',
  WATCH: 'watch',
  APPLY: 'apply',
  APPLY_STATUS: 'apply-status',
  DELETE: 'delete',
});
const VERBS = new Set(Object.values(Verb));

/** A Kubernetes resource type. */
export class ResourceType {
  constructor(group, version, kind, plural, namespaced = true) {
    Object.assign(this, { group, version, kind, plural, namespaced });
    Object.freeze(this);
  }

  /** A type of the core API group (`apiVersion: v1`). */
  static core(version, kind, plural, namespaced = true) {
    return new ResourceType('', version, kind, plural, namespaced);
  }

  get apiVersion() {
    return this.group ? `${this.group}/${this.version}` : this.version;
  }

  toString() {
    return `${this.apiVersion} ${this.kind}`;
  }
}

/** An object's identity; `namespace` is undefined for cluster-scoped objects. */
export class ObjectKey {
  constructor(namespace, name) {
    this.namespace = namespace ?? undefined;
    this.name = name;
    Object.freeze(this);
  }

  toString() {
    return this.namespace ? `${this.namespace}/${this.name}` : this.name;
  }
}

/** How changes of a secondary map to primary keys. */
export const Mapping = Object.freeze({
  NONE: { tag: 'none' },
  OWNER_REFERENCES: { tag: 'owner-references' },
  CUSTOM: { tag: 'custom' },
  /** Reads as triggers: the primaries whose last successful reconcile read the changed object. */
  READS: { tag: 'reads' },
  /** The value of label `key` names the primary (`name` or `namespace.name`). */
  label: (key) => ({ tag: 'label', val: key }),
});

function checkVerbs(verbs) {
  for (const verb of verbs) {
    if (!VERBS.has(verb)) throw new TypeError(`unknown verb ${JSON.stringify(verb)}: expected one of ${[...VERBS].join(', ')}`);
  }
  return [...verbs];
}

/** What a plugin declares at load; chain the methods. */
export class Declaration {
  constructor(name, version, primary) {
    this.name = name;
    this.version = version;
    this.primary = primary;
    this.primaryVerbs = [];
    this.primarySelector = '';
    this.secondaries = [];
    this.managedFinalizer = false;
    this.resyncSeconds = undefined;
    this.maxConcurrency = undefined;
    this.configSchema = undefined;
    this.cron = undefined;
  }

  /**
   * Only primaries matching this label selector (`app=web,!legacy`) are
   * watched, cached and reconciled; the default is every object.
   */
  selecting(selector) {
    this.primarySelector = selector;
    return this;
  }

  /** Verbs on the primary beyond the implied get, list and watch. */
  verbs(...verbs) {
    this.primaryVerbs.push(...checkVerbs(verbs));
    return this;
  }

  /**
   * A secondary type: `{ type, verbs, labelSelector, mapping, prune }`. With `prune: true` its owned
   * children form a set: the host deletes those it owns for the primary that a reconcile no longer applies.
   */
  secondary({ type, verbs = [], labelSelector = '', mapping = Mapping.NONE, prune = false }) {
    const checked = checkVerbs(verbs);
    if (mapping.tag !== 'none' && !checked.includes(Verb.WATCH)) checked.push(Verb.WATCH);
    if (prune && !checked.includes(Verb.DELETE)) checked.push(Verb.DELETE);
    this.secondaries.push({ type, verbs: checked, labelSelector, mapping, prune });
    return this;
  }

  /**
   * Children of `type` this plugin applies and deletes, mapped back by owner references;
   * `{ prune: true }` makes them a set (those a reconcile no longer applies are deleted by the host).
   */
  owns(type, { prune = false } = {}) {
    return this.secondary({ type, verbs: [Verb.GET, Verb.LIST, Verb.APPLY, Verb.DELETE], mapping: Mapping.OWNER_REFERENCES, prune });
  }

  /** Objects of `type` this plugin only reads. */
  reads(type) {
    return this.secondary({ type, verbs: [Verb.GET, Verb.LIST] });
  }

  /** Ask the host to manage the finalizer `kubewasm.dev/<name>` and call `finalize`. */
  finalizer() {
    this.managedFinalizer = true;
    return this;
  }

  resync(seconds) {
    this.resyncSeconds = seconds;
    return this;
  }

  concurrency(n) {
    this.maxConcurrency = n;
    return this;
  }

  /** A JSON Schema the configuration must match. */
  schema(schema) {
    this.configSchema = JSON.stringify(schema);
    return this;
  }

  /**
   * Ask to be called on a cron schedule, in UTC (the reconciler's `scheduled`): five fields as a
   * CronJob's (`'0 3 * * *'`), six with seconds first, or a macro (`'@hourly'`).
   */
  schedule(cron) {
    this.cron = cron;
    return this;
  }
}

/** A Kubernetes event, about the primary unless `regarding: [type, key]` is set. */
export class Event {
  constructor(reason, action, note, { warning = false, regarding = undefined } = {}) {
    Object.assign(this, { reason, action, note, warning, regarding });
  }
}

/** Throw it (or any Error) to fail a reconcile: the host retries with backoff. */
export class ReconcileError extends Error {}

/**
 * Desired actions and an optional requeue; chain the methods.
 * Children are never pruned implicitly: use `delete` to remove one.
 */
export class Outcome {
  constructor() {
    this.actions = [];
    this.requeueAfterMs = undefined;
    this.needsFinalizer = undefined;
  }

  /**
   * Server-side apply; `owned` makes the primary the controller owner.
   * `force: false` refuses to take over fields another field manager (a
   * person's `kubectl apply`) set to other values: the apply fails with a
   * conflict naming them and the key is retried. For partial applies of
   * objects people also edit.
   */
  apply(object, { owned = true, force = true } = {}) {
    this.actions.push({ kind: 'apply', object, owned, force });
    return this;
  }

  /** Server-side apply of `object`'s status. */
  applyStatus(object) {
    this.actions.push({ kind: 'apply-status', object });
    return this;
  }

  /**
   * Deletes the object, only while it has this `uid` (default: the uid the
   * cache held for it) and this `resourceVersion` (default: any). A
   * precondition that no longer holds fails the delete with a conflict.
   */
  delete(type, key, { uid, resourceVersion } = {}) {
    this.actions.push({ kind: 'delete', type, key, preconditions: { uid, resourceVersion } });
    return this;
  }

  event(event) {
    this.actions.push({ kind: 'event', event });
    return this;
  }

  requeueAfter(seconds) {
    this.requeueAfterMs = Math.round(seconds * 1000);
    return this;
  }

  /** Whether this primary needs the managed finalizer (default: yes). */
  finalizer(needed) {
    this.needsFinalizer = needed;
    return this;
  }

  applied() {
    return this.actions.filter((a) => a.kind === 'apply').map((a) => a.object);
  }

  statuses() {
    return this.actions.filter((a) => a.kind === 'apply-status').map((a) => a.object);
  }

  deleted() {
    return this.actions.filter((a) => a.kind === 'delete').map((a) => [a.type, a.key]);
  }

  /** The requeue asked for, in seconds; `undefined` without one. */
  requeue() {
    return this.requeueAfterMs === undefined ? undefined : this.requeueAfterMs / 1000;
  }

  events() {
    return this.actions.filter((a) => a.kind === 'event').map((a) => a.event);
  }
}

let backend;

/** Installs where reads and logs go: the host's imports, or a test fixture. */
export function setBackend(next) {
  const previous = backend;
  backend = next;
  return previous;
}

/**
 * The time of the call, a `Date`: in the host, the wall clock it gives the
 * call (frozen for the call; `replay --now` sets it); in a native test, the
 * harness's `now` if it set one.
 */
export function now() {
  return backend?.now?.() ?? new Date();
}

function host() {
  if (!backend) throw new ReconcileError('no host: export the plugin with exportPlugin, or test it with @kubewasm/guest/testing');
  return backend;
}

function cacheErrorText(e) {
  const payload = e?.payload ?? e;
  if (payload?.tag === 'denied') return `read denied: ${payload.val}`;
  if (payload?.tag === 'invalid-selector') return payload.val;
  return String(e?.message ?? e);
}

const witType = (t) => ({ group: t.group, version: t.version, kind: t.kind, plural: t.plural, namespaced: t.namespaced });
const witKey = (k) => ({ namespace: k.namespace ?? undefined, name: k.name });

/** One reconcile (or finalize) call. */
export class Context {
  constructor(type, key, { config = '{}', retries = 0, lastFailure = undefined, previous = undefined, deleted = false, scheduledAt = undefined } = {}) {
    this.type = type;
    this.key = key;
    this.retries = retries;
    this.lastFailure = lastFailure;
    this.rawConfig = config;
    /** In `mapKeys`: a modified object's state before the change (map it too: the primaries it left). */
    this.previous = previous;
    /** In `mapKeys`: whether the changed object was deleted (the object given is its last state). */
    this.deleted = deleted;
    /** In `scheduled`: the time the schedule named (RFC 3339, UTC); there is no primary then. */
    this.scheduledAt = scheduledAt;
  }

  get name() {
    return this.key.name;
  }

  get namespace() {
    return this.key.namespace;
  }

  /** The plugin's configuration (`{}` when none is set). */
  get config() {
    try {
      return JSON.parse(this.rawConfig || '{}');
    } catch (e) {
      throw new ReconcileError(`invalid configuration: ${e.message}`);
    }
  }

  /** The primary object, or undefined once it is gone. */
  primary() {
    return this.get(this.type, this.key);
  }

  /** One object, or undefined. Throws ReconcileError if the read is denied. */
  get(type, key) {
    let text;
    try {
      text = host().cache.get(witType(type), witKey(key));
    } catch (e) {
      throw new ReconcileError(cacheErrorText(e));
    }
    return text === undefined || text === null ? undefined : JSON.parse(text);
  }

  /** Objects of `type` in `namespace` (all when undefined) matching a label selector. */
  list(type, namespace = undefined, selector = '') {
    let texts;
    try {
      texts = host().cache.list(witType(type), namespace, selector);
    } catch (e) {
      throw new ReconcileError(cacheErrorText(e));
    }
    return texts.map((t) => JSON.parse(t));
  }
}

/** Structured logging through the host's `tracing`. */
export const log = Object.freeze({
  debug: (message, fields = {}) => emit('debug', message, fields),
  info: (message, fields = {}) => emit('info', message, fields),
  warn: (message, fields = {}) => emit('warn', message, fields),
  error: (message, fields = {}) => emit('error', message, fields),
});

function emit(level, message, fields) {
  host().log.log(level, message, Object.entries(fields).map(([k, v]) => [k, String(v)]));
}

function toWitOutcome(outcome) {
  if (!(outcome instanceof Outcome)) throw new TypeError('a call must return an Outcome');
  const actions = outcome.actions.map((a) => {
    switch (a.kind) {
      case 'apply':
        return { tag: 'apply', val: { object: JSON.stringify(a.object), owned: a.owned, force: a.force } };
      case 'apply-status':
        return { tag: 'apply-status', val: JSON.stringify(a.object) };
      case 'delete':
        return { tag: 'delete', val: { type: witType(a.type), key: witKey(a.key), preconditions: a.preconditions } };
      default: {
        const e = a.event;
        return {
          tag: 'event',
          val: {
            regarding: e.regarding ? [witType(e.regarding[0]), witKey(e.regarding[1])] : undefined,
            type: e.warning ? 'warning' : 'normal',
            reason: e.reason,
            action: e.action,
            note: e.note,
          },
        };
      }
    }
  });
  return {
    actions,
    requeueAfterMs: outcome.requeueAfterMs === undefined ? undefined : BigInt(outcome.requeueAfterMs),
    finalizer: outcome.needsFinalizer,
  };
}

function run(fn, request) {
  const ctx = new Context(new ResourceType(request.type.group, request.type.version, request.type.kind, request.type.plural, request.type.namespaced),
    new ObjectKey(request.key.namespace, request.key.name),
    { config: request.config, retries: request.retries, lastFailure: request.lastFailure });
  return call(fn, ctx);
}

/** Runs `fn` on `ctx` and converts its outcome, or its failure. */
function call(fn, ctx) {
  try {
    return toWitOutcome(fn(ctx));
  } catch (e) {
    throw failure(e);
  }
}

/**
 * A thrown value as the `failure` record: its message and where it was
 * thrown (`TypeError: x is undefined (at plugin.js:12)`), the first frame of
 * the stack outside this SDK. In a component the stack points into the
 * bundle: `kubewasm-componentize` appends a line table
 * (`globalThis.__kubewasmSourceLines`) that maps it back to the source.
 */
export function failure(e) {
  if (!(e instanceof Error)) return { message: String(e) };
  const table = globalThis.__kubewasmSourceLines;
  const sdk = /(^|\/)(index|testing|rules)\.js$|@kubewasm\/guest|guest-sdk\/js\//;
  const at = String(e.stack ?? '')
    .split('\n')
    .map((line) => line.match(/([^\s@(]+\.[cm]?js):(\d+)(?::(\d+))?/))
    .filter(Boolean)
    .map(([, file, line, column]) => {
      const mapped = table?.lines[Number(line) - 1];
      if (mapped) return `${table.sources[mapped[0]]}:${mapped[1]}`;
      return `${file.replace(/^.*\//, '')}:${line}${column ? `:${column}` : ''}`;
    })
    .find((where) => !sdk.test(where.replace(/:\d+(:\d+)?$/, '')));
  return { message: `${e.name}: ${e.message}${at ? ` (at ${at})` : ''}` };
}

/**
 * A context for `object`, a changed object of `type` (for `mapKeys`), with
 * its state before the change or its deletion.
 */
export function changedContext(type, object, config, { previous = undefined, deleted = false } = {}) {
  const meta = object.metadata ?? {};
  return new Context(type, new ObjectKey(meta.namespace, meta.name ?? ''), { config, previous, deleted });
}

/**
 * The object to export as `plugin` from the component's entry module.
 * `host` is `{ cache, log }`: the modules `kubewasm:controller/cache@0.3.0`
 * and `kubewasm:controller/log@0.3.0`.
 */
export function exportPlugin(reconciler, hostImports) {
  setBackend(hostImports);
  return {
    declare() {
      const d = reconciler.declare();
      return {
        name: d.name,
        version: d.version,
        primary: witType(d.primary),
        primaryVerbs: d.primaryVerbs,
        primarySelector: d.primarySelector,
        secondaries: d.secondaries.map((s) => ({ type: witType(s.type), verbs: s.verbs, labelSelector: s.labelSelector, mapping: s.mapping, prune: s.prune })),
        managedFinalizer: d.managedFinalizer,
        resyncSeconds: d.resyncSeconds,
        maxConcurrency: d.maxConcurrency,
        configSchema: d.configSchema,
        schedule: d.cron,
      };
    },
    reconcile: (request) => run((ctx) => reconciler.reconcile(ctx), request),
    finalize: (request) => run((ctx) => (reconciler.finalize ? reconciler.finalize(ctx) : new Outcome()), request),
    scheduled({ scheduledAt, config }) {
      // No primary: an empty key of the primary's type.
      const ctx = new Context(reconciler.declare().primary, new ObjectKey(undefined, ''), { config, scheduledAt });
      return call((c) => (reconciler.scheduled ? reconciler.scheduled(c) : new Outcome()), ctx);
    },
    mapKeys({ type, object, previous, deleted, config }) {
      if (!reconciler.mapKeys) return [];
      try {
        const changed = JSON.parse(object);
        const t = new ResourceType(type.group, type.version, type.kind, type.plural, type.namespaced);
        const change = { previous: previous === undefined ? undefined : JSON.parse(previous), deleted };
        return reconciler.mapKeys(changedContext(t, changed, config, change), changed).map(witKey);
      } catch (e) {
        throw failure(e);
      }
    },
  };
}
