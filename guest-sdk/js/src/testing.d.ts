import type { KubeObject, ObjectKey, Outcome, Reconciler, ResourceType } from './index.js';

export declare class Harness {
  constructor(reconciler: Reconciler, options?: { config?: unknown; now?: Date });
  logs: { level: string; message: string; fields: Record<string, string> }[];
  object(object: KubeObject): this;
  reconcile(key: ObjectKey, options?: { lastFailure?: string }): Outcome;
  finalize(key: ObjectKey): Outcome;
  /** Runs `scheduled` for the time `at` (RFC 3339) the schedule named. */
  scheduled(at: string): Outcome;
  mapKeys(type: ResourceType, object: KubeObject, change?: { previous?: KubeObject; deleted?: boolean }): ObjectKey[];
}
/** Whether `labels` satisfy `selector`; throws for a selector the host refuses. */
export declare function matches(selector: string, labels: Record<string, string>): boolean;
