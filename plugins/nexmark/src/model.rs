//! The Nexmark event model: people, auctions and bids, generated from the
//! event id alone.
//!
//! The model is the one of Beam's Nexmark generator (and of the Flink and
//! RisingWave ports): event ids split into people, auctions and bids
//! 1 : 3 : 46, ids of people and auctions grow with the event id, and most
//! auctions go to a few hot sellers, most bids to a few hot auctions from
//! a few hot bidders. What differs from Beam, and why (all to keep one
//! event cheap and its values inline):
//!
//! - every event is a pure function of its id and the [`GeneratorConfig`]:
//!   a [`SplitMix64`] is seeded from the id, so any task can generate any
//!   event, tasks split the id space (`task i` of `n` takes `i, i + n, …`)
//!   and a test computes the reference from the same code;
//! - event time advances at a fixed rate (`events_per_sec` events per
//!   second of event time, from `first_event_time_ms`): no out-of-order
//!   groups and no delayed events;
//! - no `extra` padding field and no bid `url`; an auction's description
//!   is at most 31 characters (Beam: 100): every string fits inline in a
//!   [`Value`] ([`SmallStr`]), so generating and copying an event never
//!   allocates.

use squall_plugin_api::rng::SplitMix64;
use squall_plugin_api::SmallStr;
use squall_plugin_api::Value;

/// People per [`TOTAL_PROPORTION`] events (Beam's `PERSON_PROPORTION`).
pub const PERSON_PROPORTION: u64 = 1;
/// Auctions per [`TOTAL_PROPORTION`] events (Beam's `AUCTION_PROPORTION`).
pub const AUCTION_PROPORTION: u64 = 3;
/// Bids per [`TOTAL_PROPORTION`] events (Beam's `BID_PROPORTION`).
pub const BID_PROPORTION: u64 = 46;
/// The length of one cycle of event kinds: event id `n` is a person when
/// `n % 50 == 0`, an auction when `n % 50` is 1, 2 or 3, else a bid.
pub const TOTAL_PROPORTION: u64 = PERSON_PROPORTION + AUCTION_PROPORTION + BID_PROPORTION;
/// The id of the first person.
pub const FIRST_PERSON_ID: u64 = 1000;
/// The id of the first auction.
pub const FIRST_AUCTION_ID: u64 = 1000;
/// The first category; categories are `10 .. 10 + num_categories`.
pub const FIRST_CATEGORY_ID: u64 = 10;
/// Hot auctions are the auction ids that are multiples of this (from the
/// first auction): Beam's `HOT_AUCTION_RATIO` constant.
pub const HOT_AUCTION_STEP: u64 = 100;
/// Hot sellers are the person ids that are multiples of this (from the
/// first person): Beam's `HOT_SELLER_RATIO` constant.
pub const HOT_SELLER_STEP: u64 = 100;
/// Hot bidders are one past the multiples of this (from the first person):
/// Beam's `HOT_BIDDER_RATIO` constant.
pub const HOT_BIDDER_STEP: u64 = 100;
/// How many people not yet created a random person id may name.
pub const PERSON_ID_LEAD: u64 = 10;
/// How many auctions not yet created a random auction id may name.
pub const AUCTION_ID_LEAD: u64 = 10;
/// One bid in this many goes to a channel of its own (`channel-N`); the
/// others go to one of [`HOT_CHANNELS`].
pub const HOT_CHANNEL_RATIO: u64 = 2;
/// The channels most bids come from.
pub const HOT_CHANNELS: [&str; 4] = ["Google", "Facebook", "Baidu", "Apple"];
/// How many `channel-N` channels there are.
pub const CHANNELS: u64 = 10_000;

/// First names of people (Beam's list).
pub const FIRST_NAMES: [&str; 11] = [
    "Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah", "Deiter", "Walter",
];
/// Last names of people (Beam's list).
pub const LAST_NAMES: [&str; 9] =
    ["Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones", "Noris"];
