// configmap-replicator: a ConfigMap annotated
// `kubewasm.dev/replicate-to: ns-a,ns-b` is copied into those namespaces
// (same name, label `kubewasm.dev/replica-of: <namespace>.<name>`) and kept
// in sync.
//
// Level-triggered, from either end:
// - reconciling a source applies a copy per listed namespace and deletes
//   copies in namespaces no longer listed;
// - reconciling a copy (every ConfigMap is a primary) compares it with its
//   source and puts it back if it was edited by hand, or deletes it if its
//   source is gone or no longer lists its namespace.
// Deleting a source deletes every copy: the plugin asks for a managed
// finalizer on sources only. A copy deleted by hand comes back: ConfigMaps
// are declared again as a secondary mapped by the `replica-of` label
// (`namespace.name` of the source), so a copy's change, its deletion
// included, reconciles its source.

import { Declaration, Event, Mapping, ObjectKey, Outcome, Verb, log } from '@kubewasm/guest';
import { core_v1 } from '@kubewasm/guest/types';

export const REPLICATE_TO = 'kubewasm.dev/replicate-to';
export const REPLICA_OF = 'kubewasm.dev/replica-of';
const CONFIG_MAP = core_v1.ConfigMap;
const DNS_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;

/** The namespaces a source lists, valid and without its own. */
export function targets(source) {
  const listed = source.metadata?.annotations?.[REPLICATE_TO];
  if (listed === undefined) return undefined;
  const own = source.metadata.namespace;
  return [...new Set(listed.split(',').map((s) => s.trim()).filter((ns) => DNS_LABEL.test(ns) && ns !== own))];
}

const replicaLabel = (source) => `${source.metadata.namespace}.${source.metadata.name}`;

/** The copy of `source` in `namespace`. */
export function copyOf(source, namespace) {
  const copy = {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: source.metadata.name, namespace, labels: { [REPLICA_OF]: replicaLabel(source) } },
  };
  if (source.data) copy.data = source.data;
  if (source.binaryData) copy.binaryData = source.binaryData;
  return copy;
}

/** Whether a copy's content differs from its source's (labels aside). */
function drifted(copy, source) {
  const same = (a = {}, b = {}) => JSON.stringify(Object.entries(a).sort()) === JSON.stringify(Object.entries(b).sort());
  return !same(copy.data, source.data) || !same(copy.binaryData, source.binaryData)
    || copy.metadata?.labels?.[REPLICA_OF] !== replicaLabel(source);
}

/** Keys a copy holds that its source does not: fields another manager owns, which apply cannot remove. */
function extraKeys(copy, source) {
  return [...Object.keys(copy.data ?? {}).filter((k) => !(k in (source.data ?? {}))),
    ...Object.keys(copy.binaryData ?? {}).filter((k) => !(k in (source.binaryData ?? {})))];
}

/** Puts one copy in line with its source. */
function syncCopy(out, ctx, source, namespace) {
  const key = new ObjectKey(namespace, source.metadata.name);
  const existing = ctx.get(CONFIG_MAP, key);
  if (existing && !existing.metadata?.labels?.[REPLICA_OF]) {
    // Not ours: never overwrite a ConfigMap someone else made.
    out.event(new Event('TargetExists', 'Replicate', `${namespace}/${key.name} exists and is not a replica: left alone`, { warning: true }));
    return;
  }
  if (existing && extraKeys(existing, source).length > 0) {
    // Server-side apply cannot take back keys added by hand: recreate.
    log.info('replica has keys its source lacks: recreating', { replica: `${namespace}/${key.name}` });
    out.delete(CONFIG_MAP, key);
    return;
  }
  if (!existing || drifted(existing, source)) out.apply(copyOf(source, namespace), { owned: false });
}

function replicasOf(ctx, source) {
  return ctx.list(CONFIG_MAP, undefined, `${REPLICA_OF}=${replicaLabel(source)}`);
}

export const replicator = {
  declare() {
    return new Declaration('configmap-replicator', '0.1.0', CONFIG_MAP)
      .verbs(Verb.APPLY, Verb.DELETE)
      .secondary({ type: CONFIG_MAP, verbs: [Verb.GET, Verb.LIST], mapping: Mapping.label(REPLICA_OF) })
      .finalizer();
  },

  reconcile(ctx) {
    const cm = ctx.primary();
    if (!cm) return new Outcome().finalizer(false);
    const wanted = targets(cm);
    if (wanted !== undefined) {
      const out = new Outcome().finalizer(true);
      for (const ns of wanted) syncCopy(out, ctx, cm, ns);
      for (const replica of replicasOf(ctx, cm)) {
        if (!wanted.includes(replica.metadata.namespace)) {
          out.delete(CONFIG_MAP, new ObjectKey(replica.metadata.namespace, replica.metadata.name));
        }
      }
      return out;
    }
    const out = new Outcome().finalizer(false);
    const origin = cm.metadata?.labels?.[REPLICA_OF];
    if (origin === undefined) return out;
    // A copy: check it against its source.
    const dot = origin.indexOf('.');
    const source = dot > 0 ? ctx.get(CONFIG_MAP, new ObjectKey(origin.slice(0, dot), origin.slice(dot + 1))) : undefined;
    const stillWanted = source && !source.metadata.deletionTimestamp && (targets(source) ?? []).includes(cm.metadata.namespace);
    if (!stillWanted) return out.delete(CONFIG_MAP, ctx.key);
    syncCopy(out, ctx, source, cm.metadata.namespace);
    return out;
  },

  finalize(ctx) {
    // The source is being deleted: every copy goes with it.
    const cm = ctx.primary();
    const out = new Outcome();
    if (!cm) return out;
    for (const replica of replicasOf(ctx, cm)) {
      out.delete(CONFIG_MAP, new ObjectKey(replica.metadata.namespace, replica.metadata.name));
    }
    return out;
  },
};
