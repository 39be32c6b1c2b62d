//! Swarm testing (Groce et al., "Swarm Testing", ISSTA 2012): each run
//! first draws which kinds of trouble it leans on, instead of every run
//! mixing every fault thinly. A failure path that needs three rare things at
//! once (a long lease, a process paused across a trim, a busy lock that
//! moved on ten generations) is reached by the runs whose profile has all
//! three, often, rather than almost never by every run.
//!
//! Shrinking lowers draws towards 0: profile 0 is the plain run.

use super::draws::Draws;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Profile {
    /// Chance (percent) that a lock write a caller is about to send is held
    /// by a pause of its process (`pauses.rs`); besides the rare pause any
    /// request may meet.
    pub pauses: u64,
    /// Callers may hold long leases (a long workload): still live when a
    /// request paused for minutes lands.
    pub long_leases: bool,
    /// More callers, each taking the lock more times: a lock that moves on
    /// many generations while one of them is paused.
    pub busy: bool,
    /// SSM listings often come back short (a page of fewer items than
    /// exist, even none, with or without a token to read on).
    pub short_listings: bool,
}

impl Profile {
    pub fn draw(draws: &mut Draws) -> Profile {
        Profile {
            pauses: [0, 10, 40][draws.below(3) as usize],
            long_leases: draws.chance(50),
            busy: draws.chance(40),
            short_listings: draws.chance(40),
        }
    }

    /// A caller's lease in seconds.
    pub fn lease(&self, draws: &mut Draws) -> i64 {
        match self.long_leases {
            true => [60, 1500, 1500][draws.below(3) as usize],
            false => [30, 60, 120][draws.below(3) as usize],
        }
    }

    /// How many callers besides the lock's limit + 1.
    pub fn extra_callers(&self, draws: &mut Draws) -> usize {
        draws.below(if self.busy { 5 } else { 3 }) as usize
    }

    /// Locked sections after the first one a caller runs.
    pub fn cycles(&self, draws: &mut Draws) -> u32 {
        match self.busy {
            true => draws.below(4) as u32,
            false => u32::from(draws.chance(50)),
        }
    }

    pub fn describe(&self) -> String {
        format!(
            "profile: pauses {}%, long leases {}, busy {}, short listings {}",
            self.pauses, self.long_leases, self.busy, self.short_listings
        )
    }
}
