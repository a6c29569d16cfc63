// A JavaScript test plugin that misbehaves on request (config `mode`):
// `ok` applies a copy of its ConfigMap, `throw` throws, `loop` never
// returns, `oom` allocates until the memory limit stops it, `flood-log`
// logs until stopped, `flood-actions` returns 1,200 applies, `bad-name`
// applies a ConfigMap named `a/b`, `system-namespace` applies one into
// `kube-system`, `lie-plural` reads its ConfigMap through a type claiming the
// plural `secrets` and applies `lied-<found>`, `list-pods` lists Pods
// (declared with the selector `misbehave=visible`), gets `default/hidden` and
// applies `listed-<names>-hidden-<found or denied>`, `language` returns an
// event whose note is `javascript`. Its configuration must
// match its schema: an object with a string `mode`.
import * as cache from 'kubewasm:controller/cache@0.3.0';
import * as log from 'kubewasm:controller/log@0.3.0';
import { Declaration, Event, ObjectKey, Outcome, ReconcileError, ResourceType, Verb, exportPlugin } from '@kubewasm/guest';

const CONFIG_MAP = ResourceType.core('v1', 'ConfigMap', 'configmaps');
const POD = ResourceType.core('v1', 'Pod', 'pods');
const SCHEMA = { type: 'object', required: ['mode'], properties: { mode: { type: 'string' } } };
const cm = (name, namespace) => ({ apiVersion: 'v1', kind: 'ConfigMap', metadata: namespace ? { name, namespace } : { name } });

const misbehave = {
  declare: () => new Declaration('misbehave-js', '0.1.0', CONFIG_MAP).verbs(Verb.APPLY)
    .secondary({ type: POD, verbs: [Verb.GET, Verb.LIST], labelSelector: 'misbehave=visible' })
    .schema(SCHEMA),
  reconcile(ctx) {
    switch (ctx.config.mode) {
      case 'language':
        return new Outcome().event(new Event('Language', 'Reconcile', 'javascript'));
      case 'ok': {
        const cm = ctx.primary();
        return new Outcome().apply({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: `${cm.metadata.name}-copy` }, data: cm.data ?? {} });
      }
      case 'throw':
        throw new RangeError('misbehave-js was asked to throw');
      case 'loop': {
        let n = 0;
        for (;;) n += 1;
      }
      case 'oom': {
        const hoard = [];
        for (;;) hoard.push(new Uint8Array(1 << 20).fill(1));
      }
      case 'flood-log':
        for (;;) log.log('info', 'flood', [['x', 'y']]);
      case 'flood-actions': {
        const outcome = new Outcome();
        for (let i = 0; i < 1200; i += 1) outcome.apply({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: `c${i}` } });
        return outcome;
      }
      case 'bad-name':
        return new Outcome().apply({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'a/b' } }, { owned: false });
      case 'system-namespace':
        return new Outcome().apply(cm('planted', 'kube-system'), { owned: false });
      case 'lie-plural': {
        const lying = new ResourceType('', 'v1', 'ConfigMap', 'secrets', false);
        return new Outcome().apply(cm(`lied-${ctx.get(lying, ctx.key) !== undefined}`));
      }
      case 'list-pods': {
        const listed = ctx.list(POD).map((p) => p.metadata.name).join('-');
        let hidden;
        try {
          hidden = String(ctx.get(POD, new ObjectKey('default', 'hidden')) !== undefined);
        } catch (e) {
          if (!(e instanceof ReconcileError)) throw e;
          hidden = 'denied';
        }
        return new Outcome().apply(cm(`listed-${listed}-hidden-${hidden}`));
      }
      default:
        throw new Error(`unknown mode ${ctx.config.mode}`);
    }
  },
};

export const plugin = exportPlugin(misbehave, { cache, log });
