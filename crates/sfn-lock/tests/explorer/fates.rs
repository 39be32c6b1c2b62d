//! What may happen to one request, and doing it: the faults.

use std::collections::{BTreeMap, BTreeSet};

use aws_smithy_runtime_api::client::result::ConnectorError;
use aws_smithy_types::date_time::{DateTime, Format};
use serde_json::Value;

use super::draws::Draws;
use super::server::{forward, throttled, Answer};
use super::tokens::Tokens;
use super::wire::Parked;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fate {
    /// Lands and is answered.
    Land,
    /// Lands; the answer never arrives (the SDK retries).
    AnswerLost,
    /// Never reaches the service (connection refused or reset first).
    FailsBefore,
    /// Answered "throttled" without landing.
    Throttled,
    /// The caller's process dies before the request is sent.
    CrashBefore,
    /// The request lands; the caller's process dies before the answer.
    CrashAfter,
    /// The function gives up on the request (its operation timeout: the
    /// invocation fails and Step Functions retries it), but the request is
    /// on its way and lands at a later step.
    LandsLate,
    /// A listing page answered with fewer items than exist (SSM's
    /// `GetParametersByPath` is documented to return "between zero and
    /// MaxResults", "on a best-effort basis"), with a token to read on or,
    /// as often, without one: the listing looks complete but misses items
    /// (what the library guards against, DESIGN.md "A listing is checked
    /// against the hint").
    ShortPage,
    /// The caller's process pauses before sending it (`pauses.rs`).
    Paused,
}

impl Fate {
    pub fn draw(draws: &mut Draws) -> Fate {
        match draws.below(100) {
            0..=65 => Fate::Land,
            66..=69 => Fate::Paused,
            70..=71 => Fate::LandsLate,
            72..=77 => Fate::AnswerLost,
            78..=81 => Fate::FailsBefore,
            82..=85 => Fate::Throttled,
            86..=87 => Fate::CrashBefore,
            88..=89 => Fate::CrashAfter,
            // Lands as any other request but a listing, which is shortened:
            // one listing in ten (a read relies on few).
            _ => Fate::ShortPage,
        }
    }

    pub fn lands(self) -> bool {
        matches!(
            self,
            Fate::Land | Fate::AnswerLost | Fate::CrashAfter | Fate::ShortPage
        )
    }
}

/// Listing continuations the explorer handed out: token → (the server's own
/// token to go on from, the names already returned).
#[derive(Debug, Default)]
pub struct Continuations {
    next: u64,
    pending: BTreeMap<String, (Option<String>, BTreeSet<String>)>,
    /// Callers whose last SSM `GetParameters` found none of the names it
    /// asked for: a read whose hint's generations are all gone, about to
    /// list the lock (the path of issue 23's empty listing).
    empty_probes: BTreeSet<usize>,
}

impl Continuations {
    /// Whether `parked` is the listing that follows `caller`'s empty probe:
    /// the search cuts it short more often there, where it decides most.
    pub fn follows_empty_probe(&self, parked: &Parked) -> bool {
        is_listing(parked) && self.empty_probes.contains(&parked.caller)
    }

    fn note_probe(&mut self, parked: &Parked, answer: &Answer) {
        if parked.target() != Some("AmazonSSM.GetParameters") || answer.status != 200 {
            return;
        }
        let body: Value = serde_json::from_slice(&answer.body).unwrap_or_default();
        match body["Parameters"]
            .as_array()
            .is_some_and(|found| found.is_empty())
        {
            true => self.empty_probes.insert(parked.caller),
            false => self.empty_probes.remove(&parked.caller),
        };
    }
}

