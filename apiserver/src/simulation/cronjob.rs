//! The CronJob controller: at each time its `schedule` names (five cron
//! fields in UTC, or `@hourly`, `@daily`…), a Job from `jobTemplate`
//! named `<cronjob>-<minutes since the epoch>`, controlled by it, unless
//! `suspend`; `concurrencyPolicy` `Forbid` skips a run while one is
//! active, `Replace` deletes the active ones first; finished Jobs kept to
//! `successfulJobsHistoryLimit` (3) and `failedJobsHistoryLimit` (1).
//! Status: `active`, `lastScheduleTime`, `lastSuccessfulTime`.

use std::time::Duration;

use jiff::Timestamp;
use kubewasm_core::ObjectKey;
use kubewasm_core::schedule::Schedule;
use serde_json::{Value, json};

use super::client::{Client, ClientError, Kind, kinds};
use super::pods::{from_template, owned};
use super::reconcile::{Next, Reconciler};
use crate::objects::text_at;

/// The CronJob controller.
#[derive(Debug)]
pub struct CronJobs {
    client: Client,
}

impl CronJobs {
    /// A controller writing through `client`.
    pub fn new(client: Client) -> Self {
        Self { client }
    }
}

/// The time `text` names, to the minute (the start of its minute).
fn minute_of(text: &str) -> Option<Timestamp> {
    let second = text.parse::<Timestamp>().ok()?.as_second();
    Timestamp::from_second(second - second.rem_euclid(60)).ok()
}

fn job_finished(job: &Value) -> Option<&str> {
    job.pointer("/status/conditions")
        .and_then(Value::as_array)?
        .iter()
        .find(|c| {
            matches!(c["type"].as_str(), Some("Complete" | "Failed")) && c["status"] == "True"
        })
        .and_then(|c| c["type"].as_str())
}

impl Reconciler for CronJobs {
    fn primary(&self) -> Kind {
        kinds::CRONJOB
    }

    async fn reconcile(&self, key: &ObjectKey) -> Result<Next, ClientError> {
        let Some(cj) = self.client.store().get(&kinds::CRONJOB.key(), key) else {
            return Ok(Next::Done);
        };
        let ns = key.namespace.as_deref();
        let Ok(schedule) = Schedule::parse(text_at(&cj, "/spec/schedule")) else {
            tracing::debug!(cronjob = %key, "unparseable schedule: never runs");
            return Ok(Next::Done);
        };
        let now = Timestamp::now();
        let mut jobs = owned(self.client.store(), &cj, kinds::JOB);
        jobs.sort_by_key(|j| text_at(j, "/metadata/creationTimestamp").to_owned());
        let active: Vec<_> = jobs.iter().filter(|j| job_finished(j).is_none()).collect();
        let since = text_at(&cj, "/status/lastScheduleTime");
        let since = minute_of(since)
            .or_else(|| minute_of(text_at(&cj, "/metadata/creationTimestamp")))
            .unwrap_or(now);
        let mut status = json!({});
        let suspended = cj.pointer("/spec/suspend") == Some(&Value::Bool(true));
        if let Some(due) = schedule.last_between(since, now).filter(|_| !suspended) {
            let policy = text_at(&cj, "/spec/concurrencyPolicy");
            if policy == "Replace" {
                for job in &active {
                    self.client.delete_object(kinds::JOB, job).await?;
                }
            }
            if policy != "Forbid" || active.is_empty() {
                let scheduled = due.to_string();
                let annotations =
                    json!({"batch.kubernetes.io/cronjob-scheduled-timestamp": scheduled});
                let mut job = from_template(
                    kinds::CRONJOB,
                    &cj,
                    "/spec/jobTemplate",
                    &json!({}),
                    &annotations,
                );
                job["metadata"]["name"] =
                    format!("{}-{}", key.name, due.as_second().div_euclid(60)).into();
                match self.client.create(kinds::JOB, ns, job).await {
                    Err(e) if e.code != 409 => return Err(e),
                    _ => {}
                }
                status["lastScheduleTime"] = scheduled.into();
            }
        }
        // History: the oldest finished Jobs beyond the limits go.
        for (kind, limit) in [
            ("Complete", "/spec/successfulJobsHistoryLimit"),
            ("Failed", "/spec/failedJobsHistoryLimit"),
        ]
        .map(|(k, p)| {
            (
                k,
                cj.pointer(p)
                    .and_then(Value::as_u64)
                    .unwrap_or(if k == "Complete" { 3 } else { 1 }),
            )
        }) {
            let done: Vec<_> = jobs
                .iter()
                .filter(|j| job_finished(j) == Some(kind))
                .collect();
            let extra = done
                .len()
                .saturating_sub(usize::try_from(limit).unwrap_or(usize::MAX));
            for job in done.iter().take(extra) {
                self.client.delete_object(kinds::JOB, job).await?;
            }
        }
        let refs: Vec<Value> = active
            .iter()
            .map(|j| json!({"apiVersion": "batch/v1", "kind": "Job", "namespace": ns, "name": text_at(j, "/metadata/name"),
                            "uid": text_at(j, "/metadata/uid")}))
            .collect();
        if cj.pointer("/status/active").cloned().unwrap_or(json!([])) != Value::Array(refs.clone())
        {
            status["active"] = refs.into();
        }
        if let Some(last) = jobs
            .iter()
            .rev()
            .filter(|j| job_finished(j) == Some("Complete"))
            .filter_map(|j| j.pointer("/status/completionTime").cloned())
            .next()
            && cj.pointer("/status/lastSuccessfulTime") != Some(&last)
        {
            status["lastSuccessfulTime"] = last;
        }
        if status.as_object().is_some_and(|s| !s.is_empty()) {
            self.client
                .patch(
                    kinds::CRONJOB,
                    ns,
                    &key.name,
                    Some("status"),
                    &json!({"status": status}),
                )
                .await?;
        }
        // Back at the next scheduled minute (a Job's change brings it back sooner).
        Ok(match schedule.next_after(now) {
            Some(next) => Next::After(Duration::from_secs(
                u64::try_from(next.as_second() - now.as_second())
                    .unwrap_or(60)
                    .max(1),
            )),
            None => Next::Done,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_time_should_be_read_to_its_minute() {
        assert_eq!(
            minute_of("2026-12-02T20:06:42Z"),
            "2026-12-02T20:06:00Z".parse().ok()
        );
        assert_eq!(minute_of("not a time"), None);
    }
}
