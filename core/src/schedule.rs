//! Cron schedules, in UTC: when a scheduled plugin is called, and when the
//! embedded cluster's CronJobs run.
//!
//! # Syntax
//! Five fields, as a CronJob's (`minute hour day-of-month month
//! day-of-week`), or six with seconds first (`second minute ...`: a
//! schedule shorter than a minute, for tests and demos). Each field is `*`,
//! a value, a range `a-b`, a step `*/n`, `a-b/n` or `a/n` (from `a` to the
//! field's end), or a comma-separated list of those. Months and days of
//! the week may be named (`jan`, `mon`; any case); Sunday is 0 or 7. The
//! macros `@yearly` (`@annually`), `@monthly`, `@weekly`, `@daily`
//! (`@midnight`) and `@hourly` stand for their five fields.
//!
//! # Days
//! As cron's: when both the day of the month and the day of the week are
//! restricted (neither starts with `*`), a day matches if either does;
//! otherwise it must match both.
//!
//! # Guarantees
//! [`Schedule::parse`] refuses a malformed schedule, saying which field; one
//! that parses but never fires (the 30th of February) parses, as cron's
//! does, and has no next time. A schedule fires at most once a second; its
//! times are pure functions of the time given (the caller's clock), found by
//! skipping whole units (a day, an hour, a minute) that miss.

use jiff::Timestamp;
use jiff::civil::Date;
use jiff::tz::TimeZone;

/// How many years ahead a next time is looked for; a schedule with none
/// within them never fires.
const HORIZON_SECONDS: i64 = 5 * 366 * 24 * 3600;

/// How far back a last time is looked for.
const LOOKBACK_SECONDS: i64 = 7 * 24 * 3600;

/// A parsed cron schedule (see the module documentation).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Schedule {
    seconds: u64,
    minutes: u64,
    hours: u64,
    days: u64,
    months: u64,
    weekdays: u64,
    /// Whether the day of the month, or of the week, is unrestricted
    /// (its field starts with `*`).
    any_day: bool,
    any_weekday: bool,
}

/// Why a schedule was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ScheduleError {
    /// Not five or six fields, nor a known macro.
    #[error(
        "schedule `{0}` is not five fields (minute hour day-of-month month day-of-week), six (seconds first) or a macro such as @hourly"
    )]
    Fields(String),
    /// A field does not parse, or is out of its range.
    #[error("schedule field {field} `{text}` is invalid: {why}")]
    Field {
        /// Which field (`minute`, `month`...).
        field: &'static str,
        /// Its text.
        text: String,
        /// What is wrong.
        why: String,
    },
}

/// One field's name, range and value names.
struct Field {
    name: &'static str,
    min: u32,
    max: u32,
    names: &'static [&'static str],
}

impl Field {
    /// A field of numbers only.
    const fn numbers(name: &'static str, min: u32, max: u32) -> Self {
        Self {
            name,
            min,
            max,
            names: &[],
        }
    }
}

const SECOND: Field = Field::numbers("second", 0, 59);
const MINUTE: Field = Field::numbers("minute", 0, 59);
const HOUR: Field = Field::numbers("hour", 0, 23);
const DAY: Field = Field::numbers("day-of-month", 1, 31);
const MONTH: Field = Field {
    name: "month",
    min: 1,
    max: 12,
    names: &[
        "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
    ],
};
const WEEKDAY: Field = Field {
    name: "day-of-week",
    min: 0,
    max: 7,
    names: &["sun", "mon", "tue", "wed", "thu", "fri", "sat"],
};

impl Field {
    /// The values `text` selects, as bits.
    fn parse(&self, text: &str) -> Result<u64, ScheduleError> {
        let fail = |why: String| ScheduleError::Field {
            field: self.name,
            text: text.to_owned(),
            why,
        };
        let mut bits = 0u64;
        for item in text.split(',') {
            let (range, step) = match item.split_once('/') {
                Some((range, step)) => {
                    let step: u32 =
                        step.parse().ok().filter(|s| *s > 0).ok_or_else(|| {
                            fail(format!("step `{step}` is not a positive number"))
                        })?;
                    (range, step)
                }
                None => (item, 1),
            };
            let (low, high) = match range {
                "*" => (self.min, self.max),
                _ => match range.split_once('-') {
                    Some((low, high)) => (self.value(low, &fail)?, self.value(high, &fail)?),
                    // `a/n` runs from `a` to the field's end.
                    None if item.contains('/') => (self.value(range, &fail)?, self.max),
                    None => {
                        let value = self.value(range, &fail)?;
                        (value, value)
                    }
                },
            };
            if low > high {
                return Err(fail(format!("the range {low}-{high} is backwards")));
            }
            for value in (low..=high).step_by(step as usize) {
                bits |= 1 << value;
            }
        }
        Ok(bits)
    }