/// The states people live in (Beam's list).
pub const US_STATES: [&str; 6] = ["AZ", "CA", "ID", "OR", "WA", "WY"];
/// The cities people live in (Beam's list; a city is drawn independently
/// of the state, as in Beam).
pub const US_CITIES: [&str; 10] = [
    "Phoenix",
    "Los Angeles",
    "San Francisco",
    "Boise",
    "Portland",
    "Bend",
    "Redmond",
    "Seattle",
    "Kent",
    "Cheyenne",
];

/// The fields of stream `person`, in order.
pub const PERSON_FIELDS: [&str; 7] =
    ["id", "name", "email_address", "credit_card", "city", "state", "date_time"];
/// The fields of stream `auction`, in order.
pub const AUCTION_FIELDS: [&str; 9] = [
    "id",
    "item_name",
    "description",
    "initial_bid",
    "reserve",
    "date_time",
    "expires",
    "seller",
    "category",
];
/// The fields of stream `bid`, in order.
pub const BID_FIELDS: [&str; 5] = ["auction", "bidder", "price", "channel", "date_time"];

/// Positions of the fields of a person tuple.
pub mod person {
    /// `id`
    pub const ID: usize = 0;
    /// `name`
    pub const NAME: usize = 1;
    /// `city`
    pub const CITY: usize = 4;
    /// `state`
    pub const STATE: usize = 5;
    /// `date_time`
    pub const DATE_TIME: usize = 6;
}

/// Positions of the fields of an auction tuple.
pub mod auction {
    /// `id`
    pub const ID: usize = 0;
    /// `reserve`
    pub const RESERVE: usize = 4;
    /// `date_time`
    pub const DATE_TIME: usize = 5;
    /// `expires`
    pub const EXPIRES: usize = 6;
    /// `seller`
    pub const SELLER: usize = 7;
    /// `category`
    pub const CATEGORY: usize = 8;
}

/// Positions of the fields of a bid tuple.
pub mod bid {
    /// `auction`
    pub const AUCTION: usize = 0;
    /// `bidder`
    pub const BIDDER: usize = 1;
    /// `price`
    pub const PRICE: usize = 2;
    /// `channel`
    pub const CHANNEL: usize = 3;
    /// `date_time`
    pub const DATE_TIME: usize = 4;
}

/// What the generator is configured with. The defaults are Beam's
/// `NexmarkConfiguration` defaults (`firstEventRate` 10,000 events/s,
/// `hotAuctionRatio` 2, `hotSellersRatio` 4, `hotBiddersRatio` 4,
/// `numActivePeople` 1,000, `numInFlightAuctions` 100, 5 categories),
/// with event time starting at 0 ms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GeneratorConfig {
    /// The event time of event 0, in ms since the epoch.
    pub first_event_time_ms: u64,
    /// How fast event time advances: events per second of event time.
    pub events_per_sec: u64,
    /// 1 - 1/ratio of the bids go to a hot auction.
    pub hot_auction_ratio: u64,
    /// 1 - 1/ratio of the auctions are sold by a hot seller.
    pub hot_seller_ratio: u64,
    /// 1 - 1/ratio of the bids are made by a hot bidder.
    pub hot_bidder_ratio: u64,
    /// Random person ids are drawn from the last this many people (plus
    /// [`PERSON_ID_LEAD`]).
    pub num_active_people: u64,
    /// Random auction ids are drawn from the last this many auctions (plus
    /// [`AUCTION_ID_LEAD`]); it also sets how long auctions run.
    pub num_in_flight_auctions: u64,
    /// How many categories auctions fall into.
    pub num_categories: u64,
}

impl Default for GeneratorConfig {
    fn default() -> Self {
        Self {
            first_event_time_ms: 0,
            events_per_sec: 10_000,
            hot_auction_ratio: 2,
            hot_seller_ratio: 4,
            hot_bidder_ratio: 4,
            num_active_people: 1000,
            num_in_flight_auctions: 100,
            num_categories: 5,
        }
    }
}

