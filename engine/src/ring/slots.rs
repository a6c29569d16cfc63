//! The ring's arithmetic: the fixed slots, the slot of a hash, the
//! members each slot belongs to (rendezvous hashing), and the moves from
//! one assignment to the next.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use kubewasm_core::shard::{ShardField, ShardRange, fnv1a64};

/// Slots of the hash space (each `2^64 / SLOTS` wide). 48: one, two,
/// three, four, six or eight members hold equal shares (32 gave three
/// members 11, 11 and 10); it fits the `u64` masks of slots held.
pub const SLOTS: u32 = 48;

/// The label every Lease of a ring carries, valued with the ring's id.
pub const RING_LABEL: &str = "kubewasm.dev/ring";

/// How a replica joins its ring.
#[derive(Clone, Debug)]
pub struct RingConfig {
    /// The Leases' namespace.
    pub namespace: String,
    /// The ring's id (the replicas' shared `--leader-election-id`).
    pub ring: String,
    /// This replica's identity, unique in the ring.
    pub identity: String,
    /// What a primary is placed by.
    pub field: ShardField,
    /// How long a member Lease holds without renewal.
    pub lease_duration: Duration,
    /// How long a replica keeps starting steps without a renewal.
    pub renew_deadline: Duration,
    /// How often a replica renews and looks at the ring.
    pub retry_period: Duration,
}

impl RingConfig {
    /// client-go's timings scaled to `lease_duration` (2/3 and 2/15 of it).
    pub fn new(namespace: &str, ring: &str, identity: &str, lease_duration: Duration) -> Self {
        Self {
            namespace: namespace.to_owned(),
            ring: ring.to_owned(),
            identity: identity.to_owned(),
            field: ShardField::Uid,
            lease_duration,
            renew_deadline: lease_duration * 2 / 3,
            retry_period: (lease_duration * 2 / 15).max(Duration::from_millis(100)),
        }
    }

    pub(super) fn member_lease(&self, identity: &str) -> String {
        format!("{}-member-{}", self.ring, dns_safe(identity))
    }

    pub(super) fn slot_lease(&self, slot: u32) -> String {
        format!("{}-slot-{slot}", self.ring)
    }
}

/// `identity` as a DNS subdomain's label characters.
fn dns_safe(identity: &str) -> String {
    identity
        .chars()
        .map(|c| match c.to_ascii_lowercase() {
            c @ ('a'..='z' | '0'..='9' | '-' | '.') => c,
            _ => '-',
        })
        .collect()
}

/// The slot of a hash.
pub fn slot_of(hash: u64) -> u32 {
    // Slot `n` is `ShardRange::nth_of(n, SLOTS)`.
    ShardRange::index_of(hash, SLOTS)
}

/// The range of the hash space a slot covers.
pub fn range_of(slot: u32) -> ShardRange {
    ShardRange::nth_of(slot, SLOTS).unwrap_or(ShardRange::ALL)
}

/// The rendezvous score of `member` for `slot`: FNV-1a of
/// `<member>/<slot>` mixed by MurmurHash3's finalizer (FNV-1a's high bits
/// barely move with the last bytes, which would hand one member every
/// slot).
fn score(member: &str, slot: u32) -> u64 {
    let mut k = fnv1a64(format!("{member}/{slot}").as_bytes());
    k ^= k >> 33;
    k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
    k ^= k >> 33;
    k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    k ^ (k >> 33)
}

