//! The bounds on open watches: a slot of all of them and one of the
//! user's for each watch, given back when it ends.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::http::error::ApiError;

/// The bounds on open watches: all of them, and each user's.
#[derive(Debug)]
pub(super) struct WatchSlots {
    all: Arc<Semaphore>,
    per_user: Mutex<HashMap<String, Arc<Semaphore>>>,
    per_user_max: usize,
}

/// One open watch's slots, given back when it ends.
#[derive(Debug)]
pub(super) struct WatchSlot {
    _all: OwnedSemaphorePermit,
    _user: OwnedSemaphorePermit,
}

impl WatchSlots {
    pub(super) fn new(total: usize, per_user: usize) -> Self {
        Self {
            all: Arc::new(Semaphore::new(total)),
            per_user: Mutex::new(HashMap::new()),
            per_user_max: per_user,
        }
    }

    /// A slot for one more watch of `user`, or 429.
    pub(super) fn acquire(&self, user: &str) -> Result<WatchSlot, ApiError> {
        let mine = Arc::clone(
            self.per_user
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .entry(user.to_owned())
                .or_insert_with(|| Arc::new(Semaphore::new(self.per_user_max))),
        );
        let user_slot = mine.try_acquire_owned().map_err(|_| {
            ApiError::too_many_requests(format!(
                "user \"{user}\" has {} watches open; retry later",
                self.per_user_max
            ))
        })?;
        let all_slot = Arc::clone(&self.all)
            .try_acquire_owned()
            .map_err(|_| ApiError::too_many_requests("too many watches are open; retry later"))?;
        Ok(WatchSlot {
            _all: all_slot,
            _user: user_slot,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_user_should_have_a_bound_of_its_own_within_the_total() {
        let slots = WatchSlots::new(5, 2);
        let a1 = slots.acquire("alice").expect("first");
        let _a2 = slots.acquire("alice").expect("second");
        let refused = slots.acquire("alice").expect_err("third");
        assert_eq!(refused.code, 429);
        assert!(refused.message.contains("alice"), "{}", refused.message);
        // Bob is not starved by Alice.
        let _b1 = slots.acquire("bob").expect("bob");
        let _b2 = slots.acquire("bob").expect("bob");
        let _c1 = slots.acquire("carol").expect("carol");
        // The total is reached: carol's second is refused although hers is free.
        assert_eq!(
            slots.acquire("carol").map(|_| ()).map_err(|e| e.code),
            Err(429)
        );
        // A watch that ends gives its slots back.
        drop(a1);
        assert!(slots.acquire("alice").is_ok());
    }
}
