//! Nexmark q3: local item suggestion, a join of people and auctions kept in
//! keyed state.

use serde::{Deserialize, Serialize};
use squall_plugin_api::prelude::*;

use crate::model::{auction, person, Kind};
use crate::{check_grouped, check_kinds, str_at, u64_at};

/// The config of [`LocalItemSuggestion`].
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Q3Config {
    #[serde(default = "default_states")]
    states: Vec<String>,
    #[serde(default = "default_category")]
    category: u64,
}

fn default_states() -> Vec<String> {
    ["OR", "ID", "CA"].map(String::from).to_vec()
}

fn default_category() -> u64 {
    10
}

/// What the join keeps for one person id (the store's key).
#[derive(Debug, Default, Serialize, Deserialize)]
struct Seller {
    /// The person, once seen, when they live in one of the states.
    local: Option<Local>,
    /// True once the person was seen and lives elsewhere: their auctions
    /// never match.
    elsewhere: bool,
    /// Auctions of the category whose seller was not seen yet (a seller
    /// id may name a person created a little later).
    waiting: Vec<u64>,
}

#[derive(Debug, Serialize, Deserialize)]
struct Local {
    name: String,
    city: String,
    state: String,
}

/// Nexmark q3: who sells in category 10 in Oregon, Idaho or California.
///
/// `SELECT P.name, P.city, P.state, A.id FROM auction A, person P WHERE
/// A.seller = P.id AND (P.state = 'OR' OR P.state = 'ID' OR P.state =
/// 'CA') AND A.category = 10`, as an unbounded join: every matching
/// (person, auction) pair is emitted once, as `(name, city, state, id)`,
/// whichever of the two arrives first.
///
/// Inputs: the `person` stream grouped by `id` and the `auction` stream
/// grouped by `seller`, so a person and their auctions meet in one task.
/// The state is a [`KeyValueState`] keyed by person id (durable with
/// `[state]`): the person (name, city and state when local, else a mark)
/// and the auctions that arrived before their seller.
#[derive(Debug)]
pub struct LocalItemSuggestion {
    states: Vec<String>,
    category: u64,
    sellers: KeyValueState<Seller>,
}

impl BasicBolt for LocalItemSuggestion {
    const NAME: &'static str = "Q3LocalItemSuggestion";
    const DESCRIPTION: &'static str =
        "q3: (name, city, state, auction) of people in OR/ID/CA selling in category 10";
    const CONFIG_KEYS: Option<&'static [ConfigKey]> = Some(&[
        ConfigKey::optional(
            "states",
            KeyKind::Array,
            "[\"OR\", \"ID\", \"CA\"]",
            "the sellers' states",
        ),
        ConfigKey::optional("category", KeyKind::Integer, "10", "the auctions' category"),
    ]);
    const STORES: Option<&'static [StoreSpec]> = Some(&[StoreSpec::keyed("sellers")]);
    const EMITS: &'static [&'static str] = &["default"];

    fn declare_outputs(outputs: &mut OutputDeclarer) {
        outputs.declare(&["name", "city", "state", "id"]);
    }

    fn check_inputs(_config: &ComponentConfig<'_>, inputs: &[InputDecl]) -> Result<()> {
        check_kinds(inputs, &[Kind::Person, Kind::Auction], &[Kind::Person, Kind::Auction])?;
        check_grouped(inputs, Kind::Person, "id")?;
        check_grouped(inputs, Kind::Auction, "seller")
    }

    fn new(config: &ComponentConfig<'_>) -> Result<Self> {
        let config: Q3Config = config.parse()?;
        Ok(Self {
            states: config.states,
            category: config.category,
            sellers: KeyValueState::new("sellers"),
        })
    }

    fn execute(&mut self, input: &Tuple<'_>, collector: &mut BasicCollector<'_>) -> Result<()> {
        match input.values().len() {
            7 => {
                let id = input.get(person::ID).cloned().ok_or("a person id")?;
                let state = str_at(input, person::STATE)?;
                if self.states.iter().any(|s| s == state) {
                    let name = str_at(input, person::NAME)?;
                    let city = str_at(input, person::CITY)?;
                    let seller = self.sellers.entry(&id);
                    for auction in seller.waiting.drain(..) {
                        collector.emit(&[
                            Value::from(name),
                            Value::from(city),
                            Value::from(state),
                            Value::U64(auction),
                        ]);
                    }
                    seller.local = Some(Local {
                        name: name.to_owned(),
                        city: city.to_owned(),
                        state: state.to_owned(),
                    });
                } else {
                    let seller = self.sellers.entry(&id);
                    seller.elsewhere = true;
                    seller.waiting = Vec::new();
                }
            }
            9 => {
                if u64_at(input, auction::CATEGORY)? != self.category {
                    return Ok(());
                }
                let id = u64_at(input, auction::ID)?;
                let key = input.get(auction::SELLER).ok_or("a seller")?;
                match self.sellers.get(key) {
                    Some(Seller { local: Some(p), .. }) => collector.emit(&[
                        Value::from(p.name.as_str()),
                        Value::from(p.city.as_str()),
                        Value::from(p.state.as_str()),
                        Value::U64(id),
                    ]),
                    Some(Seller { elsewhere: true, .. }) => {}
                    _ => self.sellers.entry(key).waiting.push(id),
                }
            }
            n => return Err(format!("q3 expects people and auctions, not {n} values").into()),
        }
        Ok(())
    }

    fn stores(&mut self) -> Stores<'_> {
        Stores::none().with(&mut self.sellers)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use squall_plugin_api::testing::check_config_keys;

    #[test]
    fn the_config_keys_match_the_config_struct() {
        check_config_keys::<Q3Config>(LocalItemSuggestion::CONFIG_KEYS, "").unwrap();
    }
}