/// The kind of an event, fixed by its id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// A new person (stream `person`).
    Person,
    /// A new auction (stream `auction`).
    Auction,
    /// A bid (stream `bid`).
    Bid,
}

impl Kind {
    /// The kind of event `id`: 1 in 50 people, 3 in 50 auctions, 46 in 50 bids.
    #[inline]
    pub fn of(id: u64) -> Kind {
        match id % TOTAL_PROPORTION {
            0 => Kind::Person,
            r if r < PERSON_PROPORTION + AUCTION_PROPORTION => Kind::Auction,
            _ => Kind::Bid,
        }
    }

    /// The name of the stream that carries this kind.
    pub fn stream(self) -> &'static str {
        match self {
            Kind::Person => "person",
            Kind::Auction => "auction",
            Kind::Bid => "bid",
        }
    }

    /// The fields of this kind's stream.
    pub fn fields(self) -> &'static [&'static str] {
        match self {
            Kind::Person => &PERSON_FIELDS,
            Kind::Auction => &AUCTION_FIELDS,
            Kind::Bid => &BID_FIELDS,
        }
    }
}

/// A person who registered to buy or sell.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Person {
    /// The person's id (from [`FIRST_PERSON_ID`], one per 50 events).
    pub id: u64,
    /// First and last name.
    pub name: InlineStr,
    /// An e-mail address.
    pub email_address: InlineStr,
    /// A credit card number, four groups of four digits.
    pub credit_card: InlineStr,
    /// A city (one of [`US_CITIES`]).
    pub city: InlineStr,
    /// A state (one of [`US_STATES`]).
    pub state: InlineStr,
    /// Event time, ms.
    pub date_time: u64,
}

/// An item put up for auction.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Auction {
    /// The auction's id (from [`FIRST_AUCTION_ID`], three per 50 events).
    pub id: u64,
    /// The item's name.
    pub item_name: InlineStr,
    /// Its description (at most 31 characters).
    pub description: InlineStr,
    /// The first bid, in cents.
    pub initial_bid: u64,
    /// The lowest price the seller accepts, in cents.
    pub reserve: u64,
    /// Event time the auction opens, ms.
    pub date_time: u64,
    /// Event time the auction closes, ms (after `date_time`).
    pub expires: u64,
    /// The seller's person id.
    pub seller: u64,
    /// The category (from [`FIRST_CATEGORY_ID`]).
    pub category: u64,
}

/// A bid on an auction.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bid {
    /// The auction's id.
    pub auction: u64,
    /// The bidder's person id.
    pub bidder: u64,
    /// The price, in cents.
    pub price: u64,
    /// Where the bid came from.
    pub channel: InlineStr,
    /// Event time, ms.
    pub date_time: u64,
}

/// One generated event.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Event {
    /// A person.
    Person(Person),
    /// An auction.
    Auction(Auction),
    /// A bid.
    Bid(Bid),
}

impl Event {
    /// The event's kind.
    pub fn kind(&self) -> Kind {
        match self {
            Event::Person(_) => Kind::Person,
            Event::Auction(_) => Kind::Auction,
            Event::Bid(_) => Kind::Bid,
        }
    }

    /// The event time, ms.
    pub fn date_time(&self) -> u64 {
        match self {
            Event::Person(p) => p.date_time,
            Event::Auction(a) => a.date_time,
            Event::Bid(b) => b.date_time,
        }
    }

