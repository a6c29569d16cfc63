//! The Job controller: Pods up to `completions` at most `parallelism` at
//! a time (`<job>-xxxxx`; in `Indexed` mode one per index,
//! `<job>-<index>-xxxxx` with the `batch.kubernetes.io/job-completion-index`
//! annotation and label), each labelled with the Job's name and uid; a
//! failed Pod replaced until more than `backoffLimit` have failed, then
//! `Failed` (`BackoffLimitExceeded`) and its active Pods removed; done,
//! `SuccessCriteriaMet` then `Complete`; suspended, its Pods removed and
//! `Suspended` until resumed. Status: `active`, `ready`,
//! `succeeded`, `failed`, `completedIndexes`, `startTime`,
//! `completionTime`.

use std::collections::BTreeSet;

use kubewasm_core::ObjectKey;
use serde_json::{Value, json};

use super::client::{Client, ClientError, Kind, kinds};
use super::pods::{
    BURST, active, condition, from_template, generation, owned, ready, set_condition,
};
use super::reconcile::{Next, Reconciler};
use crate::objects::{now, text_at};

/// The label and annotation of an Indexed Job's Pod's index.
pub const INDEX: &str = "batch.kubernetes.io/job-completion-index";

/// The Job controller.
#[derive(Debug)]
pub struct Jobs {
    client: Client,
}

impl Jobs {
    /// A controller writing through `client`.
    pub fn new(client: Client) -> Self {
        Self { client }
    }
}

fn int(job: &Value, pointer: &str, default: i64) -> i64 {
    super::pods::count_at(job, pointer, default)
}

fn index_of(pod: &Value) -> Option<i64> {
    pod.pointer("/metadata/annotations")
        .and_then(|a| a.get(INDEX))
        .and_then(Value::as_str)
        .and_then(|i| i.parse().ok())
}

/// Indexes as the API writes them: `0-2,5`.
pub fn ranges(indexes: &BTreeSet<i64>) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut run: Option<(i64, i64)> = None;
    for &i in indexes {
        run = match run {
            Some((start, end)) if i == end + 1 => Some((start, i)),
            Some((start, end)) => {
                out.push(if start == end {
                    start.to_string()
                } else {
                    format!("{start}-{end}")
                });
                Some((i, i))
            }
            None => Some((i, i)),
        };
    }
    if let Some((start, end)) = run {
        out.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
    }
    out.join(",")
}

fn finished(job: &Value) -> bool {
    job.pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|c| matches!(c["type"].as_str(), Some("Complete" | "Failed")) && c["status"] == "True")
}

impl Jobs {
    /// A suspended Job: its running Pods removed, and once its status says
    /// `Suspended` (as the real controller writes it: no Pod ready or
    /// terminating, none uncounted).
    async fn suspend(&self, job: &Value) -> Result<Next, ClientError> {
        for pod in owned(self.client.store(), job, kinds::POD)
            .iter()
            .filter(|p| active(p))
        {
            self.client.delete_object(kinds::POD, pod).await?;
        }
        let conditions = job
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        if conditions
            .iter()
            .any(|c| c["type"] == "Suspended" && c["status"] == "True")
        {
            return Ok(Next::Done);
        }
        let time = now();
        let mut conditions: Vec<Value> = conditions
            .into_iter()
            .filter(|c| c["type"] != "Suspended")
            .collect();
        conditions.push(
            json!({"type": "Suspended", "status": "True", "lastProbeTime": time,
            "lastTransitionTime": time, "reason": "JobSuspended", "message": "Job suspended"}),
        );
        let status = json!({"conditions": conditions, "ready": 0, "terminating": 0,
                            "uncountedTerminatedPods": {}});
        self.client.write_status(kinds::JOB, job, status).await?;
        Ok(Next::Done)
    }
}

impl Reconciler for Jobs {
    fn primary(&self) -> Kind {
        kinds::JOB
    }