    fn value(
        &self,
        text: &str,
        fail: &dyn Fn(String) -> ScheduleError,
    ) -> Result<u32, ScheduleError> {
        let lower = text.to_ascii_lowercase();
        let value = match self.names.iter().position(|n| *n == lower) {
            // Months are named from 1, days of the week from 0.
            Some(i) => u32::try_from(i).unwrap_or(u32::MAX) + u32::from(self.min == 1),
            None => text
                .parse()
                .map_err(|_| fail(format!("`{text}` is not a number or a name")))?,
        };
        if value < self.min || value > self.max {
            return Err(fail(format!(
                "{value} is outside {}-{}",
                self.min, self.max
            )));
        }
        Ok(value)
    }
}

impl Schedule {
    /// Parses a schedule (see the module documentation).
    ///
    /// # Errors
    /// [`ScheduleError`] says which field is wrong, or that it never fires.
    pub fn parse(text: &str) -> Result<Self, ScheduleError> {
        let expanded = match text.trim() {
            "@yearly" | "@annually" => "0 0 1 1 *",
            "@monthly" => "0 0 1 * *",
            "@weekly" => "0 0 * * 0",
            "@daily" | "@midnight" => "0 0 * * *",
            "@hourly" => "0 * * * *",
            other => other,
        };
        let fields: Vec<&str> = expanded.split_whitespace().collect();
        let (second, rest) = match fields.as_slice() {
            [_, _, _, _, _] => ("0", fields.as_slice()),
            [second, rest @ ..] if rest.len() == 5 => (*second, rest),
            _ => return Err(ScheduleError::Fields(text.to_owned())),
        };
        let [minute, hour, day, month, weekday] = rest else {
            return Err(ScheduleError::Fields(text.to_owned()));
        };
        let mut weekdays = WEEKDAY.parse(weekday)?;
        // Sunday is 0 or 7.
        if weekdays & (1 << 7) != 0 {
            weekdays = (weekdays | 1) & !(1 << 7);
        }
        let schedule = Self {
            seconds: SECOND.parse(second)?,
            minutes: MINUTE.parse(minute)?,
            hours: HOUR.parse(hour)?,
            days: DAY.parse(day)?,
            months: MONTH.parse(month)?,
            weekdays,
            any_day: day.starts_with('*'),
            any_weekday: weekday.starts_with('*'),
        };
        Ok(schedule)
    }

    fn day_matches(&self, date: Date) -> bool {
        let day = self.days & (1 << date.day()) != 0;
        let weekday = self.weekdays & (1 << date.weekday().to_sunday_zero_offset()) != 0;
        if self.any_day || self.any_weekday {
            day && weekday
        } else {
            day || weekday
        }
    }

    /// The unit of time `second` (since the epoch, UTC) misses the schedule
    /// by, the largest first (so a search skips it whole); `None` if it is
    /// a time of the schedule.
    fn miss(&self, second: i64) -> Option<Unit> {
        let Ok(at) = Timestamp::from_second(second) else {
            return Some(Unit::Day);
        };
        let at = at.to_zoned(TimeZone::UTC).datetime();
        let bit = |set: u64, value: i8| set & (1 << value) != 0;
        if !bit(self.months, at.month()) || !self.day_matches(at.date()) {
            Some(Unit::Day)
        } else if !bit(self.hours, at.hour()) {
            Some(Unit::Hour)
        } else if !bit(self.minutes, at.minute()) {
            Some(Unit::Minute)
        } else if !bit(self.seconds, at.second()) {
            Some(Unit::Second)
        } else {
            None
        }
    }

    /// Whether the second `at` falls in is a time of the schedule.
    pub fn matches(&self, at: Timestamp) -> bool {
        self.miss(at.as_second()).is_none()
    }

    /// The first time of the schedule after `after` (a whole second later
    /// at least); `None` if none within five years.
    pub fn next_after(&self, after: Timestamp) -> Option<Timestamp> {
        let ceiling = after.as_second().saturating_add(HORIZON_SECONDS);
        let mut second = after.as_second().checked_add(1)?;
        while second <= ceiling {
            match self.miss(second) {
                None => return Timestamp::from_second(second).ok(),
                // On to the first second of the next unit.
                Some(unit) => second += unit.seconds() - second.rem_euclid(unit.seconds()),
            }
        }
        None
    }