/// Which live member should own each slot: rendezvous hashing with bounded
/// loads. The (slot, member) pairs are taken by score, highest first, and a
/// slot goes to the first member of its pairs with room: fewer than
/// `floor(SLOTS / members)` slots, or that many while fewer than
/// `SLOTS % members` members hold one more. Every member so owns
/// `SLOTS / members` slots, or one more (pure rendezvous hashing leaves one of three
/// members up to half the space, and the ring as slow as that member); a
/// member that comes or goes moves its own share and the few slots the new
/// shares displace. Every replica computes the same table from
/// the same live set. Empty when no member is live.
pub fn assignment(live: &BTreeSet<String>) -> Vec<Option<&str>> {
    let mut owners: Vec<Option<&str>> = vec![None; SLOTS as usize];
    if live.is_empty() {
        return owners;
    }
    // `floor` slots each, and one more for `extra` of them: SLOTS in all,
    // so every slot finds a member with room.
    let members = u32::try_from(live.len()).unwrap_or(u32::MAX);
    let (floor, mut extra) = (SLOTS / members, SLOTS % members);
    let mut pairs: Vec<(u64, u32, &str)> = live
        .iter()
        .flat_map(|m| (0..SLOTS).map(move |slot| (score(m, slot), slot, m.as_str())))
        .collect();
    // Highest score first; ties by slot and member, so every replica agrees.
    pairs.sort_unstable_by(|a, b| b.cmp(a));
    let mut owned: BTreeMap<&str, u32> = BTreeMap::new();
    for (_, slot, member) in pairs {
        let count = owned.entry(member).or_insert(0);
        let Some(owner @ None) = owners.get_mut(slot as usize) else {
            continue;
        };
        if *count < floor || (*count == floor && extra > 0) {
            if *count == floor {
                extra -= 1;
            }
            *owner = Some(member);
            *count += 1;
        }
    }
    owners
}

/// What one round does to a slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Move {
    /// Take it (guarded write naming this replica), then list its primaries.
    Acquire(u32),
    /// Stop starting its steps, wait for those in flight, clear the holder.
    Release(u32),
}

