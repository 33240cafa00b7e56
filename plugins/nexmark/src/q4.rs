//! Nexmark q4: the average closing price per category: winning bids
//! ([`WinningBids`]), then their average per category and window
//! ([`AveragePrice`]).

use std::collections::BTreeSet;

use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};
use squall_plugin_api::prelude::*;

use crate::model::{auction, bid, Kind};
use crate::{check_grouped, check_kinds, u64_at, Empty};

/// The fields of [`WinningBids`]'s stream, in order.
pub const WINNING_BID_FIELDS: [&str; 4] = ["auction", "category", "price", "date_time"];

/// An auction still open, as [`WinningBids`] keeps it.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Open {
    category: u64,
    start: u64,
    expires: u64,
    reserve: u64,
    /// The highest qualifying price so far (0: none).
    best: u64,
}

/// The winning bid of every auction, when it closes (Beam's
/// `WinningBids`, the first half of q4 and q6).
///
/// A bid counts for an auction when its `date_time` lies in the auction's
/// `[date_time, expires)` and its price is at least the auction's
/// reserve; the winning bid is the highest such price. An auction closes
/// when the task's watermark, the largest `date_time` of any auction or
/// bid it has executed, reaches its `expires`: it then emits `(auction,
/// category, price, date_time)` with `date_time` = the auction's
/// `expires` (its event time), or nothing when no bid counted. Auctions
/// that close at one watermark come out in `(expires, auction)` order.
///
/// Inputs: `auction` grouped by `id`, `bid` grouped by `auction`. The open
/// auctions are a [`KeyValueState`] keyed by auction id and the watermark a
/// [`ValueState`] (both durable with `[state]`). With one task the
/// watermark is the stream's; with several, each task's own, so an
/// auction may close a little later than with one.
#[derive(Debug)]
pub struct WinningBids {
    open: KeyValueState<Open>,
    watermark: ValueState<u64>,
    /// `(expires, auction)` of every open auction: what closes next.
    closing: BTreeSet<(u64, u64)>,
}

fn max_merge(a: &mut u64, b: u64) {
    *a = (*a).max(b);
}

impl WinningBids {
    fn advance(&mut self, time: u64, collector: &mut BasicCollector<'_>) {
        if time <= *self.watermark.get() {
            return;
        }
        self.watermark.set(time);
        while let Some(&(expires, id)) = self.closing.first() {
            if expires > time {
                break;
            }
            self.closing.pop_first();
            if let Some(open) = self.open.remove(&Value::U64(id)) {
                if open.best > 0 {
                    collector.emit(&[
                        Value::U64(id),
                        Value::U64(open.category),
                        Value::U64(open.best),
                        Value::U64(expires),
                    ]);
                }
            }
        }
    }
}

impl BasicBolt for WinningBids {
    const NAME: &'static str = "Q4WinningBids";
    const DESCRIPTION: &'static str =
        "q4/q6: (auction, category, price, date_time = expires) of each auction's winning bid, when it closes";
    const CONFIG_KEYS: Option<&'static [ConfigKey]> = Some(&[]);
    const STORES: Option<&'static [StoreSpec]> =
        Some(&[StoreSpec::keyed("open"), StoreSpec::value("watermark")]);
    const EMITS: &'static [&'static str] = &["default"];

    fn declare_outputs(outputs: &mut OutputDeclarer) {
        outputs.declare(&WINNING_BID_FIELDS);
    }

    fn check_inputs(_config: &ComponentConfig<'_>, inputs: &[InputDecl]) -> Result<()> {
        check_kinds(inputs, &[Kind::Auction, Kind::Bid], &[Kind::Auction, Kind::Bid])?;
        check_grouped(inputs, Kind::Auction, "id")?;
        check_grouped(inputs, Kind::Bid, "auction")
    }

    fn new(config: &ComponentConfig<'_>) -> Result<Self> {
        config.parse::<Empty>()?;
        Ok(Self {
            open: KeyValueState::new("open"),
            watermark: ValueState::new("watermark", max_merge),
            closing: BTreeSet::new(),
        })
    }

    fn prepare(&mut self, _context: &TaskContext) -> Result<()> {
        // After a restore: what closes next, from the open auctions.
        self.closing =
            self.open.iter().filter_map(|(k, o)| k.as_u64().map(|id| (o.expires, id))).collect();
        Ok(())
    }

    fn execute(&mut self, input: &Tuple<'_>, collector: &mut BasicCollector<'_>) -> Result<()> {
        let time = match input.values().len() {
            9 => {
                let id = u64_at(input, auction::ID)?;
                let open = Open {
                    category: u64_at(input, auction::CATEGORY)?,
                    start: u64_at(input, auction::DATE_TIME)?,
                    expires: u64_at(input, auction::EXPIRES)?,
                    reserve: u64_at(input, auction::RESERVE)?,
                    best: 0,
                };
                self.closing.insert((open.expires, id));
                let start = open.start;
                self.open.insert(Value::U64(id), open);
                start
            }
            5 => {
                let key = input.get(bid::AUCTION).ok_or("a bid's auction")?;
                let price = u64_at(input, bid::PRICE)?;
                let time = u64_at(input, bid::DATE_TIME)?;
                let counts = self.open.get(key).is_some_and(|o| {
                    (o.start..o.expires).contains(&time) && price >= o.reserve && price > o.best
                });
                if counts {
                    if let Some(open) = self.open.get_mut(key) {
                        open.best = price;
                    }
                }
                time
            }
            n => return Err(format!("q4 expects auctions and bids, not {n} values").into()),
        };
        self.advance(time, collector);
        Ok(())
    }

    fn stores(&mut self) -> Stores<'_> {
        Stores::none().with(&mut self.open).with(&mut self.watermark)
    }
}