    /// Appends the event's values, in the order of its stream's fields
    /// ([`Kind::fields`]). No value allocates.
    #[inline]
    pub fn write_values(&self, out: &mut Vec<Value>) {
        match self {
            Event::Person(p) => out.extend([
                Value::U64(p.id),
                Value::SmallStr(p.name.0),
                Value::SmallStr(p.email_address.0),
                Value::SmallStr(p.credit_card.0),
                Value::SmallStr(p.city.0),
                Value::SmallStr(p.state.0),
                Value::U64(p.date_time),
            ]),
            Event::Auction(a) => out.extend([
                Value::U64(a.id),
                Value::SmallStr(a.item_name.0),
                Value::SmallStr(a.description.0),
                Value::U64(a.initial_bid),
                Value::U64(a.reserve),
                Value::U64(a.date_time),
                Value::U64(a.expires),
                Value::U64(a.seller),
                Value::U64(a.category),
            ]),
            Event::Bid(b) => out.extend([
                Value::U64(b.auction),
                Value::U64(b.bidder),
                Value::U64(b.price),
                Value::SmallStr(b.channel.0),
                Value::U64(b.date_time),
            ]),
        }
    }

    /// The event's values, in the order of its stream's fields.
    pub fn values(&self) -> Vec<Value> {
        let mut out = Vec::with_capacity(AUCTION_FIELDS.len());
        self.write_values(&mut out);
        out
    }
}

/// A setting of the generator that must be at least 1 is 0 (its name).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ZeroSetting(pub &'static str);

impl std::fmt::Display for ZeroSetting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} must be at least 1", self.0)
    }
}

impl std::error::Error for ZeroSetting {}

/// Generates Nexmark events from their ids.
///
/// ```
/// use squall_nexmark::model::{Event, Generator, GeneratorConfig, Kind};
///
/// let generator = Generator::new(GeneratorConfig::default()).unwrap();
/// assert_eq!(Kind::of(0), Kind::Person);
/// let Event::Person(first) = generator.event(0) else { unreachable!() };
/// assert_eq!(first.id, 1000);
/// // The same id always gives the same event.
/// assert_eq!(generator.event(17), generator.event(17));
/// // 10,000 events per second: event 20,000 happens 2 s after event 0.
/// assert_eq!(generator.timestamp(20_000), 2_000);
/// ```
#[derive(Debug, Clone)]
pub struct Generator {
    config: GeneratorConfig,
    /// Events between an auction and the one `num_in_flight_auctions`
    /// auctions later: how far ahead an auction's length looks.
    auction_horizon_events: u64,
}

impl Generator {
    /// A generator for `config`.
    ///
    /// # Errors
    /// When a rate or ratio is 0, or there are no categories or people.
    pub fn new(config: GeneratorConfig) -> Result<Self, ZeroSetting> {
        for (name, value) in [
            ("events_per_sec", config.events_per_sec),
            ("hot_auction_ratio", config.hot_auction_ratio),
            ("hot_seller_ratio", config.hot_seller_ratio),
            ("hot_bidder_ratio", config.hot_bidder_ratio),
            ("num_active_people", config.num_active_people),
            ("num_categories", config.num_categories),
        ] {
            if value == 0 {
                return Err(ZeroSetting(name));
            }
        }
        let auction_horizon_events =
            config.num_in_flight_auctions * TOTAL_PROPORTION / AUCTION_PROPORTION;
        Ok(Self { config, auction_horizon_events })
    }

    /// The configuration.
    pub fn config(&self) -> &GeneratorConfig {
        &self.config
    }

    /// The event time of event `id`, ms: `first_event_time_ms + id * 1000
    /// / events_per_sec`, rounded down.
    #[inline]
    pub fn timestamp(&self, id: u64) -> u64 {
        let offset = u128::from(id) * 1000 / u128::from(self.config.events_per_sec);
        self.config.first_event_time_ms + offset as u64
    }

    /// Event `id`.
    #[inline]
    pub fn event(&self, id: u64) -> Event {
        let mut rng = SplitMix64::new(SplitMix64::mix(id));
        let date_time = self.timestamp(id);
        match Kind::of(id) {
            Kind::Person => Event::Person(self.person(id, date_time, &mut rng)),
            Kind::Auction => Event::Auction(self.auction(id, date_time, &mut rng)),
            Kind::Bid => Event::Bid(self.bid(id, date_time, &mut rng)),
        }
    }

