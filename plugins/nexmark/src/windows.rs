//! The windowed queries on the host's event-time windows: q5 (hot items),
//! q7 (highest bid) and q8 (monitor new users).

use rustc_hash::{FxHashMap, FxHashSet};
use squall_plugin_api::prelude::*;

use crate::model::{auction, bid, person, Kind};
use crate::{check_kinds, str_at, u64_at, Empty};

/// Nexmark q5: the hot items, the auction(s) with the most bids in each
/// window.
///
/// Input: `bid`, in a sliding event-time window (Flink's q5: `length =
/// "10s"`, `slide = "2s"`, `timestamp_field = "date_time"`). For each
/// window, emits `(auction, bids, window_end)` for every auction whose bid
/// count in the window equals the window's largest, by auction id.
///
/// The counts are kept as the window slides: the bids that entered are
/// added and the bids that left are taken away, so a window costs what
/// slid, not its length (checked against the window's size each time, and
/// counted again from the window when they differ, as after a restore).
#[derive(Debug, Default)]
pub struct HotItems {
    counts: FxHashMap<u64, u64>,
    total: usize,
    hot: Vec<u64>,
}

impl HotItems {
    fn add(&mut self, tuple: &Tuple<'_>) -> Result<()> {
        *self.counts.entry(u64_at(tuple, bid::AUCTION)?).or_default() += 1;
        self.total += 1;
        Ok(())
    }
}

impl WindowedBolt for HotItems {
    const NAME: &'static str = "Q5HotItems";
    const DESCRIPTION: &'static str =
        "q5: (auction, bids, window_end) of the auction(s) with the most bids in each window";
    const CONFIG_KEYS: Option<&'static [ConfigKey]> = Some(&[]);
    const EMITS: &'static [&'static str] = &["default"];

    fn declare_outputs(outputs: &mut OutputDeclarer) {
        outputs.declare(&["auction", "bids", "window_end"]);
    }

    fn check_inputs(_config: &ComponentConfig<'_>, inputs: &[InputDecl]) -> Result<()> {
        check_kinds(inputs, &[Kind::Bid], &[Kind::Bid])
    }

    fn new(config: &ComponentConfig<'_>) -> Result<Self> {
        config.parse::<Empty>()?;
        Ok(Self::default())
    }

    fn execute(&mut self, window: &Window<'_>, collector: &mut BasicCollector<'_>) -> Result<()> {
        for t in window.new_tuples() {
            self.add(t)?;
        }
        for t in window.expired() {
            let auction = u64_at(t, bid::AUCTION)?;
            if let Some(count) = self.counts.get_mut(&auction) {
                *count -= 1;
                self.total -= 1;
                if *count == 0 {
                    self.counts.remove(&auction);
                }
            }
        }
        if self.total != window.tuples().len() {
            self.counts.clear();
            self.total = 0;
            for t in window.tuples() {
                self.add(t)?;
            }
        }
        let Some(&most) = self.counts.values().max() else { return Ok(()) };
        self.hot.clear();
        self.hot.extend(self.counts.iter().filter(|(_, &c)| c == most).map(|(&a, _)| a));
        self.hot.sort_unstable();
        let end = window.end_millis();
        for &auction in &self.hot {
            collector.emit(&[Value::U64(auction), Value::U64(most), Value::U64(end)]);
        }
        Ok(())
    }
}

/// Nexmark q7: the highest bid of each window.
///
/// Input: `bid`, in a tumbling event-time window (Flink's q7: `length =
/// "10s"`, `timestamp_field = "date_time"`). For each window, emits
/// `(auction, price, bidder, date_time, window_end)` of every bid whose
/// price is the window's highest, in window order.
#[derive(Debug, Default)]
pub struct HighestBid;