/// The average winning price per category of each window (the second half
/// of q4).
///
/// Input: [`WinningBids`]'s stream `(auction, category, price,
/// date_time)`, in a time window on `timestamp_field = "date_time"`. For
/// each window and each category with winning bids in it, emits
/// `(category, average, auctions, window_end)`, by category: `average` is
/// the sum of the prices divided by `auctions`, rounded down (integer
/// cents).
#[derive(Debug, Default)]
pub struct AveragePrice {
    sums: FxHashMap<u64, (u64, u64)>,
}

impl WindowedBolt for AveragePrice {
    const NAME: &'static str = "Q4AveragePrice";
    const DESCRIPTION: &'static str =
        "q4: (category, average, auctions, window_end) of the winning bids of each window";
    const CONFIG_KEYS: Option<&'static [ConfigKey]> = Some(&[]);
    const INPUT_FIELDS: &'static [&'static str] = &["category", "price", "date_time"];
    const EMITS: &'static [&'static str] = &["default"];

    fn declare_outputs(outputs: &mut OutputDeclarer) {
        outputs.declare(&["category", "average", "auctions", "window_end"]);
    }

    fn check_inputs(_config: &ComponentConfig<'_>, inputs: &[InputDecl]) -> Result<()> {
        for input in inputs {
            if !input.fields.iter().map(|f| f.as_str()).eq(WINNING_BID_FIELDS) {
                return Err(format!(
                    "input from \"{}\" must be Q4WinningBids' stream ({})",
                    input.component,
                    WINNING_BID_FIELDS.join(", ")
                )
                .into());
            }
        }
        Ok(())
    }

    fn new(config: &ComponentConfig<'_>) -> Result<Self> {
        config.parse::<Empty>()?;
        Ok(Self::default())
    }

    fn execute(&mut self, window: &Window<'_>, collector: &mut BasicCollector<'_>) -> Result<()> {
        self.sums.clear();
        for t in window.tuples() {
            let category = u64_at(t, 1)?;
            let price = u64_at(t, 2)?;
            let entry = self.sums.entry(category).or_default();
            entry.0 += price;
            entry.1 += 1;
        }
        let mut categories: Vec<(u64, (u64, u64))> = self.sums.drain().collect();
        categories.sort_unstable();
        let end = window.end_millis();
        for (category, (sum, count)) in categories {
            collector.emit(&[
                Value::U64(category),
                Value::U64(sum / count),
                Value::U64(count),
                Value::U64(end),
            ]);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use squall_plugin_api::testing::Recorder;

    fn auction_values(id: u64, start: u64, expires: u64, reserve: u64) -> Vec<Value> {
        let mut v = vec![Value::U64(id), Value::from("item"), Value::from("text"), Value::U64(1)];
        v.extend([Value::U64(reserve), Value::U64(start), Value::U64(expires)]);
        v.extend([Value::U64(1000), Value::U64(12)]);
        v
    }

    fn bid_values(auction: u64, price: u64, time: u64) -> Vec<Value> {
        vec![
            Value::U64(auction),
            Value::U64(1001),
            Value::U64(price),
            Value::from("Apple"),
            Value::U64(time),
        ]
    }

    #[test]
    fn a_bid_counts_from_the_start_until_before_the_expiry_and_from_the_reserve() {
        let mut bolt = WinningBids::new(&ComponentConfig::new("")).unwrap();
        bolt.prepare(&TaskContext::builder("winning").build()).unwrap();
        let inputs = [
            auction_values(7, 100, 200, 10),
            auction_values(8, 100, 150, 10),
            bid_values(7, 5, 120),   // under the reserve
            bid_values(7, 40, 100),  // at the start: counts
            bid_values(7, 30, 150),  // lower; closes auction 8, which had no bid
            bid_values(7, 99, 200),  // at the expiry: too late; closes auction 7
            bid_values(7, 500, 210), // after it closed
        ];
        let mut recorder = Recorder::default();
        {
            let mut collector = BasicCollector::new(recorder.output());
            for values in &inputs {
                let stream = if values.len() == 9 { "auction" } else { "bid" };
                let tuple = Tuple::new(values, &[], "events", stream, 0, Anchor(1));
                bolt.execute(&tuple, &mut collector).unwrap();
            }
        }
        let out: Vec<Vec<Value>> = recorder.emitted.iter().map(|e| e.values.clone()).collect();
        assert_eq!(out, [[Value::U64(7), Value::U64(12), Value::U64(40), Value::U64(200)]]);
        assert!(bolt.open.is_empty() && bolt.closing.is_empty());
    }
}
