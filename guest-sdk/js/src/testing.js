// Run a plugin natively with `node --test`: fixtures stand in for the
// host's cache, and reads are checked against the declaration as the host
// checks them.
//
//   import { Harness } from '@kubewasm/guest/testing';
//   const outcome = new Harness(myPlugin).object(cm).reconcile(new ObjectKey('default', 'a'));

import { Context, Outcome, Verb, setBackend } from './index.js';

/** Objects and a configuration to run a reconciler against. */
export class Harness {
  constructor(reconciler, { config = {} } = {}) {
    this.reconciler = reconciler;
    this.declaration = reconciler.declare();
    this.config = config;
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

  #run(fn, key, lastFailure) {
    const previous = setBackend(this.#backend());
    try {
      return fn(new Context(this.declaration.primary, key, { config: JSON.stringify(this.config), lastFailure }));
    } finally {
      setBackend(previous);
    }
  }

  #allowed(type, verb) {
    const d = this.declaration;
    const same = (t) => t.group === type.group && t.version === type.version && t.kind === type.kind;
    if (same(d.primary)) return verb === Verb.GET || verb === Verb.LIST || d.primaryVerbs.includes(verb);
    return d.secondaries.some((s) => same(s.type) && s.verbs.includes(verb));
  }

  #backend() {
    const check = (type, verb) => {
      if (!this.#allowed(type, verb)) {
        const apiVersion = type.group ? `${type.group}/${type.version}` : type.version;
        throw { payload: { tag: 'denied', val: `plugin \`${this.declaration.name}\` may not ${verb} ${apiVersion} ${type.kind}: the type was not declared` } };
      }
    };
    const of = (type) => {
      const apiVersion = type.group ? `${type.group}/${type.version}` : type.version;
      return this.objects.filter((o) => o.apiVersion === apiVersion && o.kind === type.kind);
    };
    return {
      cache: {
        get: (type, key) => {
          check(type, Verb.GET);
          const found = of(type).find((o) => o.metadata?.name === key.name && (o.metadata?.namespace ?? undefined) === (key.namespace ?? undefined));
          return found === undefined ? undefined : JSON.stringify(found);
        },
        list: (type, namespace, selector) => {
          check(type, Verb.LIST);
          return of(type)
            .filter((o) => namespace === undefined || o.metadata?.namespace === namespace)
            .filter((o) => matches(selector, o.metadata?.labels ?? {}))
            .sort((a, b) => `${a.metadata.namespace ?? ''}/${a.metadata.name}`.localeCompare(`${b.metadata.namespace ?? ''}/${b.metadata.name}`))
            .map((o) => JSON.stringify(o));
        },
      },
      log: {
        log: (level, message, fields) => this.logs.push({ level, message, fields: Object.fromEntries(fields) }),
      },
    };
  }
}

/** The API server's selector grammar: `k=v`, `k==v`, `k!=v`, `k in (a,b)`, `k notin (a,b)`, `k`, `!k`. */
export function matches(selector, labels) {
  const clauses = [];
  let depth = 0;
  let start = 0;
  [...selector].forEach((c, i) => {
    if (c === '(') depth += 1;
    if (c === ')') depth -= 1;
    if (c === ',' && depth === 0) {
      clauses.push(selector.slice(start, i));
      start = i + 1;
    }
  });
  clauses.push(selector.slice(start));
  return clauses.map((c) => c.trim()).filter(Boolean).every((clause) => {
    const set = clause.match(/^(\S+)\s+(in|notin)\s*\((.*)\)$/);
    if (set) {
      const inside = new Set(set[3].split(',').map((v) => v.trim())).has(labels[set[1]]);
      return set[2] === 'in' ? inside : !inside;
    }
    if (clause.startsWith('!')) return !(clause.slice(1).trim() in labels);
    if (clause.includes('!=')) {
      const [k, v] = clause.split('!=');
      return labels[k.trim()] !== v.trim();
    }
    if (clause.includes('=')) {
      const [k, v] = clause.replace('==', '=').split('=');
      return labels[k.trim()] === v.trim();
    }
    return clause in labels;
  });
}
