//! Delivery lanes: one per webhook target, so that a target that never answers delays only
//! its own events. This module owns the bookkeeping (no I/O, no clock): which events may
//! start now, which wait, which are dropped.
//!
//! Invariants, for every target key:
//! - at most `in_flight` deliveries run at once, and at most `queued` events wait;
//! - an event waits only while its lane is full: `offer` starts it at once otherwise, and
//!   `finished` hands the freed slot to the oldest waiting event (first in, first out);
//! - a lane exists only while it has something running or waiting: `finished` removes it
//!   when its last delivery ends with nothing queued, so the map never holds idle targets;
//! - at most `targets` lanes exist; an event for a new target beyond that is dropped.
//!
//! There is deliberately no global limit on deliveries in flight: any such limit can be
//! filled by slow targets, and would then stall every other target. The total is bounded
//! instead by `targets × in_flight`.
//!
//! Keeps I15 (DESIGN.md, "Invariants"): a slow target fills only its own lane.

use std::collections::{HashMap, VecDeque};

/// The limits of every lane, and of the number of lanes.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub in_flight: usize,
    pub queued: usize,
    pub targets: usize,
}

/// What became of an offered event.
#[derive(Debug, PartialEq, Eq)]
pub enum Admit<J> {
    /// It holds a slot of its lane: deliver it now, and call `finished` when done.
    Start(J),
    /// It waits in its lane; `finished` returns it when a slot frees.
    Queued,
    /// Not taken: its lane's queue is full, or too many targets are busy.
    Dropped(J, Full),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Full {
    Lane,
    Targets,
}

impl Full {
    pub fn as_str(self) -> &'static str {
        match self {
            Full::Lane => "the target's queue is full",
            Full::Targets => "too many webhook targets are busy",
        }
    }
}

struct Lane<J> {
    running: usize,
    waiting: VecDeque<J>,
}

pub struct Lanes<J> {
    limits: Limits,
    lanes: HashMap<String, Lane<J>>,
    /// Events waiting, in all lanes together.
    queued: usize,
}

impl<J> Lanes<J> {
    pub fn new(limits: Limits) -> Lanes<J> {
        Lanes {
            limits,
            lanes: HashMap::new(),
            queued: 0,
        }
    }

    /// Offers an event for `target`.
    pub fn offer(&mut self, target: &str, job: J) -> Admit<J> {
        if !self.lanes.contains_key(target) && self.lanes.len() >= self.limits.targets {
            return Admit::Dropped(job, Full::Targets);
        }
        let lane = self.lanes.entry(target.to_owned()).or_insert_with(|| Lane {
            running: 0,
            waiting: VecDeque::new(),
        });
        if lane.running < self.limits.in_flight {
            lane.running += 1;
            Admit::Start(job)
        } else if lane.waiting.len() < self.limits.queued {
            lane.waiting.push_back(job);
            self.queued += 1;
            Admit::Queued
        } else {
            Admit::Dropped(job, Full::Lane)
        }
    }

    /// A delivery to `target` ended. Returns the next event to deliver in the slot it freed,
    /// if one waits; otherwise the slot is released (and the lane too, once idle).
    pub fn finished(&mut self, target: &str) -> Option<J> {
        let lane = self.lanes.get_mut(target)?;
        if let Some(next) = lane.waiting.pop_front() {
            self.queued -= 1;
            return Some(next);
        }
        lane.running = lane.running.saturating_sub(1);
        if lane.running == 0 {
            self.lanes.remove(target);
        }
        None
    }

    /// Events waiting for a slot, in all lanes together.
    pub fn queued(&self) -> usize {
        self.queued
    }

    /// Targets with something running or waiting.
    pub fn targets(&self) -> usize {
        self.lanes.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: Limits = Limits {
        in_flight: 2,
        queued: 3,
        targets: 2,
    };

    #[test]
    fn a_full_lane_queues_then_drops_without_touching_other_lanes() {
        let mut lanes = Lanes::new(LIMITS);
        assert_eq!(lanes.offer("slow", 1), Admit::Start(1));
        assert_eq!(lanes.offer("slow", 2), Admit::Start(2));
        for job in 3..=5 {
            assert_eq!(lanes.offer("slow", job), Admit::Queued);
        }
        assert_eq!(lanes.offer("slow", 6), Admit::Dropped(6, Full::Lane));
        assert_eq!(lanes.queued(), 3, "the dropped event is not counted");
        assert_eq!(
            lanes.offer("live", 7),
            Admit::Start(7),
            "another target starts at once while `slow` is stuck"
        );
    }

    #[test]
    fn a_freed_slot_goes_to_the_oldest_waiting_event() {
        let mut lanes = Lanes::new(LIMITS);
        for job in 1..=4 {
            lanes.offer("t", job);
        }
        assert_eq!(lanes.finished("t"), Some(3));
        assert_eq!(lanes.finished("t"), Some(4));
        assert_eq!(lanes.offer("t", 5), Admit::Queued, "both slots still run");
        assert_eq!(lanes.finished("t"), Some(5));
        assert_eq!(lanes.queued(), 0);
        assert_eq!(lanes.finished("t"), None);
        assert_eq!(lanes.offer("t", 6), Admit::Start(6), "a slot was freed");
    }

    #[test]
    fn idle_lanes_are_removed_and_the_number_of_targets_is_capped() {
        let mut lanes = Lanes::new(LIMITS);
        assert_eq!(lanes.offer("a", 1), Admit::Start(1));
        assert_eq!(lanes.offer("b", 2), Admit::Start(2));
        assert_eq!(lanes.offer("c", 3), Admit::Dropped(3, Full::Targets));
        assert_eq!(lanes.finished("a"), None);
        assert_eq!(
            lanes.targets(),
            1,
            "a's lane went when its last delivery ended"
        );
        assert_eq!(lanes.offer("c", 4), Admit::Start(4), "its place is free");
        assert_eq!(lanes.finished("b"), None);
        assert_eq!(lanes.finished("c"), None);
        assert_eq!(lanes.targets(), 0);
        assert_eq!(lanes.finished("c"), None, "a stray finish changes nothing");
    }

    #[test]
    fn a_lane_is_kept_while_events_wait_even_with_one_slot_left_running() {
        let mut lanes = Lanes::new(LIMITS);
        lanes.offer("t", 1);
        lanes.offer("t", 2);
        lanes.offer("t", 3);
        assert_eq!(lanes.finished("t"), Some(3));
        assert_eq!(lanes.finished("t"), None);
        assert_eq!(lanes.targets(), 1, "job 3 still runs");
        assert_eq!(lanes.finished("t"), None);
        assert_eq!(lanes.targets(), 0);
    }
}
