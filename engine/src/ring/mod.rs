//! Sharding across replicas: the replicas sharing a ring id split every
//! plugin's primaries between them, and no key is ever reconciled by two
//! replicas at once.
//!
//! # Objects
//! - **Member Leases** `<ring>-member-<identity>`, one per replica, labelled
//!   `kubewasm.dev/ring=<ring>`, renewed every `retry_period` by a task of
//!   its own (a round that waits for steps to drain never delays it). A member is
//!   live while this replica has seen its Lease change within
//!   `lease_duration` (observed time, as client-go's election: clocks need
//!   not agree).
//! - **Slot Leases** `<ring>-slot-<n>`, one per slot of the hash space (
//!   [`SLOTS`] equal ranges of the FNV-1a 64 hash of a primary's uid, or of
//!   its namespace): its holder is the only replica that may start steps for
//!   the slot's primaries. Every write of it is guarded by its
//!   resourceVersion, so two replicas racing for it get one winner.
//!
//! # Who should own a slot
//! Rendezvous hashing with bounded loads over the live members
//! ([`assignment`]): pairs of (slot, member) by the score of
//! `"<identity>/<slot>"`, highest first, each slot to the first member
//! with room below an equal share. Every replica computes it the same
//! way from what it sees; each member owns an equal share give or take one
//! slot, and a membership change moves the slots of the member that came
//! or went, and a few more: at most a quarter of the others (the property
//! tests' bound; the worst of 40,000 random rings of up to nine members
//! moved 9 of 48).
//!
//! # States of a slot, for this replica
//! ```text
//!             acquire (slot Lease free, or its holder not live; guarded write)
//!   not held ─────────────────────────────────────────────────────────▶ held
//!      ▲                                                                  │
//!      │ release: stop starting steps, wait for those in flight,          │
//!      │ then clear the holder (guarded write)                            │
//!      └──────────────────────────────────────────────────────────────────┘
//!   fenced (no renewal of the member Lease within renew_deadline, seen
//!   then or by the first renewal after the lapse): every slot not held at
//!   once, steps for none start; after a renewal a slot is held again only
//!   by a new guarded write of its Lease, sent after the fence
//! ```
//! - A slot moves only after its previous holder released it, or after the
//!   previous holder's member Lease expired (`lease_duration` > its
//!   `renew_deadline`, after which it starts nothing).
//! - The slots held are told to the informers once per round
//!   ([`Shard::slots`]): the store of a sharded type holds the objects of
//!   those slots only ([`super::share`]), and its informer lists again when
//!   they change, so a replica that acquires a slot is shown every primary
//!   of it (a listing, as at start): level-triggered after a move.
//! - Keys of slots this replica does not hold are dropped from its queues:
//!   their holder has them, or will list them when it acquires the slot.
//!
//! The decision of one round is [`plan`], pure, here; [`run`] does the I/O
//! (`lease.rs`); [`Shard`] is the gate the workers pass (`shard.rs`).

mod lease;
mod shard;
mod slots;

pub use lease::{run, start};
pub use shard::{InFlight, Shard};
pub use slots::{Move, RING_LABEL, RingConfig, SLOTS, assignment, plan, range_of, slot_of};
