//! The stateless queries: q0 (pass-through), q1 (currency conversion), q2
//! (selection), and the null sink every query topology ends in.

use serde::Deserialize;
use squall_plugin_api::prelude::*;

use crate::model::{bid, Kind, BID_FIELDS};
use crate::{check_kinds, u64_at, Empty};

/// Nexmark q0: every bid, unchanged (`SELECT * FROM bid`, the cost of the
/// pipeline itself). Output: the bid's fields.
#[derive(Debug, Default)]
pub struct PassThrough;

impl BasicBolt for PassThrough {
    const NAME: &'static str = "Q0PassThrough";
    const DESCRIPTION: &'static str = "q0: emits every bid unchanged";
    const CONFIG_KEYS: Option<&'static [ConfigKey]> = Some(&[]);
    const EMITS: &'static [&'static str] = &["default"];

    fn declare_outputs(outputs: &mut OutputDeclarer) {
        outputs.declare(&BID_FIELDS);
    }

    fn check_inputs(_config: &ComponentConfig<'_>, inputs: &[InputDecl]) -> Result<()> {
        check_kinds(inputs, &[Kind::Bid], &[Kind::Bid])
    }

    fn new(config: &ComponentConfig<'_>) -> Result<Self> {
        config.parse::<Empty>()?;
        Ok(Self)
    }

    fn execute(&mut self, input: &Tuple<'_>, collector: &mut BasicCollector<'_>) -> Result<()> {
        collector.emit(input.values());
        Ok(())
    }
}

/// Nexmark q1: every bid with its price converted from dollars to euros.
///
/// Exact semantics: `price` (cents) becomes `price * 908 / 1000` in
/// integer arithmetic, rounded down (Nexmark's `0.908 * price`; no float
/// is involved, so a reference computes the same value). Output: the bid's
/// fields, with `price` in euro cents.
#[derive(Debug, Default)]
pub struct CurrencyConversion;

impl BasicBolt for CurrencyConversion {
    const NAME: &'static str = "Q1CurrencyConversion";
    const DESCRIPTION: &'static str =
        "q1: every bid with price * 908 / 1000 (dollars to euros, rounded down)";
    const CONFIG_KEYS: Option<&'static [ConfigKey]> = Some(&[]);
    const EMITS: &'static [&'static str] = &["default"];

    fn declare_outputs(outputs: &mut OutputDeclarer) {
        outputs.declare(&BID_FIELDS);
    }

    fn check_inputs(_config: &ComponentConfig<'_>, inputs: &[InputDecl]) -> Result<()> {
        check_kinds(inputs, &[Kind::Bid], &[Kind::Bid])
    }

    fn new(config: &ComponentConfig<'_>) -> Result<Self> {
        config.parse::<Empty>()?;
        Ok(Self)
    }

    fn execute(&mut self, input: &Tuple<'_>, collector: &mut BasicCollector<'_>) -> Result<()> {
        let v = input.values();
        if v.len() != BID_FIELDS.len() {
            return Err("q1 expects bid tuples".into());
        }
        let price = u64_at(input, bid::PRICE)?;
        collector.emit(&[
            v[bid::AUCTION].clone(),
            v[bid::BIDDER].clone(),
            Value::U64(dollars_to_euros(price)),
            v[bid::CHANNEL].clone(),
            v[bid::DATE_TIME].clone(),
        ]);
        Ok(())
    }
}

/// q1's conversion: `cents * 908 / 1000`, rounded down (in 128 bits, so
/// no price overflows).
#[inline]
pub fn dollars_to_euros(cents: u64) -> u64 {
    (u128::from(cents) * 908 / 1000) as u64
}

/// The config of [`Selection`].
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SelectionConfig {
    #[serde(default = "default_modulus")]
    modulus: u64,
}

fn default_modulus() -> u64 {
    123
}

/// Nexmark q2: the bids on some auctions: `SELECT auction, price FROM bid
/// WHERE auction % 123 = 0` (`modulus` sets the 123). Output: `(auction,
/// price)`.
#[derive(Debug)]
pub struct Selection {
    modulus: u64,
}

