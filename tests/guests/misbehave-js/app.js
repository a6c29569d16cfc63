// A JavaScript test plugin that misbehaves on request (config `mode`):
// `ok` applies a copy of its ConfigMap, `throw` throws, `loop` never
// returns, `oom` allocates until the memory limit stops it, `flood-log`
// logs until stopped, `flood-actions` returns 5,000 applies, `bad-name`
// applies a ConfigMap named `a/b`.
import * as cache from 'kubewasm:controller/cache@0.1.0';
import * as log from 'kubewasm:controller/log@0.1.0';
import { Declaration, Outcome, ResourceType, Verb, exportPlugin } from '@kubewasm/guest';

const CONFIG_MAP = ResourceType.core('v1', 'ConfigMap', 'configmaps');

const misbehave = {
  declare: () => new Declaration('misbehave-js', '0.1.0', CONFIG_MAP).verbs(Verb.APPLY),
  reconcile(ctx) {
    switch (ctx.config.mode) {
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
        for (let i = 0; i < 5000; i += 1) outcome.apply({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: `c${i}` } });
        return outcome;
      }
      case 'bad-name':
        return new Outcome().apply({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'a/b' } }, { owned: false });
      default:
        throw new Error(`unknown mode ${ctx.config.mode}`);
    }
  },
};

export const plugin = exportPlugin(misbehave, { cache, log });