impl WindowedBolt for HighestBid {
    const NAME: &'static str = "Q7HighestBid";
    const DESCRIPTION: &'static str =
        "q7: (auction, price, bidder, date_time, window_end) of the highest bid(s) of each window";
    const CONFIG_KEYS: Option<&'static [ConfigKey]> = Some(&[]);
    const EMITS: &'static [&'static str] = &["default"];

    fn declare_outputs(outputs: &mut OutputDeclarer) {
        outputs.declare(&["auction", "price", "bidder", "date_time", "window_end"]);
    }

    fn check_inputs(_config: &ComponentConfig<'_>, inputs: &[InputDecl]) -> Result<()> {
        check_kinds(inputs, &[Kind::Bid], &[Kind::Bid])
    }

    fn new(config: &ComponentConfig<'_>) -> Result<Self> {
        config.parse::<Empty>()?;
        Ok(Self)
    }

    fn execute(&mut self, window: &Window<'_>, collector: &mut BasicCollector<'_>) -> Result<()> {
        let mut most = None;
        for t in window.tuples() {
            let price = u64_at(t, bid::PRICE)?;
            most = Some(most.map_or(price, |m: u64| m.max(price)));
        }
        let Some(most) = most else { return Ok(()) };
        let end = window.end_millis();
        for t in window.tuples() {
            if u64_at(t, bid::PRICE)? == most {
                let v = t.values();
                collector.emit(&[
                    v[bid::AUCTION].clone(),
                    Value::U64(most),
                    v[bid::BIDDER].clone(),
                    v[bid::DATE_TIME].clone(),
                    Value::U64(end),
                ]);
            }
        }
        Ok(())
    }
}

/// Nexmark q8: monitor new users, the people who opened an auction in the
/// window in which they registered.
///
/// Inputs: `person` and `auction`, in one tumbling event-time window
/// (Flink's q8: `length = "10s"`, `timestamp_field = "date_time"`). For each
/// window, emits `(id, name, window_start)` of every person of the window
/// who is the seller of an auction of the same window, by id (once per
/// person and window, however many auctions).
#[derive(Debug, Default)]
pub struct NewUsers {
    sellers: FxHashSet<u64>,
    people: Vec<(u64, Value)>,
}

impl WindowedBolt for NewUsers {
    const NAME: &'static str = "Q8NewUsers";
    const DESCRIPTION: &'static str =
        "q8: (id, name, window_start) of the people who sell in the window they registered in";
    const CONFIG_KEYS: Option<&'static [ConfigKey]> = Some(&[]);
    const EMITS: &'static [&'static str] = &["default"];

    fn declare_outputs(outputs: &mut OutputDeclarer) {
        outputs.declare(&["id", "name", "window_start"]);
    }

    fn check_inputs(_config: &ComponentConfig<'_>, inputs: &[InputDecl]) -> Result<()> {
        check_kinds(inputs, &[Kind::Person, Kind::Auction], &[Kind::Person, Kind::Auction])
    }

    fn new(config: &ComponentConfig<'_>) -> Result<Self> {
        config.parse::<Empty>()?;
        Ok(Self::default())
    }

    fn execute(&mut self, window: &Window<'_>, collector: &mut BasicCollector<'_>) -> Result<()> {
        self.sellers.clear();
        self.people.clear();
        for t in window.tuples() {
            match t.values().len() {
                7 => {
                    str_at(t, person::NAME)?;
                    let name = t.values()[person::NAME].clone();
                    self.people.push((u64_at(t, person::ID)?, name));
                }
                9 => {
                    self.sellers.insert(u64_at(t, auction::SELLER)?);
                }
                n => return Err(format!("q8 expects people and auctions, not {n} values").into()),
            }
        }
        self.people.sort_unstable_by_key(|(id, _)| *id);
        self.people.dedup_by_key(|(id, _)| *id);
        let start = window.start_millis();
        for (id, name) in &self.people {
            if self.sellers.contains(id) {
                collector.emit(&[Value::U64(*id), name.clone(), Value::U64(start)]);
            }
        }
        Ok(())
    }
}