    fn person(&self, id: u64, date_time: u64, rng: &mut SplitMix64) -> Person {
        let mut text = Text::default();
        text.push(pick(rng, &FIRST_NAMES));
        text.push(" ");
        text.push(pick(rng, &LAST_NAMES));
        let name = text.take();
        random_letters(rng, 7, &mut text);
        text.push("@");
        random_letters(rng, 5, &mut text);
        text.push(".com");
        let email_address = text.take();
        for group in 0..4 {
            if group > 0 {
                text.push(" ");
            }
            let mut digits = rng.below(10_000);
            let mut four = [b'0'; 4];
            for d in four.iter_mut().rev() {
                *d = b'0' + (digits % 10) as u8;
                digits /= 10;
            }
            text.push_bytes(&four);
        }
        let credit_card = text.take();
        let city = small(pick(rng, &US_CITIES));
        let state = small(pick(rng, &US_STATES));
        Person {
            id: last_base0_person_id(id) + FIRST_PERSON_ID,
            name,
            email_address,
            credit_card,
            city,
            state,
            date_time,
        }
    }

    fn auction(&self, id: u64, date_time: u64, rng: &mut SplitMix64) -> Auction {
        let c = &self.config;
        let seller = if rng.below(c.hot_seller_ratio) > 0 {
            (last_base0_person_id(id) / HOT_SELLER_STEP) * HOT_SELLER_STEP
        } else {
            self.next_base0_person_id(id, rng)
        };
        let category = FIRST_CATEGORY_ID + rng.below(c.num_categories);
        let initial_bid = next_price(rng);
        let reserve = initial_bid + next_price(rng);
        let mut text = Text::default();
        random_letters(rng, 20, &mut text);
        let item_name = text.take();
        random_letters(rng, SmallStr::CAPACITY as u64, &mut text);
        let description = text.take();
        // Auctions run for up to twice the event time until the auction
        // `num_in_flight_auctions` later: about that many are open at once.
        let horizon = self.timestamp(id + self.auction_horizon_events) - date_time;
        let expires = date_time + 1 + rng.below((2 * horizon).max(1));
        Auction {
            id: last_base0_auction_id(id) + FIRST_AUCTION_ID,
            item_name,
            description,
            initial_bid,
            reserve,
            date_time,
            expires,
            seller: seller + FIRST_PERSON_ID,
            category,
        }
    }

    fn bid(&self, id: u64, date_time: u64, rng: &mut SplitMix64) -> Bid {
        let c = &self.config;
        let auction = if rng.below(c.hot_auction_ratio) > 0 {
            (last_base0_auction_id(id) / HOT_AUCTION_STEP) * HOT_AUCTION_STEP
        } else {
            self.next_base0_auction_id(id, rng)
        };
        let bidder = if rng.below(c.hot_bidder_ratio) > 0 {
            (last_base0_person_id(id) / HOT_BIDDER_STEP) * HOT_BIDDER_STEP + 1
        } else {
            self.next_base0_person_id(id, rng)
        };
        let price = next_price(rng);
        let channel = if rng.below(HOT_CHANNEL_RATIO) > 0 {
            small(pick(rng, &HOT_CHANNELS))
        } else {
            let mut text = Text::default();
            text.push("channel-");
            text.push_number(rng.below(CHANNELS));
            text.take()
        };
        Bid {
            auction: auction + FIRST_AUCTION_ID,
            bidder: bidder + FIRST_PERSON_ID,
            price,
            channel,
            date_time,
        }
    }

    /// A person id among the last `num_active_people` (or a few not yet
    /// created), 0-based.
    fn next_base0_person_id(&self, id: u64, rng: &mut SplitMix64) -> u64 {
        let people = last_base0_person_id(id) + 1;
        let active = people.min(self.config.num_active_people);
        people - active + rng.below(active + PERSON_ID_LEAD)
    }

