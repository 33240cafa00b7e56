//! The Nexmark benchmark on squall: an event generator and the queries.
//!
//! # Overview
//! - [`model`]: the event model as a plain Rust library:
//!   [`Generator::event`](model::Generator::event) computes event `id`
//!   (a person, an auction or a bid) from the id alone, so tests compute
//!   their reference from the same code.
//! - [`NexmarkSpout`] (`nexmark::Generator`) emits the events on three
//!   streams, `person`, `auction` and `bid` (fields
//!   [`model::PERSON_FIELDS`], [`model::AUCTION_FIELDS`],
//!   [`model::BID_FIELDS`]): one stream per kind, so a query subscribes to
//!   the kinds it reads and a bid-only query never sees people or auctions.
//! - The queries, one bolt each (two for q4):
//!
//!   | query | bolt | kind | output |
//!   | --- | --- | --- | --- |
//!   | q0 pass-through | [`PassThrough`] | basic | the bid |
//!   | q1 currency conversion | [`CurrencyConversion`] | basic | the bid, `price * 908 / 1000` |
//!   | q2 selection | [`Selection`] | basic | `(auction, price)` where `auction % 123 == 0` |
//!   | q3 local item suggestion | [`LocalItemSuggestion`] | basic, keyed state | `(name, city, state, id)` |
//!   | q4 average price per category | [`WinningBids`] → [`AveragePrice`] | basic, keyed state → windowed | `(category, average, auctions, window_end)` |
//!   | q5 hot items | [`HotItems`] | windowed (sliding) | `(auction, bids, window_end)` |
//!   | q7 highest bid | [`HighestBid`] | windowed (tumbling) | `(auction, price, bidder, date_time, window_end)` |
//!   | q8 monitor new users | [`NewUsers`] | windowed (tumbling) | `(id, name, window_start)` |
//!
//!   [`Sink`] drops what it gets: every query topology ends in it.
//! - Events through Kafka: [`Encode`] turns each event into one compact
//!   record value ([`codec`]), [`Decode`] turns the value back into the
//!   generator's tuple on the generator's stream, so a query reads events
//!   from a `kafka::KafkaSpout` unchanged
//!   (`topologies/nexmark/load-kafka.toml`, `topologies/nexmark/kafka/`).
//!
//! The windowed queries run on the host's event-time windows
//! (`timestamp_field = "date_time"`): the generator's tuples leave each
//! task in event-time order, so with one generator task no tuple is late.
//! `topologies/nexmark/qN.toml` runs each query; docs/nexmark.md says what
//! each computes, exactly.
//!
//! # Example
//! ```toml
//! [plugins]
//! nexmark = "../../target/release/libsquall_nexmark.so"
//!
//! [spouts.events]
//! component = "nexmark::Generator"
//! config = { events_per_sec = 10000 }
//!
//! [bolts.q2]
//! component = "nexmark::Q2Selection"
//! inputs = [{ from = "events", stream = "bid" }]
//!
//! [bolts.sink]
//! component = "nexmark::Sink"
//! inputs = [{ from = "q2" }]
//! ```

#![warn(missing_docs)]

mod broker;
pub mod codec;
pub mod model;
mod q3;
mod q4;
mod queries;
mod spout;
mod windows;

use serde::Deserialize;
use squall_plugin_api::{InputDecl, Result, Tuple};

use model::Kind;

pub use broker::{Decode, Encode};
pub use q3::LocalItemSuggestion;
pub use q4::{AveragePrice, WinningBids, WINNING_BID_FIELDS};
pub use queries::{dollars_to_euros, CurrencyConversion, PassThrough, Selection, Sink};
pub use spout::NexmarkSpout;
pub use windows::{HighestBid, HotItems, NewUsers};

squall_plugin_api::export_plugin! {
    spouts: [NexmarkSpout],
    basic_bolts: [PassThrough, CurrencyConversion, Selection, LocalItemSuggestion, WinningBids, Sink, Encode, Decode],
    windowed_bolts: [AveragePrice, HotItems, HighestBid, NewUsers],
}

/// A config with no keys (`deny_unknown_fields` refuses any).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Empty {}

/// The kind of event an input carries, told by its fields.
fn input_kind(input: &InputDecl) -> Option<Kind> {
    [Kind::Person, Kind::Auction, Kind::Bid]
        .into_iter()
        .find(|k| input.fields.iter().map(|f| f.as_str()).eq(k.fields().iter().copied()))
}

/// Refuses inputs that are not generator streams of the `allowed` kinds,
/// or that leave out one of the `required` kinds. The query bolts read
/// their inputs by position, so the fields must be the generator's, in
/// its order.
fn check_kinds(inputs: &[InputDecl], allowed: &[Kind], required: &[Kind]) -> Result<()> {
    let names = |kinds: &[Kind]| kinds.iter().map(|k| k.stream()).collect::<Vec<_>>().join(" and ");
    for input in inputs {
        if !input_kind(input).is_some_and(|k| allowed.contains(&k)) {
            return Err(format!(
                "input from \"{}\" stream \"{}\" is not a generator {} stream (its fields: {})",
                input.component,
                input.stream,
                names(allowed),
                input.fields.iter().map(|f| f.as_str()).collect::<Vec<_>>().join(", ")
            )
            .into());
        }
    }
    for kind in required {
        if !inputs.iter().any(|i| input_kind(i) == Some(*kind)) {
            return Err(
                format!("it needs an input of the generator's {} stream", kind.stream()).into()
            );
        }
    }
    Ok(())
}

/// Refuses an input of `kind` that is not grouped by `field` alone (nor
/// global): the join's state is keyed by it.
fn check_grouped(inputs: &[InputDecl], kind: Kind, field: &str) -> Result<()> {
    for input in inputs.iter().filter(|i| input_kind(i) == Some(kind)) {
        let by_field = input.grouping.as_str() == "fields"
            && input.grouping_fields.len() == 1
            && input.grouping_fields[0].as_str() == field;
        if !by_field && input.grouping.as_str() != "global" {
            return Err(format!(
                "input from \"{}\" stream \"{}\" uses grouping \"{}\"; the join needs grouping = {{ fields = [\"{field}\"] }}",
                input.component, input.stream, input.grouping
            )
            .into());
        }
    }
    Ok(())
}

/// The unsigned integer at position `i` of `tuple`.
#[inline]
fn u64_at(tuple: &Tuple<'_>, i: usize) -> Result<u64> {
    match tuple.get(i).and_then(squall_plugin_api::Value::as_u64) {
        Some(v) => Ok(v),
        None => {
            Err(format!("expected an unsigned integer in field {i} of {:?}", tuple.values()).into())
        }
    }
}

/// The string at position `i` of `tuple`.
#[inline]
fn str_at<'a>(tuple: &Tuple<'a>, i: usize) -> Result<&'a str> {
    match tuple.get(i).and_then(squall_plugin_api::Value::as_str) {
        Some(v) => Ok(v),
        None => Err(format!("expected a string in field {i} of {:?}", tuple.values()).into()),
    }
}