impl BasicBolt for Selection {
    const NAME: &'static str = "Q2Selection";
    const DESCRIPTION: &'static str =
        "q2: (auction, price) of the bids whose auction % modulus == 0";
    const CONFIG_KEYS: Option<&'static [ConfigKey]> = Some(&[ConfigKey::optional(
        "modulus",
        KeyKind::Integer,
        "123",
        "keep the bids whose auction id is a multiple of this",
    )]);
    const EMITS: &'static [&'static str] = &["default"];

    fn declare_outputs(outputs: &mut OutputDeclarer) {
        outputs.declare(&["auction", "price"]);
    }

    fn check_inputs(_config: &ComponentConfig<'_>, inputs: &[InputDecl]) -> Result<()> {
        check_kinds(inputs, &[Kind::Bid], &[Kind::Bid])
    }

    fn new(config: &ComponentConfig<'_>) -> Result<Self> {
        let config: SelectionConfig = config.parse()?;
        if config.modulus == 0 {
            return Err("modulus must be at least 1".into());
        }
        Ok(Self { modulus: config.modulus })
    }

    fn execute(&mut self, input: &Tuple<'_>, collector: &mut BasicCollector<'_>) -> Result<()> {
        let auction = u64_at(input, bid::AUCTION)?;
        if auction.is_multiple_of(self.modulus) {
            let price = u64_at(input, bid::PRICE)?;
            collector.emit(&[Value::U64(auction), Value::U64(price)]);
        }
        Ok(())
    }
}

/// Drops what it receives: the end of every query topology, so that a run
/// measures the query and not an output.
#[derive(Debug, Default)]
pub struct Sink;

impl BasicBolt for Sink {
    const NAME: &'static str = "Sink";
    const DESCRIPTION: &'static str = "drops every tuple (the end of a query topology)";
    const CONFIG_KEYS: Option<&'static [ConfigKey]> = Some(&[]);

    fn new(config: &ComponentConfig<'_>) -> Result<Self> {
        config.parse::<Empty>()?;
        Ok(Self)
    }

    fn execute(&mut self, _input: &Tuple<'_>, _collector: &mut BasicCollector<'_>) -> Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use squall_plugin_api::testing::{check_config_keys, Recorder};

    fn bid_tuple(values: &[Value]) -> Tuple<'_> {
        Tuple::new(values, &[], "events", "bid", 0, Anchor(1))
    }

    #[test]
    fn q1_converts_in_integers_and_q2_selects_multiples() {
        assert_eq!(dollars_to_euros(1000), 908);
        assert_eq!(dollars_to_euros(1), 0);
        assert_eq!(dollars_to_euros(1999), 1815); // 1815.092
        let values =
            [Value::U64(246), Value::U64(7), Value::U64(1000), Value::from("Apple"), Value::U64(5)];
        let mut recorder = Recorder::default();
        {
            let mut collector = BasicCollector::new(recorder.output());
            CurrencyConversion.execute(&bid_tuple(&values), &mut collector).unwrap();
            let mut q2 = Selection::new(&ComponentConfig::new("")).unwrap();
            q2.execute(&bid_tuple(&values), &mut collector).unwrap();
            let mut other = values.clone();
            other[0] = Value::U64(247);
            q2.execute(&bid_tuple(&other), &mut collector).unwrap();
        }
        assert_eq!(recorder.emitted[0].values[2], Value::U64(908));
        assert_eq!(recorder.emitted[1].values, [Value::U64(246), Value::U64(1000)]);
        assert_eq!(recorder.emitted.len(), 2);
    }

    #[test]
    fn the_config_keys_match_the_config_struct() {
        check_config_keys::<SelectionConfig>(Selection::CONFIG_KEYS, "").unwrap();
        assert!(Selection::new(&ComponentConfig::new("modulus = 0")).is_err());
        assert!(PassThrough::new(&ComponentConfig::new("x = 1")).is_err());
    }
}