    /// An auction id among the last `num_in_flight_auctions` (or a few not
    /// yet created), 0-based.
    fn next_base0_auction_id(&self, id: u64, rng: &mut SplitMix64) -> u64 {
        let max = last_base0_auction_id(id);
        let min = max.saturating_sub(self.config.num_in_flight_auctions);
        min + rng.below(max - min + 1 + AUCTION_ID_LEAD)
    }
}

/// The 0-based id of the last person created at or before event `id`.
#[inline]
pub fn last_base0_person_id(id: u64) -> u64 {
    // One person per cycle, at its start.
    id / TOTAL_PROPORTION
}

/// The 0-based id of the last auction created at or before event `id`
/// (for a person event of the first cycle, where there is none yet: 0).
#[inline]
pub fn last_base0_auction_id(id: u64) -> u64 {
    let epoch = id / TOTAL_PROPORTION;
    let offset = id % TOTAL_PROPORTION;
    if offset < PERSON_PROPORTION {
        // The auctions of the previous cycle.
        (epoch * AUCTION_PROPORTION).saturating_sub(1)
    } else if offset >= PERSON_PROPORTION + AUCTION_PROPORTION {
        epoch * AUCTION_PROPORTION + AUCTION_PROPORTION - 1
    } else {
        epoch * AUCTION_PROPORTION + offset - PERSON_PROPORTION
    }
}

/// A price in cents: 10^(6u) dollars for a uniform u in [0, 1), rounded to
/// the cent (Beam's `nextPrice`: from $1 to $1,000,000, most of them small).
#[inline]
fn next_price(rng: &mut SplitMix64) -> u64 {
    (10f64.powf(rng.next_f64() * 6.0) * 100.0).round() as u64
}

fn pick<'a>(rng: &mut SplitMix64, list: &[&'a str]) -> &'a str {
    list[rng.below(list.len() as u64) as usize]
}

/// 3 to `max` lowercase letters.
fn random_letters(rng: &mut SplitMix64, max: u64, text: &mut Text) {
    let len = 3 + rng.below(max - 2);
    for _ in 0..len {
        text.push_bytes(&[b'a' + rng.below(26) as u8]);
    }
}

fn small(s: &str) -> InlineStr {
    InlineStr(SmallStr::new(s).expect("the model's strings fit inline"))
}

/// A string of at most [`SmallStr::CAPACITY`] bytes, stored inline: an
/// event's strings, copied into a [`Value::SmallStr`] without allocating.
#[derive(Clone, Copy)]
pub struct InlineStr(pub SmallStr);

impl InlineStr {
    /// The string.
    pub fn as_str(&self) -> &str {
        self.0.as_str()
    }
}

impl PartialEq for InlineStr {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for InlineStr {}

impl std::fmt::Debug for InlineStr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self.as_str(), f)
    }
}

/// A string being built on the stack, at most [`SmallStr::CAPACITY`]
/// bytes of ASCII.
#[derive(Default)]
struct Text {
    bytes: [u8; SmallStr::CAPACITY],
    len: usize,
}

impl Text {
    fn push(&mut self, s: &str) {
        self.push_bytes(s.as_bytes());
    }

    fn push_bytes(&mut self, b: &[u8]) {
        let end = (self.len + b.len()).min(SmallStr::CAPACITY);
        self.bytes[self.len..end].copy_from_slice(&b[..end - self.len]);
        self.len = end;
    }