/// Carries out `fate` for `parked`; the answer's description for the trace.
pub fn carry_out(
    mut parked: Parked,
    fate: Fate,
    store_now: i64,
    tokens: &mut Tokens,
    continuations: &mut Continuations,
    draws: &mut Draws,
) -> String {
    match fate {
        Fate::FailsBefore | Fate::CrashBefore => {
            parked.answer(Err(ConnectorError::io(
                "connection reset before sending".into(),
            )));
            return "did not land".into();
        }
        Fate::Throttled => {
            let answer = throttled(&parked);
            parked.answer(answer.into_response());
            return "throttled".into();
        }
        _ => {}
    }
    let resumed = resume(&mut parked, continuations);
    let mut answer = if parked.is_sfn() {
        tokens.land(&parked)
    } else {
        match forward(&parked) {
            Ok(answer) => answer,
            Err(error) => panic!("{error}"),
        }
    };
    continuations.note_probe(&parked, &answer);
    if parked.is_ssm() {
        // The SSM store reads the service's clock from this header.
        let date = DateTime::from_millis(store_now)
            .fmt(Format::HttpDate)
            .unwrap_or_default();
        answer.set_header("date", date);
    }
    if let Some(seen) = &resumed {
        drop_seen(&mut answer, seen);
    }
    let mut note = format!("{}", answer.status);
    if fate == Fate::ShortPage && is_listing(&parked) && answer.status == 200 {
        // A listing that ends early without a token stands for a stale
        // read, stronger than documented (it may hide items of any age): it
        // is kept to generation listings, whose reads guard against it; a
        // release's listing of its owner markers is only cut with a token.
        let request: Value = serde_json::from_slice(&parked.body).unwrap_or_default();
        let may_end = !request["Path"]
            .as_str()
            .unwrap_or_default()
            .contains("/.owners");
        note = shorten(
            &mut answer,
            (resumed.unwrap_or_default(), may_end),
            continuations,
            draws,
        );
    }
    match fate {
        Fate::AnswerLost | Fate::CrashAfter => {
            parked.answer(Err(ConnectorError::timeout("the answer was lost".into())));
            format!("landed ({note}), answer lost")
        }
        _ => {
            parked.answer(answer.into_response());
            format!("answered {note}")
        }
    }
}

pub fn is_listing(parked: &Parked) -> bool {
    parked.target() == Some("AmazonSSM.GetParametersByPath")
}

/// A request that carries one of our tokens goes to the server with the
/// server's own; the names to leave out are returned.
fn resume(parked: &mut Parked, continuations: &mut Continuations) -> Option<BTreeSet<String>> {
    if !is_listing(parked) {
        return None;
    }
    let mut body: Value = serde_json::from_slice(&parked.body).ok()?;
    let token = body["NextToken"].as_str()?.to_owned();
    // A token may be sent again (the SDK's retry of a page whose answer was lost).
    let (server_token, seen) = continuations.pending.get(&token).cloned()?;
    match server_token {
        Some(server_token) => body["NextToken"] = Value::String(server_token),
        None => {
            if let Some(object) = body.as_object_mut() {
                object.remove("NextToken");
            }
        }
    }
    parked.body = serde_json::to_vec(&body).ok()?;
    Some(seen)
}

fn drop_seen(answer: &mut Answer, seen: &BTreeSet<String>) {
    let Ok(mut body) = serde_json::from_slice::<Value>(&answer.body) else {
        return;
    };
    if let Some(items) = body["Parameters"].as_array_mut() {
        items.retain(|item| {
            !item["Name"]
                .as_str()
                .is_some_and(|name| seen.contains(name))
        });
    }
    answer.body = serde_json::to_vec(&body).unwrap_or_default();
}

/// Keeps a drawn number of the page's items and hands out a token for the rest.
fn shorten(
    answer: &mut Answer,
    (mut seen, may_end): (BTreeSet<String>, bool),
    continuations: &mut Continuations,
    draws: &mut Draws,
) -> String {
    let Ok(mut body) = serde_json::from_slice::<Value>(&answer.body) else {
        return "200".into();
    };
    let items = body["Parameters"].as_array().cloned().unwrap_or_default();
    // None, as often as some: a read that lists finds nothing at all.
    let keep = if draws.chance(50) {
        0
    } else {
        draws.below(items.len() as u64 + 1) as usize
    };
    seen.extend(
        items[..keep]
            .iter()
            .filter_map(|item| item["Name"].as_str().map(str::to_owned)),
    );
    body["Parameters"] = Value::Array(items[..keep].to_vec());
    if may_end && draws.chance(50) {
        // The listing ends here, the rest (and later pages) unsaid.
        if let Some(object) = body.as_object_mut() {
            object.remove("NextToken");
        }
        answer.body = serde_json::to_vec(&body).unwrap_or_default();
        return format!("200, short last page: {keep} of {} items", items.len());
    }
    continuations.next += 1;
    let ours = format!("explorer-{}", continuations.next);
    let server_token = body["NextToken"].as_str().map(str::to_owned);
    continuations
        .pending
        .insert(ours.clone(), (server_token, seen));
    body["NextToken"] = Value::String(ours);
    answer.body = serde_json::to_vec(&body).unwrap_or_default();
    format!("200, short page: {keep} of {} items", items.len())
}