    async fn reconcile(&self, key: &ObjectKey) -> Result<Next, ClientError> {
        let Some(job) = self.client.live(kinds::JOB, key) else {
            return Ok(Next::Done);
        };
        if finished(&job) {
            return Ok(Next::Done);
        }
        if job.pointer("/spec/suspend") == Some(&Value::Bool(true)) {
            return self.suspend(&job).await;
        }
        let ns = key.namespace.as_deref();
        let pods = owned(self.client.store(), &job, kinds::POD);
        let phase = |p: &Value, wanted: &str| text_at(p, "/status/phase") == wanted;
        let running: Vec<_> = pods.iter().filter(|p| active(p)).collect();
        let succeeded_pods: Vec<_> = pods.iter().filter(|p| phase(p, "Succeeded")).collect();
        let failed = pods.iter().filter(|p| phase(p, "Failed")).count() as i64;
        let completions = int(&job, "/spec/completions", 1);
        let parallelism = int(&job, "/spec/parallelism", 1);
        let indexed = text_at(&job, "/spec/completionMode") == "Indexed";
        let done_indexes: BTreeSet<i64> =
            succeeded_pods.iter().filter_map(|p| index_of(p)).collect();
        let succeeded = if indexed {
            done_indexes.len() as i64
        } else {
            succeeded_pods.len() as i64
        };
        let mut status = json!({
            "active": running.len(), "ready": running.iter().filter(|p| ready(p)).count(),
            "succeeded": succeeded, "failed": failed, "terminating": 0,
            "uncountedTerminatedPods": {},
            "startTime": job.pointer("/status/startTime").cloned().unwrap_or_else(|| now().into()),
            "observedGeneration": generation(&job),
        });
        if indexed {
            status["completedIndexes"] = ranges(&done_indexes).into();
        }
        let mut conditions = job
            .pointer("/status/conditions")
            .cloned()
            .unwrap_or_else(|| json!([]));
        if let Some(suspended) = conditions
            .as_array_mut()
            .and_then(|all| all.iter_mut().find(|c| c["type"] == "Suspended"))
            .filter(|c| c["status"] == "True")
        {
            let time = now();
            *suspended = json!({"type": "Suspended", "status": "False", "lastProbeTime": time,
                "lastTransitionTime": time, "reason": "JobResumed", "message": "Job resumed"});
        }
        if conditions.as_array().is_some_and(|c| !c.is_empty()) {
            status["conditions"] = conditions.clone();
        }
        if failed > int(&job, "/spec/backoffLimit", 6) {
            for pod in &running {
                self.client.delete_object(kinds::POD, pod).await?;
            }
            let message = "Job has reached the specified backoff limit";
            let conditions = set_condition(
                &conditions,
                condition("FailureTarget", true, "BackoffLimitExceeded", message),
            );
            status["conditions"] = set_condition(
                &conditions,
                condition("Failed", true, "BackoffLimitExceeded", message),
            );
            status["active"] = 0.into();
        } else if succeeded >= completions {
            let message = "Reached expected number of succeeded pods";
            let conditions = set_condition(
                &conditions,
                condition("SuccessCriteriaMet", true, "CompletionsReached", message),
            );
            status["conditions"] = set_condition(
                &conditions,
                condition("Complete", true, "CompletionsReached", message),
            );
            status["completionTime"] = now().into();
        } else {
            let room = usize::try_from(parallelism)
                .unwrap_or(0)
                .saturating_sub(running.len());
            let labels = json!({"batch.kubernetes.io/job-name": key.name, "job-name": key.name,
                "batch.kubernetes.io/controller-uid": text_at(&job, "/metadata/uid"),
                "controller-uid": text_at(&job, "/metadata/uid")});
            if indexed {
                let taken: BTreeSet<i64> = running.iter().filter_map(|p| index_of(p)).collect();
                for index in (0..completions)
                    .filter(|i| !done_indexes.contains(i) && !taken.contains(i))
                    .take(room.min(BURST))
                {
                    let mut labels = labels.clone();
                    labels[INDEX] = index.to_string().into();
                    let mut pod = from_template(
                        kinds::JOB,
                        &job,
                        "/spec/template",
                        &labels,
                        &json!({INDEX: index.to_string()}),
                    );
                    pod["metadata"]["generateName"] = format!("{}-{index}-", key.name).into();
                    self.client.create(kinds::POD, ns, pod).await?;
                }
            } else {
                let missing = usize::try_from(completions - succeeded)
                    .unwrap_or(0)
                    .saturating_sub(running.len());
                for _ in 0..room.min(missing).min(BURST) {
                    let mut pod =
                        from_template(kinds::JOB, &job, "/spec/template", &labels, &json!({}));
                    pod["metadata"]["generateName"] = format!("{}-", key.name).into();
                    self.client.create(kinds::POD, ns, pod).await?;
                }
            }
        }
        self.client.write_status(kinds::JOB, &job, status).await?;
        Ok(Next::Done)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn completed_indexes_should_read_as_ranges() {
        let set = |v: &[i64]| v.iter().copied().collect::<BTreeSet<i64>>();
        assert_eq!(ranges(&set(&[0, 1, 2, 5, 7, 8])), "0-2,5,7-8");
        assert_eq!(ranges(&set(&[])), "");
        assert_eq!(ranges(&set(&[3])), "3");
    }
}