/// One round's decision, pure: given each slot's holder as its Lease says,
/// the live members (this one included) and the slots this replica holds
/// (may start steps for) now.
pub fn plan(
    me: &str,
    holders: &BTreeMap<u32, String>,
    live: &BTreeSet<String>,
    held: u64,
) -> Vec<Move> {
    let owners = assignment(live);
    (0..SLOTS)
        .filter_map(|slot| {
            let holder = holders.get(&slot).map(String::as_str).unwrap_or_default();
            let mine = owners.get(slot as usize).copied().flatten() == Some(me);
            let holding = held & (1 << slot) != 0;
            match (holder == me, mine) {
                // Held, or held by its Lease after a fence: give it up.
                (true, false) => Some(Move::Release(slot)),
                // Its Lease names this replica but it does not hold it (a
                // fence, a restart): take it again by a write.
                (true, true) if !holding => Some(Move::Acquire(slot)),
                // Free, or its holder is gone.
                (false, true) if holder.is_empty() || !live.contains(holder) => {
                    Some(Move::Acquire(slot))
                }
                _ => None,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn live(members: &[&str]) -> BTreeSet<String> {
        members.iter().map(|m| (*m).to_owned()).collect()
    }

    fn holding(holders: &[(u32, &str)]) -> BTreeMap<u32, String> {
        holders.iter().map(|(s, h)| (*s, (*h).to_owned())).collect()
    }

    #[test]
    fn slots_should_cover_the_hash_space_in_equal_ranges() {
        assert_eq!(slot_of(0), 0);
        assert_eq!(slot_of(u64::MAX), SLOTS - 1);
        for slot in 0..SLOTS {
            let range = range_of(slot);
            assert_eq!(slot_of(range.start), slot);
            let last = u64::try_from(range.end - 1).expect("in the space");
            assert_eq!(slot_of(last), slot);
        }
    }

    #[test]
    fn the_assignment_should_balance_and_move_little_when_a_member_comes_or_goes() {
        let owner_of = |live: &BTreeSet<String>| -> Vec<String> {
            assignment(live)
                .into_iter()
                .map(|o| o.expect("an owner").to_owned())
                .collect()
        };
        for n in 1..=7 {
            let members: Vec<String> = (0..n).map(|i| format!("kubewasm-{i}-x")).collect();
            let all: BTreeSet<String> = members.iter().cloned().collect();
            let owners = owner_of(&all);
            // Balanced: every member floor or ceil of its share.
            for m in &members {
                let share = owners.iter().filter(|o| *o == m).count() as u32;
                assert!(
                    (SLOTS / n..=SLOTS.div_ceil(n)).contains(&share),
                    "{n} members: {m} owns {share}"
                );
            }
            // One leaves: its slots move, and few others (the shares grew).
            if n > 1 {
                let gone = &members[0];
                let rest: BTreeSet<String> = members[1..].iter().cloned().collect();
                let after = owner_of(&rest);
                let displaced = (0..SLOTS as usize)
                    .filter(|s| owners[*s] != *gone && owners[*s] != after[*s])
                    .count();
                // Balance costs a little movement: at most a quarter.
                assert!(
                    displaced <= SLOTS as usize / 4,
                    "{n} → {}: {displaced} slots moved without cause",
                    n - 1
                );
            }
        }
        // Every replica computes the same table whatever it saw first.
        let three = live(&["a", "b", "c"]);
        assert_eq!(assignment(&three), assignment(&three.clone()));
        assert!(assignment(&BTreeSet::new()).iter().all(Option::is_none));
    }

    #[test]
    fn a_slot_should_move_only_once_released_or_its_holder_gone() {
        let members = live(&["a", "b"]);
        let owners = assignment(&members);
        let for_b: Vec<u32> = (0..SLOTS)
            .filter(|s| owners[*s as usize] == Some("b"))
            .collect();
        let slot = for_b[0];
        // a holds a slot b should own: b waits while a is live...
        let held_by_a = holding(&[(slot, "a")]);
        assert!(!plan("b", &held_by_a, &members, 0).contains(&Move::Acquire(slot)));
        // ...and a releases it;
        assert!(plan("a", &held_by_a, &members, 1 << slot).contains(&Move::Release(slot)));
        // once free, b takes it.
        assert!(plan("b", &holding(&[(slot, "")]), &members, 0).contains(&Move::Acquire(slot)));
        // A holder no longer live loses it to the owner.
        let alone = live(&["b"]);
        assert!(plan("b", &held_by_a, &alone, 0).contains(&Move::Acquire(slot)));
    }

    #[test]
    fn after_a_fence_a_slot_should_be_taken_again_by_a_write_not_assumed() {
        let me = live(&["a"]);
        let mine = holding(&[(0, "a")]);
        // Its Lease names this replica, but it holds nothing (fenced, or
        // restarted): it takes the slot again by a guarded write.
        assert!(plan("a", &mine, &me, 0).contains(&Move::Acquire(0)));
        assert!(!plan("a", &mine, &me, 1).contains(&Move::Acquire(0)));
    }

    mod properties {
        use proptest::prelude::*;

        use super::*;

        fn members() -> impl Strategy<Value = BTreeSet<String>> {
            proptest::collection::btree_set("[a-z0-9][a-z0-9.-]{0,20}", 1..9)
        }

        fn owners(live: &BTreeSet<String>) -> Vec<String> {
            assignment(live)
                .into_iter()
                .map(|o| o.unwrap_or_default().to_owned())
                .collect()
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(256))]

            /// Every slot to one live member, each member its equal share
            /// give or take one.
            #[test]
            fn every_slot_should_have_one_live_owner_and_shares_be_equal(live in members()) {
                let owners = owners(&live);
                let n = u32::try_from(live.len()).unwrap_or(u32::MAX);
                prop_assert!(owners.iter().all(|o| live.contains(o)));
                for m in &live {
                    let share = u32::try_from(owners.iter().filter(|o| *o == m).count())
                        .unwrap_or(u32::MAX);
                    prop_assert!((SLOTS / n..=SLOTS.div_ceil(n)).contains(&share), "{} owns {}", m, share);
                }
            }

            /// A member that comes (or, the same change read backwards,
            /// goes) moves its own slots and at most a quarter of the
            /// others (the price of equal shares).
            #[test]
            fn a_membership_change_should_move_little_more_than_it_must(
                live in members(),
                newcomer in "[a-z0-9][a-z0-9.-]{0,20}",
            ) {
                prop_assume!(!live.contains(&newcomer));
                let before = owners(&live);
                let mut grown = live.clone();
                grown.insert(newcomer.clone());
                let after = owners(&grown);
                let moved = (0..SLOTS as usize)
                    .filter(|s| after[*s] != newcomer && before[*s] != after[*s])
                    .count();
                prop_assert!(moved <= SLOTS as usize / 4, "{} joining moved {} others", newcomer, moved);
            }
        }
    }
}