    fn push_number(&mut self, mut n: u64) {
        let mut digits = [0u8; 20];
        let mut i = digits.len();
        loop {
            i -= 1;
            digits[i] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        self.push_bytes(&digits[i..]);
    }

    /// The string so far, which is then cleared.
    fn take(&mut self) -> InlineStr {
        let s = std::str::from_utf8(&self.bytes[..self.len]).expect("only ASCII is pushed");
        let out = small(s);
        self.len = 0;
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_follow_the_1_3_46_cycle() {
        let mut counts = [0u64; 3];
        for id in 0..50_000 {
            counts[Kind::of(id) as usize] += 1;
        }
        assert_eq!(counts, [1000, 3000, 46_000]);
        assert_eq!(Kind::of(50), Kind::Person);
        assert_eq!(
            (Kind::of(1), Kind::of(3), Kind::of(4)),
            (Kind::Auction, Kind::Auction, Kind::Bid)
        );
    }

    #[test]
    fn ids_of_people_and_auctions_are_dense_and_in_order() {
        let g = Generator::new(GeneratorConfig::default()).unwrap();
        let mut people = Vec::new();
        let mut auctions = Vec::new();
        for id in 0..5000 {
            match g.event(id) {
                Event::Person(p) => people.push(p.id),
                Event::Auction(a) => auctions.push(a.id),
                Event::Bid(_) => {}
            }
        }
        assert_eq!(people, (1000..1100).collect::<Vec<_>>());
        assert_eq!(auctions, (1000..1300).collect::<Vec<_>>());
    }

    #[test]
    fn hot_ratios_hold() {
        let g = Generator::new(GeneratorConfig::default()).unwrap();
        let (mut bids, mut hot_auction, mut hot_bidder) = (0u64, 0u64, 0u64);
        let (mut auctions, mut hot_seller) = (0u64, 0u64);
        for id in 0..200_000 {
            match g.event(id) {
                Event::Bid(b) => {
                    bids += 1;
                    // A hot auction is a multiple of 100 past the first;
                    // a random one is too, 1 time in 100.
                    hot_auction +=
                        u64::from((b.auction - FIRST_AUCTION_ID).is_multiple_of(HOT_AUCTION_STEP));
                    hot_bidder += u64::from((b.bidder - FIRST_PERSON_ID) % HOT_BIDDER_STEP == 1);
                    assert!(b.price >= 100 && b.price <= 100_000_000, "{b:?}");
                }
                Event::Auction(a) => {
                    auctions += 1;
                    hot_seller +=
                        u64::from((a.seller - FIRST_PERSON_ID).is_multiple_of(HOT_SELLER_STEP));
                    assert!(a.expires > a.date_time && a.reserve > a.initial_bid, "{a:?}");
                    assert!((10..15).contains(&a.category));
                }
                Event::Person(p) => {
                    assert!(US_STATES.contains(&p.state.as_str()));
                    assert_eq!(p.credit_card.as_str().len(), 19);
                }
            }
        }
        let share = |part: u64, all: u64| part as f64 / all as f64;
        // 1/2 hot plus 1/2 * 1/100 random multiples: 0.505.
        assert!((share(hot_auction, bids) - 0.505).abs() < 0.01, "{}", share(hot_auction, bids));
        // 3/4 hot plus a few random ones.
        assert!((share(hot_bidder, bids) - 0.7525).abs() < 0.01, "{}", share(hot_bidder, bids));
        assert!(
            (share(hot_seller, auctions) - 0.7525).abs() < 0.02,
            "{}",
            share(hot_seller, auctions)
        );
    }

    #[test]
    fn the_same_id_gives_the_same_event_and_time_advances_at_the_rate() {
        let config = GeneratorConfig {
            first_event_time_ms: 5000,
            events_per_sec: 100,
            ..Default::default()
        };
        let a = Generator::new(config.clone()).unwrap();
        let b = Generator::new(config).unwrap();
        for id in (0..10_000).step_by(7) {
            assert_eq!(a.event(id), b.event(id));
            assert_eq!(a.event(id).date_time(), 5000 + id * 10);
        }
        assert_ne!(a.event(4), a.event(5));
    }

    #[test]
    fn a_zero_rate_is_refused() {
        let config = GeneratorConfig { events_per_sec: 0, ..Default::default() };
        assert_eq!(
            Generator::new(config).unwrap_err().to_string(),
            "events_per_sec must be at least 1"
        );
    }
}
