// The host's rules for names, labels and label selectors, for the native
// test harness: the same rules as the host's `kubewasm_core::validation` and
// `kubewasm_core::selector`, held to the same answers by the shared
// conformance fixtures (`tests/conformance/reads.json`).

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const NAME_PART = /^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;

const isDnsLabel = (s) => s.length <= 63 && DNS_LABEL.test(s);
const isDnsSubdomain = (s) => s.length <= 253 && s.split('.').every(isDnsLabel);

/** Whether `name` can name an object of `type`, by its type's rule. */
export function isValidName(type, name) {
  const rule = nameRule(type);
  if (rule === 'dnsLabel') return isDnsLabel(name);
  if (rule === 'pathSegment') {
    return name.length > 0 && name.length <= 253 && name !== '.' && name !== '..'
      && [...name].every((c) => c.charCodeAt(0) >= 33 && c.charCodeAt(0) <= 126 && c !== '/' && c !== '%');
  }
  return isDnsSubdomain(name);
}

// The rules' texts, as the host words them (`kubewasm_core::validation::Rule`).
const RULES = {
  dnsLabel: "must be a DNS label: at most 63 lowercase letters, digits or '-', starting and ending with a letter or digit",
  dnsSubdomain: "must be a DNS subdomain: at most 253 lowercase letters, digits, '-' or '.', starting and ending with a letter or digit",
  pathSegment: "must be a path segment name: printable ASCII, not empty, '.' or '..', without '/' or '%', at most 253 characters",
  labelKey: "must be an optional DNS subdomain and '/', then at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit",
  labelValue: "must be empty or at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit",
  labelString: 'must be a string',
};

// The rule names of `type` follow, as a Kubernetes 1.37 server checks them
// (`kubewasm_core::validation::kind_name_rule`).
function nameRule(type) {
  const kind = `${type.group}/${type.kind}`;
  if (['/Namespace', '/Service', 'apps/StatefulSet'].includes(kind)) return 'dnsLabel';
  if (type.group === 'rbac.authorization.k8s.io' || kind === 'policy/PodDisruptionBudget') return 'pathSegment';
  return 'dnsSubdomain';
}

const invalid = (what, value, rule) => `invalid ${what} \`${[...value].slice(0, 80).join('')}\`: ${RULES[rule]}`;

/** The host's refusal of `name` for an object of `type`, if any. */
export const nameError = (type, name) => (isValidName(type, name) ? undefined : invalid('name', name, nameRule(type)));

export const namespaceError = (namespace) => (isDnsLabel(namespace) ? undefined : invalid('namespace', namespace, 'dnsLabel'));

/** The host's refusal of the first invalid label of `object`, if any. */
export function labelsError(object) {
  const labels = object?.metadata?.labels;
  if (labels === null || typeof labels !== 'object' || Array.isArray(labels)) return undefined;
  for (const [key, value] of Object.entries(labels)) {
    if (!isLabelKey(key)) return invalid('label key', key, 'labelKey');
    if (value === null) continue;
    if (typeof value !== 'string') return invalid('label value', JSON.stringify(value), 'labelString');
    if (!isLabelValue(value)) return invalid('label value', value, 'labelValue');
  }
  return undefined;
}

export function isLabelKey(key) {
  const slash = key.indexOf('/');
  if (slash >= 0) {
    const [prefix, name] = [key.slice(0, slash), key.slice(slash + 1)];
    return prefix.length > 0 && isDnsSubdomain(prefix) && name.length <= 63 && NAME_PART.test(name);
  }
  return key.length <= 63 && NAME_PART.test(key);
}

export const isLabelValue = (value) => value === '' || (value.length <= 63 && NAME_PART.test(value));

/** A label selector the host refuses; the message names it. */
export class SelectorError extends Error {}

/** Parses the API server's selector grammar into requirements; throws SelectorError where the host does. */
export function parseSelector(selector) {
  const fail = (reason) => new SelectorError(`invalid label selector \`${selector}\`: ${reason}`);
  const clauses = [];
  let depth = 0;
  let start = 0;
  [...selector].forEach((c, i) => {
    if (c === '(') depth += 1;
    else if (c === ')') {
      if (depth === 0) throw fail('unbalanced `)`');
      depth -= 1;
    } else if (c === ',' && depth === 0) {
      clauses.push(selector.slice(start, i));
      start = i + 1;
    }
  });
  if (depth !== 0) throw fail('unbalanced `(`');
  clauses.push(selector.slice(start));
  const requirements = [];
  for (const clause of clauses.map((c) => c.trim())) {
    if (clause === '') {
      if (selector.trim() === '') continue;
      throw fail('empty requirement');
    }
    requirements.push(requirement(clause, fail));
  }
  return requirements;
}

function requirement(clause, fail) {
  const key = (k) => {
    if (!isLabelKey(k)) throw fail(`invalid label key \`${k}\``);
    return k;
  };
  const value = (v) => {
    if (!isLabelValue(v)) throw fail(`invalid label value \`${v}\``);
    return v;
  };
  const split = (sep) => [clause.slice(0, clause.indexOf(sep)), clause.slice(clause.indexOf(sep) + sep.length)];
  if (clause.startsWith('!')) return { op: '!', key: key(clause.slice(1).trim()) };
  if (clause.includes('!=')) {
    const [k, v] = split('!=');
    return { op: '!=', key: key(k.trim()), value: value(v.trim()) };
  }
  if (clause.includes('=')) {
    const [k, v] = split(clause.includes('==') ? '==' : '=');
    return { op: '=', key: key(k.trim()), value: value(v.trim()) };
  }
  const words = clause.match(/^(\S+)(?:\s+(.*))?$/s);
  const k = key(words[1]);
  if (words[2] === undefined) return { op: 'exists', key: k };
  const rest = words[2].trim();
  const op = rest.startsWith('notin') ? 'notin' : rest.startsWith('in') ? 'in' : undefined;
  if (op === undefined) throw fail(`unknown operator in \`${clause}\``);
  const set = rest.slice(op.length).trim();
  if (!set.startsWith('(') || !set.endsWith(')')) throw fail(`expected a parenthesised set of values in \`${clause}\``);
  return { op, key: k, values: new Set(set.slice(1, -1).split(',').map((v) => value(v.trim()))) };
}

/** Whether an object's labels satisfy every requirement. */
export function matchesRequirements(requirements, object) {
  const labels = object?.metadata?.labels ?? {};
  return requirements.every(({ op, key, value, values }) => {
    const label = typeof labels[key] === 'string' ? labels[key] : undefined;
    switch (op) {
      case '=': return label === value;
      case '!=': return label !== value;
      case 'in': return label !== undefined && values.has(label);
      case 'notin': return label === undefined || !values.has(label);
      case 'exists': return label !== undefined;
      default: return label === undefined;
    }
  });
}
