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
use serde_json::{Value, json};

use super::client::{Client, ClientError, Kind, kinds};
use super::pods::{from_template, owned};
use super::reconcile::{Next, Reconciler};
use crate::objects::text_at;

/// A parsed schedule: the allowed values of each field.
#[derive(Debug, PartialEq, Eq)]
pub struct Schedule {
    minutes: Vec<bool>,
    hours: Vec<bool>,
    days: Vec<bool>,
    months: Vec<bool>,
    weekdays: Vec<bool>,
    /// Whether day of month and day of week were both restricted (then
    /// either matches, as cron reads them).
    either_day: bool,
}

/// Why a schedule does not parse.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("unparseable schedule {0:?}")]
pub struct ScheduleError(String);

fn field(text: &str, min: u32, max: u32) -> Option<Vec<bool>> {
    let mut allowed = vec![false; max as usize + 1];
    for part in text.split(',') {
        let (range, step) = match part.split_once('/') {
            Some((r, s)) => (r, s.parse::<u32>().ok().filter(|s| *s > 0)?),
            None => (part, 1),
        };
        let (from, to) = match range {
            "*" => (min, max),
            r => match r.split_once('-') {
                Some((a, b)) => (a.parse().ok()?, b.parse().ok()?),
                None if part.contains('/') => (r.parse().ok()?, max),
                None => {
                    let v = r.parse().ok()?;
                    (v, v)
                }
            },
        };
        if from < min || to > max || from > to {
            return None;
        }
        for v in (from..=to).step_by(step as usize) {
            allowed[v as usize] = true;
        }
    }
    Some(allowed)
}

impl std::str::FromStr for Schedule {
    type Err = ScheduleError;

    fn from_str(text: &str) -> Result<Self, ScheduleError> {
        let expanded = match text.trim() {
            "@yearly" | "@annually" => "0 0 1 1 *",
            "@monthly" => "0 0 1 * *",
            "@weekly" => "0 0 * * 0",
            "@daily" | "@midnight" => "0 0 * * *",
            "@hourly" => "0 * * * *",
            other => other,
        };
        let parts: Vec<&str> = expanded.split_whitespace().collect();
        let bad = || ScheduleError(text.to_owned());
        let [m, h, dom, mon, dow] = parts.as_slice() else {
            return Err(bad());
        };
        let mut weekdays = field(&dow.replace('7', "0"), 0, 6).ok_or_else(bad)?;
        weekdays.truncate(7);
        Ok(Self {
            minutes: field(m, 0, 59).ok_or_else(bad)?,
            hours: field(h, 0, 23).ok_or_else(bad)?,
            days: field(dom, 1, 31).ok_or_else(bad)?,
            months: field(mon, 1, 12).ok_or_else(bad)?,
            weekdays,
            either_day: *dom != "*" && *dow != "*",
        })
    }
}

impl Schedule {
    /// How far `unix_minute` misses the schedule: `None` if it is
    /// scheduled, else the unit that fails first (a day, an hour, a
    /// minute), so that a search can skip the whole unit.
    fn miss(&self, unix_minute: i64) -> Option<Unit> {
        let Ok(time) = Timestamp::from_second(unix_minute * 60) else {
            return Some(Unit::Day);
        };
        let date = time.to_zoned(jiff::tz::TimeZone::UTC);
        let at = |v: &[bool], i: i64| {
            usize::try_from(i)
                .ok()
                .and_then(|i| v.get(i))
                .copied()
                .unwrap_or(false)
        };
        let day = at(&self.days, i64::from(date.day()));
        let weekday = at(
            &self.weekdays,
            i64::from(date.weekday().to_sunday_zero_offset()),
        );
        let day_ok = if self.either_day {
            day || weekday
        } else {
            day && weekday
        };
        if !day_ok || !at(&self.months, i64::from(date.month())) {
            Some(Unit::Day)
        } else if !at(&self.hours, i64::from(date.hour())) {
            Some(Unit::Hour)
        } else if !at(&self.minutes, i64::from(date.minute())) {
            Some(Unit::Minute)
        } else {
            None
        }
    }

    /// Whether the minute starting at `unix_minute` is scheduled.
    pub fn matches(&self, unix_minute: i64) -> bool {
        self.miss(unix_minute).is_none()
    }

    /// The latest scheduled minute in `(after, until]`, looking back at
    /// most a week (a missed day or hour is skipped whole).
    pub fn last(&self, after: i64, until: i64) -> Option<i64> {
        let floor = after.max(until - 7 * 24 * 60);
        let mut minute = until;
        while minute > floor {
            match self.miss(minute) {
                None => return Some(minute),
                // Back to the last minute of the unit before.
                Some(unit) => minute -= minute.rem_euclid(unit.minutes()) + 1,
            }
        }
        None
    }