    /// The latest time of the schedule in `(after, until]`, looking back a
    /// week at most.
    pub fn last_between(&self, after: Timestamp, until: Timestamp) -> Option<Timestamp> {
        let floor = after
            .as_second()
            .max(until.as_second().saturating_sub(LOOKBACK_SECONDS));
        let mut second = until.as_second();
        while second > floor {
            match self.miss(second) {
                None => return Timestamp::from_second(second).ok(),
                // Back to the last second of the unit before.
                Some(unit) => second -= second.rem_euclid(unit.seconds()) + 1,
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
    Second,
}

impl Unit {
    fn seconds(self) -> i64 {
        match self {
            Self::Day => 24 * 3600,
            Self::Hour => 3600,
            Self::Minute => 60,
            Self::Second => 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> Timestamp {
        text.parse().expect("a timestamp")
    }

    fn next(schedule: &str, after: &str) -> String {
        Schedule::parse(schedule)
            .expect("valid")
            .next_after(at(after))
            .expect("fires")
            .to_string()
    }

    #[test]
    fn next_after_should_follow_each_field() {
        assert_eq!(
            next("*/15 * * * *", "2026-12-03T10:07:30Z"),
            "2026-12-03T10:15:00Z"
        );
        assert_eq!(
            next("0 9 * * mon-fri", "2026-12-04T09:00:00Z"),
            "2026-12-07T09:00:00Z"
        );
        assert_eq!(
            next("@monthly", "2026-12-03T00:00:00Z"),
            "2027-01-01T00:00:00Z"
        );
        assert_eq!(
            next("@hourly", "2026-12-31T23:30:00Z"),
            "2027-01-01T00:00:00Z"
        );
        assert_eq!(
            next("30 2 29 feb *", "2026-01-01T00:00:00Z"),
            "2028-02-29T02:30:00Z"
        );
        // Six fields: seconds first.
        assert_eq!(
            next("*/2 * * * * *", "2026-12-03T10:00:01Z"),
            "2026-12-03T10:00:02Z"
        );
        assert_eq!(
            next("*/2 * * * * *", "2026-12-03T10:00:02.5Z"),
            "2026-12-03T10:00:04Z"
        );
        // Always strictly later.
        assert_eq!(
            next("0 0 * * *", "2026-12-03T00:00:00Z"),
            "2026-12-04T00:00:00Z"
        );
    }

    #[test]
    fn days_of_month_and_week_should_match_either_when_both_are_restricted() {
        // The 13th, or any Friday (2026-12-04 is a Friday).
        assert_eq!(
            next("0 0 13 * fri", "2026-12-01T00:00:00Z"),
            "2026-12-04T00:00:00Z"
        );
        // The day of the month unrestricted: Fridays only.
        assert_eq!(
            next("0 0 * * 5", "2026-12-05T00:00:00Z"),
            "2026-12-11T00:00:00Z"
        );
        // Sunday is 0 or 7.
        assert_eq!(
            next("0 0 * * 7", "2026-12-03T00:00:00Z"),
            "2026-12-06T00:00:00Z"
        );
    }

    #[test]
    fn parse_should_name_the_wrong_field_and_let_what_never_fires_parse() {
        for (text, field) in [
            ("61 * * * *", "minute"),
            ("* 24 * * *", "hour"),
            ("* * 0 * *", "day-of-month"),
            ("* * * foo *", "month"),
            ("*/0 * * * *", "minute"),
            ("5-1 * * * *", "minute"),
        ] {
            match Schedule::parse(text) {
                Err(ScheduleError::Field { field: named, .. }) => {
                    assert_eq!(named, field, "{text}")
                }
                other => panic!("{text}: {other:?}"),
            }
        }
        assert!(matches!(
            Schedule::parse("* * *"),
            Err(ScheduleError::Fields(_))
        ));
        for bad in ["* * * *", "a b c d e"] {
            assert!(
                matches!(
                    Schedule::parse(bad),
                    Err(ScheduleError::Fields(_) | ScheduleError::Field { .. })
                ),
                "{bad}"
            );
        }
        // Parses, as cron's does, but never fires.
        let never = Schedule::parse("0 0 30 feb *").expect("parses");
        assert_eq!(never.next_after(at("2026-12-02T20:06:00Z")), None);
        assert_eq!(
            never.last_between(Timestamp::UNIX_EPOCH, at("2026-12-02T20:06:00Z")),
            None
        );
    }

    #[test]
    fn matches_and_last_between_should_agree_with_next_after() {
        let every_5 = Schedule::parse("*/5 * * * *").expect("valid");
        assert!(every_5.matches(at("2026-12-02T20:05:00Z")));
        assert!(!every_5.matches(at("2026-12-02T20:06:00Z")));
        assert!(
            !every_5.matches(at("2026-12-02T20:05:01Z")),
            "seconds are a field too"
        );
        assert_eq!(
            every_5.last_between(at("2026-12-02T19:00:00Z"), at("2026-12-02T20:07:00Z")),
            Some(at("2026-12-02T20:05:00Z"))
        );
        assert_eq!(
            every_5.last_between(at("2026-12-02T20:05:00Z"), at("2026-12-02T20:07:00Z")),
            None,
            "the start is excluded"
        );
        // 2026-12-02 is a Wednesday.
        let weekdays = Schedule::parse("30 9 * * 1-5").expect("valid");
        assert!(weekdays.matches(at("2026-12-02T09:30:00Z")));
        assert!(!weekdays.matches(at("2026-12-06T09:30:00Z")), "a Sunday");
    }
}
