// Types of @kubewasm/guest.

export declare const Verb: Readonly<{
  GET: 'get'; LIST: 'list'; WATCH: 'watch'; APPLY: 'apply'; APPLY_STATUS: 'apply-status'; DELETE: 'delete';
}>;
export type VerbName = (typeof Verb)[keyof typeof Verb];

/** Any Kubernetes object: parsed JSON. */
export type KubeObject = { apiVersion: string; kind: string; metadata: Record<string, any>; [field: string]: any };

export declare class ResourceType {
  constructor(group: string, version: string, kind: string, plural: string, namespaced?: boolean);
  static core(version: string, kind: string, plural: string, namespaced?: boolean): ResourceType;
  readonly group: string;
  readonly version: string;
  readonly kind: string;
  readonly plural: string;
  readonly namespaced: boolean;
  readonly apiVersion: string;
}

export declare class ObjectKey {
  constructor(namespace: string | undefined | null, name: string);
  readonly namespace: string | undefined;
  readonly name: string;
}

export type MappingValue =
  | { tag: 'none' }
  | { tag: 'owner-references' }
  | { tag: 'custom' }
  | { tag: 'reads' }
  | { tag: 'label'; val: string };
export declare const Mapping: Readonly<{
  NONE: MappingValue; OWNER_REFERENCES: MappingValue; CUSTOM: MappingValue; READS: MappingValue;
  label(key: string): MappingValue;
}>;

export declare class Declaration {
  constructor(name: string, version: string, primary: ResourceType);
  verbs(...verbs: VerbName[]): this;
  /** Only primaries matching this label selector are watched and reconciled. */
  selecting(selector: string): this;
  /** `prune: true`: the owned children of `type` form a set; those a reconcile no longer applies are deleted. */
  secondary(s: { type: ResourceType; verbs?: VerbName[]; labelSelector?: string; mapping?: MappingValue; prune?: boolean }): this;
  owns(type: ResourceType, options?: { prune?: boolean }): this;
  reads(type: ResourceType): this;
  finalizer(): this;
  resync(seconds: number): this;
  concurrency(n: number): this;
  schema(schema: object): this;
  /** Called on a cron schedule, in UTC: five fields, six with seconds first, or a macro (`@hourly`). */
  schedule(cron: string): this;
}

export declare class Event {
  constructor(reason: string, action: string, note: string, options?: { warning?: boolean; regarding?: [ResourceType, ObjectKey] });
}

export declare class ReconcileError extends Error {}

/** What a delete requires of the object (checked by the API server). */
export interface Preconditions {
  uid?: string;
  resourceVersion?: string;
}

/** One desired action, as the host receives it. */
export type Action =
  | { kind: 'apply'; object: KubeObject; owned: boolean; force: boolean }
  | { kind: 'apply-status'; object: KubeObject }
  | { kind: 'delete'; type: ResourceType; key: ObjectKey; preconditions: Preconditions }
  | { kind: 'event'; event: Event };

export declare class Outcome {
  /** Every action, in order. */
  readonly actions: Action[];
  /** The requeue asked for, in milliseconds. */
  readonly requeueAfterMs: number | undefined;
  /** Whether the primary needs the managed finalizer (`undefined`: yes). */
  readonly needsFinalizer: boolean | undefined;
  apply(object: KubeObject, options?: { owned?: boolean; force?: boolean }): this;
  applyStatus(object: KubeObject): this;
  delete(type: ResourceType, key: ObjectKey, preconditions?: Preconditions): this;
  event(event: Event): this;
  requeueAfter(seconds: number): this;
  finalizer(needed: boolean): this;
  applied(): KubeObject[];
  statuses(): KubeObject[];
  deleted(): [ResourceType, ObjectKey][];
  events(): Event[];
  /** The requeue asked for, in seconds. */
  requeue(): number | undefined;
}

export declare class Context {
  readonly type: ResourceType;
  readonly key: ObjectKey;
  readonly name: string;
  readonly namespace: string | undefined;
  readonly retries: number;
  readonly lastFailure: string | undefined;
  /** In `mapKeys`: a modified object's state before the change. */
  readonly previous: KubeObject | undefined;
  /** In `mapKeys`: whether the changed object was deleted (the object given is its last state). */
  readonly deleted: boolean;
  /** In `scheduled`: the time the schedule named (RFC 3339, UTC); there is no primary then. */
  readonly scheduledAt: string | undefined;
  readonly config: any;
  primary(): KubeObject | undefined;
  get(type: ResourceType, key: ObjectKey): KubeObject | undefined;
  list(type: ResourceType, namespace?: string, selector?: string): KubeObject[];
}

export interface Reconciler {
  declare(): Declaration;
  reconcile(ctx: Context): Outcome;
  finalize?(ctx: Context): Outcome;
  /**
   * `ctx` is about the changed object: its type, key, the config and cache reads, its
   * state before the change (`ctx.previous`: map it too) or its deletion (`ctx.deleted`).
   */
  mapKeys?(ctx: Context, object: KubeObject): ObjectKey[];
  /** Called on the declared `schedule`: no primary (applies unowned, events name what they are about). */
  scheduled?(ctx: Context): Outcome;
}

/** The time of the call: the host's clock for it, or the harness's `now`. */
export declare function now(): Date;

export declare const log: Readonly<{
  debug(message: string, fields?: Record<string, unknown>): void;
  info(message: string, fields?: Record<string, unknown>): void;
  warn(message: string, fields?: Record<string, unknown>): void;
  error(message: string, fields?: Record<string, unknown>): void;
}>;

export declare function setBackend(backend: unknown): unknown;
export declare function exportPlugin(reconciler: Reconciler, host: { cache: unknown; log: unknown }): unknown;
