//! Every choice a run makes, drawn from a seed and recorded, so that a run
//! replays exactly from its record and a failing record can be shrunk: a
//! smaller draw always means the more ordinary choice (0 = the first parked
//! request lands and is answered), so shrinking towards 0 removes faults.

#[derive(Clone, Debug)]
pub struct Draws {
    state: u64,
    /// Draws to replay first; past its end, fresh ones from the seed.
    replay: Vec<u64>,
    /// Past the replay, draw 0 instead of from the seed (a shrunk run ends quietly).
    quiet_after_replay: bool,
    pub record: Vec<u64>,
}

impl Draws {
    pub fn from_seed(seed: u64) -> Self {
        Draws {
            state: seed ^ 0x9e37_79b9_7f4a_7c15,
            replay: Vec::new(),
            quiet_after_replay: false,
            record: Vec::new(),
        }
    }

    pub fn replaying(seed: u64, replay: Vec<u64>) -> Self {
        Draws {
            replay,
            quiet_after_replay: true,
            ..Draws::from_seed(seed)
        }
    }

    /// A number below `bound` (at least 1).
    pub fn below(&mut self, bound: u64) -> u64 {
        let bound = bound.max(1);
        let raw = match self.replay.get(self.record.len()) {
            Some(raw) => *raw,
            None if self.quiet_after_replay => 0,
            None => self.splitmix(),
        };
        self.record.push(raw);
        raw % bound
    }

    /// True with `percent` chance; false when shrunk to 0.
    pub fn chance(&mut self, percent: u64) -> bool {
        // 0 must mean "no": the shrinker's direction.
        self.below(100) >= 100 - percent
    }

    fn splitmix(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

/// Smaller records that still fail the same way: chunks removed, then each
/// draw lowered to 0. `fails` replays a record and says whether it still fails.
pub fn shrink(record: Vec<u64>, mut fails: impl FnMut(&[u64]) -> bool, budget: usize) -> Vec<u64> {
    let mut best = record;
    let mut tries = 0;
    let mut chunk = best.len().max(1) / 2;
    while chunk >= 1 && tries < budget {
        let mut start = 0;
        while start < best.len() && tries < budget {
            let mut candidate = best.clone();
            let end = (start + chunk).min(candidate.len());
            candidate.drain(start..end);
            tries += 1;
            if fails(&candidate) {
                best = candidate;
            } else {
                start += chunk;
            }
        }
        chunk /= 2;
    }
    for index in 0..best.len() {
        if tries >= budget {
            break;
        }
        if best[index] != 0 {
            let mut candidate = best.clone();
            candidate[index] = 0;
            tries += 1;
            if fails(&candidate) {
                best = candidate;
            }
        }
    }
    best
}