    /// The first scheduled minute after `now`, within a year (a missed day
    /// or hour is skipped whole).
    pub fn next(&self, now: i64) -> Option<i64> {
        let ceiling = now + 366 * 24 * 60;
        let mut minute = now + 1;
        while minute <= ceiling {
            match self.miss(minute) {
                None => return Some(minute),
                // On to the first minute of the next unit.
                Some(unit) => minute += unit.minutes() - minute.rem_euclid(unit.minutes()),
            }
        }
        None
    }
}

/// A unit of a schedule's search.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Unit {
    Day,
    Hour,
    Minute,
}

impl Unit {
    fn minutes(self) -> i64 {
        match self {
            Self::Day => 24 * 60,
            Self::Hour => 60,
            Self::Minute => 1,
        }
    }
}

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

fn minute_of(text: &str) -> Option<i64> {
    text.parse::<Timestamp>()
        .ok()
        .map(|t| t.as_second().div_euclid(60))
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
        let Ok(schedule) = text_at(&cj, "/spec/schedule").parse::<Schedule>() else {
            tracing::debug!(cronjob = %key, "unparseable schedule: never runs");
            return Ok(Next::Done);
        };
        let now_second = Timestamp::now().as_second();
        let now = now_second.div_euclid(60);
        let mut jobs = owned(self.client.store(), &cj, kinds::JOB);
        jobs.sort_by_key(|j| text_at(j, "/metadata/creationTimestamp").to_owned());
        let active: Vec<_> = jobs.iter().filter(|j| job_finished(j).is_none()).collect();
        let since = text_at(&cj, "/status/lastScheduleTime");
        let since = minute_of(since)
            .or_else(|| minute_of(text_at(&cj, "/metadata/creationTimestamp")))
            .unwrap_or(now);
        let mut status = json!({});
        let suspended = cj.pointer("/spec/suspend") == Some(&Value::Bool(true));
        if let Some(due) = schedule.last(since, now).filter(|_| !suspended) {
            let policy = text_at(&cj, "/spec/concurrencyPolicy");
            if policy == "Replace" {
                for job in &active {
                    self.client.delete_object(kinds::JOB, job).await?;
                }
            }
            if policy != "Forbid" || active.is_empty() {
                let scheduled = Timestamp::from_second(due * 60)
                    .map(|t| t.to_string())
                    .unwrap_or_default();
                let annotations =
                    json!({"batch.kubernetes.io/cronjob-scheduled-timestamp": scheduled});
                let mut job = from_template(
                    kinds::CRONJOB,
                    &cj,
                    "/spec/jobTemplate",
                    &json!({}),
                    &annotations,
                );
                job["metadata"]["name"] = format!("{}-{due}", key.name).into();
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
        Ok(match schedule.next(now) {
            Some(next) => Next::After(Duration::from_secs(
                u64::try_from(next * 60 - now_second).unwrap_or(60).max(1),
            )),
            None => Next::Done,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn minute(text: &str) -> i64 {
        minute_of(text).expect("a time")
    }

    #[test]
    fn schedules_should_read_as_cron_reads_them() {
        let every_5: Schedule = "*/5 * * * *".parse().expect("valid");
        assert!(every_5.matches(minute("2026-12-02T20:05:00Z")));
        assert!(!every_5.matches(minute("2026-12-02T20:06:00Z")));
        assert_eq!(
            every_5.next(minute("2026-12-02T20:06:00Z")),
            Some(minute("2026-12-02T20:10:00Z"))
        );
        assert_eq!(
            every_5.last(
                minute("2026-12-02T19:00:00Z"),
                minute("2026-12-02T20:07:00Z")
            ),
            Some(minute("2026-12-02T20:05:00Z"))
        );
        let daily: Schedule = "@daily".parse().expect("valid");
        assert_eq!(
            daily.next(minute("2026-12-02T20:06:00Z")),
            Some(minute("2026-12-03T00:00:00Z"))
        );
        // 2026-12-02 is a Wednesday (3).
        let weekdays: Schedule = "30 9 * * 1-5".parse().expect("valid");
        assert!(weekdays.matches(minute("2026-12-02T09:30:00Z")));
        assert!(
            !weekdays.matches(minute("2026-12-06T09:30:00Z")),
            "a Sunday"
        );
        let never: Schedule = "0 0 31 2 *".parse().expect("valid, never due");
        assert_eq!(never.next(minute("2026-12-02T20:06:00Z")), None);
        assert_eq!(never.last(0, minute("2026-12-02T20:06:00Z")), None);
        let leap: Schedule = "15 3 29 2 *".parse().expect("valid");
        assert_eq!(
            leap.next(minute("2027-03-01T00:00:00Z")),
            Some(minute("2028-02-29T03:15:00Z"))
        );
        for bad in ["* * * *", "61 * * * *", "*/0 * * * *", "a b c d e"] {
            assert!(bad.parse::<Schedule>().is_err(), "{bad}");
        }
    }
}
